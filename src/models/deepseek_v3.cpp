// DeepSeek-V3 decoder (MHA in place of MLA), MoE as Hugging Face's
// DeepseekV3MoE computes it.

#include <spool/models/deepseek_v3.hpp>

#include <spool/models/config_checks.hpp>
#include <spool/models/moe.hpp>

namespace spool::models {

DeepseekV3Config DeepseekV3Config::tiny() { return DeepseekV3Config{}; }

DeepseekV3Config DeepseekV3Config::deepseek_v3() {
  DeepseekV3Config c;
  c.layers = 61;
  c.hidden = 7168;
  c.heads = 128;
  c.head_dim = 128;
  c.ffn = 18432;
  c.moe_ffn = 2048;
  c.experts = 256;
  c.shared_experts = 1;
  c.top_k = 8;
  c.n_group = 8;
  c.topk_group = 4;
  c.first_k_dense_replace = 3;
  c.vocab = 129280;
  return c;
}

void DeepseekV3Config::validate() const {
  check_decoder_dims("deepseek_v3",
                     {{"layers", layers},
                      {"hidden", hidden},
                      {"ffn", ffn},
                      {"moe_ffn", moe_ffn},
                      {"experts", experts},
                      {"shared_experts", shared_experts},
                      {"top_k", top_k},
                      {"n_group", n_group},
                      {"topk_group", topk_group},
                      {"vocab", vocab}},
                     heads, heads, head_dim);
  if (first_k_dense_replace < 0) fail("deepseek_v3 config: first_k_dense_replace must not be negative");
  if (experts % n_group != 0) fail("deepseek_v3 config: experts ({}) must divide into n_group ({}) groups", experts, n_group);
  if (topk_group > n_group) fail("deepseek_v3 config: topk_group ({}) exceeds n_group ({})", topk_group, n_group);
  if (top_k > topk_group * (experts / n_group))
    fail("deepseek_v3 config: top_k ({}) exceeds the experts of the topk_group kept groups ({})", top_k,
         topk_group * (experts / n_group));
}

AttentionShape DeepseekV3Config::attention() const { return {hidden, heads, heads, head_dim, rope_theta, {}}; }

std::string DeepseekV3Config::describe() const {
  return fmt::format(
      "{} layers ({} dense), hidden {}, {} heads (MHA), head dim {}, dense FFN {}, {} experts top-{} in {} groups "
      "(top-{} groups) of FFN {}, {} shared, vocab {}",
      layers, std::min(first_k_dense_replace, layers), hidden, heads, head_dim, ffn, experts, top_k, n_group,
      topk_group, moe_ffn, shared_experts, vocab);
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

Graph build_deepseek_v3(const DeepseekV3Config& c, const Phase& phase) {
  c.validate();
  phase.validate("deepseek_v3");
  Graph g("deepseek_v3");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    x = residual_layer(x, c.attention(), c.rms_eps, start.rope, phase, prefix, i, [&](const Tensor& h2) {
      return i < c.first_k_dense_replace ? gated_mlp(h2, prefix + "mlp.", c.ffn)
                                         : deepseek_v3_moe_block(c, h2, prefix + "mlp.");
    });
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, /*tied=*/false);
  return g;
}

}  // namespace spool::models
