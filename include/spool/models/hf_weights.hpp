#pragma once
// Hugging Face model folders: `config.json` and `model.safetensors` (or the
// shards named by `model.safetensors.index.json`), read for llama, qwen3,
// gemma, qwen3_moe, deepseek_v3 and llama4 (a Llama4ForCausalLM folder, or
// Meta's Llama4ForConditionalGeneration one: text_config and the
// language_model. tensors; the vision tensors are not read). The model's shapes come from config.json; the
// weights (f32, bf16 or f16 in the file, read in that dtype) become the
// values of the graph's Weight nodes, in the model's dtype: bf16 values of a
// bf16 model are taken as they are, anything else is rounded once on load. Every problem is a spool::Error naming the
// file and the key or tensor: a missing, mistyped or unknown config key, an unsupported feature (a RoPE scaling type
// other than linear, llama3 and yarn, attention bias, another activation, ...), a missing, unknown or mis-shaped
// tensor, an unsupported dtype, a malformed file.
//
// Reading holds every value as a double (interp::HostTensor), so it is meant
// for small checkpoints run on the reference interpreter.

#include <spool/interp/host_tensor.hpp>
#include <spool/interp/interp.hpp>

#include <spool/models/decoder.hpp>
#include <spool/models/deepseek_v3.hpp>
#include <spool/models/gemma.hpp>
#include <spool/models/llama.hpp>
#include <spool/models/llama4.hpp>
#include <spool/models/qwen3.hpp>
#include <spool/models/qwen3_moe.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace spool::models {

// A config.json that remembers which keys were read, so that the keys nobody
// read can be reported as unknown.
class HfConfig {
 public:
  static HfConfig read(const std::string& path);
  HfConfig(nlohmann::json json, std::string path);

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;  // present and not null
  bool is_null(const std::string& key) const;  // present and null (marks the key read)
  int64_t integer(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  double number(const std::string& key) const;
  double number_or(const std::string& key, double fallback) const;
  bool boolean(const std::string& key) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  // true/false, or an integer read as a flag (non-zero is true).
  bool flag_or(const std::string& key, bool fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> integers_or(const std::string& key, const std::vector<int64_t>& fallback) const;
  // A nested object (e.g. rope_scaling) as a config of its own, whose
  // errors name "PATH: KEY" and whose unknown keys can be rejected.
  HfConfig object(const std::string& key) const;
  // The key, when present, must hold one of `allowed` (null counts as absent).
  void expect_one_of(const std::string& key, const std::vector<nlohmann::json>& allowed, std::string_view why) const;
  // Marks keys that do not change the computation (token ids, dtype, ...).
  void ignore(const std::vector<std::string>& keys) const;
  // Fails naming every key that was neither read nor ignored.
  void reject_unknown_keys(std::string_view model) const;

 private:
  const nlohmann::json& at(const std::string& key, std::string_view expected) const;

  nlohmann::json json_;
  std::string path_;
  mutable std::set<std::string> used_;
};

// The config.json of a checkpoint a real size names ("llama-3-8b",
// "gemma-2b", "qwen3-4b", "qwen3-30b-a3b"; src/models/shapes/), compiled in.
HfConfig published_config(std::string_view checkpoint);

// Shapes from config.json, checked as described above.
LlamaConfig llama_config_from_hf(const HfConfig& config);
Qwen3Config qwen3_config_from_hf(const HfConfig& config);
GemmaConfig gemma_config_from_hf(const HfConfig& config);
Qwen3MoeConfig qwen3_moe_config_from_hf(const HfConfig& config);
// deepseek_v3: MLA's ranks and head dims, yarn (with mscale_all_dim for the
// softmax scale), the router's n_group/topk_group, routed_scaling_factor,
// first_k_dense_replace and moe_layer_freq. The multi-token-prediction layers
// (num_nextn_predict_layers) are not part of the causal LM and are skipped.
DeepseekV3Config deepseek_v3_config_from_hf(const HfConfig& config);
// llama4 (model_type llama4_text, a Llama4ForCausalLM folder): the text
// config's keys with Hugging Face's defaults: moe_layers or
// interleave_moe_layer_step, no_rope_layers or no_rope_layer_interval,
// use_qk_norm, attention_chunk_size (null: none), attn_temperature_tuning,
// floor_scale, attn_scale, intermediate_size_mlp.
Llama4Config llama4_config_from_hf(const HfConfig& config);

// A checkpoint tensor and the file it came from.
struct CheckpointTensor {
  interp::HostTensor value;  // in the file's dtype (f32, bf16 or f16)
  std::string file;
};
using Checkpoint = std::map<std::string, CheckpointTensor>;

// One .safetensors file: its F32, BF16 and F16 tensors.
Checkpoint read_safetensors(const std::string& path);
// A folder's model.safetensors, or every shard of model.safetensors.index.json.
Checkpoint read_checkpoint(const std::string& dir);

// Values for every Weight node of `graph`, taken from the checkpoint by name.
// With `stacked_experts`, a weight named `P.experts.W` of shape [E, a, b] is
// stacked from the checkpoint's `P.experts.0.W` .. `P.experts.{E-1}.W` [a, b].
// Fails listing every missing, mis-shaped and unknown tensor.
interp::Env bind_weights(const Graph& graph, Checkpoint checkpoint, bool stacked_experts, std::string_view model);

// A model built from a Hugging Face folder: the graph for `phase` with the
// folder's shapes, and its weights.
struct LoadedModel {
  Graph graph;
  interp::Env weights;
  std::string shape;  // one line, as `spool models` prints shapes
  int64_t vocab = 0;
  DType dtype = DType::F32;  // the model's dtype
};
// `family` is llama, qwen3, gemma, qwen3_moe, deepseek_v3 or llama4;
// config.json's model_type must match (llama4: llama4_text). The model runs in `dtype`; without one, in the
// checkpoint's (config.json's torch_dtype: bfloat16 gives bf16, anything else f32).
LoadedModel load_hf_model(const std::string& family, const std::string& dir, const Phase& phase,
                          std::optional<DType> dtype = std::nullopt);
bool has_hf_loader(const std::string& family);
// The weights of a folder for `graph`, a `family` model built from the
// folder's config (load_hf_model's second half: a caller that builds the
// graph itself, e.g. deepseek_v3 in another MLA form).
interp::Env load_hf_weights(const std::string& family, const std::string& dir, const Graph& graph);

}  // namespace spool::models
