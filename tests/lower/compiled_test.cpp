// Blocks built as HLIR (spool::nn), compiled to LLIR by spool::compile with
// the shipped rules, lowered and run in functional simulation: the result
// equals the interpreter on the HLIR. Prints each block's lowering report.

#include <spool/compile/compile.hpp>
#include <spool/interp/interp.hpp>
#include <spool/lower/lower.hpp>
#include <spool/nn/nn.hpp>

#include <doctest/doctest.h>

#include "lower_test_util.hpp"

using namespace spool;
using spool::lower_test::timed;

namespace {

// The interpreter's outputs on the HLIR and the simulated ones of its
// compiled and lowered program.
lower_test::Outputs compile_and_run(const Graph& hlir, const char* config_name, lower::LowerReport* report) {
  compile::Options options;
  options.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  const compile::Compiled compiled = compile::run(hlir, options);
  const target::NpuConfig config = target::load_config(config_name);
  const lower::Lowered lowered = lower::to_npu(compiled.program, config, timed(config));
  const interp::Env env = interp::random_inputs(hlir, 21);
  lower_test::Outputs out;
  out.expected = interp::run(hlir, env);
  out.got = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, env).outputs;
  *report = lowered.report;
  return out;
}

}  // namespace

TEST_CASE("compiled blocks: FFN, MoE experts, attention and RoPE through spool::compile and lowering") {
  struct Block {
    const char* name;
    Graph graph;
  };
  std::vector<Block> blocks;
  {
    Graph g("ffn");
    Tensor x = input(g, "x", DType::F32, {40, 48});
    output("h", nn::relu(nn::linear(x, weight(g, "w1", DType::F32, {72, 48}), weight(g, "b1", DType::F32, {72}))));
    blocks.push_back({"ffn", std::move(g)});
  }
  {
    Graph g("moe_experts");
    Tensor x = input(g, "x", DType::F32, {3, 10, 16});
    Tensor gate_up = nn::bmm(x, weight(g, "w_gate_up", DType::F32, {3, 16, 48}));
    const std::vector<Tensor> parts = gate_up.chunk(2, -1);
    output("y", nn::bmm(nn::swiglu(parts[0], parts[1]), weight(g, "w_down", DType::F32, {3, 24, 16})));
    blocks.push_back({"moe_experts", std::move(g)});
  }
  {
    Graph g("attention");
    Tensor q = input(g, "q", DType::F32, {2, 12, 8});
    Tensor k = input(g, "k", DType::F32, {2, 12, 8});
    Tensor v = input(g, "v", DType::F32, {2, 12, 8});
    output("o", nn::attention(q, k, v, true));
    blocks.push_back({"attention", std::move(g)});
  }
  {
    Graph g("rope");
    Tensor x = input(g, "x", DType::F32, {2, 4, 6, 16});
    const nn::RopeTables t = nn::rope_tables(g, 6, 16, 10000.0);
    output("y", nn::rope(x, t.cos, t.sin));
    blocks.push_back({"rope", std::move(g)});
  }
  for (Block& b : blocks) {
    for (const char* cfg : {"toy", "tpuv3"}) {
      CAPTURE(b.name);
      CAPTURE(cfg);
      lower::LowerReport report;
      CHECK(compile_and_run(b.graph, cfg, &report).within(1e-5));
      MESSAGE(std::string(b.name) << " compiled and lowered on " << std::string(cfg) << "\n" << report.to_text());
    }
  }
}
