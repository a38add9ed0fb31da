// Qwen3 dense decoder, as Hugging Face's Qwen3ForCausalLM computes it.

#include <spool/models/qwen3.hpp>

#include <spool/models/hf_weights.hpp>
#include <spool/models/config_checks.hpp>

namespace spool::models {

Qwen3Config Qwen3Config::tiny() { return Qwen3Config{}; }

Qwen3Config Qwen3Config::qwen3_4b() { return qwen3_config_from_hf(published_config("qwen3-4b")); }

void Qwen3Config::validate() const {
  check_decoder_dims("qwen3", {{"layers", layers}, {"hidden", hidden}, {"ffn", ffn}, {"vocab", vocab}}, heads,
                     kv_heads, head_dim);
}

AttentionShape Qwen3Config::attention() const { return {hidden, heads, kv_heads, head_dim, rope_theta, rms_eps}; }

std::string Qwen3Config::describe() const {
  return fmt::format("{} layers, hidden {}, {} heads, {} KV heads, head dim {}, FFN {}, vocab {}, q/k RMSNorm{}",
                     layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
                     tie_word_embeddings ? ", tied embeddings" : "") +
         nn::describe(rope_scaling);
}

Graph build_qwen3(const Qwen3Config& c, const Phase& phase) {
  c.validate();
  phase.validate("qwen3");
  Graph g("qwen3");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    x = residual_layer(x, c.attention(), c.rms_eps, start.rope, phase, prefix, i, [&](const Tensor& h2) {
      return gated_mlp(h2, prefix + "mlp.", c.ffn);
    });
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, c.tie_word_embeddings);
  return g;
}

}  // namespace spool::models
