// Functional mode against the reference interpreter: the same computation is
// built as an HLIR graph (spool::nn) and run by spool::interp on the same
// random inputs; the workload is compiled from the same HLIR by the pipeline
// (models/workloads.hpp) and its simulated NPU program must agree to f32
// accuracy.

#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/npu/text.hpp>
#include <spool/npu/verify.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <spool/models/workloads.hpp>

#include "support/allclose.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace spool;

namespace {

// Runs the workload functionally with the interpreter's inputs and compares
// its output with the interpreter's (test::allclose).
test::AllClose simulated_vs_interp(const models::Workload& w, const target::NpuConfig& config, Graph& graph,
                                   const test::Tolerance& tolerance) {
  const interp::Env env = interp::random_inputs(graph, 7);
  const auto expected = interp::run(graph, env);
  sim::Memory memory(w.program);
  for (const auto& [name, buffer] : w.inputs) {
    const interp::HostTensor& t = env.at(name);
    std::vector<double> values(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) values[i] = t.get(i);
    memory.write(buffer, values);
  }
  sim::Options options;
  options.mode = sim::Mode::Functional;
  options.memory = &memory;
  const sim::Report report = sim::run(w.program, config, options);
  CHECK(report.mode == sim::Mode::Functional);
  CHECK(report.cycles > 0);
  const std::string& buffer = w.outputs.at(0).second;
  const npu::DramBuffer& b = w.program.buffers.at(static_cast<size_t>(w.program.find_buffer(buffer)));
  const std::vector<double> values = memory.read(buffer);
  interp::HostTensor actual(b.dtype, b.shape);
  REQUIRE(static_cast<int64_t>(values.size()) == actual.size());
  for (int64_t i = 0; i < actual.size(); ++i) actual.set(i, values[static_cast<size_t>(i)]);
  const interp::HostTensor& ref = expected.at(w.outputs.at(0).first);
  // A reference that is not finite, or all zeros, would make the tolerance
  // meaningless.
  for (int64_t i = 0; i < ref.size(); ++i) REQUIRE(std::isfinite(ref.get(i)));
  const test::AllClose result = test::allclose(actual, ref, tolerance);
  REQUIRE(result.scale > 0);
  return result;
}

}  // namespace

TEST_CASE("functional: GEMM equals the reference interpreter (aligned and ragged)") {
  for (const char* config_name : {"toy", "tpuv3"}) {
    const target::NpuConfig config = target::load_config(config_name);
    // Shapes that make the toy tiling use several m blocks, several column
    // blocks with a ragged tail, and ragged k.
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{16, 16, 16}, {37, 20, 19}, {64, 136, 40}, {3, 1, 300},
                           {600, 64, 200}, {300, 20, 1000}, {64, 8, 2000}}) {
      CAPTURE(config_name);
      CAPTURE(M);
      CAPTURE(K);
      CAPTURE(N);
      Graph g("gemm");
      const Tensor a = input(g, "a", DType::F32, {M, K});
      const Tensor w = weight(g, "w", DType::F32, {K, N});
      output("out", nn::matmul(a, w));
      const models::Workload workload = models::compile_workload(fmt::format("gemm:{}x{}x{}", M, K, N), config);
      CHECK(simulated_vs_interp(workload, config, g, {.stol = 1e-5}));
    }
  }
}

TEST_CASE("functional: softmax equals the reference interpreter") {
  const target::NpuConfig config = target::load_config("toy");
  for (auto [R, C] : {std::pair<int64_t, int64_t>{8, 8}, {33, 100}, {1, 7}}) {
    CAPTURE(R);
    CAPTURE(C);
    Graph g("softmax");
    output("out", nn::softmax(input(g, "x", DType::F32, {R, C}), 1));
    const models::Workload workload = models::compile_workload(fmt::format("softmax:{}x{}", R, C), config);
    CHECK(simulated_vs_interp(workload, config, g, {.stol = 1e-5}));
  }
}

TEST_CASE("functional: layernorm equals the reference interpreter") {
  const target::NpuConfig config = target::load_config("toy");
  for (auto [R, C] : {std::pair<int64_t, int64_t>{8, 16}, {17, 40}, {2, 300}}) {
    CAPTURE(R);
    CAPTURE(C);
    Graph g("layernorm");
    const Tensor x = input(g, "x", DType::F32, {R, C});
    const Tensor w = weight(g, "weight", DType::F32, {C});
    const Tensor b = weight(g, "bias", DType::F32, {C});
    output("out", nn::layer_norm(x, w, b, 1e-5));
    const models::Workload workload = models::compile_workload(fmt::format("layernorm:{}x{}", R, C), config);
    CHECK(simulated_vs_interp(workload, config, g, {.stol = 1e-5}));
  }
}

TEST_CASE("functional: attention equals the reference interpreter") {
  for (const char* config_name : {"toy", "tpuv3"}) {
    const target::NpuConfig config = target::load_config(config_name);
    for (auto [H, S, D] : {std::tuple<int64_t, int64_t, int64_t>{2, 16, 8}, {3, 21, 12}}) {
      CAPTURE(config_name);
      CAPTURE(H);
      CAPTURE(S);
      CAPTURE(D);
      // scores = k q^T / sqrt(D), softmax along dim -2, out = v^T scores.
      Graph g("attention");
      const Tensor q = input(g, "q", DType::F32, {H, S, D});
      const Tensor k = input(g, "k", DType::F32, {H, S, D});
      const Tensor v = input(g, "v", DType::F32, {H, S, D});
      const Tensor scores = nn::matmul(k, q.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(D)));
      output("out", nn::matmul(v.transpose(1, 2), nn::softmax(scores, 1)));
      const models::Workload workload = models::compile_workload(fmt::format("attention:{}x{}x{}", H, S, D), config);
      CHECK(simulated_vs_interp(workload, config, g, {.stol = 1e-5}));
    }
  }
}

TEST_CASE("functional: bf16 stores round to nearest even, integer division by zero is an error") {
  const target::NpuConfig toy = target::load_config("toy");
  const std::string text = R"(program "p" spad 4096
buffer @x : f32[4] input
buffer @y : bf16[4] output
kernel "k" {
  spad %A : f32[4] x1 at 0
  spad %B : bf16[4] x1 at 64
  dma.load [4] %A[0 : 1] <- @x[0 : 1] tag 0
  vector "round" [1, 4] {
    %a = load %A[0 : 4] : f32
    %b = cast %a : bf16
    store %B[0 : 4], %b
  }
  dma.store [4] @y[0 : 1] <- %B[0 : 1] tag 1
}
)";
  const npu::Program p = npu::parse(text).take();
  sim::Memory memory(p);
  const std::vector<double> x = {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, -2.5, 1e-3};
  memory.write("x", x);
  sim::Options options;
  options.mode = sim::Mode::Functional;
  options.memory = &memory;
  (void)sim::run(p, toy, options);
  const std::vector<double> y = memory.read("y");
  CHECK(y[0] == 1.0);              // a tie rounds to even
  CHECK(y[1] == 1.0 + 4.0 / 256);  // a tie rounds to even (upwards)
  CHECK(y[2] == -2.5);
  CHECK(y[3] == round_to_float(DType::BF16, 1e-3));

  const std::string div = R"(program "p" spad 4096
buffer @x : i32[4] input
kernel "k" {
  spad %A : i32[4] x1 at 0
  dma.load [4] %A[0 : 1] <- @x[0 : 1] tag 0
  vector "div" [1, 4] {
    %a = load %A[0 : 4] : i32
    %z = const 0 : i32
    %q = div %a, %z : i32
    store %A[0 : 4], %q
  }
}
)";
  const npu::Program pd = npu::parse(div).take();
  sim::Memory md(pd);
  sim::Options od;
  od.mode = sim::Mode::Functional;
  od.memory = &md;
  CHECK_THROWS_WITH_AS(sim::run(pd, toy, od), "kernel 'k': value %q: op 'div': integer division by zero", spool::Error);
}

TEST_CASE("functional: reductions down the rows give one value per column, against direct loops") {
  // x [5 x 12]: column sums and maxima (reduce.*.rows), a per-column value
  // broadcast down the rows (x - colmax, full), and a per-row value against
  // a per-column one (rowsum + colsum, full).
  const target::NpuConfig toy = target::load_config("toy");
  const std::string text = R"(program "p" spad 4096
buffer @x : f32[5, 12] input
buffer @colsum : f32[12] output
buffer @colmax : f32[12] output
buffer @centered : f32[5, 12] output
buffer @cross : f32[5, 12] output
kernel "k" {
  spad %X : f32[60] x1 at 0
  spad %S : f32[12] x1 at 256
  spad %M : f32[12] x1 at 320
  spad %C : f32[60] x1 at 384
  spad %D : f32[60] x1 at 640
  dma.load [5, 12] %X[0 : 12, 1] <- @x[0 : 12, 1] tag 0
  wait 0
  vector "down" [5, 12] {
    %x = load %X[0 : 12] : f32
    %s = reduce.sum.rows %x : f32
    %m = reduce.max.rows %x : f32
    %two = const 2 : f32
    %s2 = mul %s, %two : f32
    %c = sub %x, %m : f32
    %r = reduce.sum %x : f32
    %d = add %r, %s : f32
    store %S[0 : 1], %s2
    store %M[0 : 1], %m
    store %C[0 : 12], %c
    store %D[0 : 12], %d
  }
  dma.store [12] @colsum[0 : 1] <- %S[0 : 1] tag 1
  dma.store [12] @colmax[0 : 1] <- %M[0 : 1] tag 1
  dma.store [5, 12] @centered[0 : 12, 1] <- %C[0 : 12, 1] tag 1
  dma.store [5, 12] @cross[0 : 12, 1] <- %D[0 : 12, 1] tag 1
  wait 1
}
)";
  auto parsed = npu::parse(text);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  const npu::Program p = parsed.take();
  REQUIRE(npu::verify(p).empty());
  CHECK(npu::print(npu::parse(npu::print(p)).take()) == npu::print(p));
  sim::Memory memory(p);
  std::vector<double> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 37) % 23) - 11.0;
  memory.write("x", x);
  sim::Options options;
  options.mode = sim::Mode::Functional;
  options.memory = &memory;
  (void)sim::run(p, toy, options);
  const std::vector<double> colsum = memory.read("colsum"), colmax = memory.read("colmax");
  const std::vector<double> centered = memory.read("centered"), cross = memory.read("cross");
  for (int c = 0; c < 12; ++c) {
    double sum = 0, max = -INFINITY;
    for (int r = 0; r < 5; ++r) {
      sum += x[r * 12 + c];
      max = std::max(max, x[r * 12 + c]);
    }
    CHECK(colsum[c] == 2 * sum);
    CHECK(colmax[c] == max);
    for (int r = 0; r < 5; ++r) {
      double rowsum = 0;
      for (int j = 0; j < 12; ++j) rowsum += x[r * 12 + j];
      CHECK(centered[r * 12 + c] == x[r * 12 + c] - max);
      CHECK(cross[r * 12 + c] == rowsum + sum);
    }
  }
}
