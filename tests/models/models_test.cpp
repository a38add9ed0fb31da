// The example models: every tiny model builds and runs on the reference
// interpreter in prefill and decode with finite outputs; a decode step with
// the cache of a prefill equals the last row of a longer prefill; every
// real-shaped model builds its graph (shapes only).

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>

#include <spool/models/bert.hpp>
#include <spool/models/deepseek_v3.hpp>
#include <spool/models/gemma.hpp>
#include <spool/models/llama.hpp>
#include <spool/models/llama4.hpp>
#include <spool/models/registry.hpp>
#include <spool/models/qwen3.hpp>
#include <spool/models/qwen3_moe.hpp>

#include "support/allclose.hpp"

#include <spool/ir/text.hpp>
#include <spool/npu/kernel.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/target/npu.hpp>

#include <cmath>

using namespace spool;
using namespace spool::models;
using interp::HostTensor;

namespace {

const char* const kDecoders[] = {"llama", "gemma", "qwen3", "qwen3_moe", "deepseek_v3", "llama4"};

Graph build(const std::string& name, const std::string& size, const std::string& phase, int64_t seq = 0,
            int64_t context = 0) {
  ModelOptions options;
  options.size = size;
  options.phase = phase;
  options.seq = seq;
  options.context = context;
  return find_model(name).entry->build(options);
}

bool all_finite(const HostTensor& t) {
  for (int64_t i = 0; i < t.size(); ++i)
    if (!std::isfinite(t.get(i))) return false;
  return true;
}

std::map<std::string, HostTensor> run_with_tokens(const Graph& g, const std::vector<int64_t>& tokens,
                                                  const interp::Env& extra = {}) {
  interp::Env env = interp::random_inputs(g, /*seed=*/7);
  env["tokens"] = HostTensor::from_i64({static_cast<int64_t>(tokens.size())}, tokens);
  for (const auto& [name, value] : extra) env[name] = value;
  return interp::run(g, env);
}

HostTensor last_row(const HostTensor& logits) {
  const int64_t rows = logits.shape()[0], cols = logits.shape()[1];
  HostTensor out(logits.dtype(), {1, cols});
  for (int64_t j = 0; j < cols; ++j) out.set(j, logits.get((rows - 1) * cols + j));
  return out;
}

}  // namespace

TEST_CASE("spool models lists every model with tiny and real shapes") {
  std::vector<std::string> names;
  for (const ModelEntry& entry : registry()) {
    names.push_back(entry.name);
    CHECK(!entry.tiny_shape.empty());
    CHECK(!entry.real_shape.empty());
  }
  CHECK(names == std::vector<std::string>{"llama", "gemma", "qwen3", "qwen3_moe", "deepseek_v3", "llama4", "bert"});
  CHECK_THROWS_WITH(find_model("gpt9"),
                    "unknown model 'gpt9' (known: llama, gemma, qwen3, qwen3_moe, deepseek_v3, llama4, bert)");
  CHECK(find_model("bert:large").variant == "large");
  CHECK_THROWS_WITH(find_model("bert:huge"),
                    "model bert has no variant 'huge' (known: bert:base, bert:large, bert:xlarge)");
}

TEST_CASE("tiny configs stay tiny and keep their family's structure") {
  CHECK(LlamaConfig::tiny().hidden <= 128);
  CHECK(GemmaConfig::tiny().kv_heads == 1);  // MQA, as gemma-2B
  CHECK(Qwen3MoeConfig::tiny().experts > Qwen3MoeConfig::tiny().top_k);
  const DeepseekV3Config ds = DeepseekV3Config::tiny();
  CHECK(ds.first_k_dense_replace >= 1);
  CHECK(ds.first_k_dense_replace < ds.layers);
  CHECK(ds.n_group > ds.topk_group);
  const Llama4Config l4 = Llama4Config::tiny();
  for (int64_t l = 0; l < l4.layers; ++l) CHECK(l4.is_moe(l));  // Scout: every layer MoE
  CHECK(l4.top_k == 1);
  CHECK(!l4.uses_rope(3));  // every fourth layer NoPE
  CHECK(l4.uses_rope(2));
  const Llama4Config maverick = Llama4Config::tiny_maverick();
  CHECK(!maverick.is_moe(0));  // Maverick: MoE every second layer
  CHECK(maverick.is_moe(1));
  CHECK(!maverick.use_qk_norm);
  for (const auto& [layers, hidden, vocab] :
       {std::tuple{LlamaConfig::tiny().layers, LlamaConfig::tiny().hidden, LlamaConfig::tiny().vocab},
        std::tuple{GemmaConfig::tiny().layers, GemmaConfig::tiny().hidden, GemmaConfig::tiny().vocab},
        std::tuple{Qwen3Config::tiny().layers, Qwen3Config::tiny().hidden, Qwen3Config::tiny().vocab},
        std::tuple{Qwen3MoeConfig::tiny().layers, Qwen3MoeConfig::tiny().hidden, Qwen3MoeConfig::tiny().vocab},
        std::tuple{ds.layers, ds.hidden, ds.vocab}, std::tuple{l4.layers, l4.hidden, l4.vocab}}) {
    CHECK(layers >= 2);
    CHECK(layers <= 4);
    CHECK(hidden <= 128);
    CHECK(vocab <= 512);
  }
}

TEST_CASE("every tiny decoder runs prefill and decode with finite outputs") {
  for (const char* name : kDecoders) {
    INFO("model " << std::string(name));
    const auto prefill = run_with_tokens(build(name, "tiny", "prefill", 6), {3, 1, 4, 1, 5, 9});
    REQUIRE(prefill.contains("logits"));
    CHECK(prefill.at("logits").shape()[0] == 6);
    CHECK(prefill.contains("cache_key.0"));
    for (const auto& [output, value] : prefill) {
      INFO("output " << output);
      CHECK(all_finite(value));
    }
    const Graph decode_graph = build(name, "tiny", "decode", 0, 5);
    const auto decode = interp::run(decode_graph, interp::random_inputs(decode_graph, 3));
    CHECK(decode.at("logits").shape()[0] == 1);
    CHECK(decode.at("cache_key.0").shape()[0] == 6);  // 5 cached rows and the new one
    for (const auto& [output, value] : decode) {
      INFO("output " << output);
      CHECK(all_finite(value));
    }
  }
}

TEST_CASE("decode with the cache of a prefill equals the last row of a longer prefill") {
  const std::vector<int64_t> prompt = {11, 2, 200, 37, 5, 64, 8};
  for (const char* name : kDecoders) {
    INFO("model " << std::string(name));
    const auto full = run_with_tokens(build(name, "tiny", "prefill", 8), [&] {
      std::vector<int64_t> all = prompt;
      all.push_back(99);
      return all;
    }());
    const auto prefill = run_with_tokens(build(name, "tiny", "prefill", 7), prompt);
    const interp::Env cache = models::next_cache(prefill, 1);
    const auto decode = run_with_tokens(build(name, "tiny", "decode", 0, 7), {99}, cache);
    const test::AllClose logits = test::allclose(decode.at("logits"), last_row(full.at("logits")), {.stol = 1e-5});
    MESSAGE(std::string(name) << ": decode vs prefill max abs " << logits.worst << ", relative to scale "
                              << logits.worst_to_scale);
    CHECK(logits);
    // The cache after the decode step equals the longer prefill's cache.
    int caches = 0;
    for (const auto& [cache_name, value] : decode) {
      if (cache_name.rfind("cache_", 0) != 0) continue;
      INFO(cache_name);
      REQUIRE(full.contains(cache_name));
      CHECK(test::allclose(value, full.at(cache_name), {.stol = 1e-5}));
      ++caches;
    }
    CHECK(caches >= 4);
  }
}

TEST_CASE("bert: the tiny block runs; an encoder has no decode phase") {
  const Graph g = build("bert", "tiny", "prefill");
  const auto out = interp::run(g, interp::random_inputs(g, 1));
  REQUIRE(out.contains("y"));
  CHECK(out.at("y").shape() == Shape{8, 64});
  CHECK(all_finite(out.at("y")));
  CHECK_THROWS_WITH(build("bert", "tiny", "decode"),
                    "bert: an encoder has no KV cache, so there is no decode phase (use --phase prefill)");
}

TEST_CASE("bert real variants have issue 6's shapes at sequence 512") {
  for (const auto& [variant, hidden, heads] :
       {std::tuple{"base", 768, 12}, std::tuple{"large", 1024, 16}, std::tuple{"xlarge", 2048, 32}}) {
    ModelOptions options;
    options.size = "real";
    options.variant = variant;
    const Graph g = find_model("bert").entry->build(options);
    REQUIRE(g.outputs().size() == 1);
    const Node& y = g.node(g.outputs()[0].edge.src);
    INFO(std::string(variant));
    CHECK(g.outputs()[0].edge.view.apply(y.shape) == Shape{512, hidden});
    CHECK(BertConfig::variant_named(variant).heads == heads);
  }
}

TEST_CASE("every real-shaped model builds its graph (shapes only)") {
  for (const ModelEntry& entry : registry()) {
    for (const char* phase : {"prefill", "decode"}) {
      if (entry.name == "bert" && std::string(phase) == "decode") continue;
      INFO(entry.name << " " << std::string(phase));
      const Graph g = build(entry.name, "real", phase);
      int64_t parameters = 0;
      for (const NodeId id : g.live_ids())
        if (g.node(id).op == Op::Weight) parameters += num_elements(g.node(id).shape);
      MESSAGE(entry.name << " real " << std::string(phase) << ": " << g.num_live() << " nodes, " << parameters / 1e9
                         << " B parameters");
      CHECK(g.num_live() > 0);
      // The graph grows linearly with the layers: every four more add the
      // same nodes (from 4 layers on, past deepseek-v3's three dense
      // layers, and in whole periods of llama4's MoE on every second
      // layer). A builder whose graph went quadratic fails here.
      auto nodes = [&](int64_t layers) {
        ModelOptions options;
        options.size = "real";
        options.phase = phase;
        options.layers = layers;
        return static_cast<int64_t>(entry.build(options).num_live());
      };
      const int64_t four = nodes(4), eight = nodes(8);
      CHECK(eight > four);
      CHECK(nodes(12) - eight == eight - four);
    }
  }
}

TEST_CASE("real shapes have their published parameter counts") {
  auto parameters = [](const Graph& g) {
    int64_t n = 0;
    for (const NodeId id : g.live_ids())
      if (g.node(id).op == Op::Weight) n += num_elements(g.node(id).shape);
    return n;
  };
  // llama-3-8B: 8.03 B; qwen3-4B: 4.02 B (tied); gemma-2B: 2.51 B; qwen3-30B-A3B: 30.5 B.
  CHECK(parameters(build("llama", "real", "decode", 0, 4)) == 8030261248);
  CHECK(parameters(build("qwen3", "real", "decode", 0, 4)) == 4022468096);
  CHECK(parameters(build("gemma", "real", "decode", 0, 4)) == 2506172416);
  CHECK(parameters(build("qwen3_moe", "real", "decode", 0, 4)) == 30532122624);
  // DeepSeek-V3: 671 B, 37 B active (the published figures, without the
  // multi-token-prediction module); Llama-4 Scout 109 B / 17 B active as
  // Meta counts them with the vision encoder, of which the text model is
  // 107.8 B; Maverick 400 B / 17 B active.
  const int64_t deepseek = parameters(build("deepseek_v3", "real", "decode", 0, 4));
  CHECK(deepseek == DeepseekV3Config::deepseek_v3().parameters());
  CHECK(deepseek / 1000000000 == 671);
  CHECK(DeepseekV3Config::deepseek_v3().active_parameters() / 1000000000 == 37);
  const int64_t scout = parameters(build("llama4", "real", "decode", 0, 4));
  CHECK(scout == Llama4Config::scout().parameters());
  CHECK(scout / 100000000 == 1077);
  CHECK(Llama4Config::scout().active_parameters() / 1000000000 == 17);
  ModelOptions o;
  o.size = "real";
  o.variant = "maverick";
  o.phase = "decode";
  o.context = 4;
  const int64_t maverick = parameters(find_model("llama4").entry->build(o));
  CHECK(maverick == Llama4Config::maverick().parameters());
  CHECK(maverick / 1000000000 == 400);
  CHECK(Llama4Config::maverick().active_parameters() / 1000000000 == 17);
}

TEST_CASE("deepseek-v3: the absorbed MLA equals the expanded form in prefill and decode") {
  const std::vector<int64_t> prompt = {11, 2, 200, 37, 5, 64, 8};
  auto build_form = [](MlaForm form, const Phase& phase) {
    DeepseekV3Config c = DeepseekV3Config::tiny();
    c.mla_form = form;
    return build_deepseek_v3(c, phase);
  };
  // The same weights (and caches) for both forms: the random inputs of one graph.
  for (const Phase& phase : {Phase::prefill(7), Phase::decode(6)}) {
    CAPTURE(phase.context);
    const Graph expanded = build_form(MlaForm::Expanded, phase), absorbed = build_form(MlaForm::Absorbed, phase);
    interp::Env env = interp::random_inputs(expanded, 5);
    const std::vector<int64_t> ids = phase.has_cache() ? std::vector<int64_t>{prompt.back()} : prompt;
    env["tokens"] = HostTensor::from_i64({static_cast<int64_t>(ids.size())}, ids);
    const auto a = interp::run(expanded, env), b = interp::run(absorbed, env);
    REQUIRE(a.size() == b.size());
    for (const auto& [name, value] : a) {
      CAPTURE(name);
      CHECK(test::allclose(b.at(name), value, {.stol = 1e-5}));
    }
    // The forms differ: the absorbed one never applies kv_b_proj to the cache.
    CHECK(print_graph(expanded) != print_graph(absorbed));
  }
  // A decode step runs absorbed by default, a prefill expanded.
  DeepseekV3Config c = DeepseekV3Config::tiny();
  CHECK(print_graph(build_deepseek_v3(c, Phase::decode(6))) ==
        print_graph(build_form(MlaForm::Absorbed, Phase::decode(6))));
  CHECK(print_graph(build_deepseek_v3(c, Phase::prefill(7))) ==
        print_graph(build_form(MlaForm::Expanded, Phase::prefill(7))));
}

TEST_CASE("deepseek-v3: the compressed cache holds kv_lora_rank + qk_rope_head_dim values per token and layer") {
  const Graph g = build("deepseek_v3", "tiny", "decode", 0, 5);
  const DeepseekV3Config c = DeepseekV3Config::tiny();
  int64_t cache_inputs = 0;
  for (const NodeId id : g.live_ids()) {
    const Node& node = g.node(id);
    if (node.op != Op::Input) continue;
    const std::string& name = std::get<NameAttr>(node.attr).name;
    if (name.rfind("cache_latent.", 0) == 0) CHECK(node.shape == Shape{6, c.kv_lora_rank});
    if (name.rfind("cache_key.", 0) == 0) CHECK(node.shape == Shape{6, c.qk_rope_head_dim});
    cache_inputs += name.rfind("cache_", 0) == 0;
  }
  CHECK(cache_inputs == 2 * c.layers);
}

TEST_CASE("phase options") {
  ModelOptions options;
  CHECK(resolve_phase(options).seq == 8);
  options.size = "real";
  CHECK(resolve_phase(options).seq == 512);
  options.phase = "decode";
  CHECK(resolve_phase(options).context == 512);
  CHECK(resolve_phase(options).seq == 1);
  options.seq = 4;
  CHECK_THROWS_WITH(resolve_phase(options), "a decode step processes one token; --seq 4 is for --phase prefill");
  options = ModelOptions{};
  options.context = 3;
  CHECK_THROWS_WITH(resolve_phase(options),
                    "--context is the KV cache length of a decode step; a prefill starts with none");
  // A real prefill computes the logits a server samples from (the last
  // token's); a tiny one all, for the checks; --logits chooses.
  options = ModelOptions{};
  CHECK(!resolve_phase(options).last_token_logits);
  options.size = "real";
  CHECK(resolve_phase(options).last_token_logits);
  options.logits = "all";
  CHECK(!resolve_phase(options).last_token_logits);
  options.size = "tiny";
  options.logits = "last";
  CHECK(resolve_phase(options).last_token_logits);
  options.logits = "first";
  CHECK_THROWS_WITH(resolve_phase(options), "unknown --logits 'first' (expected last or all)");
}

TEST_CASE("a prefill's last-token logits are the last row of its logits of every token") {
  const std::vector<int64_t> prompt = {11, 2, 200, 37, 5, 64};
  for (const char* name : kDecoders) {
    INFO("model " << std::string(name));
    ModelOptions options;
    options.seq = static_cast<int64_t>(prompt.size());
    const auto all = run_with_tokens(find_model(name).entry->build(options), prompt);
    options.logits = "last";
    const Graph last_graph = find_model(name).entry->build(options);
    const auto last = run_with_tokens(last_graph, prompt);
    REQUIRE(last.at("logits").shape() == Shape{1, all.at("logits").shape()[1]});
    // The same ops on the same row: equal to the bit.
    const HostTensor expected = last_row(all.at("logits"));
    for (int64_t j = 0; j < expected.size(); ++j) CHECK(last.at("logits").get(j) == expected.get(j));
    // The caches are the prefill's either way.
    CHECK(last.at("cache_key.0").shape() == all.at("cache_key.0").shape());
    // The LM head reads one row.
    bool one_row_head = false;
    for (const NodeId id : last_graph.live_ids())
      one_row_head = one_row_head || (last_graph.node(id).shape == Shape{1, all.at("logits").shape()[1]});
    CHECK(one_row_head);
  }
}

TEST_CASE("deepseek-v3 real decode: the program's cache buffers hold 576 values per token and layer") {
  ModelOptions o;
  o.size = "real";
  o.layers = 2;
  o.phase = "decode";
  o.context = 256;
  const Graph graph = find_model("deepseek_v3").entry->build(o);
  pipeline::Options options;
  options.compile.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  options.ignore_capacity = true;
  const pipeline::Report report = pipeline::run(graph, target::load_config("tpuv3"), options);
  REQUIRE(report.lowered);
  const npu::Program& p = report.lowered->program;
  const int64_t tokens = o.context + 1;
  std::map<std::string, int64_t> per_layer;  // layer suffix -> cache values
  int64_t largest_temp = 0;
  for (const npu::DramBuffer& b : p.buffers) {
    if (b.alias_of >= 0) continue;
    if (b.name.rfind("cache_", 0) == 0) {
      CHECK(b.kind == npu::BufferKind::Input);  // updated in place
      CHECK(b.shape.at(0) == tokens);
      per_layer[b.name.substr(b.name.find('.'))] += num_elements(b.shape) / tokens;
    } else if (b.kind == npu::BufferKind::Temp) {
      largest_temp = std::max(largest_temp, num_elements(b.shape));
    }
  }
  CHECK(per_layer == std::map<std::string, int64_t>{{".0", 576}, {".1", 576}});
  // Nothing expands the cache per head: the expanded keys alone would be
  // 128 heads x 128 nope dims per token.
  CHECK(largest_temp < 128 * 128 * tokens);
  CHECK(report.lowering.inputs_updated_in_place == 4);
}
