// Planted faults (include/spool/support/fault.hpp) the CLI cannot reach with
// its own inputs: a top-k over values with ties (random weights never tie).
// Each test first shows the program passes the check without the fault, so
// the failure is the fault's.

#include <doctest/doctest.h>

#include <spool/nn/nn.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/support/fault.hpp>

#include <string>

using namespace spool;

namespace {

// Router-like scores with many ties: small integers in f32.
Graph tied_topk() {
  Graph g("tied_topk");
  const Tensor x = input(g, "x", DType::F32, {16, 32});
  const nn::TopK top = nn::topk(x, 4);
  output("values", top.values);
  output("indices", top.indices);
  return g;
}

pipeline::Report run_with(const Graph& graph, const char* fault) {
  interp::HostTensor x(DType::F32, {16, 32});
  for (int64_t i = 0; i < 16 * 32; ++i) x.set(i, static_cast<double>((i * 7) % 5));
  pipeline::Options options;
  options.compile.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  options.inputs = interp::Env{{"x", x}};
  fault::clear();
  if (fault) fault::plant(fault);
  pipeline::Report report = pipeline::run(graph, target::load_config("tpuv3"), options);
  fault::clear();
  return report;
}

}  // namespace

TEST_CASE("fault topk-tie: a top-k breaking ties toward the larger index fails the check") {
  const Graph graph = tied_topk();
  const pipeline::Report clean = run_with(graph, nullptr);
  REQUIRE(clean.check);
  CHECK(clean.check->ok);
  const pipeline::Report faulty = run_with(graph, "topk-tie");
  REQUIRE(faulty.check);
  CHECK_FALSE(faulty.check->ok);
  CHECK(faulty.check->worst_output == "indices");
}

TEST_CASE("faults: every planted fault has a name, a stage and a description") {
  CHECK(fault::all().size() >= 12);
  for (const fault::FaultInfo& f : fault::all()) {
    CHECK_FALSE(f.name.empty());
    CHECK_FALSE(f.stage.empty());
    CHECK_FALSE(f.what.empty());
  }
  CHECK_THROWS_WITH_AS(fault::plant("no-such-fault"), doctest::Contains("no planted fault is named"), Error);
}
