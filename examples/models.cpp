// The registry of example models.

#include "models.hpp"

#include "llama.hpp"

#include <spool/support/error.hpp>

namespace spool::examples {
namespace {

std::string llama_shape(const LlamaConfig& c) {
  return fmt::format("{} layers, hidden {}, {} heads, {} KV heads, head dim {}, FFN {}, vocab {}", c.layers,
                     c.hidden, c.heads, c.kv_heads, c.head_dim, c.ffn, c.vocab);
}

LlamaConfig llama_config(const ModelOptions& options) {
  LlamaConfig c;
  if (options.size == "tiny")
    c = LlamaConfig::tiny();
  else if (options.size == "real")
    c = LlamaConfig::llama3_8b();
  else
    fail("llama: unknown size '{}' (expected tiny or real)", options.size);
  if (options.layers != 0) c.layers = options.layers;
  return c;
}

}  // namespace

const std::vector<ModelEntry>& models() {
  static const std::vector<ModelEntry> registry = {
      {"llama", "Llama-3 decoder: RMSNorm, GQA attention with RoPE, SwiGLU", llama_shape(LlamaConfig::tiny()),
       llama_shape(LlamaConfig::llama3_8b()),
       [](const ModelOptions& options) { return build_llama(llama_config(options), options.seq); }},
  };
  return registry;
}

const ModelEntry& find_model(const std::string& name) {
  std::string known;
  for (const ModelEntry& entry : models()) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : ", ") + entry.name;
  }
  fail("unknown model '{}' (known: {})", name, known);
}

}  // namespace spool::examples
