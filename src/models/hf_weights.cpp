// Reading Hugging Face model folders: config.json and safetensors files.
//
// safetensors layout: an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {dtype, shape, data_offsets: [begin, end]}
// (offsets into the data that follows the header; an optional
// "__metadata__" entry of strings), then the raw little-endian data.

#include <spool/models/hf_weights.hpp>

#include <spool/support/error.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace spool::models {
namespace {

using nlohmann::json;

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("failed to read '{}'", path);
  return bytes;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

// IEEE half to float (exact): subnormals, infinities and NaN included.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t load_u16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}

uint32_t load_u32(const char* p) {
  return static_cast<uint32_t>(load_u16(p)) | (static_cast<uint32_t>(load_u16(p + 2)) << 16);
}

// Keys of every config.json that do not change what the model computes.
const std::vector<std::string> kIgnoredKeys = {
    "architectures", "torch_dtype", "dtype", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "max_position_embeddings", "initializer_range", "use_cache", "attention_dropout",
    "_name_or_path", "_attn_implementation", "return_dict", "output_attentions", "output_hidden_states",
    "pretraining_tp", "max_window_layers", "output_router_logits", "router_aux_loss_coef"};

// The keys shared by llama, qwen3, gemma and qwen3_moe.
struct CommonKeys {
  int64_t hidden, ffn, heads, kv_heads, head_dim, layers, vocab;
  double rms_eps, rope_theta;
  bool tie;
  nn::RopeScaling rope_scaling;
};

// `rope_scaling` as Hugging Face's rope_config_validation and
// ROPE_INIT_FUNCTIONS read it: rope_type (or the older "type") default,
// linear, llama3 or yarn, with that type's keys; any other type or key is
// an error.
nn::RopeScaling read_rope_scaling(const HfConfig& c) {
  using Kind = nn::RopeScaling::Kind;
  nn::RopeScaling s;
  if (!c.has("rope_scaling")) return s;
  const HfConfig r = c.object("rope_scaling");
  const std::string type = r.string_or("rope_type", r.string_or("type", ""));
  if (r.has("rope_type") && r.has("type") && r.string_or("type", "") != type)
    fail("{}: rope_type \"{}\" and type \"{}\" differ", r.path(), type, r.string_or("type", ""));
  if (type.empty()) fail("{}: missing key 'rope_type'", r.path());
  if (type == "default") {
    r.reject_unknown_keys("default RoPE");
    return s;
  }
  if (type != "linear" && type != "llama3" && type != "yarn")
    fail("{}: unsupported rope_type \"{}\" (spool knows default, linear, llama3 and yarn)", r.path(), type);
  s.factor = r.number("factor");
  if (type == "linear") {
    s.kind = Kind::Linear;
  } else if (type == "llama3") {
    s.kind = Kind::Llama3;
    s.low_freq_factor = r.number("low_freq_factor");
    s.high_freq_factor = r.number("high_freq_factor");
    s.original_max_position_embeddings = r.integer("original_max_position_embeddings");
  } else {
    s.kind = Kind::Yarn;
    // The pretrained context: rope_scaling's, else the model's.
    const int64_t max_positions = c.integer_or("max_position_embeddings", 0);
    s.original_max_position_embeddings = r.integer_or("original_max_position_embeddings", max_positions);
    if (s.original_max_position_embeddings < 1)
      fail("{}: yarn needs original_max_position_embeddings (or max_position_embeddings in {})", r.path(), c.path());
    // Newer Hugging Face versions take the factor as max_position_embeddings /
    // original_max_position_embeddings when both are given; where the two
    // readings differ the checkpoint is ambiguous.
    if (r.has("original_max_position_embeddings") && max_positions > 0 &&
        static_cast<double>(max_positions) / static_cast<double>(s.original_max_position_embeddings) != s.factor)
      fail("{}: factor {} is not max_position_embeddings / original_max_position_embeddings = {} / {}; Hugging Face "
           "versions read this differently",
           r.path(), s.factor, max_positions, s.original_max_position_embeddings);
    s.beta_fast = r.number_or("beta_fast", 32.0);
    s.beta_slow = r.number_or("beta_slow", 1.0);
    s.truncate = r.boolean_or("truncate", true);
    s.attention_factor = r.has("attention_factor")
                             ? r.number("attention_factor")
                             : nn::yarn_attention_factor(s.factor, r.number_or("mscale", 0.0),
                                                         r.number_or("mscale_all_dim", 0.0));
  }
  r.ignore({"rope_type", "type"});
  r.reject_unknown_keys(type + " RoPE scaling");
  try {
    s.validate();
  } catch (const Error& e) {
    fail("{}: {}", r.path(), e.what());
  }
  return s;
}

// `tie_default`: what Hugging Face's config class of the family assumes when
// config.json has no tie_word_embeddings (Gemma ties; Llama and Qwen3 do not).
CommonKeys read_common(const HfConfig& c, std::string_view model, bool head_dim_required, bool tie_default) {
  CommonKeys k;
  k.hidden = c.integer("hidden_size");
  k.ffn = c.integer("intermediate_size");
  k.heads = c.integer("num_attention_heads");
  k.kv_heads = c.integer("num_key_value_heads");
  k.head_dim = head_dim_required ? c.integer("head_dim") : c.integer_or("head_dim", k.heads > 0 ? k.hidden / k.heads : 0);
  k.layers = c.integer("num_hidden_layers");
  k.vocab = c.integer("vocab_size");
  k.rms_eps = c.number("rms_norm_eps");
  k.rope_theta = c.number("rope_theta");
  k.tie = c.boolean_or("tie_word_embeddings", tie_default);
  k.rope_scaling = read_rope_scaling(c);
  c.expect_one_of("attention_bias", {false}, fmt::format("spool's {} has no attention bias", model));
  c.expect_one_of("mlp_bias", {false}, fmt::format("spool's {} has no MLP bias", model));
  c.expect_one_of("use_sliding_window", {false}, fmt::format("spool's {} has no sliding window", model));
  c.ignore({"sliding_window"});  // only read by Hugging Face when use_sliding_window is true
  return k;
}

void expect_model_type(const HfConfig& c, const std::string& expected) {
  const std::string type = c.string_or("model_type", "");
  if (type.empty()) fail("{}: missing key 'model_type' (expected \"{}\")", c.path(), expected);
  if (type != expected) fail("{}: model_type is \"{}\" but the model is {} (model_type \"{}\")", c.path(), type, expected, expected);
}

}  // namespace

// ---- HfConfig ---------------------------------------------------------------

HfConfig::HfConfig(json value, std::string path) : json_(std::move(value)), path_(std::move(path)) {
  if (!json_.is_object()) fail("{}: expected a JSON object", path_);
}

HfConfig HfConfig::read(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail("{}: no such file", path);
  const std::vector<char> bytes = read_bytes(path);
  try {
    return HfConfig(json::parse(bytes.begin(), bytes.end()), path);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    fail("{}: invalid JSON: {}", path, e.what());
  }
}

bool HfConfig::has(const std::string& key) const {
  used_.insert(key);
  return json_.contains(key) && !json_.at(key).is_null();
}

bool HfConfig::is_null(const std::string& key) const {
  used_.insert(key);
  return json_.contains(key) && json_.at(key).is_null();
}

bool HfConfig::flag_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const json& v = json_.at(key);
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  fail("{}: key '{}' must be true, false or an integer, got {}", path_, key, v.dump());
}

const json& HfConfig::at(const std::string& key, std::string_view expected) const {
  used_.insert(key);
  if (!json_.contains(key) || json_.at(key).is_null()) fail("{}: missing key '{}' ({})", path_, key, expected);
  return json_.at(key);
}

int64_t HfConfig::integer(const std::string& key) const {
  const json& v = at(key, "an integer");
  if (!v.is_number_integer()) fail("{}: key '{}' must be an integer, got {}", path_, key, v.dump());
  return v.get<int64_t>();
}

int64_t HfConfig::integer_or(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }

double HfConfig::number(const std::string& key) const {
  const json& v = at(key, "a number");
  if (!v.is_number()) fail("{}: key '{}' must be a number, got {}", path_, key, v.dump());
  return v.get<double>();
}

double HfConfig::number_or(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }

bool HfConfig::boolean(const std::string& key) const {
  const json& v = at(key, "true or false");
  if (!v.is_boolean()) fail("{}: key '{}' must be true or false, got {}", path_, key, v.dump());
  return v.get<bool>();
}

bool HfConfig::boolean_or(const std::string& key, bool fallback) const { return has(key) ? boolean(key) : fallback; }

std::string HfConfig::string_or(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const json& v = json_.at(key);
  if (!v.is_string()) fail("{}: key '{}' must be a string, got {}", path_, key, v.dump());
  return v.get<std::string>();
}

HfConfig HfConfig::object(const std::string& key) const {
  const json& v = at(key, "an object");
  if (!v.is_object()) fail("{}: key '{}' must be an object, got {}", path_, key, v.dump());
  return HfConfig(v, path_ + ": " + key);
}

std::vector<int64_t> HfConfig::integers_or(const std::string& key, const std::vector<int64_t>& fallback) const {
  if (!has(key)) return fallback;
  const json& v = json_.at(key);
  std::vector<int64_t> out;
  if (!v.is_array()) fail("{}: key '{}' must be a list of integers, got {}", path_, key, v.dump());
  for (const json& item : v) {
    if (!item.is_number_integer()) fail("{}: key '{}' must be a list of integers, got {}", path_, key, v.dump());
    out.push_back(item.get<int64_t>());
  }
  return out;
}

void HfConfig::expect_one_of(const std::string& key, const std::vector<json>& allowed, std::string_view why) const {
  if (!has(key)) return;
  const json& v = json_.at(key);
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end())
    fail("{}: unsupported value {} for key '{}' ({})", path_, v.dump(), key, why);
}

void HfConfig::ignore(const std::vector<std::string>& keys) const { used_.insert(keys.begin(), keys.end()); }

void HfConfig::reject_unknown_keys(std::string_view model) const {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : json_.items())
    if (!used_.contains(key)) unknown.push_back("'" + key + "'");
  if (!unknown.empty())
    fail("{}: unknown key{} {} for a {} model (spool does not know what {} would change)", path_,
         unknown.size() == 1 ? "" : "s", join(unknown, ", "), model, unknown.size() == 1 ? "it" : "they");
}

// ---- configs ------------------------------------------------------------------

// The keys every decoder config shares, copied into a config struct with the
// same field names.
template <typename Config>
void set_common(Config& out, const CommonKeys& k) {
  out.layers = k.layers;
  out.hidden = k.hidden;
  out.heads = k.heads;
  out.kv_heads = k.kv_heads;
  out.head_dim = k.head_dim;
  out.ffn = k.ffn;
  out.vocab = k.vocab;
  out.rms_eps = k.rms_eps;
  out.rope_theta = k.rope_theta;
  out.rope_scaling = k.rope_scaling;
  if constexpr (requires { out.tie_word_embeddings; }) out.tie_word_embeddings = k.tie;  // Gemma always ties
}

LlamaConfig llama_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "llama");
  const CommonKeys k = read_common(c, "llama", /*head_dim_required=*/false, /*tie_default=*/false);
  c.expect_one_of("hidden_act", {"silu"}, "spool's llama uses SwiGLU");
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("llama");
  LlamaConfig out;
  set_common(out, k);
  out.validate();
  return out;
}

Qwen3Config qwen3_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "qwen3");
  const CommonKeys k = read_common(c, "qwen3", /*head_dim_required=*/true, /*tie_default=*/false);
  c.expect_one_of("hidden_act", {"silu"}, "spool's qwen3 uses SwiGLU");
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("qwen3");
  Qwen3Config out;
  set_common(out, k);
  out.validate();
  return out;
}

GemmaConfig gemma_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "gemma");
  const CommonKeys k = read_common(c, "gemma", /*head_dim_required=*/true, /*tie_default=*/true);
  // Hugging Face's Gemma uses the tanh GELU whether the config says "gelu" or "gelu_pytorch_tanh".
  c.expect_one_of("hidden_act", {"gelu", "gelu_pytorch_tanh"}, "spool's gemma uses GeGLU with the tanh GELU");
  c.expect_one_of("hidden_activation", {"gelu", "gelu_pytorch_tanh"}, "spool's gemma uses GeGLU with the tanh GELU");
  if (!k.tie) fail("{}: tie_word_embeddings is false, but Gemma ties its LM head to the embeddings", c.path());
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("gemma");
  GemmaConfig out;
  set_common(out, k);
  out.validate();
  return out;
}

Qwen3MoeConfig qwen3_moe_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "qwen3_moe");
  const CommonKeys k = read_common(c, "qwen3_moe", /*head_dim_required=*/true, /*tie_default=*/false);
  c.expect_one_of("hidden_act", {"silu"}, "spool's qwen3_moe uses SwiGLU experts");
  Qwen3MoeConfig out;
  out.moe_ffn = c.integer("moe_intermediate_size");
  out.experts = c.integer("num_experts");
  out.top_k = c.integer("num_experts_per_tok");
  out.norm_topk_prob = c.boolean("norm_topk_prob");
  out.decoder_sparse_step = c.integer_or("decoder_sparse_step", 1);
  out.mlp_only_layers = c.integers_or("mlp_only_layers", {});
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("qwen3_moe");
  set_common(out, k);
  out.validate();
  return out;
}

DeepseekV3Config deepseek_v3_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "deepseek_v3");
  const CommonKeys k = read_common(c, "deepseek_v3", /*head_dim_required=*/false, /*tie_default=*/false);
  c.expect_one_of("hidden_act", {"silu"}, "spool's deepseek_v3 uses SwiGLU");
  c.expect_one_of("scoring_func", {"sigmoid"}, "spool's deepseek_v3 router scores with a sigmoid");
  c.expect_one_of("topk_method", {"noaux_tc"}, "spool's deepseek_v3 routes by noaux_tc (bias-corrected group top-k)");
  c.expect_one_of("quantization_config", {}, "spool reads f32, bf16 and f16 weights, not quantized ones");
  DeepseekV3Config out;
  out.layers = k.layers;
  out.hidden = k.hidden;
  out.heads = k.heads;
  out.ffn = k.ffn;
  out.vocab = k.vocab;
  out.rms_eps = k.rms_eps;
  out.rope_theta = k.rope_theta;
  out.rope_scaling = k.rope_scaling;
  if (k.tie) fail("{}: tie_word_embeddings is true, but DeepSeek-V3 has its own LM head", c.path());
  if (k.kv_heads != k.heads)
    fail("{}: num_key_value_heads ({}) differs from num_attention_heads ({}); MLA has one latent per token", c.path(),
         k.kv_heads, k.heads);
  out.q_lora_rank = c.integer_or("q_lora_rank", 0);  // null: no low-rank query path
  out.kv_lora_rank = c.integer("kv_lora_rank");
  out.qk_nope_head_dim = c.integer("qk_nope_head_dim");
  out.qk_rope_head_dim = c.integer("qk_rope_head_dim");
  out.v_head_dim = c.integer("v_head_dim");
  // Hugging Face's config sets head_dim to the RoPE part of a head.
  if (c.has("head_dim") && k.head_dim != out.qk_rope_head_dim)
    fail("{}: head_dim ({}) must equal qk_rope_head_dim ({})", c.path(), k.head_dim, out.qk_rope_head_dim);
  out.rope_interleave = c.boolean_or("rope_interleave", true);
  if (c.has("rope_scaling")) out.mscale_all_dim = c.object("rope_scaling").number_or("mscale_all_dim", 0.0);
  out.moe_ffn = c.integer("moe_intermediate_size");
  out.experts = c.integer("n_routed_experts");
  out.shared_experts = c.integer("n_shared_experts");
  out.top_k = c.integer("num_experts_per_tok");
  out.n_group = c.integer("n_group");
  out.topk_group = c.integer("topk_group");
  out.first_k_dense_replace = c.integer("first_k_dense_replace");
  out.moe_layer_freq = c.integer_or("moe_layer_freq", 1);
  out.routed_scaling_factor = c.number("routed_scaling_factor");
  out.norm_topk_prob = c.boolean("norm_topk_prob");
  // Training-only keys (auxiliary losses, expert parallelism) and the
  // multi-token-prediction layers, which the causal LM's forward never runs
  // (their tensors are skipped on load).
  c.ignore({"aux_loss_alpha", "seq_aux", "ep_size", "auto_map", "num_nextn_predict_layers"});
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("deepseek_v3");
  out.validate();
  return out;
}

Llama4Config llama4_config_from_hf(const HfConfig& c) {
  expect_model_type(c, "llama4_text");
  const CommonKeys k = read_common(c, "llama4", /*head_dim_required=*/true, /*tie_default=*/false);
  c.expect_one_of("hidden_act", {"silu"}, "spool's llama4 uses SwiGLU");
  Llama4Config out;
  set_common(out, k);
  out.ffn_dense = c.integer("intermediate_size_mlp");
  out.experts = c.integer_or("num_local_experts", 16);
  out.top_k = c.integer_or("num_experts_per_tok", 1);
  out.moe_layer_step = c.integer_or("interleave_moe_layer_step", 1);
  out.moe_layers = c.integers_or("moe_layers", {});
  out.no_rope_layer_interval = c.integer_or("no_rope_layer_interval", 4);
  out.no_rope_layers = c.integers_or("no_rope_layers", {});
  out.use_qk_norm = c.boolean_or("use_qk_norm", true);
  out.attention_chunk_size = c.is_null("attention_chunk_size") ? 0 : c.integer_or("attention_chunk_size", 8192);
  out.attn_temperature_tuning = c.flag_or("attn_temperature_tuning", true);
  out.floor_scale = c.number_or("floor_scale", 8192.0);
  out.attn_scale = c.number_or("attn_scale", 0.1);
  // Training-only: router noise, and a flag of Meta's quantization tooling.
  c.ignore({"router_jitter_noise", "for_llm_compressor"});
  c.ignore(kIgnoredKeys);
  c.reject_unknown_keys("llama4");
  out.validate();
  return out;
}

// ---- safetensors ----------------------------------------------------------------

Checkpoint read_safetensors(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  if (bytes.size() < 8) fail("{}: not a safetensors file (shorter than its 8-byte header length)", path);
  const uint64_t header_size = static_cast<uint64_t>(load_u32(bytes.data())) |
                               (static_cast<uint64_t>(load_u32(bytes.data() + 4)) << 32);
  if (header_size > bytes.size() - 8)
    fail("{}: header length {} exceeds the file's {} bytes", path, header_size, bytes.size());
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    fail("{}: invalid header JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: the header must be a JSON object", path);
  const char* data = bytes.data() + 8 + header_size;
  const uint64_t data_size = bytes.size() - 8 - header_size;

  Checkpoint out;
  // The tensors' byte ranges, which must tile the data exactly (the format
  // allows no overlaps, holes or trailing bytes).
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      fail("{}: tensor '{}' needs dtype, shape and data_offsets", path, name);
    const json& dtype = entry.at("dtype");
    const json& shape_json = entry.at("shape");
    const json& offsets = entry.at("data_offsets");
    if (!dtype.is_string()) fail("{}: tensor '{}': dtype must be a string", path, name);
    const std::string type = dtype.get<std::string>();
    int64_t element_size = 0;
    if (type == "F32")
      element_size = 4;
    else if (type == "BF16" || type == "F16")
      element_size = 2;
    else
      fail("{}: tensor '{}' has dtype {} (spool reads F32, BF16 and F16)", path, name, type);
    Shape shape;
    if (!shape_json.is_array()) fail("{}: tensor '{}': shape must be a list", path, name);
    for (const json& d : shape_json) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': bad shape {}", path, name, shape_json.dump());
      shape.push_back(d.get<int64_t>());
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be two non-negative integers", path, name);
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    // The element count and its bytes, refusing a shape whose size would
    // overflow instead of letting it wrap past the size check.
    int64_t count = 1;
    for (const int64_t d : shape) {
      if (d != 0 && count > std::numeric_limits<int64_t>::max() / element_size / d)
        fail("{}: tensor '{}': shape {} has too many elements", path, name, shape_str(shape));
      count *= d;
    }
    if (begin > end || end > data_size)
      fail("{}: tensor '{}': data_offsets [{}, {}] are outside the {} data bytes", path, name, begin, end, data_size);
    if (end - begin != static_cast<uint64_t>(count * element_size))
      fail("{}: tensor '{}': {} data bytes for {} {} elements of shape {}", path, name, end - begin, count, type,
           shape_str(shape));
    ranges.emplace_back(begin, end, name);
    // The file's dtype is kept (a bf16 checkpoint stays bf16; the values are exact in it).
    interp::HostTensor value(type == "F32" ? DType::F32 : type == "BF16" ? DType::BF16 : DType::F16, shape);
    const char* p = data + begin;
    for (int64_t i = 0; i < count; ++i) {
      float f = 0.0f;
      if (type == "F32")
        f = std::bit_cast<float>(load_u32(p + 4 * i));
      else if (type == "BF16")
        f = std::bit_cast<float>(static_cast<uint32_t>(load_u16(p + 2 * i)) << 16);
      else
        f = half_to_float(load_u16(p + 2 * i));
      value.set(i, f);
    }
    out.emplace(name, CheckpointTensor{std::move(value), path});
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  std::string last = "the header";
  for (const auto& [begin, end, name] : ranges) {
    if (begin < covered) fail("{}: tensor '{}' (bytes {}..{}) overlaps {}", path, name, begin, end, last);
    if (begin > covered) fail("{}: bytes {}..{} of the data belong to no tensor", path, covered, begin);
    covered = end;
    last = "tensor '" + name + "'";
  }
  if (covered != data_size)
    fail("{}: {} trailing bytes after the last tensor (the data holds {} bytes, the tensors {})", path,
         data_size - covered, data_size, covered);
  return out;
}

Checkpoint read_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("{}: not a directory (expected a Hugging Face model folder)", dir);
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::is_regular_file(single)) return read_safetensors(single);
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (!fs::is_regular_file(index_path))
    fail("{}: no model.safetensors (nor model.safetensors.index.json) in the folder", dir);
  const std::vector<char> bytes = read_bytes(index_path);
  json index;
  try {
    index = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    fail("{}: invalid JSON: {}", index_path, e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    fail("{}: missing object 'weight_map'", index_path);
  std::set<std::string> shards;
  for (const auto& [name, file] : index.at("weight_map").items()) {
    if (!file.is_string()) fail("{}: weight_map entry '{}' must name a file", index_path, name);
    shards.insert(file.get<std::string>());
  }
  Checkpoint out;
  for (const std::string& shard : shards) {
    Checkpoint part = read_safetensors((fs::path(dir) / shard).string());
    for (auto& [name, tensor] : part)
      if (!out.emplace(name, std::move(tensor)).second) fail("{}: tensor '{}' appears in two shards", dir, name);
  }
  return out;
}

// ---- binding ----------------------------------------------------------------

// The tensor in the model's dtype: the same tensor when they agree (a bf16
// checkpoint of a bf16 model is not widened), otherwise every value rounded
// to it (an f32 checkpoint run in bf16 is rounded once, on load).
interp::HostTensor as_dtype(const interp::HostTensor& value, DType dtype) {
  if (value.dtype() == dtype) return value;
  interp::HostTensor out(dtype, value.shape());
  for (int64_t i = 0; i < value.size(); ++i) out.set(i, value.get(i));
  return out;
}

interp::Env bind_weights(const Graph& graph, Checkpoint checkpoint, bool stacked_experts, std::string_view model) {
  std::string file = "the checkpoint";
  if (!checkpoint.empty()) file = checkpoint.begin()->second.file;
  std::vector<std::string> problems;
  interp::Env env;
  auto take = [&](const std::string& name, const Shape& shape) -> const interp::HostTensor* {
    const auto it = checkpoint.find(name);
    if (it == checkpoint.end()) {
      problems.push_back(fmt::format("missing tensor '{}' (expected {})", name, shape_str(shape)));
      return nullptr;
    }
    if (it->second.value.shape() != shape) {
      problems.push_back(fmt::format("{}: tensor '{}' has shape {} but the model expects {}", it->second.file, name,
                                     shape_str(it->second.value.shape()), shape_str(shape)));
      return nullptr;
    }
    return &it->second.value;
  };
  std::set<std::string> used;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    if (node.op != Op::Weight) continue;
    const std::string& name = std::get<NameAttr>(node.attr).name;
    const size_t experts_at = name.find(".experts.");
    if (stacked_experts && experts_at != std::string::npos && node.shape.size() == 3) {
      // P.experts.W [E, a, b] from P.experts.e.W [a, b].
      const std::string head = name.substr(0, experts_at + 9), tail = name.substr(experts_at + 9);
      const Shape part_shape(node.shape.begin() + 1, node.shape.end());
      interp::HostTensor stacked(node.dtype, node.shape);
      bool complete = true;
      const int64_t part_size = num_elements(part_shape);
      for (int64_t e = 0; e < node.shape[0]; ++e) {
        const std::string part_name = fmt::format("{}{}.{}", head, e, tail);
        used.insert(part_name);
        const interp::HostTensor* part = take(part_name, part_shape);
        if (!part) {
          complete = false;
          continue;
        }
        for (int64_t i = 0; i < part_size; ++i) stacked.set(e * part_size + i, part->get(i));
      }
      if (complete) env.emplace(name, std::move(stacked));
      continue;
    }
    used.insert(name);
    if (const interp::HostTensor* value = take(name, node.shape)) env.emplace(name, as_dtype(*value, node.dtype));
  }
  for (const auto& [name, tensor] : checkpoint)
    if (!used.contains(name))
      problems.push_back(fmt::format("{}: unknown tensor '{}' (not a parameter of this {} model)", tensor.file, name, model));
  if (!problems.empty())
    fail("{} does not match the {} model of its config.json ({} problem{}):\n  {}", file, model, problems.size(),
         problems.size() == 1 ? "" : "s", join(problems, "\n  "));
  return env;
}

// ---- whole models ---------------------------------------------------------------

bool has_hf_loader(const std::string& family) {
  return family == "llama" || family == "qwen3" || family == "gemma" || family == "qwen3_moe" ||
         family == "deepseek_v3" || family == "llama4";
}

DType checkpoint_dtype(const HfConfig& config) {
  for (const char* key : {"torch_dtype", "dtype"})
    if (config.string_or(key, "") == "bfloat16") return DType::BF16;
  return DType::F32;
}

namespace {

// The graph, shape line and vocabulary of a model read from `config`.
template <typename Config, typename Build>
void build_loaded(LoadedModel& out, Config c, DType dtype, const Phase& phase, Build build) {
  c.dtype = dtype;
  out.graph = build(c, phase);
  out.shape = c.describe();
  out.vocab = c.vocab;
}

}  // namespace

namespace {

// Llama 4 as Meta publishes it (Llama4ForConditionalGeneration, model_type
// llama4) keeps the text model's config under text_config.
bool llama4_multimodal(const HfConfig& config) { return config.string_or("model_type", "") == "llama4"; }

HfConfig llama4_text_config(const HfConfig& config) {
  if (!llama4_multimodal(config)) return config;
  config.expect_one_of("tie_word_embeddings", {false}, "Llama 4 has its own LM head");
  // The vision encoder and the image tokens: the text model does not read them.
  config.ignore({"vision_config", "boi_token_index", "eoi_token_index", "image_token_index"});
  config.ignore(kIgnoredKeys);
  HfConfig text = config.object("text_config");
  config.reject_unknown_keys("llama4 (multimodal)");
  return text;
}

}  // namespace

interp::Env load_hf_weights(const std::string& family, const std::string& dir, const Graph& graph) {
  const HfConfig config = HfConfig::read((std::filesystem::path(dir) / "config.json").string());
  Checkpoint checkpoint = read_checkpoint(dir);
  if (family == "llama4" && llama4_multimodal(config)) {
    // The text model's tensors are under language_model. (language_model.model.layers.0...,
    // language_model.lm_head.weight); the vision encoder's and the projector's are not read.
    Checkpoint text;
    for (auto& [name, tensor] : checkpoint) {
      if (name.rfind("language_model.", 0) == 0)
        text.emplace(name.substr(15), std::move(tensor));
      else if (name.rfind("vision_model.", 0) != 0 && name.rfind("multi_modal_projector.", 0) != 0)
        text.emplace(name, std::move(tensor));  // reported as unknown
    }
    checkpoint = std::move(text);
  }
  if (family == "deepseek_v3") {
    // The multi-token-prediction layers follow the decoder's layers in the
    // checkpoint (model.layers.N, ... for N = num_hidden_layers); the causal
    // LM does not run them.
    const int64_t layers = config.integer("num_hidden_layers"),
                  extra = config.integer_or("num_nextn_predict_layers", 0);
    for (int64_t l = layers; l < layers + extra; ++l) {
      const std::string prefix = fmt::format("model.layers.{}.", l);
      for (auto it = checkpoint.begin(); it != checkpoint.end();)
        it = it->first.rfind(prefix, 0) == 0 ? checkpoint.erase(it) : std::next(it);
    }
  }
  // qwen3_moe's and deepseek_v3's experts are one stacked weight per
  // projection (llama4's are stored stacked already).
  return bind_weights(graph, std::move(checkpoint),
                      /*stacked_experts=*/family == "qwen3_moe" || family == "deepseek_v3", family);
}

LoadedModel load_hf_model(const std::string& family, const std::string& dir, const Phase& phase,
                          std::optional<DType> dtype) {
  const HfConfig config = HfConfig::read((std::filesystem::path(dir) / "config.json").string());
  LoadedModel out;
  out.dtype = dtype.value_or(checkpoint_dtype(config));
  if (family == "llama")
    build_loaded(out, llama_config_from_hf(config), out.dtype, phase, build_llama);
  else if (family == "qwen3")
    build_loaded(out, qwen3_config_from_hf(config), out.dtype, phase, build_qwen3);
  else if (family == "gemma")
    build_loaded(out, gemma_config_from_hf(config), out.dtype, phase, build_gemma);
  else if (family == "qwen3_moe")
    build_loaded(out, qwen3_moe_config_from_hf(config), out.dtype, phase, build_qwen3_moe);
  else if (family == "deepseek_v3")
    build_loaded(out, deepseek_v3_config_from_hf(config), out.dtype, phase, build_deepseek_v3);
  else if (family == "llama4")
    build_loaded(out, llama4_config_from_hf(llama4_text_config(config)), out.dtype, phase, build_llama4);
  else
    fail("{}: reading Hugging Face weights is supported for llama, qwen3, gemma, qwen3_moe, deepseek_v3 and llama4",
         family);
  out.weights = load_hf_weights(family, dir, out.graph);
  return out;
}

}  // namespace spool::models
