// Llama-4 text decoder (llama4.hpp): NoPE and chunked RoPE layers, L2 q/k
// norm, attention temperature tuning, and the MoE as Hugging Face's
// Llama4TextMoe computes it.

#include <spool/models/llama4.hpp>

#include <spool/models/config_checks.hpp>
#include <spool/models/hf_weights.hpp>
#include <spool/models/moe.hpp>

#include <algorithm>

namespace spool::models {
namespace {

// 671.0B, 1.2M: a parameter count as model cards write it.
std::string billions(double v) { return v >= 1e9 ? fmt::format("{:.1f}B", v / 1e9) : fmt::format("{:.1f}M", v / 1e6); }

}  // namespace

Llama4Config Llama4Config::tiny() { return Llama4Config{}; }

Llama4Config Llama4Config::tiny_maverick() {
  Llama4Config c;
  c.experts = 8;
  c.moe_layer_step = 2;
  c.use_qk_norm = false;
  return c;
}

Llama4Config Llama4Config::scout() { return llama4_config_from_hf(published_config("llama-4-scout")); }

Llama4Config Llama4Config::maverick() { return llama4_config_from_hf(published_config("llama-4-maverick")); }

void Llama4Config::validate() const {
  check_decoder_dims("llama4",
                     {{"layers", layers},
                      {"hidden", hidden},
                      {"ffn", ffn},
                      {"ffn_dense", ffn_dense},
                      {"experts", experts},
                      {"top_k", top_k},
                      {"moe_layer_step", moe_layer_step},
                      {"no_rope_layer_interval", no_rope_layer_interval},
                      {"vocab", vocab}},
                     heads, kv_heads, head_dim);
  if (top_k > experts) fail("llama4 config: top_k ({}) exceeds experts ({})", top_k, experts);
  for (const int64_t l : moe_layers)
    if (l < 0 || l >= layers) fail("llama4 config: moe_layers names layer {} of {}", l, layers);
  if (!no_rope_layers.empty() && static_cast<int64_t>(no_rope_layers.size()) < layers)
    fail("llama4 config: no_rope_layers has {} entries for {} layers", no_rope_layers.size(), layers);
  for (const int64_t v : no_rope_layers)
    if (v != 0 && v != 1) fail("llama4 config: no_rope_layers entries are 0 (NoPE) or 1 (RoPE), got {}", v);
  if (attention_chunk_size < 0) fail("llama4 config: attention_chunk_size must not be negative");
  if (attn_temperature_tuning && !(floor_scale > 0.0 && std::isfinite(attn_scale)))
    fail("llama4 config: temperature tuning needs a positive floor_scale, got {}", floor_scale);
  rope_scaling.validate();
}

bool Llama4Config::is_moe(int64_t layer) const {
  if (!moe_layers.empty()) return std::find(moe_layers.begin(), moe_layers.end(), layer) != moe_layers.end();
  return layer % moe_layer_step == moe_layer_step - 1;
}

bool Llama4Config::uses_rope(int64_t layer) const {
  if (!no_rope_layers.empty()) return no_rope_layers.at(static_cast<size_t>(layer)) != 0;
  return (layer + 1) % no_rope_layer_interval != 0;
}

namespace {

// The MoE and the NoPE layers of c, counted without a loop over the layers
// when they follow the default patterns (a config may name any count).
int64_t moe_layer_count(const Llama4Config& c) {
  if (c.moe_layers.empty()) return c.layers / c.moe_layer_step;
  std::vector<int64_t> named = c.moe_layers;
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  return std::count_if(named.begin(), named.end(), [&](int64_t l) { return l >= 0 && l < c.layers; });
}

int64_t nope_layer_count(const Llama4Config& c) {
  if (c.no_rope_layers.empty()) return c.layers / c.no_rope_layer_interval;
  const int64_t n = std::min<int64_t>(c.layers, static_cast<int64_t>(c.no_rope_layers.size()));
  return std::count(c.no_rope_layers.begin(), c.no_rope_layers.begin() + n, 0);
}

// Parameters (every weight, or those one token uses) in double: exact for
// any real model (below 2^53), and no integer overflow for absurd configs.
double count_parameters(const Llama4Config& c, bool active) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double hidden = d(c.hidden);
  const double attention = 2.0 * hidden * d(c.heads) * d(c.head_dim) + 2.0 * hidden * d(c.kv_heads) * d(c.head_dim);
  const double moe =
      d(active ? c.top_k : c.experts) * 3.0 * hidden * d(c.ffn) + 3.0 * hidden * d(c.ffn) + d(c.experts) * hidden;
  const double moe_layers = d(moe_layer_count(c)), dense_layers = d(c.layers) - moe_layers;
  return (c.tie_word_embeddings ? 1.0 : 2.0) * d(c.vocab) * hidden + hidden + d(c.layers) * (attention + 2.0 * hidden) +
         moe_layers * moe + dense_layers * 3.0 * hidden * d(c.ffn_dense);
}

}  // namespace

int64_t Llama4Config::parameters() const { return checked_parameter_count("llama4", count_parameters(*this, false)); }

int64_t Llama4Config::active_parameters() const {
  return checked_parameter_count("llama4", count_parameters(*this, true));
}

std::string Llama4Config::describe() const {
  const int64_t moe_count = moe_layer_count(*this), nope = nope_layer_count(*this);
  std::string attention = fmt::format("{} NoPE", nope);
  if (use_qk_norm) attention += ", L2 q/k norm";
  if (attention_chunk_size > 0) attention += fmt::format(", RoPE layers chunked by {}", attention_chunk_size);
  if (attn_temperature_tuning)
    attention += fmt::format(", temperature tuning (floor {:g}, scale {:g})", floor_scale, attn_scale);
  return fmt::format(
             "{} layers ({} MoE; {}), hidden {}, {} heads, {} KV heads, head dim {}, {} experts top-{} of FFN {} "
             "+ shared, dense FFN {}, vocab {}",
             layers, moe_count, attention, hidden, heads, kv_heads, head_dim, experts, top_k, ffn, ffn_dense, vocab) +
         nn::describe(rope_scaling) +
         fmt::format("; {} parameters, {} active", billions(count_parameters(*this, false)),
                     billions(count_parameters(*this, true)));
}

Tensor llama4_moe_block(const Llama4Config& c, const Tensor& x, const std::string& prefix) {
  Graph& g = x.graph();
  auto w = [&](const std::string& name, const Shape& shape) { return model_weight(g, c.dtype, prefix + name, shape); };
  const Tensor logits = nn::linear(x, w("router.weight", {c.experts, c.hidden}));
  const RoutedPairs pairs = route_pairs(x, sigmoid_topk_routing(logits, c.top_k));
  // The router score scales the expert's input, not its output.
  const Tensor rows = pairs.rows * pairs.weights.cast(pairs.rows.dtype()).unsqueeze(1);
  const Tensor gate_up_w = w("experts.gate_up_proj", {c.experts, c.hidden, 2 * c.ffn});
  const Tensor down_w = w("experts.down_proj", {c.experts, c.ffn, c.hidden});
  Tensor down;
  if (grouped_experts(pairs.experts.dim(0), c.experts)) {
    // Prefill: each expert's matrices once for its rows ([E, in, out] read as [E, out, in]).
    const Tensor counts = expert_counts(pairs.experts, c.experts);
    const std::vector<Tensor> halves = grouped_matmul(rows, gate_up_w.transpose(1, 2), counts).chunk(2, -1);
    down = grouped_matmul(nn::swiglu(halves[0], halves[1]), down_w.transpose(1, 2), counts);
  } else {
    const ExpertBlocks blocks = expert_blocks(rows, pairs.experts, c.experts, 1);
    const std::vector<Tensor> halves = expert_matmul(blocks.rows, gate_up_w, blocks.experts).chunk(2, -1);
    down = expert_matmul(nn::swiglu(halves[0], halves[1]), down_w, blocks.experts);
  }
  return gated_mlp(x, prefix + "shared_expert.", c.ffn) + combine_pairs(down, pairs, /*weighted=*/false);
}

Tensor llama4_attention(const Llama4Config& c, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                        const std::string& prefix, int64_t layer) {
  Graph& g = h.graph();
  const int64_t seq = h.dim(0), d = c.head_dim;
  auto w = [&](const std::string& name, const Shape& shape) {
    return model_weight(g, h.dtype(), prefix + name, shape);
  };
  Tensor q = nn::linear(h, w("q_proj.weight", {c.heads * d, c.hidden})).reshape({seq, c.heads, d}).transpose(0, 1);
  Tensor k =
      nn::linear(h, w("k_proj.weight", {c.kv_heads * d, c.hidden})).reshape({seq, c.kv_heads, d}).transpose(0, 1);
  const Tensor v = nn::linear(h, w("v_proj.weight", {c.kv_heads * d, c.hidden})).reshape({seq, c.kv_heads, d});
  const bool rope_layer = c.uses_rope(layer);
  if (rope_layer) {
    // Complex pairs in float32, rounded once (apply_rotary_emb).
    q = nn::rope_interleaved(q, rope.cos, rope.sin, /*in_f32=*/true);
    k = nn::rope_interleaved(k, rope.cos, rope.sin, /*in_f32=*/true);
    if (c.use_qk_norm) {
      q = nn::l2_norm(q, c.rms_eps);
      k = nn::l2_norm(k, c.rms_eps);
    }
  } else if (c.attn_temperature_tuning) {
    // Query at position p scaled by log1p(floor((p + 1) / floor_scale)) * attn_scale + 1,
    // in f32 (the scales are f32 in Hugging Face, so a half q promotes).
    const Tensor next = iota(g, {seq}, 0, DType::F32) + static_cast<double>(phase.context + 1);
    const Tensor floored = (next - next % c.floor_scale) * (1.0 / c.floor_scale);
    const Tensor scales = nn::log(floored + 1.0) * c.attn_scale + 1.0;
    q = (q.cast(DType::F32) * scales.reshape({1, seq, 1})).cast(q.dtype());
  }
  const Tensor keys = append_to_cache(fmt::format("cache_key.{}", layer), k.transpose(0, 1), phase);
  const Tensor values = append_to_cache(fmt::format("cache_value.{}", layer), v, phase);
  const int64_t chunk = rope_layer ? c.attention_chunk_size : 0;
  const Tensor attn =
      nn::attention(q, keys.transpose(0, 1), values.transpose(0, 1), /*causal=*/true, std::nullopt, chunk);
  return nn::linear(attn.transpose(0, 1).reshape({seq, c.heads * d}), w("o_proj.weight", {c.hidden, c.heads * d}));
}

Graph build_llama4(const Llama4Config& c, const Phase& phase) {
  c.validate();
  phase.validate("llama4");
  Graph g("llama4");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    auto norm = [&](const Tensor& v, const char* name) {
      return nn::rms_norm(v, model_weight(g, c.dtype, prefix + name, {c.hidden}), c.rms_eps);
    };
    x = x + llama4_attention(c, norm(x, "input_layernorm.weight"), start.rope, phase, prefix + "self_attn.", i);
    const Tensor h2 = norm(x, "post_attention_layernorm.weight");
    x = x + (c.is_moe(i) ? llama4_moe_block(c, h2, prefix + "feed_forward.")
                         : gated_mlp(h2, prefix + "feed_forward.", c.ffn_dense));
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, c.tie_word_embeddings);
  return g;
}

}  // namespace spool::models
