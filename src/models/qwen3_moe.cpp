// Qwen3-MoE decoder, as Hugging Face's Qwen3MoeForCausalLM computes it.

#include <spool/models/qwen3_moe.hpp>

#include <spool/models/hf_weights.hpp>
#include <spool/models/config_checks.hpp>
#include <spool/models/moe.hpp>

#include <algorithm>

namespace spool::models {

Qwen3MoeConfig Qwen3MoeConfig::tiny() { return Qwen3MoeConfig{}; }

Qwen3MoeConfig Qwen3MoeConfig::qwen3_30b_a3b() { return qwen3_moe_config_from_hf(published_config("qwen3-30b-a3b")); }

void Qwen3MoeConfig::validate() const {
  check_decoder_dims("qwen3_moe",
                     {{"layers", layers},
                      {"hidden", hidden},
                      {"ffn", ffn},
                      {"moe_ffn", moe_ffn},
                      {"experts", experts},
                      {"top_k", top_k},
                      {"decoder_sparse_step", decoder_sparse_step},
                      {"vocab", vocab}},
                     heads, kv_heads, head_dim);
  if (top_k > experts) fail("qwen3_moe config: top_k ({}) exceeds experts ({})", top_k, experts);
}

bool Qwen3MoeConfig::is_sparse(int64_t layer) const {
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end() &&
         experts > 0 && (layer + 1) % decoder_sparse_step == 0;
}

AttentionShape Qwen3MoeConfig::attention() const { return {hidden, heads, kv_heads, head_dim, rope_theta, rms_eps}; }

std::string Qwen3MoeConfig::describe() const {
  return fmt::format("{} layers, hidden {}, {} heads, {} KV heads, head dim {}, {} experts top-{} of FFN {}, vocab {}",
                     layers, hidden, heads, kv_heads, head_dim, experts, top_k, moe_ffn, vocab) +
         nn::describe(rope_scaling);
}

Tensor qwen3_moe_block(const Qwen3MoeConfig& c, const Tensor& x, const std::string& prefix) {
  Graph& g = x.graph();
  auto w = [&](const std::string& name, const Shape& shape) { return model_weight(g, c.dtype, prefix + name, shape); };
  const Tensor logits = nn::linear(x, w("gate.weight", {c.experts, c.hidden}));
  const RoutedPairs pairs = route_pairs(x, softmax_topk_routing(logits, c.top_k, c.norm_topk_prob));
  const Tensor down = swiglu_experts(pairs, w("experts.gate_proj.weight", {c.experts, c.moe_ffn, c.hidden}),
                                     w("experts.up_proj.weight", {c.experts, c.moe_ffn, c.hidden}),
                                     w("experts.down_proj.weight", {c.experts, c.hidden, c.moe_ffn}));
  return combine_pairs(down, pairs, /*weighted=*/true);
}

Graph build_qwen3_moe(const Qwen3MoeConfig& c, const Phase& phase) {
  c.validate();
  phase.validate("qwen3_moe");
  Graph g("qwen3_moe");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    x = residual_layer(x, c.attention(), c.rms_eps, start.rope, phase, prefix, i, [&](const Tensor& h2) {
      return c.is_sparse(i) ? qwen3_moe_block(c, h2, prefix + "mlp.") : gated_mlp(h2, prefix + "mlp.", c.ffn);
    });
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, c.tie_word_embeddings);
  return g;
}

}  // namespace spool::models
