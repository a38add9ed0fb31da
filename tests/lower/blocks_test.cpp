// Transformer blocks lowered end to end and compared with the interpreter:
// an FFN (addmm + ReLU), a llama4 MoE expert block (chunk prologue fused into
// the down projection), a deepseek-v3 routing block (integer index math) and
// an nvFuser-style RoPE block (views and cats). The LLIR is built by hand from
// kernel nodes and HLIR primitives (single-op kernels). Each test prints the
// block's lowering report.

#include "lower_test_util.hpp"
#include <spool/models/workloads.hpp>

#include <spool/lower/spad_alloc.hpp>
#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

using namespace spool;
using spool::lower_test::timed;
using spool::lower_test::lower_and_run;
using spool::lower_test::constant_instr;
using spool::lower_test::instr;

namespace {


// silu($0) * $1 as a program: $0 * recip(1 + exp2(-log2(e) * $0)) * $1.
ProgramAttr swiglu_program() {
  ProgramAttr p;
  p.instrs = {constant_instr(-1.4426950408889634), instr(Op::Mul, 0, 2), instr(Op::Exp2, 3), constant_instr(1.0),
              instr(Op::Add, 4, 5), instr(Op::Recip, 6), instr(Op::Mul, 0, 7), instr(Op::Mul, 8, 1)};
  return p;
}

const lower::KernelInfo& info_of(const lower::Lowered& l, const std::string& kind) {
  for (const lower::KernelInfo& k : l.report.per_kernel)
    if (k.kind == kind) return k;
  FAIL("no kernel of kind " << kind);
  return l.report.per_kernel.front();
}

const npu::Kernel& kernel_named(const lower::Lowered& l, const std::string& name) {
  for (const npu::Kernel& k : l.program.kernels)
    if (k.name == name) return k;
  FAIL("no kernel named " << name);
  return l.program.kernels.front();
}

// The end of the highest scratchpad buffer of the kernel, as placed.
int64_t placed_footprint(const npu::Kernel& k) {
  int64_t end = 0;
  for (const npu::SpadBuffer& b : k.spad)
    end = std::max(end, b.offset + (b.footprint_bytes() + lower::kSpadAlign - 1) / lower::kSpadAlign * lower::kSpadAlign);
  return end;
}

bool has_vector_step(const npu::Kernel& k, const std::string& label) {
  bool found = false;
  npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
    if (const auto* v = std::get_if<npu::VectorOp>(&s.node)) found = found || v->label == label;
  });
  return found;
}

Graph ffn(int64_t M, int64_t K, int64_t N) {
  Graph g("ffn");
  Tensor x = input(g, "x", DType::F32, {M, K});
  Tensor w = weight(g, "w1", DType::F32, {N, K});
  Tensor b = weight(g, "b1", DType::F32, {N});
  GemmAttr addmm_relu;  // relu(x w^T + b)
  addmm_relu.epilogue.instrs = {instr(Op::Add, 0, 1), constant_instr(0.0), instr(Op::Max, 2, 3)};
  output("h", Tensor(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge(), b.broadcast_to({M, N}).edge()}, addmm_relu)));
  return g;
}

}  // namespace

TEST_CASE("blocks: FFN addmm + ReLU, M=512 N=3072 K=768 on tpuv3: footprint equals the budget that chose the tile") {
  const Graph g = ffn(512, 768, 3072);
  const target::NpuConfig tpu = target::load_config("tpuv3");
  lower::Lowered l;
  CHECK(lower_and_run(g, "tpuv3", 11, 2, &l).within(1e-5));
  MESSAGE("ffn on tpuv3\n" << l.report.to_text());
  REQUIRE(l.report.kernels == 1);
  CHECK(l.report.fused_kernels == 1);
  CHECK(l.report.copy_kernels == 0);
  const lower::KernelInfo& gemm = info_of(l, "gemm");
  const npu::Kernel& k = kernel_named(l, gemm.name);
  MESSAGE("tile " << gemm.tile << ", footprint " << gemm.spad_bytes << " bytes");
  CHECK(gemm.spad_bytes == placed_footprint(k));
  CHECK(gemm.spad_bytes <= tpu.spad_bytes());
  CHECK(gemm.spad_bytes == npu::spad_liveness(k).peak_bytes);  // every buffer live together: no holes
  // The bias is kept at its logical shape: one value per column of the tile.
  bool bias_per_column = false;
  for (const npu::SpadBuffer& b : k.spad)
    if (b.name == "e0") bias_per_column = b.elements <= 2 * 3072 && b.elements < k.spad[0].elements;
  CHECK(bias_per_column);

  // A budget that fits only smaller tiles: the selection shrinks and the footprint still equals the budget used.
  for (int64_t budget : {int64_t{1} << 20, int64_t{300} << 10}) {
    lower::LowerOptions options;
    options.spad_budget = budget;
    const lower::Lowered small = lower::to_npu(g, tpu, timed(tpu, options));
    const lower::KernelInfo& s = info_of(small, "gemm");
    CAPTURE(budget);
    MESSAGE("budget " << budget << ": tile " << s.tile << ", footprint " << s.spad_bytes);
    CHECK(s.spad_bytes <= budget);
    CHECK(s.spad_bytes == placed_footprint(kernel_named(small, s.name)));
  }
  // Nothing fits a tiny budget: a clear error, not a crash.
  lower::LowerOptions tiny;
  tiny.spad_budget = 4096;
  CHECK_THROWS_WITH_AS(lower::to_npu(g, tpu, timed(tpu, tiny)), doctest::Contains("scratchpad"), Error);
}

TEST_CASE("blocks: llama4 MoE experts: the chunk prologue is fused into the down projection") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const int64_t E = 3, T = 20, H = 24, F = 40;
    Graph g("llama4_moe");
    Tensor x = input(g, "x", DType::F32, {E, T, H});
    Tensor w_gate_up = weight(g, "w_gate_up", DType::F32, {E, H, 2 * F});
    Tensor w_down = weight(g, "w_down", DType::F32, {E, F, H});
    // gate_up = bmm(x, w) of width 2F; gate, up = chunk(gate_up, 2); silu(gate) * up feeds the down bmm.
    Tensor gate_up(&g, g.add(Op::Gemm, {x.edge(), w_gate_up.edge()}, GemmAttr{}));
    const std::vector<Tensor> parts = gate_up.chunk(2, -1);
    GemmAttr down;
    down.a = swiglu_program();
    down.a_inputs = 2;
    output("y", Tensor(&g, g.add(Op::Gemm, {parts[0].edge(), parts[1].edge(), w_down.edge()}, down)));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 12, 2, &l).within(1e-5));
    MESSAGE("llama4 moe on " << std::string(cfg) << "\n" << l.report.to_text());
    // Two kernels: the prologue runs inside the second GEMM, reading both
    // halves of gate_up through aliases of its buffer.
    CHECK(l.report.kernels == 2);
    CHECK(l.report.fused_kernels == 1);
    CHECK(l.report.copy_kernels == 0);
    CHECK(l.report.notes.empty());
    REQUIRE(l.report.per_kernel.size() == 2);
    const npu::Kernel& k = kernel_named(l, l.report.per_kernel[1].name);
    CHECK(has_vector_step(k, "prologue.a"));
    int alias_loads = 0;
    npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
      if (const auto* d = std::get_if<npu::DmaOp>(&s.node))
        if (d->load && l.program.buffers[d->dram].alias_of >= 0) ++alias_loads;
    });
    CHECK(alias_loads >= 2);
  }
}

TEST_CASE("blocks: a GEMM fusion that cannot be placed falls back to standalone kernels") {
  const int64_t M = 64, K = 64, N = 64;
  Graph g("fallback");
  Tensor a = input(g, "a", DType::F32, {M, K});
  Tensor b = weight(g, "b", DType::F32, {K, N});
  GemmAttr attr;  // an epilogue adding the column index (an iota): not placed in the GEMM
  ProgramInstr iota_instr;
  iota_instr.op = Op::Iota;
  iota_instr.axis = 1;
  iota_instr.dtype = DType::F32;
  attr.epilogue.instrs = {iota_instr, instr(Op::Add, 0, 1)};
  output("y", Tensor(&g, g.add(Op::Gemm, {a.edge(), b.edge()}, attr)));
  lower::Lowered l;
  CHECK(lower_and_run(g, "toy", 13, 2, &l).within(1e-5));
  CHECK(l.report.notes.size() == 1);
  CHECK(l.report.kernels >= 3);  // iota, gemm, epilogue
}

TEST_CASE("blocks: deepseek-v3 routing: sigmoid scores, group top-k, expert mask (arange % N == idx) in i64") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const int64_t T = 12, H = 32, E = 16, G = 4, TOPK_GROUPS = 2, K = 4;
    Graph g("deepseek_routing");
    Tensor x = input(g, "x", DType::F32, {T, H});
    Tensor w = weight(g, "w_router", DType::F32, {E, H});
    Tensor bias = weight(g, "e_score_correction_bias", DType::F32, {E});
    // logits = x w^T, with the sigmoid as the GEMM's epilogue.
    GemmAttr router;
    router.epilogue.instrs = {constant_instr(-1.4426950408889634), instr(Op::Mul, 0, 1), instr(Op::Exp2, 2),
                              constant_instr(1.0), instr(Op::Add, 3, 4), instr(Op::Recip, 5)};
    Tensor scores(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge()}, router));
    Tensor biased = scores + bias;
    // Group scores: the best expert of each group; keep the top groups.
    Tensor group_scores = biased.reshape({T, G, E / G}).max(-1);
    Tensor top_groups = topk_indices(group_scores, TOPK_GROUPS);  // [T, 2] i64
    // Expert e is in group e / (E/G): a mask from (arange(E) // (E/G)) compared in i64.
    Tensor expert = iota(g, {T, TOPK_GROUPS, E}, 2, DType::I64);
    Tensor expert_group = (expert - expert % static_cast<double>(E / G)) % static_cast<double>(E) ;
    Tensor group_start = top_groups.unsqueeze(-1).expand({T, TOPK_GROUPS, E}) * static_cast<double>(E / G);
    Tensor in_group = equal(expert_group, group_start).cast(DType::F32).sum(1);  // [T, E] 0/1
    Tensor masked = where(equal(in_group, 0.0), -1e30 + 0.0 * biased, biased);
    Tensor top_experts = topk_indices(masked, K);  // [T, K] i64
    // One-hot (arange % E == expert_idx) in i64, weights gathered by a masked sum.
    Tensor onehot = equal(iota(g, {T, K, E}, 2, DType::I64) % static_cast<double>(E),
                          top_experts.unsqueeze(-1).expand({T, K, E}));
    Tensor weights = (onehot.cast(DType::F32) * scores.unsqueeze(1).expand({T, K, E})).sum(-1);
    Tensor norm = weights * recip(weights.sum(-1, true).expand({T, K}) + 1e-20);
    output("top_experts", top_experts);
    output("weights", norm);
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 14, 2, &l).within(1e-5));
    MESSAGE("deepseek-v3 routing on " << std::string(cfg) << "\n" << l.report.to_text());
    for (const lower::KernelInfo& k : l.report.per_kernel)
      if (k.kind == "copy") MESSAGE("copy kernel " << k.name);
    CHECK(l.report.copy_kernels == 0);
  }
}

TEST_CASE("blocks: nvFuser-style RoPE: no kernel only slices, copy kernels only for the cats") {
  // x [2, S, (16 + 2*4) * 32] viewed [2, S, 4, 6, 32] and permuted to [2, 4, 6, S, 32]; split (4, 1, 1)
  // along the group axis into q, k, v; rope on the first 8 dims via slices, neg and cat.
  auto build = [](int64_t S) {
    Graph g("rope");
    const int64_t B = 2, G = 4, D = 32, R = 8;
    Tensor x = input(g, "x", DType::F32, {B, S, (16 + 2 * G) * D});
    Tensor cos = input(g, "cos", DType::F32, {S, R});
    Tensor sin = input(g, "sin", DType::F32, {S, R});
    Tensor heads = x.reshape({B, S, G, 6, D}).permute({0, 2, 3, 1, 4});
    const std::vector<Tensor> qkv = heads.split({4, 1, 1}, 2);
    auto rope = [&](const Tensor& t) {
      const Shape shape = t.shape();
      Shape rot_shape = shape;
      rot_shape.back() = R;
      Tensor rot = t.slice(-1, 0, R), pass = t.slice(-1, R, D);
      Tensor x1 = rot.slice(-1, 0, R / 2), x2 = rot.slice(-1, R / 2, R);
      Tensor rotated = nn::concat({-x2, x1}, -1);
      Tensor c = cos.reshape({1, 1, 1, S, R}).expand(rot_shape), s = sin.reshape({1, 1, 1, S, R}).expand(rot_shape);
      return nn::concat({rot * c + rotated * s, pass}, -1);
    };
    Tensor q = rope(qkv[0]);
    Tensor k = rope(qkv[1]);
    output("q", q.reshape({B, 16, S, D}));
    output("k", k.reshape({B, G, S, D}));
    output("v_sum", qkv[2].reshape({B, G, S, D}).expand({B, G, S, D}) + k.reshape({B, G, S, D}));
    return g;
  };
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const Graph g = build(64);
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 15, 2, &l).within(1e-5));
    MESSAGE("rope on " << std::string(cfg) << "\n" << l.report.to_text());
    // Two cats of two parts per roped tensor. The parts computed by a kernel
    // (-x2, and rot*cos + rotated*sin) are written in place by that kernel;
    // the parts that are views of the input (x1, pass) are copied: four
    // copies, each writing one part of a cat's buffer.
    CHECK(l.report.copy_kernels == 4);
    for (const lower::KernelInfo& k : l.report.per_kernel)
      if (k.kind == "copy") {
        CAPTURE(k.name);
        CHECK(k.name.find("_part") != std::string::npos);
      }
    CHECK(l.report.dram_aliases > 0);
  }
  // The full-size block lowers (timing only) with the same structure.
  const Graph big = build(1024);
  const lower::Lowered l = lower::to_npu(big, target::load_config("tpuv3"), timed(target::load_config("tpuv3")));
  CHECK(l.report.copy_kernels == 4);
  const sim::Report timing = sim::run(l.program, target::load_config("tpuv3"));
  MESSAGE("rope S=1024 on tpuv3: " << l.report.kernels << " kernels, " << timing.cycles << " cycles");
}

TEST_CASE("blocks: llama-3-8B layers compile and lower at full size (timing only), each layer the same kernels") {
  const target::NpuConfig tpu = target::load_config("tpuv3");
  // The first and the last layer may fuse with the embedding and the final
  // norm: the layers between add the same kernels.
  const models::Workload one = models::compile_workload("llama:2", tpu);
  const models::Workload two = models::compile_workload("llama:3", tpu);
  const models::Workload three = models::compile_workload("llama:4", tpu);
  MESSAGE("llama:4 on tpuv3\n" << three.report.lowering.to_text());
  // Each layer adds the same kernels, and the rolled compile finds the layers.
  const int per_layer = two.report.lowering.kernels - one.report.lowering.kernels;
  CHECK(per_layer > 5);
  CHECK(three.report.lowering.kernels == two.report.lowering.kernels + per_layer);
  CHECK(three.report.lowering.copy_kernels - two.report.lowering.copy_kernels ==
        two.report.lowering.copy_kernels - one.report.lowering.copy_kernels);
  CHECK(three.report.compile.roll.loops >= 1);
  for (const lower::KernelInfo& k : three.report.lowering.per_kernel) CHECK(k.spad_bytes <= tpu.spad_bytes());
  CHECK(one.report.sim.cycles > 0);
  CHECK(three.report.sim.cycles > two.report.sim.cycles);
}

