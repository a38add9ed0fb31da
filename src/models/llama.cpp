// The llama decoder, layer by layer, as Hugging Face's LlamaForCausalLM computes it.

#include <spool/models/llama.hpp>

#include <spool/models/hf_weights.hpp>
#include <spool/support/error.hpp>

namespace spool::models {
namespace {

Tensor layer(const LlamaConfig& c, const Tensor& x, const nn::RopeTables& rope, const Phase& phase,
             const std::string& prefix, std::optional<int64_t> cache_layer) {
  return residual_layer(x, c.attention(), c.rms_eps, rope, phase, prefix, cache_layer,
                        [&](const Tensor& h2) { return gated_mlp(h2, prefix + "mlp.", c.ffn); });
}

}  // namespace

LlamaConfig LlamaConfig::tiny() { return LlamaConfig{}; }

LlamaConfig LlamaConfig::llama3_8b() { return llama_config_from_hf(published_config("llama-3-8b")); }

void LlamaConfig::validate() const {
  auto positive = [](int64_t value, const char* name) {
    if (value < 1) fail("llama config: {} must be positive, got {}", name, value);
  };
  positive(layers, "layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(head_dim, "head_dim");
  positive(ffn, "ffn");
  positive(vocab, "vocab");
  if (heads % kv_heads != 0) fail("llama config: heads ({}) must be a multiple of kv_heads ({})", heads, kv_heads);
  if (head_dim % 2 != 0) fail("llama config: head_dim must be even for RoPE, got {}", head_dim);
}

AttentionShape LlamaConfig::attention() const { return {hidden, heads, kv_heads, head_dim, rope_theta, {}}; }

std::string LlamaConfig::describe() const {
  return fmt::format("{} layers, hidden {}, {} heads, {} KV heads, head dim {}, FFN {}, vocab {}{}", layers, hidden,
                     heads, kv_heads, head_dim, ffn, vocab, tie_word_embeddings ? ", tied embeddings" : "") +
         nn::describe(rope_scaling);
}

Tensor llama_layer(const LlamaConfig& c, const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const std::string& prefix) {
  return layer(c, x, {cos, sin}, Phase::prefill(x.dim(0)), prefix, std::nullopt);
}

Graph build_llama(const LlamaConfig& c, const Phase& phase) {
  c.validate();
  phase.validate("llama");
  Graph g("llama");
  const DecoderStart start = start_decoder(g, phase, c.head_dim, c.rope_theta, c.rope_scaling);
  const Tensor table = model_weight(g, c.dtype, "model.embed_tokens.weight", {c.vocab, c.hidden});
  Tensor x = nn::embedding(start.tokens, table);
  for (int64_t i = 0; i < c.layers; ++i) x = layer(c, x, start.rope, phase, fmt::format("model.layers.{}.", i), i);
  finish_decoder(x, phase, table, c.vocab, c.rms_eps, c.tie_word_embeddings);
  return g;
}

}  // namespace spool::models
