// The pipeline end to end on the tiny llama: rolled and unrolled compiles,
// checked against the reference interpreter.

#include <doctest/doctest.h>

#include <spool/compile/compile.hpp>
#include <spool/interp/interp.hpp>

#include "llama.hpp"

using namespace spool;

namespace {
void check_same_outputs(const Graph& reference, const Graph& program) {
  const interp::Env env = interp::random_inputs(reference, 11, 16);
  const auto want = interp::run(reference, env);
  const auto got = interp::run(program, env);
  REQUIRE(want.size() == got.size());
  for (const auto& [name, value] : want) {
    INFO(name);
    CHECK(interp::compare(got.at(name), value).max_rel_to_scale <= 1e-5);
  }
}
}  // namespace

TEST_CASE("rolled and unrolled compiles of the tiny llama agree with the interpreter and with each other") {
  const std::string algebra = std::string(SPOOL_SOURCE_DIR) + "/rules/algebra.rules";
  const std::string loops = std::string(SPOOL_SOURCE_DIR) + "/rules/loops.rules";
  for (int layers : {2, 4, 8}) {
    INFO(layers << " layers");
    examples::LlamaConfig config = examples::LlamaConfig::tiny();
    config.layers = layers;
    const Graph g = examples::build_llama(config, examples::Phase::prefill(8));
    CompileOptions options;
    options.rule_files = {algebra, loops};
    const CompileResult rolled = compile(g, options);
    options.roll = false;
    const CompileResult unrolled = compile(g, options);
    CHECK(rolled.report.roll.loops == 1);
    CHECK(rolled.report.roll.trips == std::vector<int64_t>{layers});
    CHECK(unrolled.report.roll.loops == 0);
    // Up to 4 trips the loop's region holds it both rolled and unrolled
    // (unroll-union); beyond, the body is saturated once.
    if (layers > 4) CHECK(rolled.report.egraph.nodes < unrolled.report.egraph.nodes);
    check_same_outputs(g, rolled.program);
    check_same_outputs(g, unrolled.program);
    MESSAGE(layers << " layers: e-graph " << rolled.report.egraph.nodes << " nodes rolled vs " << unrolled.report.egraph.nodes
                   << " unrolled; program " << rolled.program.num_live() << " vs " << unrolled.program.num_live()
                   << " nodes");

    // Without rules that make equal-cost alternatives (commutativity), the
    // extracted programs are the same up to node ids. (With them, greedy
    // extraction breaks ties by node id, which differs between the two
    // e-graphs.)
    CompileOptions plain;
    plain.rule_files = {loops};
    const CompileResult a = compile(g, plain);
    plain.roll = false;
    const CompileResult b = compile(g, plain);
    CHECK(compacted(cse(a.program)) == compacted(cse(b.program)));
  }
}
