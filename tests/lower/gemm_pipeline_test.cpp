// GEMM operand loads: the k loop is software pipelined (tile i + 1's loads
// come before tile i's array steps), and a prologue over a K^T operand (keys
// read through a transposed view, as in decode attention) loads rows of k
// contiguously and feeds the array with trans_b; a prologue input constant
// along k (a norm's per-row scale) is loaded one value per row. All compared
// with the interpreter, and asserted on the generated kernels.

#include "lower_test_util.hpp"

#include <spool/nn/nn.hpp>

using namespace spool;
using spool::lower_test::check_against_interp;

namespace {

ProgramInstr add_instr() {
  ProgramInstr in;
  in.op = Op::Add;
  in.args = {0, 1, 0};
  return in;
}

// The loads of DRAM buffer `name` before the kernel's first matmul, and
// whether every matmul reads B transposed.
struct Order {
  int loads_before_first_matmul = 0;
  int matmuls = 0;
  bool all_trans_b = true;
  bool all_unit_stride = true;  // every load of `name` reads runs along its last axis
};

Order order_of(const lower::Lowered& l, const std::string& name) {
  Order o;
  for (const npu::Kernel& k : l.program.kernels)
    npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
      if (const auto* m = std::get_if<npu::MatmulOp>(&s.node)) {
        ++o.matmuls;
        o.all_trans_b = o.all_trans_b && m->trans_b;
      }
      if (const auto* d = std::get_if<npu::DmaOp>(&s.node)) {
        if (!d->load || l.program.buffers[d->dram].name.rfind(name, 0) != 0) return;
        if (o.matmuls == 0) ++o.loads_before_first_matmul;
        o.all_unit_stride = o.all_unit_stride && d->dram_strides.back() == 1;
      }
    });
  return o;
}

}  // namespace

TEST_CASE("gemm: the next k tile's loads are issued before the current tile's array steps") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    // A GEMV with K over 8 array heights: at least two k tiles on any config.
    const int64_t K = std::string(cfg) == "toy" ? 100 : 2100, N = 40;
    Graph g("gemv");
    Tensor x = input(g, "x", DType::F32, {1, K});
    Tensor w = weight(g, "w", DType::F32, {N, K});
    output("y", Tensor(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge()}, GemmAttr{})));
    lower::Lowered l;
    CHECK(check_against_interp(g, cfg, 3, 2, &l) < 1e-5);
    const Order o = order_of(l, "w");
    CHECK(o.matmuls > 0);
    CHECK(o.loads_before_first_matmul == 2);
  }
}

TEST_CASE("gemm: a prologue over K^T operands loads rows of k and uses trans_b") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    // scores = q . (k_past + k_new)^T per head: the B inputs are transposed
    // views of [S, D] buffers, joined by an elementwise prologue.
    const int64_t H = 3, S = 37, D = 20;
    Graph g("scores");
    Tensor q = input(g, "q", DType::F32, {H, 1, D});
    Tensor k0 = input(g, "keys_a", DType::F32, {H, S, D});
    Tensor k1 = input(g, "keys_b", DType::F32, {H, S, D});
    GemmAttr attr;
    attr.b.instrs = {add_instr()};
    attr.b_inputs = 2;
    output("s", Tensor(&g, g.add(Op::Gemm, {q.edge(), k0.transpose(1, 2).edge(), k1.transpose(1, 2).edge()}, attr)));
    lower::Lowered l;
    CHECK(check_against_interp(g, cfg, 5, 2, &l) < 1e-5);
    const Order o = order_of(l, "keys_");
    CHECK(o.matmuls > 0);
    CHECK(o.all_trans_b);
    CHECK(o.all_unit_stride);
  }
}

TEST_CASE("gemm: an A prologue input broadcast along k is loaded one value per row") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const int64_t M = 45, K = 300, N = 24;
    Graph g("row_scaled");
    Tensor x = input(g, "x", DType::F32, {M, K});
    Tensor scale = input(g, "row_scale", DType::F32, {M, 1});
    Tensor w = weight(g, "w", DType::F32, {N, K});
    GemmAttr attr;  // (x * scale) w^T
    attr.a.instrs = {ProgramInstr{}};
    attr.a.instrs[0].op = Op::Mul;
    attr.a.instrs[0].args = {0, 1, 0};
    attr.a_inputs = 2;
    output("y", Tensor(&g, g.add(Op::Gemm, {x.edge(), scale.broadcast_to({M, K}).edge(), w.transpose(0, 1).edge()},
                                 attr)));
    lower::Lowered l;
    CHECK(check_against_interp(g, cfg, 9, 2, &l) < 1e-5);
    // Every load of the scale moves at most one tile's rows, never a column per k.
    int loads = 0;
    for (const npu::Kernel& k : l.program.kernels)
      npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
        const auto* d = std::get_if<npu::DmaOp>(&s.node);
        if (!d || !d->load || l.program.buffers[d->dram].name.rfind("row_scale", 0) != 0) return;
        ++loads;
        CHECK(d->dims.size() == 1);
      });
    CHECK(loads > 0);
  }
}
