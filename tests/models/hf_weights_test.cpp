// Hugging Face folders: the PyTorch goldens of tests/golden/models (tiny
// llama in f32, qwen3-MoE in bf16, qwen3 in f16, gemma in bf16) loaded and
// run on the reference interpreter, and every reader diagnostic on small
// hand-made folders.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/support/error.hpp>
#include <spool/support/npy.hpp>

#include <spool/models/hf_weights.hpp>

#include "support/allclose.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace spool;
using namespace spool::models;
using interp::HostTensor;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string golden_dir(const std::string& model) { return std::string(SPOOL_SOURCE_DIR) + "/tests/golden/models/" + model; }

HostTensor load_npy(const std::string& path) { return HostTensor::from_npy(read_npy(path), path); }

std::vector<int64_t> golden_tokens(const std::string& model) {
  const HostTensor t = load_npy(golden_dir(model) + "/tokens.npy");
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.size(); ++i) out.push_back(t.get_int(i));
  return out;
}

std::map<std::string, HostTensor> run_loaded(const LoadedModel& m, const std::vector<int64_t>& tokens,
                                             const interp::Env& extra = {}) {
  interp::Env env = m.weights;
  env["tokens"] = HostTensor::from_i64({static_cast<int64_t>(tokens.size())}, tokens);
  for (const auto& [name, value] : extra) env[name] = value;
  return interp::run(m.graph, env);
}

// `family` reads the folder `model` (its name when empty).
void check_golden(const std::string& model, std::string family = "") {
  if (family.empty()) family = model;
  const std::string dir = golden_dir(model);
  const std::vector<int64_t> tokens = golden_tokens(model);
  const int64_t n = static_cast<int64_t>(tokens.size());

  const LoadedModel prefill = load_hf_model(family, dir, Phase::prefill(n), DType::F32);
  const test::AllClose logits =
      test::allclose(run_loaded(prefill, tokens).at("logits"), load_npy(dir + "/logits.npy"), {.stol = 1e-4});
  MESSAGE(model << " prefill logits vs PyTorch: max abs " << logits.worst << ", relative to scale "
                << logits.worst_to_scale);
  CHECK(logits);

  // Decode the last token with the cache of a prefill of the others.
  const std::vector<int64_t> prompt(tokens.begin(), tokens.end() - 1);
  const auto first = run_loaded(load_hf_model(family, dir, Phase::prefill(n - 1), DType::F32), prompt);
  const interp::Env cache = next_cache(first, 1);
  const LoadedModel decode = load_hf_model(family, dir, Phase::decode(n - 1), DType::F32);
  const test::AllClose step = test::allclose(run_loaded(decode, {tokens.back()}, cache).at("logits"),
                                             load_npy(dir + "/decode_logits.npy"), {.stol = 1e-4});
  MESSAGE(model << " decode logits vs PyTorch: max abs " << step.worst << ", relative to scale "
                << step.worst_to_scale);
  CHECK(step);
}

// A scratch folder with a small llama config and a writer of safetensors files.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : dir_((fs::temp_directory_path() / ("spool_hf_test_" + name + "_" + std::to_string(::getpid()))).string()) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = {{"model_type", "llama"},       {"hidden_size", 4},         {"intermediate_size", 6},
               {"num_attention_heads", 2},    {"num_key_value_heads", 1}, {"num_hidden_layers", 1},
               {"vocab_size", 8},             {"rms_norm_eps", 1e-5},     {"rope_theta", 10000.0},
               {"tie_word_embeddings", true}, {"hidden_act", "silu"},     {"torch_dtype", "float32"}};
    const int64_t h = 4, f = 6, d = 2;
    shapes_ = {{"model.embed_tokens.weight", {8, h}},
               {"model.norm.weight", {h}},
               {"model.layers.0.input_layernorm.weight", {h}},
               {"model.layers.0.post_attention_layernorm.weight", {h}},
               {"model.layers.0.self_attn.q_proj.weight", {2 * d, h}},
               {"model.layers.0.self_attn.k_proj.weight", {d, h}},
               {"model.layers.0.self_attn.v_proj.weight", {d, h}},
               {"model.layers.0.self_attn.o_proj.weight", {h, 2 * d}},
               {"model.layers.0.mlp.gate_proj.weight", {f, h}},
               {"model.layers.0.mlp.up_proj.weight", {f, h}},
               {"model.layers.0.mlp.down_proj.weight", {h, f}}};
  }
  ~Scratch() { fs::remove_all(dir_); }

  const std::string& dir() const { return dir_; }
  json& config() { return config_; }
  std::map<std::string, Shape>& shapes() { return shapes_; }
  std::string file() const { return dir_ + "/model.safetensors"; }

  // Writes config.json and model.safetensors (every tensor of `dtype`, value i * 0.25 at flat index i).
  void write(const std::string& dtype = "F32") const {
    std::ofstream(dir_ + "/config.json") << config_.dump();
    write_tensors(file(), dtype, [](size_t) { return true; });
  }

  // Writes config.json, two shards (alternate tensors) and model.safetensors.index.json.
  void write_shards() const {
    std::ofstream(dir_ + "/config.json") << config_.dump();
    json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
    for (size_t shard = 0; shard < 2; ++shard) {
      const std::string name = fmt::format("model-0000{}-of-00002.safetensors", shard + 1);
      write_tensors(dir_ + "/" + name, "F32", [&](size_t i) { return i % 2 == shard; });
      size_t i = 0;
      for (const auto& entry : shapes_)
        if (i++ % 2 == shard) index["weight_map"][entry.first] = name;
    }
    std::ofstream(dir_ + "/model.safetensors.index.json") << index.dump();
  }

 private:
  template <typename Keep>
  void write_tensors(const std::string& path, const std::string& dtype, Keep keep) const {
    json header = json::object();
    std::string data;
    size_t index = 0;
    for (const auto& [name, shape] : shapes_) {
      if (!keep(index++)) continue;
      const int64_t count = num_elements(shape);
      const size_t begin = data.size();
      for (int64_t i = 0; i < count; ++i) {
        const float value = static_cast<float>(i) * 0.25f;
        uint32_t bits;
        std::memcpy(&bits, &value, 4);
        if (dtype == "F32") {
          for (int b = 0; b < 4; ++b) data.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
        } else if (dtype == "BF16") {  // multiples of 0.25 below 2^8 are exact in bf16
          data.push_back(static_cast<char>((bits >> 16) & 0xff));
          data.push_back(static_cast<char>((bits >> 24) & 0xff));
        } else {  // F16: exact for these values
          const uint16_t half = to_half(value);
          data.push_back(static_cast<char>(half & 0xff));
          data.push_back(static_cast<char>(half >> 8));
        }
      }
      header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string text = header.dump();
    std::ofstream out(path, std::ios::binary);
    const uint64_t size = text.size();
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((size >> (8 * b)) & 0xff));
    out << text << data;
  }

  static uint16_t to_half(float value) {  // normal, exactly representable values only
    if (value == 0.0f) return 0;
    int exponent = 0;
    const float mantissa = std::frexp(value, &exponent);  // value = mantissa * 2^exponent, mantissa in [0.5, 1)
    const auto fraction = static_cast<uint16_t>(std::lround((mantissa * 2.0f - 1.0f) * 1024.0f));
    return static_cast<uint16_t>(((exponent - 1 + 15) << 10) | fraction);
  }

  std::string dir_;
  json config_;
  std::map<std::string, Shape> shapes_;
};

std::string load_error(const Scratch& scratch) {
  try {
    load_hf_model("llama", scratch.dir(), Phase::prefill(2));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("tiny llama from a Hugging Face folder matches PyTorch (f32 weights)") { check_golden("llama"); }

TEST_CASE("tiny qwen3-MoE from a Hugging Face folder matches PyTorch (bf16 weights, stacked experts)") {
  check_golden("qwen3_moe");
}

TEST_CASE("tiny qwen3 from a Hugging Face folder matches PyTorch (f16 weights, q/k norm, tied embeddings)") {
  check_golden("qwen3");
}

TEST_CASE("tiny gemma from a Hugging Face folder matches PyTorch (bf16 weights, 1 + w norm, scaled and tied embeddings)") {
  check_golden("gemma");
}

TEST_CASE("tiny deepseek-v3 from a sharded Hugging Face folder matches PyTorch (MLA, yarn, group-limited MoE)") {
  check_golden("deepseek_v3");
}

TEST_CASE("deepseek-v3 golden: the expanded and the absorbed MLA both match PyTorch, in prefill and decode") {
  const std::string dir = golden_dir("deepseek_v3");
  const std::vector<int64_t> tokens = golden_tokens("deepseek_v3");
  const int64_t n = static_cast<int64_t>(tokens.size());
  const DeepseekV3Config base = deepseek_v3_config_from_hf(HfConfig::read(dir + "/config.json"));
  auto run_form = [&](MlaForm form, const Phase& phase, const std::vector<int64_t>& ids, const interp::Env& cache) {
    DeepseekV3Config c = base;
    c.mla_form = form;
    const Graph g = build_deepseek_v3(c, phase);
    interp::Env env = load_hf_weights("deepseek_v3", dir, g);
    env["tokens"] = HostTensor::from_i64({static_cast<int64_t>(ids.size())}, ids);
    for (const auto& [name, value] : cache) env[name] = value;
    return interp::run(g, env);
  };
  const std::vector<int64_t> prompt(tokens.begin(), tokens.end() - 1);
  for (const MlaForm form : {MlaForm::Expanded, MlaForm::Absorbed}) {
    CAPTURE(form == MlaForm::Absorbed ? "absorbed" : "expanded");
    const test::AllClose prefill = test::allclose(run_form(form, Phase::prefill(n), tokens, {}).at("logits"),
                                                  load_npy(dir + "/logits.npy"), {.stol = 1e-4});
    CHECK(prefill);
    // The cache of a prefill in either form, decoded in this one.
    for (const MlaForm cache_form : {MlaForm::Expanded, MlaForm::Absorbed}) {
      const interp::Env cache = next_cache(run_form(cache_form, Phase::prefill(n - 1), prompt, {}), 1);
      const test::AllClose step =
          test::allclose(run_form(form, Phase::decode(n - 1), {tokens.back()}, cache).at("logits"),
                         load_npy(dir + "/decode_logits.npy"), {.stol = 1e-4});
      MESSAGE("decode vs PyTorch: relative to scale " << step.worst_to_scale);
      CHECK(step);
    }
  }
}

TEST_CASE(
    "tiny llama4 (Scout layout) from a Hugging Face folder matches PyTorch (NoPE, L2 q/k norm, chunks, "
    "temperature tuning)") {
  check_golden("llama4");
}

TEST_CASE("tiny llama4 (Maverick layout) from a Hugging Face folder matches PyTorch (dense and MoE layers)") {
  check_golden("llama4_maverick", "llama4");
}

TEST_CASE("tiny llama4 as Meta publishes it (text_config, language_model. tensors, vision tensors) matches PyTorch") {
  check_golden("llama4_multimodal", "llama4");
}

TEST_CASE("llama4 and deepseek-v3 folders: the config's layer plan and attention keys are read") {
  const LoadedModel scout = load_hf_model("llama4", golden_dir("llama4"), Phase::prefill(4));
  CHECK(scout.shape.find("4 layers (4 MoE; 1 NoPE, L2 q/k norm, RoPE layers chunked by 3") != std::string::npos);
  const LoadedModel maverick = load_hf_model("llama4", golden_dir("llama4_maverick"), Phase::prefill(4));
  CHECK(maverick.shape.find("4 layers (2 MoE; 1 NoPE, RoPE layers chunked by 3") != std::string::npos);
  const LoadedModel ds = load_hf_model("deepseek_v3", golden_dir("deepseek_v3"), Phase::prefill(4));
  CHECK(ds.shape.find("3 layers (1 dense)") != std::string::npos);
  CHECK(ds.shape.find("cache 40 values per token and layer") != std::string::npos);
  CHECK(ds.shape.find("yarn RoPE scaling x4") != std::string::npos);
  const DeepseekV3Config c = deepseek_v3_config_from_hf(HfConfig::read(golden_dir("deepseek_v3") + "/config.json"));
  // (16 + 8)^-0.5 * mscale(4, 0.707)^2
  const double mscale = 0.1 * 0.707 * std::log(4.0) + 1.0;
  CHECK(c.softmax_scale() == doctest::Approx(mscale * mscale / std::sqrt(24.0)).epsilon(1e-12));
  CHECK(c.rope_scaling.attention_factor == doctest::Approx((0.1 * std::log(4.0) + 1.0) / mscale).epsilon(1e-12));
}

TEST_CASE("the config of a folder gives the model's shapes") {
  const LoadedModel m = load_hf_model("qwen3_moe", golden_dir("qwen3_moe"), Phase::prefill(4));
  CHECK(m.vocab == 256);
  CHECK(m.shape == "2 layers, hidden 64, 4 heads, 2 KV heads, head dim 16, 8 experts top-2 of FFN 32, vocab 256");
  CHECK(m.weights.at("model.layers.1.mlp.experts.down_proj.weight").shape() == Shape{8, 64, 32});
}

TEST_CASE("f32, bf16 and f16 tensors read back exactly") {
  for (const char* dtype : {"F32", "BF16", "F16"}) {
    INFO(std::string(dtype));
    Scratch scratch(std::string("dtype_") + dtype);
    scratch.write(dtype);
    const Checkpoint checkpoint = read_safetensors(scratch.file());
    const HostTensor& t = checkpoint.at("model.layers.0.mlp.down_proj.weight").value;
    CHECK(t.shape() == Shape{4, 6});
    for (int64_t i = 0; i < t.size(); ++i) CHECK(t.get(i) == 0.25 * static_cast<double>(i));
    CHECK(load_error(scratch) == "no error");  // tied embeddings: no lm_head.weight
  }
}

TEST_CASE("sharded checkpoints are read through model.safetensors.index.json") {
  Scratch scratch("shards");
  scratch.write_shards();
  const Checkpoint checkpoint = read_checkpoint(scratch.dir());
  CHECK(checkpoint.size() == scratch.shapes().size());
  CHECK(checkpoint.at("model.norm.weight").file.find("-of-00002.safetensors") != std::string::npos);
  CHECK(load_error(scratch) == "no error");
}

TEST_CASE("reader diagnostics name the file and the tensor or key") {
  SUBCASE("missing tensor") {
    Scratch s("missing");
    s.shapes().erase("model.layers.0.mlp.up_proj.weight");
    s.write();
    CHECK(load_error(s) == s.file() + " does not match the llama model of its config.json (1 problem):\n"
                                      "  missing tensor 'model.layers.0.mlp.up_proj.weight' (expected [6,4])");
  }
  SUBCASE("unknown and mis-shaped tensors") {
    Scratch s("unknown");
    s.shapes()["model.layers.0.self_attn.q_bias"] = {4};
    s.shapes()["model.norm.weight"] = {5};
    s.write();
    CHECK(load_error(s) == s.file() + " does not match the llama model of its config.json (2 problems):\n  " +
                               s.file() + ": tensor 'model.norm.weight' has shape [5] but the model expects [4]\n  " +
                               s.file() +
                               ": unknown tensor 'model.layers.0.self_attn.q_bias' (not a parameter of this llama "
                               "model)");
  }
  SUBCASE("missing config key") {
    Scratch s("no_key");
    s.config().erase("rms_norm_eps");
    s.write();
    CHECK(load_error(s) == s.dir() + "/config.json: missing key 'rms_norm_eps' (a number)");
  }
  SUBCASE("unknown config key") {
    Scratch s("unknown_key");
    s.config()["num_expert_groups"] = 4;
    s.write();
    CHECK(load_error(s) == s.dir() +
                               "/config.json: unknown key 'num_expert_groups' for a llama model (spool does not know "
                               "what it would change)");
  }
  SUBCASE("mistyped config key") {
    Scratch s("mistyped");
    s.config()["hidden_size"] = "4";
    s.write();
    CHECK(load_error(s) == s.dir() + "/config.json: key 'hidden_size' must be an integer, got \"4\"");
  }
  SUBCASE("unsupported feature") {
    Scratch s("attention_bias");
    s.config()["attention_bias"] = true;
    s.write();
    CHECK(load_error(s) == s.dir() + "/config.json: unsupported value true for key 'attention_bias' (spool's llama has "
                                     "no attention bias)");
  }
  SUBCASE("RoPE scaling: an unknown type, a missing or unknown key, an ambiguous yarn factor") {
    Scratch s("rope_scaling");
    s.config()["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 8.0}};
    s.write();
    const std::string where = s.dir() + "/config.json: rope_scaling: ";
    CHECK(load_error(s) == where + "unsupported rope_type \"longrope\" (spool knows default, linear, llama3 and yarn)");
    s.config()["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
    s.write();
    CHECK(load_error(s) == where + "missing key 'low_freq_factor' (a number)");
    s.config()["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}, {"low_freq_factor", 1.0}};
    s.write();
    CHECK(load_error(s) == where +
                               "unknown key 'low_freq_factor' for a linear RoPE scaling model (spool does not know "
                               "what it would change)");
    s.config()["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.5}};
    s.write();
    CHECK(load_error(s) == where + "rope scaling: factor must be at least 1, got 0.5");
    s.config()["max_position_embeddings"] = 1024;
    s.config()["rope_scaling"] = {
        {"rope_type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 256}};
    s.write();
    CHECK(load_error(s) == where +
                               "factor 8 is not max_position_embeddings / original_max_position_embeddings = 1024 / "
                               "256; Hugging Face versions read this differently");
  }
  SUBCASE("another model type") {
    Scratch s("model_type");
    s.config()["model_type"] = "mistral";
    s.write();
    CHECK(load_error(s) == s.dir() + "/config.json: model_type is \"mistral\" but the model is llama (model_type \"llama\")");
  }
  SUBCASE("unsupported dtype") {
    Scratch s("dtype");
    s.write();
    // Rewrite the header's first dtype in place: same length, so offsets stay valid.
    std::string bytes;
    {
      std::ifstream in(s.file(), std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    bytes.replace(bytes.find("\"F32\""), 5, "\"I32\"");
    std::ofstream(s.file(), std::ios::binary) << bytes;
    CHECK(load_error(s) == s.file() + ": tensor 'model.embed_tokens.weight' has dtype I32 (spool reads F32, BF16 and F16)");
  }
  SUBCASE("truncated file") {
    Scratch s("truncated");
    s.write();
    fs::resize_file(s.file(), fs::file_size(s.file()) - 4);
    CHECK(load_error(s).find("are outside the") != std::string::npos);
  }
  SUBCASE("no checkpoint") {
    Scratch s("empty");
    s.write();
    fs::remove(s.file());
    CHECK(load_error(s) == s.dir() + ": no model.safetensors (nor model.safetensors.index.json) in the folder");
  }
}

TEST_CASE("qwen3-MoE: a missing expert is named by its Hugging Face name") {
  const std::string dir = golden_dir("qwen3_moe");
  Checkpoint checkpoint = read_checkpoint(dir);
  checkpoint.erase("model.layers.1.mlp.experts.5.up_proj.weight");
  const Qwen3MoeConfig c = qwen3_moe_config_from_hf(HfConfig::read(dir + "/config.json"));
  const Graph g = build_qwen3_moe(c, Phase::prefill(2));
  CHECK_THROWS_WITH(bind_weights(g, checkpoint, true, "qwen3_moe"),
                    (dir + "/model.safetensors does not match the qwen3_moe model of its config.json (1 problem):\n"
                           "  missing tensor 'model.layers.1.mlp.experts.5.up_proj.weight' (expected [32,64])")
                        .c_str());
}

TEST_CASE("safetensors: byte ranges must tile the data; huge shapes do not wrap") {
  // Files written byte by byte: an 8-byte little-endian header length, the
  // JSON header, the data.
  const std::string path = std::string(SPOOL_BINARY_DIR) + "/raw.safetensors";
  auto write = [&](const json& header, size_t data_bytes) {
    const std::string text = header.dump();
    std::ofstream out(path, std::ios::binary);
    const uint64_t size = text.size();
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((size >> (8 * b)) & 0xff));
    out << text << std::string(data_bytes, '\0');
  };
  auto error = [&]() -> std::string {
    try {
      (void)read_safetensors(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  auto tensor = [](std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
    return json{{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, end}}};
  };
  write({{"a", tensor({2}, 0, 8)}, {"b", tensor({3}, 8, 20)}}, 20);
  CHECK(error() == "no error");
  write({{"a", tensor({2}, 0, 8)}, {"b", tensor({3}, 4, 16)}}, 16);
  CHECK(error() == path + ": tensor 'b' (bytes 4..16) overlaps tensor 'a'");
  write({{"a", tensor({2}, 0, 8)}, {"b", tensor({3}, 12, 24)}}, 24);
  CHECK(error() == path + ": bytes 8..12 of the data belong to no tensor");
  write({{"a", tensor({2}, 0, 8)}}, 12);
  CHECK(error() == path + ": 4 trailing bytes after the last tensor (the data holds 12 bytes, the tensors 8)");
  // 2^62 + 64 elements of 4 bytes wrap to 256 bytes in 64-bit arithmetic.
  write({{"a", tensor({(int64_t{1} << 62) + 64}, 0, 256)}}, 256);
  CHECK(error() == path + ": tensor 'a': shape [4611686018427387968] has too many elements");
  write({{"a", tensor({int64_t{1} << 32, int64_t{1} << 32, 64}, 0, 0)}}, 0);
  CHECK(error() == path + ": tensor 'a': shape [4294967296,4294967296,64] has too many elements");
}

TEST_CASE("a number too large for a double is invalid JSON naming the file") {
  // Found by fuzz_hf_config and fuzz_safetensors: the JSON library reports it
  // as out_of_range, not as a parse error.
  const std::string config = std::string(SPOOL_BINARY_DIR) + "/big_number_config.json";
  std::ofstream(config) << R"({"model_type": "llama", "rope_theta": 1e999})";
  CHECK_THROWS_WITH_AS(HfConfig::read(config), doctest::Contains((config + ": invalid JSON: ").c_str()), Error);
  const std::string weights = std::string(SPOOL_BINARY_DIR) + "/big_number.safetensors";
  const std::string header = R"({"a": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})";
  {
    std::ofstream out(weights, std::ios::binary);
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((header.size() >> (8 * b)) & 0xff));
    out << header << std::string(4, '\0');
  }
  CHECK_THROWS_WITH_AS(read_safetensors(weights), doctest::Contains((weights + ": invalid header JSON: ").c_str()), Error);
}

TEST_CASE("the real sizes are the checkpoints' published config.json files") {
  const LlamaConfig llama = llama_config_from_hf(published_config("llama-3-8b"));
  CHECK(llama.hidden == 4096);
  CHECK(llama.kv_heads == 8);
  CHECK(llama.rope_theta == 500000.0);
  CHECK_FALSE(llama.tie_word_embeddings);
  const Qwen3MoeConfig moe = qwen3_moe_config_from_hf(published_config("qwen3-30b-a3b"));
  CHECK(moe.experts == 128);
  CHECK(moe.top_k == 8);
  CHECK(moe.moe_ffn == 768);
  CHECK(qwen3_config_from_hf(published_config("qwen3-4b")).tie_word_embeddings);
  // Gemma's published config.json has no tie_word_embeddings: Hugging Face's
  // GemmaConfig ties by default, and so does the reader.
  CHECK(gemma_config_from_hf(published_config("gemma-2b")).vocab == 256000);
  CHECK_THROWS_WITH_AS(published_config("llama-3-70b"), doctest::Contains("no published shape named 'llama-3-70b'"),
                       spool::Error);
}

TEST_CASE("a config.json without tie_word_embeddings takes the family's default") {
  nlohmann::json j = nlohmann::json::parse(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0})");
  CHECK_FALSE(llama_config_from_hf(HfConfig(j, "llama.json")).tie_word_embeddings);
  j["model_type"] = "qwen3";
  j["head_dim"] = 16;
  CHECK_FALSE(qwen3_config_from_hf(HfConfig(j, "qwen3.json")).tie_word_embeddings);
  j["model_type"] = "gemma";
  CHECK_NOTHROW(gemma_config_from_hf(HfConfig(j, "gemma.json")));  // tied, as Gemma must be
  j["tie_word_embeddings"] = false;
  CHECK_THROWS_WITH_AS(gemma_config_from_hf(HfConfig(j, "gemma.json")), doctest::Contains("tie_word_embeddings is false"),
                       spool::Error);
}

TEST_CASE("deepseek_v3 and llama4 configs: bad keys are named with the file") {
  auto golden_config = [](const std::string& model) {
    std::ifstream in(golden_dir(model) + "/config.json");
    return json::parse(in);
  };
  json ds = golden_config("deepseek_v3");
  ds["quantization_config"] = {{"quant_method", "fp8"}};
  CHECK_THROWS_WITH_AS(deepseek_v3_config_from_hf(HfConfig(ds, "ds/config.json")),
                       doctest::Contains("ds/config.json: unsupported value {\"quant_method\":\"fp8\"} for key "
                                         "'quantization_config'"),
                       Error);
  ds = golden_config("deepseek_v3");
  ds["scoring_func"] = "softmax";
  CHECK_THROWS_WITH_AS(deepseek_v3_config_from_hf(HfConfig(ds, "ds/config.json")),
                       doctest::Contains("unsupported value \"softmax\" for key 'scoring_func'"), Error);
  ds = golden_config("deepseek_v3");
  ds["num_key_value_heads"] = 2;
  CHECK_THROWS_WITH_AS(deepseek_v3_config_from_hf(HfConfig(ds, "ds/config.json")),
                       doctest::Contains("num_key_value_heads (2) differs from num_attention_heads (4)"), Error);
  ds = golden_config("deepseek_v3");
  ds.erase("kv_lora_rank");
  CHECK_THROWS_WITH_AS(deepseek_v3_config_from_hf(HfConfig(ds, "ds/config.json")),
                       doctest::Contains("ds/config.json: missing key 'kv_lora_rank'"), Error);

  json l4 = golden_config("llama4");
  l4["no_rope_layers"] = {1, 0};
  CHECK_THROWS_WITH_AS(llama4_config_from_hf(HfConfig(l4, "l4/config.json")),
                       doctest::Contains("no_rope_layers has 2 entries for 4 layers"), Error);
  l4 = golden_config("llama4");
  l4["moe_layers"] = {0, 9};
  CHECK_THROWS_WITH_AS(llama4_config_from_hf(HfConfig(l4, "l4/config.json")),
                       doctest::Contains("moe_layers names layer 9 of 4"), Error);
  l4 = golden_config("llama4");
  l4["model_type"] = "llama4";
  CHECK_THROWS_WITH_AS(llama4_config_from_hf(HfConfig(l4, "l4/config.json")),
                       doctest::Contains("l4/config.json: model_type is \"llama4\" but the model is llama4_text"),
                       Error);
  l4 = golden_config("llama4");
  l4["layer_types"] = {"full_attention"};
  CHECK_THROWS_WITH_AS(llama4_config_from_hf(HfConfig(l4, "l4/config.json")),
                       doctest::Contains("unknown key 'layer_types'"), Error);
  // attention_chunk_size null: RoPE layers attend to everything; an integer
  // attn_temperature_tuning (Meta's configs write 4) is a flag.
  l4 = golden_config("llama4");
  l4["attention_chunk_size"] = nullptr;
  l4["attn_temperature_tuning"] = 4;
  const Llama4Config c = llama4_config_from_hf(HfConfig(l4, "l4/config.json"));
  CHECK(c.attention_chunk_size == 0);
  CHECK(c.attn_temperature_tuning);
}

TEST_CASE("a deepseek_v3 folder's multi-token-prediction tensors are skipped, other extra tensors are not") {
  // The golden holds model.layers.3.eh_proj.weight (num_nextn_predict_layers 1).
  const Checkpoint checkpoint = read_checkpoint(golden_dir("deepseek_v3"));
  CHECK(checkpoint.contains("model.layers.3.eh_proj.weight"));
  const Graph g = build_deepseek_v3(
      deepseek_v3_config_from_hf(HfConfig::read(golden_dir("deepseek_v3") + "/config.json")), Phase::prefill(2));
  CHECK_NOTHROW(load_hf_weights("deepseek_v3", golden_dir("deepseek_v3"), g));
  CHECK_THROWS_WITH_AS(bind_weights(g, checkpoint, true, "deepseek_v3"),
                       doctest::Contains("unknown tensor 'model.layers.3.eh_proj.weight'"), Error);
}

TEST_CASE("deepseek_v3 and llama4 configs of absurd sizes describe themselves without overflow") {
  auto golden_config = [](const std::string& model) {
    std::ifstream in(golden_dir(model) + "/config.json");
    return json::parse(in);
  };
  json ds = golden_config("deepseek_v3");
  ds["num_hidden_layers"] = int64_t{1} << 62;
  ds["hidden_size"] = int64_t{1} << 40;
  ds["vocab_size"] = int64_t{1} << 40;
  const DeepseekV3Config big = deepseek_v3_config_from_hf(HfConfig(ds, "ds/config.json"));
  CHECK(big.describe().find("4611686018427387904 layers (1 dense)") != std::string::npos);
  CHECK_THROWS_WITH_AS(big.parameters(), doctest::Contains("does not fit in 64 bits"), Error);
  json l4 = golden_config("llama4_maverick");  // default layer patterns
  l4["num_hidden_layers"] = int64_t{1} << 62;
  l4["intermediate_size_mlp"] = int64_t{1} << 50;
  const Llama4Config huge = llama4_config_from_hf(HfConfig(l4, "l4/config.json"));
  CHECK(huge.describe().find("4611686018427387904 layers (2305843009213693952 MoE; 1152921504606846976 NoPE") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(huge.parameters(), doctest::Contains("does not fit in 64 bits"), Error);
}
