// DeepSeek-V3 decoder: multi-head latent attention in its expanded and
// absorbed forms, and the MoE as Hugging Face's DeepseekV3MoE computes it.

#include <spool/models/deepseek_v3.hpp>

#include <spool/models/config_checks.hpp>
#include <spool/models/hf_weights.hpp>
#include <spool/models/moe.hpp>

#include <algorithm>
#include <cmath>

namespace spool::models {
namespace {

// DeepseekV3RMSNorm's default eps, which Hugging Face's attention uses for
// q_a_layernorm and kv_a_layernorm (it does not pass rms_norm_eps).
constexpr double kLatentNormEps = 1e-6;

// 671.0B, 1.2M: a parameter count as model cards write it.
std::string billions(double v) { return v >= 1e9 ? fmt::format("{:.1f}B", v / 1e9) : fmt::format("{:.1f}M", v / 1e6); }

}  // namespace

DeepseekV3Config DeepseekV3Config::tiny() { return DeepseekV3Config{}; }

DeepseekV3Config DeepseekV3Config::deepseek_v3() { return deepseek_v3_config_from_hf(published_config("deepseek-v3")); }

void DeepseekV3Config::validate() const {
  check_positive("deepseek_v3", {{"layers", layers},
                                 {"hidden", hidden},
                                 {"heads", heads},
                                 {"kv_lora_rank", kv_lora_rank},
                                 {"qk_nope_head_dim", qk_nope_head_dim},
                                 {"qk_rope_head_dim", qk_rope_head_dim},
                                 {"v_head_dim", v_head_dim},
                                 {"ffn", ffn},
                                 {"moe_ffn", moe_ffn},
                                 {"experts", experts},
                                 {"shared_experts", shared_experts},
                                 {"top_k", top_k},
                                 {"n_group", n_group},
                                 {"topk_group", topk_group},
                                 {"moe_layer_freq", moe_layer_freq},
                                 {"vocab", vocab}});
  if (q_lora_rank < 0) fail("deepseek_v3 config: q_lora_rank must not be negative (0: no low-rank query path)");
  if (qk_rope_head_dim % 2 != 0)
    fail("deepseek_v3 config: qk_rope_head_dim must be even for RoPE, got {}", qk_rope_head_dim);
  if (first_k_dense_replace < 0) fail("deepseek_v3 config: first_k_dense_replace must not be negative");
  if (experts % n_group != 0) fail("deepseek_v3 config: experts ({}) must divide into n_group ({}) groups", experts, n_group);
  if (topk_group > n_group) fail("deepseek_v3 config: topk_group ({}) exceeds n_group ({})", topk_group, n_group);
  if (top_k > topk_group * (experts / n_group))
    fail("deepseek_v3 config: top_k ({}) exceeds the experts of the topk_group kept groups ({})", top_k,
         topk_group * (experts / n_group));
  if (mscale_all_dim < 0.0 || !std::isfinite(mscale_all_dim))
    fail("deepseek_v3 config: mscale_all_dim must be finite and not negative, got {}", mscale_all_dim);
  rope_scaling.validate();
}

double DeepseekV3Config::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_nope_head_dim + qk_rope_head_dim));
  if (rope_scaling.kind != nn::RopeScaling::Kind::None && mscale_all_dim != 0.0 && rope_scaling.factor > 1.0) {
    const double mscale = 0.1 * mscale_all_dim * std::log(rope_scaling.factor) + 1.0;  // yarn_get_mscale
    scale *= mscale * mscale;
  }
  return scale;
}

namespace {

// The MoE layers of c, counted without a loop over the layers (a config
// may name any count).
int64_t moe_layer_count(const DeepseekV3Config& c) {
  // Multiples of moe_layer_freq below n.
  const auto multiples = [&](int64_t n) { return n <= 0 ? 0 : (n - 1) / c.moe_layer_freq + 1; };
  return multiples(c.layers) - multiples(std::min(c.first_k_dense_replace, c.layers));
}

// Parameters (every weight, or those one token uses) in double: exact for
// any real model (below 2^53), and no integer overflow for absurd configs.
double count_parameters(const DeepseekV3Config& c, bool active) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double hidden = d(c.hidden), heads = d(c.heads), qk = d(c.qk_nope_head_dim) + d(c.qk_rope_head_dim);
  const double q_path = c.q_lora_rank > 0 ? hidden * d(c.q_lora_rank) + d(c.q_lora_rank) + d(c.q_lora_rank) * heads * qk
                                          : hidden * heads * qk;
  const double attention = q_path + hidden * d(c.kv_lora_rank + c.qk_rope_head_dim) + d(c.kv_lora_rank) +
                           d(c.kv_lora_rank) * heads * d(c.qk_nope_head_dim + c.v_head_dim) +
                           heads * d(c.v_head_dim) * hidden;
  const double expert = 3.0 * hidden * d(c.moe_ffn);
  const double moe =
      d(active ? c.top_k : c.experts) * expert + d(c.shared_experts) * expert + d(c.experts) * hidden + d(c.experts);
  const double moe_layers = d(moe_layer_count(c)), dense_layers = d(c.layers) - moe_layers;
  return 2.0 * d(c.vocab) * hidden + hidden + d(c.layers) * (attention + 2.0 * hidden) + moe_layers * moe +
         dense_layers * 3.0 * hidden * d(c.ffn);
}

}  // namespace

int64_t DeepseekV3Config::parameters() const {
  return checked_parameter_count("deepseek_v3", count_parameters(*this, false));
}

int64_t DeepseekV3Config::active_parameters() const {
  return checked_parameter_count("deepseek_v3", count_parameters(*this, true));
}

std::string DeepseekV3Config::describe() const {
  const int64_t dense = layers - moe_layer_count(*this);
  return fmt::format(
             "{} layers ({} dense), hidden {}, {} heads with MLA (q rank {}, kv rank {}, head dims nope {} rope {} v "
             "{}; "
             "cache {} values per token and layer), dense FFN {}, {} experts top-{} in {} groups (top-{} groups) of "
             "FFN {}, {} shared, vocab {}",
             layers, dense, hidden, heads, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
             kv_lora_rank + qk_rope_head_dim, ffn, experts, top_k, n_group, topk_group, moe_ffn, shared_experts,
             vocab) +
         nn::describe(rope_scaling) +
         fmt::format("; {} parameters, {} active", billions(count_parameters(*this, false)),
                     billions(count_parameters(*this, true)));
}

Tensor deepseek_v3_moe_block(const DeepseekV3Config& c, const Tensor& x, const std::string& prefix) {
  Graph& g = x.graph();
  auto w = [&](const std::string& name, const Shape& shape) { return model_weight(g, c.dtype, prefix + name, shape); };
  const Tensor logits = nn::linear(x, w("gate.weight", {c.experts, c.hidden}));
  const Routing routing = group_limited_routing(logits, w("gate.e_score_correction_bias", {c.experts}), c.top_k,
                                                c.n_group, c.topk_group, c.norm_topk_prob, c.routed_scaling_factor);
  const RoutedPairs pairs = route_pairs(x, routing);
  const Tensor down = swiglu_experts(pairs, w("experts.gate_proj.weight", {c.experts, c.moe_ffn, c.hidden}),
                                     w("experts.up_proj.weight", {c.experts, c.moe_ffn, c.hidden}),
                                     w("experts.down_proj.weight", {c.experts, c.hidden, c.moe_ffn}));
  const Tensor routed = combine_pairs(down, pairs, /*weighted=*/true);
  return routed + gated_mlp(x, prefix + "shared_experts.", c.moe_ffn * c.shared_experts);
}

Tensor mla_attention(const DeepseekV3Config& c, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                     const std::string& prefix, int64_t layer) {
  Graph& g = h.graph();
  const int64_t seq = h.dim(0), heads = c.heads, nope = c.qk_nope_head_dim, rot = c.qk_rope_head_dim;
  const int64_t dv = c.v_head_dim, rank = c.kv_lora_rank, qk = nope + rot;
  auto w = [&](const std::string& name, const Shape& shape) {
    return model_weight(g, h.dtype(), prefix + name, shape);
  };

  // Queries [heads, seq, nope + rope], through the low-rank path.
  Tensor q;
  if (c.q_lora_rank > 0) {
    const Tensor qa = nn::rms_norm(nn::linear(h, w("q_a_proj.weight", {c.q_lora_rank, c.hidden})),
                                   w("q_a_layernorm.weight", {c.q_lora_rank}), kLatentNormEps);
    q = nn::linear(qa, w("q_b_proj.weight", {heads * qk, c.q_lora_rank}));
  } else {
    q = nn::linear(h, w("q_proj.weight", {heads * qk, c.hidden}));
  }
  q = q.reshape({seq, heads, qk}).transpose(0, 1);
  const Tensor q_nope = q.slice(-1, 0, nope);
  auto rotate = [&](const Tensor& x) {
    return c.rope_interleave ? nn::rope_interleaved(x, rope.cos, rope.sin) : nn::rope(x, rope.cos, rope.sin);
  };
  const Tensor q_rope = rotate(q.slice(-1, nope, qk));

  // The compressed key and value of this call's tokens, appended to the cache.
  const Tensor kv_a = nn::linear(h, w("kv_a_proj_with_mqa.weight", {rank + rot, c.hidden}));
  const Tensor latent = nn::rms_norm(kv_a.slice(-1, 0, rank), w("kv_a_layernorm.weight", {rank}), kLatentNormEps);
  const Tensor k_rope = rotate(kv_a.slice(-1, rank, rank + rot));
  const Tensor latents = append_to_cache(fmt::format("cache_latent.{}", layer), latent, phase);  // [T, rank]
  const Tensor rope_keys = append_to_cache(fmt::format("cache_key.{}", layer), k_rope, phase);   // [T, rope]
  const int64_t t = latents.dim(0);

  const Tensor kv_b = w("kv_b_proj.weight", {heads * (nope + dv), rank});
  const double scale = c.softmax_scale();
  const bool absorbed = c.mla_form == MlaForm::Absorbed || (c.mla_form == MlaForm::Auto && phase.has_cache());
  Tensor out;  // [heads, seq, v_head_dim]
  if (!absorbed) {
    // Every cached latent up to each head's nope key and value.
    const Tensor kv = nn::linear(latents, kv_b).reshape({t, heads, nope + dv}).transpose(0, 1);
    const Tensor keys = nn::concat({kv.slice(-1, 0, nope), rope_keys.unsqueeze(0).expand({heads, t, rot})}, -1);
    out = nn::attention(nn::concat({q_nope, q_rope}, -1), keys, kv.slice(-1, nope, nope + dv), /*causal=*/true, scale);
  } else {
    // kv_b_proj per head: [heads, nope + v, rank]; its key block turns q_nope
    // into a query over the latents, its value block maps the attended
    // latents to the head's output.
    const Tensor blocks = kv_b.reshape({heads, nope + dv, rank});
    const Tensor q_latent = nn::matmul(q_nope, blocks.slice(1, 0, nope));  // [heads, seq, rank]
    // All heads' queries as the rows of one product against the shared cache.
    Tensor scores = nn::matmul(q_latent.reshape({heads * seq, rank}), latents.transpose(0, 1)) +
                    nn::matmul(q_rope.reshape({heads * seq, rot}), rope_keys.transpose(0, 1));  // [heads*seq, T]
    scores = scores.dtype() == DType::F32 ? scores * scale : (scores.cast(DType::F32) * scale).cast(scores.dtype());
    scores = scores.reshape({heads, seq, t});
    if (seq > 1) {
      const Tensor query_pos = iota(g, {seq, t}, 0, DType::I64) + static_cast<double>(t - seq);
      const Tensor key_pos = iota(g, {seq, t}, 1, DType::I64);
      scores = nn::masked_fill(scores, less_than(query_pos, key_pos), -INFINITY);
    }
    const Tensor probs = nn::softmax(scores, -1).reshape({heads * seq, t});
    const Tensor attended = nn::matmul(probs, latents).reshape({heads, seq, rank});
    out = nn::matmul(attended, blocks.slice(1, nope, nope + dv).transpose(1, 2));
  }
  return nn::linear(out.transpose(0, 1).reshape({seq, heads * dv}), w("o_proj.weight", {c.hidden, heads * dv}));
}

Graph build_deepseek_v3(const DeepseekV3Config& c, const Phase& phase) {
  c.validate();
  phase.validate("deepseek_v3");
  Graph g("deepseek_v3");
  const DecoderStart start = start_decoder(g, phase, c.qk_rope_head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    auto norm = [&](const Tensor& v, const char* name) {
      return nn::rms_norm(v, model_weight(g, c.dtype, prefix + name, {c.hidden}), c.rms_eps);
    };
    x = x + mla_attention(c, norm(x, "input_layernorm.weight"), start.rope, phase, prefix + "self_attn.", i);
    const Tensor h2 = norm(x, "post_attention_layernorm.weight");
    x = x + (c.is_moe(i) ? deepseek_v3_moe_block(c, h2, prefix + "mlp.") : gated_mlp(h2, prefix + "mlp.", c.ffn));
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, /*tied=*/false);
  return g;
}

}  // namespace spool::models
