// Llama-4 text decoder (simplified attention, see llama4.hpp), MoE as Hugging
// Face's Llama4TextMoe computes it.

#include <spool/models/llama4.hpp>

#include <spool/models/config_checks.hpp>
#include <spool/models/moe.hpp>

namespace spool::models {

Llama4Config Llama4Config::tiny() { return Llama4Config{}; }

Llama4Config Llama4Config::scout() {
  Llama4Config c;
  c.layers = 48;
  c.hidden = 5120;
  c.heads = 40;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 8192;
  c.ffn_dense = 16384;
  c.experts = 16;
  c.top_k = 1;
  c.vocab = 202048;
  return c;
}

void Llama4Config::validate() const {
  check_decoder_dims("llama4",
                     {{"layers", layers},
                      {"hidden", hidden},
                      {"ffn", ffn},
                      {"ffn_dense", ffn_dense},
                      {"experts", experts},
                      {"top_k", top_k},
                      {"moe_layer_step", moe_layer_step},
                      {"vocab", vocab}},
                     heads, kv_heads, head_dim);
  if (top_k > experts) fail("llama4 config: top_k ({}) exceeds experts ({})", top_k, experts);
}

AttentionShape Llama4Config::attention() const { return {hidden, heads, kv_heads, head_dim, rope_theta, {}}; }

std::string Llama4Config::describe() const {
  return fmt::format(
      "{} layers (MoE every {}), hidden {}, {} heads, {} KV heads, head dim {}, {} experts top-{} of FFN {} + shared, "
      "dense FFN {}, vocab {}",
      layers, moe_layer_step, hidden, heads, kv_heads, head_dim, experts, top_k, ffn, ffn_dense, vocab);
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

Graph build_llama4(const Llama4Config& c, const Phase& phase) {
  c.validate();
  phase.validate("llama4");
  Graph g("llama4");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    x = residual_layer(x, c.attention(), c.rms_eps, start.rope, phase, prefix, i, [&](const Tensor& h2) {
      return c.is_moe(i) ? llama4_moe_block(c, h2, prefix + "feed_forward.")
                         : gated_mlp(h2, prefix + "feed_forward.", c.ffn_dense);
    });
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, /*tied=*/false);
  return g;
}

}  // namespace spool::models
