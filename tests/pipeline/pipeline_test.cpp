// pipeline::run end to end: compile, lower, simulate, and the check against
// the reference interpreter; the report's JSON keys; timing-only runs
// agree with functional ones; a search never returns a slower program.

#include <doctest/doctest.h>

#include "support/same_sim_report.hpp"

#include <spool/nn/nn.hpp>
#include <spool/pipeline/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include <spool/models/bert.hpp>
#include <spool/models/registry.hpp>

using namespace spool;

namespace {

const std::string kRules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";

Graph tiny_bert() {
  models::ModelOptions options;
  return models::find_model("bert").entry->build(options);
}

pipeline::Options functional(const Graph& graph) {
  pipeline::Options options;
  options.compile.rule_files = {kRules};
  options.inputs = interp::random_inputs(graph, 3);
  return options;
}

// A block whose outputs the check must catch when they are wrong: an MLP
// with a residual, small enough for the toy config.
Graph mlp() {
  Graph g("mlp");
  const Tensor x = input(g, "x", DType::F32, {24, 40});
  const Tensor w1 = weight(g, "w1", DType::F32, {72, 40});
  const Tensor w2 = weight(g, "w2", DType::F32, {40, 72});
  output("y", x + nn::linear(nn::relu(nn::linear(x, w1)), w2));
  return g;
}

}  // namespace

TEST_CASE("pipeline: tiny bert compiles, lowers, simulates and matches the interpreter") {
  const Graph graph = tiny_bert();
  const pipeline::Report report = pipeline::run(graph, target::load_config("tpuv3"), functional(graph));
  REQUIRE(report.check);
  CHECK(report.check->ok);
  CHECK(report.check->max_rel_err <= 1e-4);
  CHECK(report.compile.roll.loops == 1);
  CHECK(report.lowering.kernels > 0);
  CHECK(report.lowering.fused_kernels > 0);
  CHECK(report.sim.cycles > 0);
  CHECK(report.sim.cycles >= report.sim.roofline_cycles);
  CHECK(report.outputs.count("y") == 1);
}

TEST_CASE("pipeline: the report carries its JSON keys") {
  const Graph graph = mlp();
  const nlohmann::json j = pipeline::run(graph, target::load_config("toy"), functional(graph)).to_json();
  for (const char* key : {"roll_ms", "saturate_ms", "extract_ms", "unroll_ms", "lower_ms", "total_ms"})
    CHECK_MESSAGE(j["compile"].contains(key), key);
  for (const char* key : {"loops", "trips", "body_nodes", "hlir_nodes_before", "hlir_nodes_after"})
    CHECK_MESSAGE(j["roll"].contains(key), key);
  for (const char* key : {"egraphs", "nodes", "classes", "iterations", "stop_reason"})
    CHECK_MESSAGE(j["egraph"].contains(key), key);
  for (const char* key : {"kernels", "fused_kernels", "copy_kernels", "gemms_reused", "gemm_tiles_timed",
                          "gemm_tiles_known", "tile_cache"})
    CHECK_MESSAGE(j["program"].contains(key), key);
  for (const char* key : {"verify_ms", "step_ms", "replay_ms", "kernels_stepped", "kernels_replayed", "replays_refused",
                          "statements", "descriptors"})
    CHECK_MESSAGE(j["compile"]["simulate_profile"].contains(key), key);
  CHECK(j["compile"]["simulate_profile"]["kernels_stepped"].get<int64_t>() +
            j["compile"]["simulate_profile"]["kernels_replayed"].get<int64_t>() ==
        j["program"]["kernels"].get<int64_t>());
  for (const char* key : {"cycles", "time_ms", "dram_bytes", "flops", "spad_peak_bytes", "roofline_cycles"})
    CHECK_MESSAGE(j["sim"].contains(key), key);
  for (const char* key : {"ok", "max_abs_err", "max_rel_err"}) CHECK_MESSAGE(j["check"].contains(key), key);
  CHECK(j["check"]["ok"] == true);
}

TEST_CASE("pipeline: timing-only allocates nothing and takes the same cycles as the functional run") {
  const Graph graph = mlp();
  const target::NpuConfig config = target::load_config("toy");
  const pipeline::Report with_values = pipeline::run(graph, config, functional(graph));
  pipeline::Options timing;
  timing.compile.rule_files = {kRules};
  const pipeline::Report timing_only = pipeline::run(graph, config, timing);
  CHECK_FALSE(timing_only.check);
  CHECK(timing_only.outputs.empty());
  CHECK(timing_only.sim.cycles == with_values.sim.cycles);
}

TEST_CASE("pipeline: a wrong value is caught by the check") {
  const Graph graph = mlp();
  pipeline::Options options = functional(graph);
  // Inputs the interpreter and the simulator both read; the check compares
  // the simulated outputs with the interpreter's on the same values, so a
  // mismatch can only come from the compiled program. Giving the simulator
  // a missing source must be an error, not a silent zero.
  options.inputs->erase("w2");
  CHECK_THROWS_WITH_AS(pipeline::run(graph, target::load_config("toy"), options),
                       doctest::Contains("w2"), Error);
}

TEST_CASE("pipeline: the memory roofline counts gathered tables by the rows gathered") {
  Graph g("embed");
  const Tensor ids = input(g, "ids", DType::I64, {4});
  const Tensor table = weight(g, "table", DType::F32, {1000, 16});
  const Tensor head = weight(g, "head", DType::F32, {1000, 16});
  output("y", nn::embedding(ids, table));
  CHECK(pipeline::required_source_bytes(g) == 4 * 8 + 4 * 16 * 4);
  // A table that is also read whole (a tied LM head) counts whole.
  output("logits", nn::linear(nn::embedding(ids, table), table));
  CHECK(pipeline::required_source_bytes(g) == 4 * 8 + 1000 * 16 * 4);
  output("other", nn::linear(nn::embedding(ids, table), head));
  CHECK(pipeline::required_source_bytes(g) == 4 * 8 + 2 * 1000 * 16 * 4);
}

TEST_CASE("pipeline: a search never returns a program slower than greedy extraction") {
  const Graph graph = mlp();
  pipeline::Options options = functional(graph);
  options.search_genomes = 12;
  const pipeline::Report report = pipeline::run(graph, target::load_config("toy"), options);
  REQUIRE(report.search);
  CHECK(report.search->genomes > 0);
  CHECK(report.search->best_cycles > 0);
  CHECK(report.sim.cycles <= report.search->greedy_cycles);
  REQUIRE(report.check);
  CHECK(report.check->ok);
}

TEST_CASE("pipeline: outputs that are NaN in both the simulation and the reference fail the check") {
  // sqrt of a negative number: NaN for every input, in the interpreter and
  // in the simulated program alike. Equal NaNs prove nothing: not ok.
  Graph g("nan");
  const Tensor x = input(g, "x", DType::F32, {8, 16});
  output("y", nn::relu(x) + sqrt(-(x * x) - 1.0));
  const pipeline::Report report = pipeline::run(g, target::load_config("toy"), functional(g));
  REQUIRE(report.check);
  CHECK_FALSE(report.check->ok);
  CHECK(report.check->non_finite == 8 * 16);
  CHECK(report.check->non_finite_output == "y");
  CHECK(report.to_json()["check"]["non_finite"] == 8 * 16);
  // A finite program still passes, and counts none.
  const Graph fine = mlp();
  const pipeline::Report ok = pipeline::run(fine, target::load_config("toy"), functional(fine));
  CHECK(ok.check->ok);
  CHECK(ok.check->non_finite == 0);
}

namespace {

// The kinds of the lowered kernels by program kernel name (a node split over
// cores names its kernels after the node: "<name>" or "<name>_coreN").
std::string kind_of(const lower::LowerReport& report, const std::string& kernel) {
  for (const lower::KernelInfo& k : report.per_kernel)
    if (kernel == k.name || kernel.rfind(k.name + "_", 0) == 0) return k.kind;
  return "";
}

// Copy kernels that read or write a buffer whose root is a KV cache.
int cache_copies(const lower::Lowered& lowered) {
  const npu::Program& p = lowered.program;
  int copies = 0;
  for (const npu::Kernel& k : p.kernels) {
    if (kind_of(lowered.report, k.name) != "copy") continue;
    bool touches = false;
    npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
      if (const auto* dma = std::get_if<npu::DmaOp>(&s.node))
        touches = touches || p.buffers[static_cast<size_t>(p.root_of(dma->dram))].name.rfind("cache_", 0) == 0;
    });
    copies += touches;
  }
  return copies;
}

}  // namespace

TEST_CASE("pipeline: decode writes the new KV rows into the cache in place; no copy touches it") {
  for (const std::string model : {"llama", "gemma", "qwen3", "qwen3_moe", "deepseek_v3", "llama4"})
  for (const std::string dtype : {"f32", "bf16"}) {
    CAPTURE(model);
    CAPTURE(dtype);
    models::ModelOptions o;
    o.phase = "decode";
    o.dtype = dtype;
    const Graph graph = models::find_model(model).entry->build(o);
    int64_t layers = 0;
    for (const Output& out : graph.outputs()) layers += out.name.rfind("cache_key.", 0) == 0;
    pipeline::Options options = functional(graph);
    const pipeline::Report report = pipeline::run(graph, target::load_config("tpuv3"), options);
    REQUIRE(report.check);
    CHECK(report.check->ok);
    const lower::Lowered& lowered = *report.lowered;
    // Each cache output is bound to the buffer of the input it updates.
    int bound = 0;
    for (const auto& [name, buffer] : lowered.outputs) {
      if (name.rfind("cache_", 0) != 0) continue;
      const auto in = std::find_if(lowered.inputs.begin(), lowered.inputs.end(), [&](const auto& p) { return p.first == name; });
      REQUIRE(in != lowered.inputs.end());
      CHECK(in->second == buffer);
      ++bound;
    }
    CHECK(bound == 2 * layers);  // K and V of every layer
    CHECK(report.lowering.inputs_updated_in_place == 2 * layers);
    CHECK(cache_copies(lowered) == 0);
    // Updated in place, the cache is counted once (as an input), not again as an output.
    CHECK(report.memory.footprint.output_bytes < report.memory.footprint.input_bytes);
  }
}

TEST_CASE("pipeline: llama-3-8B-shaped decode and prefill copy no KV cache") {
  for (const char* phase : {"prefill", "decode"}) {
    CAPTURE(phase);
    models::ModelOptions o;
    o.size = "real";
    o.layers = 2;
    o.phase = phase;
    const Graph graph = models::find_model("llama").entry->build(o);
    pipeline::Options options;
    options.compile.rule_files = {kRules};
    const pipeline::Report report = pipeline::run(graph, target::load_config("tpuv3"), options);
    if (std::string(phase) == "decode") CHECK(report.lowering.inputs_updated_in_place == 4);
    // Decode: nothing copies the cache. Prefill: nothing writes the cache with
    // a copy (its rows come straight from the projections and RoPE).
    const lower::Lowered& lowered = *report.lowered;
    const npu::Program& p = lowered.program;
    int writes = 0;
    for (const npu::Kernel& k : p.kernels) {
      if (kind_of(lowered.report, k.name) != "copy") continue;
      npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
        if (const auto* dma = std::get_if<npu::DmaOp>(&s.node))
          writes += !dma->load && p.buffers[static_cast<size_t>(p.root_of(dma->dram))].name.rfind("cache_", 0) == 0;
      });
    }
    CHECK(writes == 0);
    if (std::string(phase) == "decode") CHECK(cache_copies(lowered) == 0);
  }
}

TEST_CASE("pipeline: a program bigger than the DRAM fails before simulating unless capacity is ignored") {
  Graph g("big");
  const Tensor x = input(g, "x", DType::F32, {8, 8192});
  // 8192 x 8192 x 4 B = 256 MiB of weights: more than the toy config's DRAM.
  output("y", nn::linear(x, weight(g, "w", DType::F32, {8192, 8192})));
  const target::NpuConfig toy = target::load_config("toy");
  pipeline::Options options;
  options.compile.rule_files = {kRules};
  try {
    pipeline::run(g, toy, options);
    FAIL("expected a capacity error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("needs 256.50 MiB of DRAM") != std::string::npos);  // 256 MiB of weights, x and y
    CHECK(what.find("toy has 256.00 MiB") != std::string::npos);
    CHECK(what.find("DRAM of 2 toy cores") != std::string::npos);
    CHECK(what.find("--ignore-capacity") != std::string::npos);
  }
  options.ignore_capacity = true;
  const pipeline::Report report = pipeline::run(g, toy, options);
  CHECK(!report.memory.fits);
  CHECK(report.memory.ignored);
  CHECK(report.memory.cores_needed == 2);
  CHECK(report.memory.footprint.weight_bytes == int64_t{8192} * 8192 * 4);
  CHECK(report.sim.cycles > 0);
  const nlohmann::json j = report.to_json();
  CHECK(j["memory"]["footprint_bytes"] == report.memory.footprint.total());
  CHECK(j["memory"]["capacity_bytes"] == toy.dram.capacity_bytes);
  CHECK(j["memory"]["fits"] == false);
}

TEST_CASE("pipeline: a KV cache updated in place counts once against the capacity, before and after lowering") {
  models::ModelOptions o;
  o.phase = "decode";
  o.context = 4096;  // caches larger than the program's temporaries
  const Graph graph = models::find_model("llama").entry->build(o);
  target::NpuConfig config = target::load_config("tpuv3");
  pipeline::Options options;
  options.compile.rule_files = {kRules};
  options.ignore_capacity = true;
  const pipeline::Report measured = pipeline::run(graph, config, options);
  REQUIRE(measured.memory.footprint.input_bytes > measured.memory.footprint.temp_peak_bytes);
  // Exactly the footprint: it fits, so neither check may refuse it (the one
  // before compiling once counted the caches again as outputs).
  config.dram.capacity_bytes = measured.memory.footprint.total();
  options.ignore_capacity = false;
  const pipeline::Report report = pipeline::run(graph, config, options);
  CHECK(report.memory.fits);
  CHECK(report.sim.cycles == measured.sim.cycles);
  config.dram.capacity_bytes = measured.memory.footprint.total() - 1;
  CHECK_THROWS_WITH_AS(pipeline::run(graph, config, options), doctest::Contains("--ignore-capacity"), Error);
}

TEST_CASE("pipeline: replays and parts side by side simulate exactly what stepping every kernel in turn does") {
  for (const char* model : {"llama", "qwen3_moe", "deepseek_v3"})
    for (const std::string phase : {"prefill", "decode"}) {
      CAPTURE(model);
      CAPTURE(phase);
      models::ModelOptions o;
      o.size = "real";
      o.layers = 4;
      o.phase = phase;
      const Graph graph = models::find_model(model).entry->build(o);
      pipeline::Options options;
      options.compile.rule_files = {kRules};
      options.ignore_capacity = true;
      const target::NpuConfig config = target::load_config("tpuv3");
      const pipeline::Report report = pipeline::run(graph, config, options);
      auto simulate = [&](bool replay, int threads) {
        sim::Options s;
        s.replay = replay;
        s.threads = threads;
        return sim::run(report.lowered->program, config, s);
      };
      const sim::Report stepped = simulate(false, 1);
      const sim::Report replayed = simulate(true, 1);
      const sim::Report in_parts = simulate(true, 2);
      CHECK(stepped.profile.kernels_replayed == 0);
      CHECK(replayed.profile.kernels_replayed > 0);
      CHECK(replayed.profile.parts == 1);
      if (phase == "prefill") CHECK(in_parts.profile.parts > 1);
      test_support::check_same(stepped, replayed);
      test_support::check_same(stepped, in_parts);
      test_support::check_same(stepped, report.sim);
    }
}
