// grouped_matmul lowered to one kernel with run-time row counts, run in
// functional simulation against the interpreter: ragged and empty groups,
// a group larger than the kernel's row block, bf16, i32 counts, column
// tiles ragged or spanning both arrays, W read through a transposed view;
// and the timing of a balanced routing.

#include <doctest/doctest.h>

#include "lower_test_util.hpp"

#include <spool/npu/text.hpp>

#include <numeric>

using namespace spool;
using namespace spool::lower_test;

namespace {

struct Case {
  int64_t K, N;
  std::vector<int64_t> counts;
  DType dtype = DType::F32;
  DType count_dtype = DType::I64;
  bool transposed_w = false;  // w stored [G, K, N], read as [G, N, K]
};

Graph grouped_graph(const Case& c) {
  const int64_t R = std::accumulate(c.counts.begin(), c.counts.end(), int64_t{0});
  const int64_t G = static_cast<int64_t>(c.counts.size());
  Graph g("grouped");
  const Tensor rows = input(g, "rows", c.dtype, {R, c.K});
  const Tensor counts = input(g, "counts", c.count_dtype, {G});
  const Tensor w = c.transposed_w ? weight(g, "w", c.dtype, {G, c.K, c.N}).transpose(1, 2)
                                  : weight(g, "w", c.dtype, {G, c.N, c.K});
  output("y", grouped_matmul(rows, w, counts));
  return g;
}

// The interpreter's and the simulator's y on random rows and weights and the case's counts.
Outputs run_case(const Case& c, const std::string& config_name, int64_t spad_budget = 0) {
  const Graph g = grouped_graph(c);
  const target::NpuConfig config = target::load_config(config_name);
  interp::Env env = interp::random_inputs(g, 7);
  interp::HostTensor counts(c.count_dtype, {static_cast<int64_t>(c.counts.size())});
  for (size_t i = 0; i < c.counts.size(); ++i) counts.set_int(static_cast<int64_t>(i), c.counts[i]);
  env.at("counts") = counts;
  Outputs out;
  out.expected = interp::run(g, env);
  lower::LowerOptions options;
  options.spad_budget = spad_budget;
  lower::Lowered lowered = lower::to_npu(g, config, timed(config, options));
  auto reparsed = npu::parse(npu::print(lowered.program));
  REQUIRE_MESSAGE(reparsed.ok(), reparsed.error().render());
  CHECK(reparsed.value() == lowered.program);
  CHECK(lowered.report.kernels == 1);
  out.got = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, env).outputs;
  return out;
}

}  // namespace

TEST_CASE("grouped_matmul: ragged, empty and single-row groups over two k tiles, f32 and bf16") {
  for (const char* config : {"tpuv3", "toy"}) {
    CAPTURE(config);
    Case c{200, 48, {7, 0, 17, 1, 15}};
    CHECK(run_case(c, config).within(1e-5));
    c.dtype = DType::BF16;
    CHECK(run_case(c, config).within(1e-2));
    c.dtype = DType::F32;
    c.count_dtype = DType::I32;
    CHECK(run_case(c, config).within(1e-5));
  }
}

TEST_CASE("grouped_matmul: a group larger than the row block runs in further blocks") {
  // 1100 rows in one group: blocks of 512 (two of them past the first).
  CHECK(run_case(Case{64, 40, {3, 1100, 0, 9}}, "tpuv3").within(1e-5));
}

TEST_CASE("grouped_matmul: column tiles spanning both arrays, ragged, and W read transposed") {
  CHECK(run_case(Case{96, 512, {5, 12, 0, 30}}, "tpuv3").within(1e-5));   // two steps of 256, prefetched across groups
  CHECK(run_case(Case{96, 300, {5, 12, 0, 30}}, "tpuv3").within(1e-5));   // 128-wide tiles, the last of 44
  CHECK(run_case(Case{96, 72, {5, 12, 0, 30}, DType::F32, DType::I64, true}, "tpuv3").within(1e-5));
  CHECK(run_case(Case{96, 512, {5, 12, 0, 30}, DType::BF16, DType::I64, true}, "tpuv3").within(1e-2));
}

TEST_CASE("grouped_matmul: a small scratchpad gets narrower steps loaded one ahead, or a clear error") {
  // 1024 columns of K = 512 f32: two steps of 512 need three 1 MiB W slots;
  // 2.5 MiB leaves room for two slots of 256-column steps.
  CHECK(run_case(Case{512, 1024, {5, 12, 0, 30}}, "tpuv3", 2621440).within(1e-5));
  CHECK_THROWS_WITH_AS(run_case(Case{512, 1024, {5, 12, 0, 30}}, "tpuv3", 65536),
                       doctest::Contains("the smallest grouped tile needs"), Error);
}

TEST_CASE("grouped_matmul: counts that do not partition the rows are an error") {
  const Graph g = grouped_graph(Case{8, 8, {2, 3}});
  interp::Env env = interp::random_inputs(g, 1);
  interp::HostTensor counts(DType::I64, {2});
  counts.set_int(0, 2);
  counts.set_int(1, 2);
  env.at("counts") = counts;
  CHECK_THROWS_WITH_AS(interp::run(g, env), doctest::Contains("the group counts sum to 4, not to the 5 rows"), Error);
  counts.set_int(1, -1);
  env.at("counts") = counts;
  CHECK_THROWS_WITH_AS(interp::run(g, env), doctest::Contains("group 1 has -1 rows"), Error);
}

TEST_CASE("grouped_matmul: each group's matrix is read once, and timing assumes balanced groups") {
  // 128 groups of a [768, 2048] bf16 matrix (qwen3-30B-A3B's gate
  // projection) over 4096 rows: the kernel reads the weights once.
  const int64_t G = 128, N = 768, K = 2048, R = 4096;
  Graph g("experts");
  const Tensor rows = input(g, "rows", DType::BF16, {R, K});
  const Tensor counts = input(g, "counts", DType::I64, {G});
  output("y", grouped_matmul(rows, weight(g, "w", DType::BF16, {G, N, K}), counts));
  const target::NpuConfig config = target::load_config("tpuv3");
  const lower::Lowered lowered = lower::to_npu(g, config, timed(config));
  const sim::Report report = sim::run(lowered.program, config);
  const int64_t weight_bytes = G * N * K * 2;
  CHECK(report.dram_read_bytes >= weight_bytes);
  CHECK(report.dram_read_bytes < weight_bytes + 3 * R * K * 2);  // the rows, read once per group's step at most
  // Balanced: 32 rows per group, the arrays stream 4096 rows, not padded blocks.
  CHECK(report.matmul_flops == 2 * R * N * K);
  MESSAGE("grouped gate projection: " << report.cycles << " cycles, DRAM " << report.dram_read_bytes
                                      << " B read, weights alone at peak: "
                                      << weight_bytes / (config.dram.channels * config.dram.bytes_per_cycle) << " cycles");
}
