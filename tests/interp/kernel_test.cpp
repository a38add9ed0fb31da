// Kernel ops (LLIR) against the HLIR they replace: bitwise equal on random
// inputs, which is what makes HLIR -> kernel rewrites exact.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include "support/allclose.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace spool;

namespace {

ProgramInstr instr(Op op, std::initializer_list<uint16_t> args) {
  ProgramInstr i;
  i.op = op;
  size_t k = 0;
  for (uint16_t a : args) i.args[k++] = a;
  return i;
}
ProgramInstr constant_instr(double value, DType dtype = DType::F32) {
  ProgramInstr i;
  i.op = Op::Constant;
  i.value = Scalar::of(dtype, value);
  i.dtype = dtype;
  return i;
}

Tensor kernel(Op op, std::vector<Tensor> inputs, Attr attr) {
  Graph& g = inputs.front().graph();
  std::vector<Edge> edges;
  for (const Tensor& t : inputs) edges.push_back(t.edge());
  return Tensor(&g, g.add(op, std::move(edges), std::move(attr)));
}

// Every output pair `X` / `X_ref` must be bitwise equal.
void check_pairs(const Graph& g, uint64_t seed = 3) {
  const auto out = interp::run(g, interp::random_inputs(g, seed, 5));
  int pairs = 0;
  for (const auto& [name, value] : out) {
    if (name.ends_with("_ref")) continue;
    INFO(name);
    CHECK(test::allclose(value, out.at(name + "_ref")));
    ++pairs;
  }
  CHECK(pairs > 0);
}

}  // namespace

TEST_CASE("a fused program computes exactly its elementwise ops") {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    INFO(dtype_name(dtype));
    Graph g;
    const Tensor x = input(g, "x", dtype, {3, 5});
    const Tensor y = input(g, "y", dtype, {5});
    // silu(x) * y + 0.5, the HLIR way
    output("f_ref", x * recip(exp2(-x * 1.4426950408889634) + 1.0) * y + 0.5);
    ProgramAttr p;
    p.instrs = {instr(Op::Neg, {0}),          constant_instr(1.4426950408889634, dtype),
                instr(Op::Mul, {2, 3}),       instr(Op::Exp2, {4}),
                constant_instr(1.0, dtype),   instr(Op::Add, {5, 6}),
                instr(Op::Recip, {7}),        instr(Op::Mul, {0, 8}),
                instr(Op::Mul, {9, 1}),       constant_instr(0.5, dtype),
                instr(Op::Add, {10, 11})};
    output("f", kernel(Op::Fused, {x, y.broadcast_to({3, 5})}, p));
    check_pairs(g);
  }
  // Integers, comparisons, where, casts and iota.
  Graph g;
  const Tensor i = input(g, "i", DType::I32, {4, 6});
  const Tensor col = iota(g, {4, 6}, 1, DType::I32);
  output("m_ref", where(less_than(i % 3.0, col), i * i, -i).cast(DType::F16));
  ProgramAttr p;
  ProgramInstr iota_instr;
  iota_instr.op = Op::Iota;
  iota_instr.axis = 1;
  iota_instr.dtype = DType::I32;
  ProgramInstr cast;
  cast.op = Op::Cast;
  cast.dtype = DType::F16;
  cast.args = {7, 0, 0};
  p.instrs = {constant_instr(3, DType::I32), instr(Op::Mod, {0, 1}), iota_instr, instr(Op::LessThan, {2, 3}),
              instr(Op::Mul, {0, 0}),        instr(Op::Neg, {0}),    instr(Op::Where, {4, 5, 6}), cast};
  output("m", kernel(Op::Fused, {i}, p));
  check_pairs(g);
}

TEST_CASE("gemm with a two-input prologue and an epilogue equals matmul") {
  Graph g;
  const Tensor gate = input(g, "gate", DType::F32, {2, 5, 8});
  const Tensor up = input(g, "up", DType::F32, {2, 5, 8});
  const Tensor w = weight(g, "w", DType::F32, {6, 8});
  const Tensor bias = weight(g, "bias", DType::F32, {6});
  const Tensor w_t = w.transpose(0, 1).unsqueeze(0).expand({2, 8, 6});
  output("y_ref", nn::relu(nn::matmul(gate * up, w_t) + bias));
  GemmAttr attr;
  attr.a.instrs = {instr(Op::Mul, {0, 1})};
  attr.a_inputs = 2;
  attr.b_inputs = 1;
  attr.epilogue.instrs = {instr(Op::Add, {0, 1}), constant_instr(0.0), instr(Op::Max, {2, 3})};
  output("y", kernel(Op::Gemm, {gate, up, w_t, bias.broadcast_to({2, 5, 6})}, attr));
  check_pairs(g);

  // Integer gemm wraps like the composite.
  Graph h;
  const Tensor a = input(h, "a", DType::I64, {3, 4});
  const Tensor b = input(h, "b", DType::I64, {4, 2});
  output("p_ref", nn::matmul(a, b));
  output("p", kernel(Op::Gemm, {a, b}, GemmAttr{}));
  check_pairs(h);
}

TEST_CASE("reduce, softmax and the norms equal their composites") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {4, 16});
  const Tensor w = weight(g, "w", DType::F32, {16});
  const Tensor b = weight(g, "b", DType::F32, {16});
  output("ss_ref", recip(sqrt((x * x).sum(1) + 1e-6)));
  ReduceAttr r;
  r.kind = Op::SumReduce;
  r.axis = 1;
  r.prologue.instrs = {instr(Op::Mul, {0, 0})};
  r.epilogue.instrs = {constant_instr(1e-6), instr(Op::Add, {0, 1}), instr(Op::Sqrt, {2}), instr(Op::Recip, {3})};
  output("ss", kernel(Op::Reduce, {x}, r));
  output("sm_ref", nn::softmax(x, 0));
  output("sm", kernel(Op::Softmax, {x}, AxisAttr{0}));
  output("rms_ref", nn::rms_norm(x, w, 1e-6, true));
  output("rms", kernel(Op::RmsNorm, {x, w}, NormAttr{1e-6, true}));
  output("ln_ref", nn::layer_norm(x, w, b, 1e-5));
  output("ln", kernel(Op::LayerNorm, {x, w, b}, NormAttr{1e-5, false}));
  output("copy_ref", x.transpose(0, 1));
  output("copy", kernel(Op::Copy, {x.transpose(0, 1)}, NoAttr{}));
  check_pairs(g);
}

// The same kernels against loops written here in double precision, so the
// kernels are checked against something other than the composites the
// interpreter builds them from.
TEST_CASE("softmax, rms_norm and layer_norm kernels equal direct loops") {
  constexpr int64_t R = 6, C = 24;
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {R, C});
  const Tensor w = weight(g, "w", DType::F32, {C});
  const Tensor b = weight(g, "b", DType::F32, {C});
  output("sm", kernel(Op::Softmax, {x}, AxisAttr{1}));
  output("rms", kernel(Op::RmsNorm, {x, w}, NormAttr{1e-6, false}));
  output("rms1", kernel(Op::RmsNorm, {x, w}, NormAttr{1e-6, true}));
  output("ln", kernel(Op::LayerNorm, {x, w, b}, NormAttr{1e-5, false}));
  const interp::Env in = interp::random_inputs(g, 11, 5);
  const auto out = interp::run(g, in);
  const std::vector<float> xv = in.at("x").to_f32(), wv = in.at("w").to_f32(), bv = in.at("b").to_f32();
  std::vector<double> sm(R * C), rms(R * C), rms1(R * C), ln(R * C);
  for (int64_t r = 0; r < R; ++r) {
    const float* row = xv.data() + r * C;
    double mx = -INFINITY, sum = 0, sq = 0, mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(row[c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(double(row[c]) - mx);
    for (int64_t c = 0; c < C; ++c) sq += double(row[c]) * row[c], mean += row[c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= C;
    const double inv_rms = 1 / std::sqrt(sq / C + 1e-6), inv_std = 1 / std::sqrt(var + 1e-5);
    for (int64_t c = 0; c < C; ++c) {
      sm[r * C + c] = std::exp(double(row[c]) - mx) / sum;
      rms[r * C + c] = row[c] * inv_rms * wv[c];
      rms1[r * C + c] = row[c] * inv_rms * (1.0 + wv[c]);
      ln[r * C + c] = (row[c] - mean) * inv_std * wv[c] + bv[c];
    }
  }
  auto values = [](const interp::HostTensor& t) {
    const std::vector<float> f = t.to_f32();
    return std::vector<double>(f.begin(), f.end());
  };
  // f32 kernels against double loops: a few f32 roundings per element.
  const test::Tolerance tol{.atol = 1e-6, .rtol = 1e-5};
  CHECK(test::allclose(values(out.at("sm")), sm, tol, {R, C}));
  CHECK(test::allclose(values(out.at("rms")), rms, tol, {R, C}));
  CHECK(test::allclose(values(out.at("rms1")), rms1, tol, {R, C}));
  CHECK(test::allclose(values(out.at("ln")), ln, tol, {R, C}));
}

TEST_CASE("kernels are type-checked and round-trip through the text form") {
  Graph g("kernels");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor w = weight(g, "w", DType::F32, {8, 3});
  auto error_of = [&](auto build) -> std::string {
    try {
      build();
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  ProgramAttr bad;
  bad.instrs = {instr(Op::Add, {0, 3})};
  CHECK(error_of([&] { kernel(Op::Fused, {x}, bad); }) == "fused: instruction 0 (add) reads $3 before it is defined");
  bad.instrs = {instr(Op::SumReduce, {0})};
  CHECK(error_of([&] { kernel(Op::Fused, {x}, bad); }) == "fused: instruction 0 (sum_reduce) is not elementwise");
  CHECK(error_of([&] { kernel(Op::Gemm, {x, x}, GemmAttr{}); }) == "gemm: inner dimensions differ: A [4,8] vs B [4,8]");
  CHECK(error_of([&] { kernel(Op::RmsNorm, {x, w}, NormAttr{}); }) == "rms_norm: parameter 1 must be f32[8], got f32[8,3]");

  ProgramAttr p;
  p.instrs = {constant_instr(-0.0), instr(Op::Add, {0, 1}), instr(Op::Exp2, {2})};
  output("f", kernel(Op::Fused, {x}, p));
  GemmAttr gemm;
  gemm.epilogue.instrs = {constant_instr(2.0), instr(Op::Mul, {0, 1})};
  output("gemm", kernel(Op::Gemm, {x, w}, gemm));
  ReduceAttr r;
  r.kind = Op::MaxReduce;
  r.axis = 0;
  output("r", kernel(Op::Reduce, {x}, r));
  const Result<Graph> parsed = parse_graph(print_graph(g));
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  CHECK(parsed.value() == g);
}
