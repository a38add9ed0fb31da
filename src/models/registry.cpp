// The registry of example models.

#include <spool/models/registry.hpp>

#include <spool/models/bert.hpp>
#include <spool/models/deepseek_v3.hpp>
#include <spool/models/gemma.hpp>
#include <spool/models/llama.hpp>
#include <spool/models/llama4.hpp>
#include <spool/models/qwen3.hpp>
#include <spool/models/qwen3_moe.hpp>

#include <spool/support/error.hpp>

#include <algorithm>

namespace spool::models {
namespace {

constexpr int64_t kTinyDefaultTokens = 8;
constexpr int64_t kRealDefaultTokens = 512;

// The config of the requested size, with --layers applied.
template <typename Config>
Config sized(const ModelOptions& options, const char* model, Config (*real)()) {
  Config c;
  if (options.size == "tiny")
    c = Config::tiny();
  else if (options.size == "real")
    c = real();
  else
    fail("{}: unknown size '{}' (expected tiny or real)", model, options.size);
  if (options.layers != 0) c.layers = options.layers;
  c.dtype = resolve_dtype(options);
  return c;
}

void no_variants(const ModelOptions& options, const char* model) {
  if (!options.variant.empty()) fail("{}: has no variant '{}'", model, options.variant);
}

template <typename Config, typename Build>
std::function<Graph(const ModelOptions&)> builder(const char* model, Config (*real)(), Build build) {
  return [=](const ModelOptions& options) {
    no_variants(options, model);
    return build(sized<Config>(options, model, real), resolve_phase(options));
  };
}

// llama4: Scout (the default) or Maverick, tiny or real.
Llama4Config llama4_config(const ModelOptions& options) {
  const bool maverick = options.variant == "maverick";
  if (!options.variant.empty() && !maverick && options.variant != "scout")
    fail("llama4: has no variant '{}' (known: scout, maverick)", options.variant);
  Llama4Config c;
  if (options.size == "tiny")
    c = maverick ? Llama4Config::tiny_maverick() : Llama4Config::tiny();
  else if (options.size == "real")
    c = maverick ? Llama4Config::maverick() : Llama4Config::scout();
  else
    fail("llama4: unknown size '{}' (expected tiny or real)", options.size);
  if (options.layers != 0) {
    c.layers = options.layers;
    // The published layer lists name every layer; keep the pattern they follow.
    c.moe_layers.clear();
    c.no_rope_layers.clear();
  }
  c.dtype = resolve_dtype(options);
  return c;
}

BertConfig bert_config(const ModelOptions& options) {
  BertConfig c;
  if (options.size == "tiny") {
    if (!options.variant.empty())
      fail("bert: variant '{}' is a real shape: use --size real (tiny has no variants)", options.variant);
    c = BertConfig::tiny();
  } else if (options.size == "real") {
    c = BertConfig::variant_named(options.variant.empty() ? "base" : options.variant);
  } else {
    fail("bert: unknown size '{}' (expected tiny or real)", options.size);
  }
  if (options.layers != 0) c.layers = options.layers;
  c.dtype = resolve_dtype(options);
  return c;
}

}  // namespace

DType resolve_dtype(const ModelOptions& options) {
  if (options.dtype.empty()) return options.size == "real" ? DType::BF16 : DType::F32;
  return model_dtype(options.dtype, "--dtype");
}

Phase resolve_phase(const ModelOptions& options) {
  const int64_t fallback = options.size == "real" ? kRealDefaultTokens : kTinyDefaultTokens;
  if (options.phase == "prefill") {
    if (options.context != 0) fail("--context is the KV cache length of a decode step; a prefill starts with none");
    Phase phase = Phase::prefill(options.seq != 0 ? options.seq : fallback);
    if (options.logits.empty())
      phase.last_token_logits = options.size == "real";
    else if (options.logits == "last" || options.logits == "all")
      phase.last_token_logits = options.logits == "last";
    else
      fail("unknown --logits '{}' (expected last or all)", options.logits);
    return phase;
  }
  if (options.phase == "decode") {
    if (options.seq != 0 && options.seq != 1)
      fail("a decode step processes one token; --seq {} is for --phase prefill", options.seq);
    return Phase::decode(options.context != 0 ? options.context : fallback);
  }
  fail("unknown phase '{}' (expected prefill or decode)", options.phase);
}

const std::vector<ModelEntry>& registry() {
  static const std::vector<ModelEntry> registry = {
      {"llama",
       "Llama-3 decoder: RMSNorm, GQA attention with RoPE, SwiGLU",
       LlamaConfig::tiny().describe(),
       "llama-3-8B: " + LlamaConfig::llama3_8b().describe(),
       {},
       builder("llama", &LlamaConfig::llama3_8b, build_llama),
       true},
      {"gemma",
       "Gemma decoder: scaled embeddings, 1+w RMSNorm, MQA, GeGLU, tied LM head",
       GemmaConfig::tiny().describe(),
       "gemma-2B: " + GemmaConfig::gemma_2b().describe(),
       {},
       builder("gemma", &GemmaConfig::gemma_2b, build_gemma),
       true},
      {"qwen3",
       "Qwen3 decoder: GQA with per-head q/k RMSNorm, SwiGLU",
       Qwen3Config::tiny().describe(),
       "qwen3-4B: " + Qwen3Config::qwen3_4b().describe(),
       {},
       builder("qwen3", &Qwen3Config::qwen3_4b, build_qwen3),
       true},
      {"qwen3_moe",
       "Qwen3-MoE decoder: softmax top-k routing (renormalised), experts as batched GEMMs",
       Qwen3MoeConfig::tiny().describe(),
       "qwen3-30B-A3B: " + Qwen3MoeConfig::qwen3_30b_a3b().describe(),
       {},
       builder("qwen3_moe", &Qwen3MoeConfig::qwen3_30b_a3b, build_qwen3_moe),
       true},
      {"deepseek_v3",
       "DeepSeek-V3 decoder: multi-head latent attention (compressed KV cache, absorbed in decode), group-limited "
       "sigmoid routing with bias correction, shared experts",
       DeepseekV3Config::tiny().describe(),
       "deepseek-v3: " + DeepseekV3Config::deepseek_v3().describe(),
       {},
       builder("deepseek_v3", &DeepseekV3Config::deepseek_v3, build_deepseek_v3),
       true},
      {"llama4",
       "Llama-4 decoder: NoPE and chunked RoPE layers, L2 q/k norm, temperature tuning, top-1 sigmoid MoE with a "
       "shared expert",
       Llama4Config::tiny().describe() + "; llama4:maverick: " + Llama4Config::tiny_maverick().describe(),
       "llama-4-scout: " + Llama4Config::scout().describe() +
           " (Meta's 109B also counts the vision encoder, which is not modelled); llama4:maverick: llama-4-maverick: " +
           Llama4Config::maverick().describe(),
       {{"scout", "llama-4-scout: " + Llama4Config::scout().describe()},
        {"maverick", "llama-4-maverick: " + Llama4Config::maverick().describe()}},
       [](const ModelOptions& options) { return build_llama4(llama4_config(options), resolve_phase(options)); },
       true},
      {"bert",
       "BERT encoder block as the bert:base|large|xlarge workloads define it (prefill only)",
       BertConfig::tiny().describe(),
       BertConfig::base().describe() + "; " + BertConfig::large().describe() + "; " + BertConfig::xlarge().describe(),
       {{"base", BertConfig::base().describe()},
        {"large", BertConfig::large().describe()},
        {"xlarge", BertConfig::xlarge().describe()}},
       [](const ModelOptions& options) {
         const BertConfig c = bert_config(options);
         ModelOptions phase_options = options;
         if (phase_options.seq == 0 && phase_options.phase == "prefill") phase_options.seq = c.seq;
         return build_bert(c, resolve_phase(phase_options));
       },
       false},
  };
  return registry;
}

std::string shape_of(const ModelEntry& entry, const std::string& size, const std::string& variant) {
  if (size != "real") return entry.tiny_shape;
  for (const auto& [name, shape] : entry.variants)
    if (name == variant || variant.empty()) return shape;
  return entry.real_shape;
}

ModelRef find_model(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string variant = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::string known;
  for (const ModelEntry& entry : registry()) {
    known += (known.empty() ? "" : ", ") + entry.name;
    if (entry.name != name) continue;
    const auto named = [&](const auto& v) { return v.first == variant; };
    if (colon != std::string::npos && std::find_if(entry.variants.begin(), entry.variants.end(), named) == entry.variants.end()) {
      std::string variants;
      for (const auto& v : entry.variants) variants += (variants.empty() ? "" : ", ") + name + ":" + v.first;
      fail("model {} has no variant '{}'{}", name, variant, variants.empty() ? "" : " (known: " + variants + ")");
    }
    return {&entry, variant};
  }
  fail("unknown model '{}' (known: {})", name, known);
}

}  // namespace spool::models
