// lower::to_npu against the reference interpreter: every LLIR op (the kernel
// ops built by hand, and HLIR primitives as single-op kernels) lowered, run in
// functional simulation on random inputs, and compared with spool::interp at
// several shapes, including sizes that are not multiples of any tile.

#include "lower_test_util.hpp"

#include <spool/ir/kernel.hpp>
#include <spool/nn/nn.hpp>
#include <spool/sim/sim.hpp>

#include <set>

#include <spool/support/error.hpp>

using namespace spool;
using spool::lower_test::timed;
using spool::lower_test::lower_and_run;
using spool::lower_test::constant_instr;
using spool::lower_test::instr;

namespace {


const char* const kConfigs[] = {"toy", "tpuv3"};

}  // namespace

TEST_CASE("lower: elementwise primitives and fused programs match the interpreter") {
  for (const char* cfg : kConfigs) {
    for (Shape shape : {Shape{7}, Shape{5, 13}, Shape{3, 9, 130}, Shape{2, 3, 4, 5}}) {
      CAPTURE(cfg);
      CAPTURE(shape_str(shape));
      Graph g("elementwise");
      Tensor x = input(g, "x", DType::F32, shape), y = input(g, "y", DType::F32, shape);
      output("a", exp2(x) + y * 3.0);
      output("b", where(less_than(x, y), sqrt(maximum(x, 0.0)), recip(y + 4.0)));
      output("c", (x % 0.3) - sin(y));
      output("d", log2(maximum(x, 0.0) + 1.0).cast(DType::BF16));
      // A fused program: silu(x) * y = x * recip(1 + exp2(-x * log2(e))) * y
      ProgramAttr p;
      p.instrs = {constant_instr(-1.4426950408889634), instr(Op::Mul, 0, 2), instr(Op::Exp2, 3),
                  constant_instr(1.0), instr(Op::Add, 4, 5), instr(Op::Recip, 6), instr(Op::Mul, 0, 7),
                  instr(Op::Mul, 8, 1)};
      Tensor f(&g, g.add(Op::Fused, {x.edge(), y.edge()}, p));
      output("f", f);
      CHECK(lower_and_run(g, cfg, 1).within(1e-5));
    }
  }
}

TEST_CASE("lower: integer and bool programs with explicit casts (mod, compare in i64)") {
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("ints");
    Tensor idx = input(g, "idx", DType::I64, {6, 11});
    Tensor ar = iota(g, {6, 11}, 1, DType::I64);
    Tensor mask = equal(ar % 4.0, idx);                        // (arange % N == expert_idx)
    output("mask", mask);
    output("sel", where(logical_not(mask), ar, -ar));
    output("cast", mask.cast(DType::F32) + idx.cast(DType::F32));
    Tensor i32 = input(g, "i32", DType::I32, {6, 11});
    output("i32", maximum(i32 * i32, i32 + i32));
    CHECK(lower_and_run(g, cfg, 3, 4).exactly());
  }
}

TEST_CASE("lower: views are strided reads (permute, slice, expand, reshape)") {
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("views");
    Tensor x = input(g, "x", DType::F32, {6, 10, 12});
    Tensor b = weight(g, "b", DType::F32, {12});
    output("perm", x.permute({2, 0, 1}) * 2.0);
    output("slice", x.slice(1, 2, 9, 3) + x.slice(1, 1, 8, 3));
    output("bias", x + b);
    output("reshape", (x.reshape({60, 12}) + 1.0).reshape({6, 120}));
    output("reshape_perm", (x.permute({1, 0, 2}) * 1.0).reshape({60, 12}).slice(0, 3, 50) - 1.0);
    output("pad", x.pad(2, 1, 3, 0.5) * 2.0);
    CHECK(lower_and_run(g, cfg, 2).within(1e-6));
  }
}

TEST_CASE("lower: a concat that is itself a part of a concat is written into its place") {
  // RoPE's two halves (a concat) transposed into a KV cache (another concat),
  // and an input updated in place: every part lands where the outer concat
  // reads it, with no copy of the inner concat's buffer.
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("nested");
    const Tensor cache = input(g, "cache", DType::F32, {7, 3, 8});
    const Tensor k = input(g, "k", DType::F32, {3, 2, 8});
    const std::vector<Tensor> halves = k.chunk(2, -1);
    const Tensor rotated = nn::concat({halves[0] * 2.0 - halves[1], halves[1] * 3.0 + halves[0]}, -1);
    output("cache", nn::concat({cache.slice(0, 0, 5), rotated.transpose(0, 1)}, 0));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 4, 2, &l).within(1e-6));
    CHECK(l.report.inputs_updated_in_place == 1);
    CHECK(l.report.copy_kernels == 0);
  }
}

TEST_CASE("lower: vector kernels are tiled along their longest axis but the last") {
  // Attention's head-major [heads, S, D] output read token-major as
  // [S, heads * D]: the permute is strided, the reshape after it is not, so
  // the permuted view is copied. Its tiles hold S rows of one head, not one
  // row per head. And a decode step's [heads, 1, D] elementwise kernel takes
  // one tile of all heads, not one tile per head.
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    const int64_t H = 8, S = 64, D = 16;
    Graph g("token_major");
    Tensor x = input(g, "x", DType::F32, {H, S, D});
    Tensor w = weight(g, "w", DType::F32, {H * D, 24});
    output("y", Tensor(&g, g.add(Op::Gemm, {x.permute({1, 0, 2}).reshape({S, H * D}).edge(), w.edge()}, GemmAttr{})));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 4, 2, &l).within(1e-5));
    int copies = 0;
    for (const lower::KernelInfo& k : l.report.per_kernel)
      if (k.kind == "copy") {
        ++copies;
        CHECK(k.tile.rfind("rows " + std::to_string(S) + " ", 0) == 0);
      }
    CHECK(copies == 1);

    Graph step("decode_step");
    Tensor q = input(step, "q", DType::F32, {H, 1, D});
    output("scaled", q * 0.5);
    CHECK(lower_and_run(step, cfg, 5, 2, &l).within(1e-6));
    REQUIRE(l.report.per_kernel.size() == 1);
    CHECK(l.report.per_kernel[0].tile == "rows " + std::to_string(H) + " cols " + std::to_string(D));

    // qwen3's per-head norm of the queries, [S, H, D] normalised over D, and
    // a sum over D: tiles of S rows of one head, not of one token's H heads.
    Graph heads("per_head_norm");
    Tensor t = input(heads, "t", DType::F32, {S, H, D});
    Tensor nw = weight(heads, "nw", DType::F32, {D});
    output("normed", Tensor(&heads, heads.add(Op::RmsNorm, {t.edge(), nw.edge()}, NormAttr{1e-6, false})));
    output("sums", t.sum(-1));
    CHECK(lower_and_run(heads, cfg, 6, 2, &l).within(1e-5));
    REQUIRE(l.report.per_kernel.size() == 2);
    for (const lower::KernelInfo& k : l.report.per_kernel) {
      CAPTURE(k.kind);
      CHECK(k.tile.rfind("rows " + std::to_string(S) + " ", 0) == 0);
    }
  }
}

TEST_CASE("lower: tiles of a transposed view move along DRAM's contiguous axis") {
  // y = x^T * 2, and a softmax kernel over axis 0 of x (BERT's layout
  // normalises scores down a column): each tile row is a DRAM column, so a
  // tile moved row by row would make every element a request of its own;
  // moved column by column, the reads come in runs and the bus moves little
  // more than the bytes of x, once per kernel.
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    const int64_t R = 384, C = 512;
    Graph g("transposed");
    Tensor x = input(g, "x", DType::F32, {R, C});
    output("y", x.transpose(0, 1) * 2.0);
    output("p", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{0})));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 8, 2, &l).within(1e-5));
    const sim::Report r = sim::run(l.program, target::load_config(cfg));
    // x is read twice (two kernels) in runs of a tile's rows; the toy
    // config's short tiles round up to whole requests. Element by element
    // it would be over ten times the bytes.
    CHECK(r.dram_read_bytes <= 3 * R * C * 4);
  }
}

TEST_CASE("lower: reductions, softmax and norms match the interpreter") {
  for (const char* cfg : kConfigs) {
    for (Shape shape : {Shape{5, 13}, Shape{3, 17, 130}, Shape{40}, Shape{40, 3, 24}}) {
      CAPTURE(cfg);
      CAPTURE(shape_str(shape));
      Graph g("rows");
      Tensor x = input(g, "x", DType::F32, shape);
      Tensor w = weight(g, "w", DType::F32, {shape.back()});
      Tensor bias = weight(g, "bias", DType::F32, {shape.back()});
      output("sum_last", x.sum(-1));
      output("max_first", x.max(0));
      // Kernel nodes built by hand.
      output("softmax", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{static_cast<int64_t>(shape.size()) - 1})));
      output("softmax0", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{0})));
      output("rms", Tensor(&g, g.add(Op::RmsNorm, {x.edge(), w.edge()}, NormAttr{1e-6, false})));
      output("rms1", Tensor(&g, g.add(Op::RmsNorm, {x.edge(), w.edge()}, NormAttr{1e-6, true})));
      output("ln", Tensor(&g, g.add(Op::LayerNorm, {x.edge(), w.edge(), bias.edge()}, NormAttr{1e-5, false})));
      ReduceAttr r;  // sum(x * x) * (1/n), along axis 0
      r.kind = Op::SumReduce;
      r.axis = 0;
      r.prologue.instrs = {instr(Op::Mul, 0, 0)};
      r.epilogue.instrs = {constant_instr(0.5), instr(Op::Mul, 0, 1)};
      output("reduce", Tensor(&g, g.add(Op::Reduce, {x.edge()}, r)));
      CHECK(lower_and_run(g, cfg, 4).within(1e-5));
    }
  }
}

TEST_CASE("lower: top-k indices match the interpreter") {
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("topk");
    Tensor x = input(g, "x", DType::F32, {9, 37});
    output("top", Tensor(&g, g.add(Op::TopK, {x.edge()}, TopKAttr{4})));
    output("top1", Tensor(&g, g.add(Op::TopK, {x.permute({1, 0}).edge()}, TopKAttr{1})));
    CHECK(lower_and_run(g, cfg, 5).exactly());
  }
}

TEST_CASE("lower: a top-k of whole integer rows is a sorting network that matches the interpreter") {
  // Rows of a power-of-two length and not (padded lanes), several rows, a
  // transposed view, i32 and i64, and values drawn from a few so that many
  // are equal (equal values go by index). A MoE layer sorts its routed pairs
  // this way.
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("sort");
    Tensor a = input(g, "a", DType::I64, {64});
    Tensor b = input(g, "b", DType::I64, {3, 100});
    Tensor c = input(g, "c", DType::I32, {70, 2});
    output("a", Tensor(&g, g.add(Op::TopK, {(a % 5.0).edge()}, TopKAttr{64})));
    output("b", Tensor(&g, g.add(Op::TopK, {(b % 7.0).edge()}, TopKAttr{100})));
    output("c", Tensor(&g, g.add(Op::TopK, {c.permute({1, 0}).edge()}, TopKAttr{70})));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 7, 2, &l).exactly());
    int sorts = 0;
    for (const lower::KernelInfo& k : l.report.per_kernel) sorts += k.tile.rfind("sort ", 0) == 0;
    CHECK(sorts == 3);
  }
}

TEST_CASE("lower: gather (top-k values, embedding rows) matches the interpreter") {
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("gather");
    Tensor x = input(g, "x", DType::F32, {9, 37});
    const nn::TopK top = nn::topk(x, 3);
    output("values", top.values);
    output("indices", top.indices);
    Tensor table = weight(g, "table", DType::F32, {50, 16});
    Tensor ids = input(g, "ids", DType::I64, {7});
    output("rows", nn::embedding(ids, table));
    Tensor idx0 = input(g, "idx0", DType::I32, {5, 37});
    output("axis0", gather(x, idx0, 0));
    CHECK(lower_and_run(g, cfg, 9, 9).within(1e-6));
  }
  // An index out of range is a runtime error naming the kernel, not a crash.
  Graph bad("bad_gather");
  Tensor t = weight(bad, "t", DType::F32, {4, 8});
  Tensor i = input(bad, "i", DType::I64, {4, 2});
  output("y", gather(t, i, 1));
  const target::NpuConfig toy = target::load_config("toy");
  const lower::Lowered l = lower::to_npu(bad, toy, timed(toy));
  interp::Env env = interp::random_inputs(bad, 1);
  env["i"].set_int(3, 8);
  CHECK_THROWS_WITH_AS(sim::run_functional(l.program, toy, l.inputs, l.outputs, env), doctest::Contains("out of range"), Error);
}

TEST_CASE("lower: GEMM with prologues and epilogue, batched, ragged, transposed operands") {
  for (const char* cfg : kConfigs) {
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{16, 16, 16}, {37, 20, 19}, {3, 1, 300},
                           {130, 264, 70}, {300, 20, 1000}}) {
      CAPTURE(cfg);
      CAPTURE(M);
      CAPTURE(K);
      CAPTURE(N);
      Graph g("gemm");
      Tensor a = input(g, "a", DType::F32, {M, K});
      Tensor w = weight(g, "w", DType::F32, {N, K});
      Tensor bias = weight(g, "bias", DType::F32, {N});
      Tensor res = input(g, "res", DType::F32, {M, N});
      output("plain", Tensor(&g, g.add(Op::Gemm, {a.edge(), w.transpose(0, 1).edge()}, GemmAttr{})));
      GemmAttr fused;  // relu(a*2 @ w^T + bias + res)
      fused.a.instrs = {constant_instr(2.0), instr(Op::Mul, 0, 1)};
      fused.epilogue.instrs = {instr(Op::Add, 0, 1), instr(Op::Add, 3, 2), constant_instr(0.0), instr(Op::Max, 4, 5)};
      output("fused", Tensor(&g, g.add(Op::Gemm, {a.edge(), w.transpose(0, 1).edge(), bias.broadcast_to({M, N}).edge(),
                                                  res.edge()},
                                       fused)));
      CHECK(lower_and_run(g, cfg, 6).within(1e-5));
    }
  }
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("bmm");
    Tensor q = input(g, "q", DType::F32, {3, 33, 24});
    Tensor k = input(g, "k", DType::F32, {3, 40, 24});
    output("scores", Tensor(&g, g.add(Op::Gemm, {q.edge(), k.transpose(1, 2).edge()}, GemmAttr{})));
    Tensor x = input(g, "x", DType::BF16, {2, 19, 21});
    Tensor y = input(g, "y", DType::BF16, {2, 21, 12});
    output("bf16", Tensor(&g, g.add(Op::Gemm, {x.edge(), y.edge()}, GemmAttr{})));
    CHECK(lower_and_run(g, cfg, 7).within(2e-2));
  }
}

TEST_CASE("lower: multi-core: independent GEMM tiles are spread over the cores and still compute the same values") {
  const target::NpuConfig v4 = target::load_config("tpuv4");
  REQUIRE(v4.cores == 2);
  Graph g("multicore");
  Tensor a = input(g, "a", DType::F32, {1024, 256});
  Tensor w = weight(g, "w", DType::F32, {256, 512});
  Tensor q = input(g, "q", DType::F32, {4, 300, 64});
  Tensor k = input(g, "k", DType::F32, {4, 200, 64});
  output("mm", Tensor(&g, g.add(Op::Gemm, {a.edge(), w.edge()}, GemmAttr{})));
  output("bmm", Tensor(&g, g.add(Op::Gemm, {q.edge(), k.transpose(1, 2).edge()}, GemmAttr{})));
  Tensor x = input(g, "x", DType::F32, {700, 512});
  output("softmax", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{1})));
  output("ew", q * 2.0 + 1.0);
  lower::Lowered l;
  CHECK(lower_and_run(g, "tpuv4", 8, 2, &l).within(1e-5));
  int split = 0;
  for (const lower::KernelInfo& info : l.report.per_kernel) split += info.core_split > 1;
  CHECK(split >= 2);  // the 1024-row GEMM and the 700-row softmax: far more work than a launch
  // The split kernels of one node have no dependency on each other and run on different cores.
  const sim::Report r = sim::run(l.program, v4);
  std::set<int> cores;
  for (const sim::KernelStats& s : r.kernel_stats) cores.insert(s.core);
  CHECK(cores.size() == 2);
  lower::LowerOptions single;
  single.multi_core = false;
  const lower::Lowered one = lower::to_npu(g, v4, timed(v4, single));
  CHECK(one.program.kernels.size() == 5);  // mm, bmm, softmax, mul, add
  // Without a tile timer the analytic estimate picks the GEMM tiles and
  // nothing is spread (spreading is decided by timing both forms); the
  // values are the same.
  const lower::Lowered untimed = lower::to_npu(g, v4);
  CHECK(untimed.program.kernels.size() == 5);
  const interp::Env env = interp::random_inputs(g, 8);
  const sim::Executed got = sim::run_functional(untimed.program, v4, untimed.inputs, untimed.outputs, env);
  CHECK(test::allclose(got.outputs, interp::run(g, env), {.stol = 1e-5}));
}

TEST_CASE("lower: a softmax that is a GEMM's only reader runs in its epilogue, along rows or down columns") {
  // Attention as BERT writes it (scores = k q^T, softmax down the keys) and
  // as decoders do (softmax along the keys of q k^T); and a batched product
  // whose B operand is broadcast over the batch (batches folded into M for a
  // plain GEMM, kept apart when a softmax normalises the columns).
  for (const char* cfg : kConfigs) {
    for (int64_t axis : {1, 2}) {
      for (bool broadcast : {false, true}) {
        CAPTURE(cfg);
        CAPTURE(axis);
        CAPTURE(broadcast);
        Graph g("softmax_epilogue");
        Tensor k = input(g, "k", DType::F32, {3, 40, 16});
        Tensor q = input(g, "q", DType::F32, {broadcast ? 1 : 3, 33, 16});
        Tensor qt = q.transpose(1, 2);
        if (broadcast) qt = qt.expand({3, 16, 33});
        GemmAttr scaled;  // the scale in the GEMM's epilogue, as the rules fuse it
        scaled.epilogue.instrs = {constant_instr(0.25), instr(Op::Mul, 0, 1)};
        Tensor scores(&g, g.add(Op::Gemm, {k.edge(), qt.edge()}, scaled));
        output("p", Tensor(&g, g.add(Op::Softmax, {scores.edge()}, AxisAttr{axis})));
        lower::Lowered l;
        CHECK(lower_and_run(g, cfg, 12, 2, &l).within(1e-5));
        CHECK(l.program.kernels.size() == 1);
        REQUIRE(l.report.per_kernel.size() == 1);
        CHECK(l.report.per_kernel[0].fused);
        // Down the columns the tile spans all 40 rows.
        if (axis == 1) CHECK(l.report.per_kernel[0].tile.rfind("m40 ", 0) == 0);
      }
    }
  }
  // No tile spans the columns within the budget: the softmax is a kernel of its own.
  lower::LowerOptions options;
  options.spad_budget = 24 << 10;
  Graph g("softmax_apart");
  Tensor a = input(g, "a", DType::F32, {600, 32});
  Tensor b = weight(g, "b", DType::F32, {32, 24});
  output("p", Tensor(&g, g.add(Op::Softmax, {Tensor(&g, g.add(Op::Gemm, {a.edge(), b.edge()}, GemmAttr{})).edge()},
                               AxisAttr{0})));
  lower::Lowered l;
  CHECK(lower_and_run(g, "toy", 13, 2, &l, options).within(1e-5));
  CHECK(l.program.kernels.size() == 2);
  // Nor with fusion disabled (the softmax, not the GEMM, writes the output).
  lower::LowerOptions unfused;
  unfused.fuse = false;
  CHECK(lower_and_run(g, "toy", 13, 2, &l, unfused).within(1e-5));
  CHECK(l.program.kernels.size() == 2);
}

TEST_CASE("lower: small scratchpad budgets force ragged row and column tiles, same values") {
  // With a few KiB per kernel every generator tiles rows and columns with
  // ragged edges (and the GEMM shrinks to its smallest tiles).
  for (int64_t budget : {int64_t{6} << 10, int64_t{20} << 10}) {
    CAPTURE(budget);
    lower::LowerOptions options;
    options.spad_budget = budget;
    Graph g("ragged");
    Tensor x = input(g, "x", DType::F32, {3, 37, 201});
    Tensor y = input(g, "y", DType::F32, {3, 37, 201});
    Tensor w = weight(g, "w", DType::F32, {201});
    output("ew", (x * y + 1.0).permute({0, 2, 1}) * 2.0);
    output("sum", x.sum(1));
    output("max", x.max(2));
    output("softmax", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{2})));
    output("rms", Tensor(&g, g.add(Op::RmsNorm, {x.edge(), w.edge()}, NormAttr{1e-6, false})));
    output("copy", Tensor(&g, g.add(Op::Copy, {x.permute({2, 0, 1}).edge()}, NoAttr{})));
    Tensor a = input(g, "a", DType::F32, {45, 70});
    Tensor b = weight(g, "b", DType::F32, {70, 29});
    output("gemm", Tensor(&g, g.add(Op::Gemm, {a.edge(), b.edge()}, GemmAttr{})));
    lower::Lowered l;
    CHECK(lower_and_run(g, "toy", 10, 2, &l, options).within(1e-5));
    for (const lower::KernelInfo& k : l.report.per_kernel) {
      CAPTURE(k.name);
      CAPTURE(k.tile);
      CHECK(k.spad_bytes <= budget);
    }
  }
}

TEST_CASE("lower: reductions down a strided axis run down the rows, without a transposing load") {
  // softmax over axis -2 and sums over axes 0 and 1 of row-major tensors:
  // the contiguous last axis stays the columns (lanes), the reduction runs
  // down the rows (reduce.*.rows); values as the interpreter's.
  Graph g("down");
  Tensor x = input(g, "x", DType::F32, {3, 40, 70});
  Tensor y = input(g, "y", DType::F32, {300, 24});
  output("softmax", Tensor(&g, g.add(Op::Softmax, {x.edge()}, AxisAttr{1})));
  output("sum0", y.sum(0));
  output("max1", x.max(1));
  output("sum_last", y.sum(1));  // contiguous: across the columns, as before
  for (const char* config : {"toy", "tpuv3"}) {
    CAPTURE(config);
    lower::Lowered l;
    CHECK(lower_and_run(g, config, 4, 2, &l).within(1e-5));
    const std::string text = npu::print(l.program);
    CHECK(text.find("reduce.max.rows") != std::string::npos);
    CHECK(text.find("reduce.sum.rows") != std::string::npos);
    CHECK(text.find("reduce.sum %") != std::string::npos);
  }
}

TEST_CASE("lower: batched GEMMs carry their column pipeline across batches, same values") {
  // Attention-shaped products: each batch one m block of two column blocks,
  // so a batch's last store waits until the next batch's first block is
  // computed (the batch loop is peeled: 16 batches run as 1 + a loop of 15).
  Graph g("bmm");
  Tensor k = input(g, "k", DType::F32, {16, 512, 64});
  Tensor q = input(g, "q", DType::F32, {16, 512, 64});
  output("scores", Tensor(&g, g.add(Op::Gemm, {k.edge(), q.transpose(1, 2).edge()}, GemmAttr{})));
  lower::Lowered l;
  CHECK(lower_and_run(g, "tpuv3", 5, 2, &l).within(1e-5));
  CHECK(npu::print(l.program).find("for batch0 in 0..15 {") != std::string::npos);
  // Smaller and ragged shapes on toy, with and without the chained form.
  for (auto [B, M, K, N] : {std::array<int64_t, 4>{3, 8, 16, 64}, {5, 8, 8, 48}, {2, 40, 12, 24}, {4, 7, 9, 33}}) {
    CAPTURE(B);
    CAPTURE(N);
    Graph h("bmm_small");
    Tensor a = input(h, "a", DType::F32, {B, M, K});
    Tensor b = input(h, "b", DType::F32, {B, K, N});
    output("c", Tensor(&h, h.add(Op::Gemm, {a.edge(), b.edge()}, GemmAttr{})));
    lower::Lowered small;
    CHECK(lower_and_run(h, "toy", 6, 2, &small).within(1e-5));
    const bool chained = npu::print(small.program).find(fmt::format("for batch0 in 0..{} {{", B - 1)) != std::string::npos;
    if (N == 64) CHECK(chained);        // an even number of whole column blocks per batch
    if (N == 33) CHECK_FALSE(chained);  // a ragged column block: the plain batch loop
  }
}

TEST_CASE("lower: top-k ranks NaN as the interpreter does (largest, ties to the lower index)") {
  // Rows with NaNs, infinities and ties: the k-rounds form (k = 3 of 20)
  // and the sorting network (all 64 of 64), their indices exactly equal to
  // the interpreter's.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (auto [cols, k] : {std::pair<int64_t, int64_t>{20, 3}, {64, 64}}) {
    CAPTURE(cols);
    Graph g("topk_nan");
    const Tensor x = input(g, "x", DType::F32, {4, cols});
    output("i", topk_indices(x, k));
    interp::Env env;
    interp::HostTensor values(DType::F32, {4, cols});
    for (int64_t i = 0; i < values.size(); ++i) {
      const int64_t r = i / cols, c = i % cols;
      double v = static_cast<double>((c * 7 + r * 3) % 11) - 5.0;
      if ((c + r) % 9 == 4) v = nan;
      if (c == 5 && r == 2) v = inf;
      if (c == 6 && r == 3) v = -inf;
      values.set(i, v);
    }
    env.emplace("x", values);
    const auto want = interp::run(g, env);
    for (const char* config : {"toy", "tpuv3"}) {
      CAPTURE(config);
      const target::NpuConfig npu = target::load_config(config);
      const lower::Lowered l = lower::to_npu(g, npu, timed(npu));
      const sim::Executed got = sim::run_functional(l.program, npu, l.inputs, l.outputs, env);
      CHECK(test::allclose(got.outputs.at("i"), want.at("i")));
    }
  }
}
