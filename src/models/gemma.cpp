// Gemma decoder, as Hugging Face's GemmaForCausalLM computes it.

#include <spool/models/gemma.hpp>

#include <spool/models/hf_weights.hpp>
#include <spool/models/config_checks.hpp>

#include <cmath>

namespace spool::models {

GemmaConfig GemmaConfig::tiny() { return GemmaConfig{}; }

GemmaConfig GemmaConfig::gemma_2b() { return gemma_config_from_hf(published_config("gemma-2b")); }

void GemmaConfig::validate() const {
  check_decoder_dims("gemma", {{"layers", layers}, {"hidden", hidden}, {"ffn", ffn}, {"vocab", vocab}}, heads,
                     kv_heads, head_dim);
}

AttentionShape GemmaConfig::attention() const { return {hidden, heads, kv_heads, head_dim, rope_theta, {}}; }

std::string GemmaConfig::describe() const {
  return fmt::format("{} layers, hidden {}, {} heads, {} KV heads, head dim {}, GeGLU FFN {}, vocab {}, tied embeddings",
                     layers, hidden, heads, kv_heads, head_dim, ffn, vocab) +
         nn::describe(rope_scaling);
}

Graph build_gemma(const GemmaConfig& c, const Phase& phase) {
  c.validate();
  phase.validate("gemma");
  Graph g("gemma");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  // Hugging Face multiplies by sqrt(hidden) rounded to the activation dtype.
  Tensor x = nn::embedding(start.tokens, table) * std::sqrt(static_cast<double>(c.hidden));
  auto norm = [&](const Tensor& t, const std::string& name) {
    return nn::rms_norm(t, model_weight(g, c.dtype, name, {c.hidden}), c.rms_eps, /*unit_offset=*/true);
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("model.layers.{}.", i);
    x = x + self_attention(c.attention(), norm(x, prefix + "input_layernorm.weight"), start.rope, phase,
                           prefix + "self_attn.", i);
    x = x + gated_mlp(norm(x, prefix + "post_attention_layernorm.weight"), prefix + "mlp.", c.ffn,
                      Activation::GeluTanh);
  }
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, /*tied=*/true, /*norm_unit_offset=*/true);
  return g;
}

}  // namespace spool::models
