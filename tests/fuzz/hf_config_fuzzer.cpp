// libFuzzer target for Hugging Face config.json files (HfConfig::read and
// the readers of the llama, qwen3, gemma, qwen3_moe, deepseek_v3 and llama4
// configs, a multimodal Llama 4's text_config included): any bytes
// are read as a config.json by every family's reader; a spool::Error naming
// the file and key is the answer to a bad one. A config that is accepted and
// small builds its model's graph in both phases, as load_hf_model does next.
// Anything else (a JSON library exception, an assertion, a sanitizer
// report) is a finding.

#include "scratch_file.hpp"

#include <spool/models/hf_weights.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace {

using namespace spool;
using namespace spool::models;

// Small enough to build in a few milliseconds.
bool at_most(std::initializer_list<int64_t> values, int64_t bound) {
  return std::all_of(values.begin(), values.end(), [&](int64_t v) { return v <= bound; });
}

template <typename Config>
bool small(const Config& c) {
  bool ok = at_most({c.layers}, 3) && at_most({c.heads, c.kv_heads}, 8) &&
            at_most({c.hidden, c.head_dim}, 64) && at_most({c.ffn, c.vocab}, 256);
  if constexpr (requires { c.moe_ffn; }) ok = ok && at_most({c.moe_ffn, c.experts}, 8);
  if constexpr (requires { c.ffn_dense; }) ok = ok && at_most({c.ffn_dense}, 256) && at_most({c.experts}, 8);
  return ok;
}

bool small(const DeepseekV3Config& c) {
  return at_most({c.layers}, 3) && at_most({c.heads, c.experts, c.moe_ffn}, 8) &&
         at_most({c.hidden, c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim}, 64) &&
         at_most({c.ffn, c.vocab}, 256);
}

template <typename Config, typename Build>
void build(const Config& config, Build build_model) {
  (void)config.describe();
  if (!small(config)) return;
  for (const Phase& phase : {Phase::prefill(3), Phase::decode(2)}) build_model(config, phase).verify();
}

template <typename Read, typename Build>
void try_family(const HfConfig& config, Read read, Build build_model) {
  const HfConfig fresh = config;  // each reader marks the keys it reads
  try {
    build(read(fresh), build_model);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static spool::fuzz::ScratchFile file("config.json");
  try {
    const HfConfig config = HfConfig::read(file.write(data, size));
    try_family(config, llama_config_from_hf, build_llama);
    try_family(config, qwen3_config_from_hf, build_qwen3);
    try_family(config, gemma_config_from_hf, build_gemma);
    try_family(config, qwen3_moe_config_from_hf, build_qwen3_moe);
    try_family(config, deepseek_v3_config_from_hf, build_deepseek_v3);
    try_family(config, llama4_config_from_hf, build_llama4);
    try_family(
        config, [](const HfConfig& c) { return llama4_config_from_hf(c.object("text_config")); }, build_llama4);
  } catch (const Error&) {
  }
  return 0;
}
