// GEMM operand loads: the k loop is software pipelined (tile i + 1's loads
// come before tile i's array steps), and a prologue over a K^T operand (keys
// read through a transposed view, as in decode attention) loads rows of k
// contiguously and feeds the array with trans_b; a prologue input constant
// along k (a norm's per-row scale) is loaded one value per row; grouped-query
// attention's products load each key and value once per KV head. All compared
// with the interpreter, and asserted on the generated kernels.

#include "lower_test_util.hpp"

#include <spool/nn/nn.hpp>
#include <spool/sim/sim.hpp>

#include <fmt/format.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <array>
#include <atomic>

using namespace spool;
using spool::lower_test::lower_and_run;
using spool::lower_test::constant_instr;
using spool::lower_test::instr;

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

TEST_CASE("gemm: the next k tiles' loads are issued before the current tile's array steps") {
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    // A GEMV with K over 8 array heights: at least two k tiles on any config.
    const int64_t K = std::string(cfg) == "toy" ? 100 : 2100, N = 40;
    Graph g("gemv");
    Tensor x = input(g, "x", DType::F32, {1, K});
    Tensor w = weight(g, "w", DType::F32, {N, K});
    output("y", Tensor(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge()}, GemmAttr{})));
    lower::Lowered l;
    CHECK(lower_and_run(g, cfg, 3, 2, &l).within(1e-5));
    const Order o = order_of(l, "w");
    CHECK(o.matmuls > 0);
    // A GEMV has three operand slots: tiles 0, 1 and 2 load before tile 0 runs.
    CHECK(o.loads_before_first_matmul == 3);
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
    CHECK(lower_and_run(g, cfg, 5, 2, &l).within(1e-5));
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
    CHECK(lower_and_run(g, cfg, 9, 2, &l).within(1e-5));
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

TEST_CASE("gemm: grouped-query attention loads each key once (a group's query heads are one product of group x S rows)") {
  // scores = (q k^T) * 0.5 and out = (p * row) v per KV head, the keys and
  // values read as [Hkv, 1, ..] and broadcast over the G query heads of a
  // group (a literal in the epilogue, a per-row input in the prologue). The
  // same products with keys and values stored once per query head load G
  // copies of them; the broadcast ones must load one.
  const int64_t Hkv = 2, G = 4, D = 32, T = 40;
  auto build = [&](int64_t S, bool per_head_kv) {
    Graph g("gqa");
    Tensor q = input(g, "q", DType::F32, {Hkv, G, S, D});
    Tensor p = input(g, "p", DType::F32, {Hkv, G, S, T});
    Tensor row = input(g, "row", DType::F32, {Hkv, G, S, 1});
    Tensor kt, v;
    if (per_head_kv) {
      kt = input(g, "keys", DType::F32, {Hkv, G, T, D}).transpose(2, 3);
      v = input(g, "values", DType::F32, {Hkv, G, T, D});
    } else {
      kt = input(g, "keys", DType::F32, {Hkv, T, D}).unsqueeze(1).transpose(2, 3).broadcast_to({Hkv, G, D, T});
      v = input(g, "values", DType::F32, {Hkv, T, D}).unsqueeze(1).broadcast_to({Hkv, G, T, D});
    }
    GemmAttr scaled;
    scaled.epilogue.instrs = {constant_instr(0.5), instr(Op::Mul, 0, 1)};
    output("scores", Tensor(&g, g.add(Op::Gemm, {q.edge(), kt.edge()}, scaled)));
    GemmAttr row_scaled;
    row_scaled.a.instrs = {instr(Op::Mul, 0, 1)};
    row_scaled.a_inputs = 2;
    output("out", Tensor(&g, g.add(Op::Gemm, {p.edge(), row.broadcast_to({Hkv, G, S, T}).edge(), v.edge()},
                                   row_scaled)));
    return g;
  };
  for (const char* cfg : {"toy", "tpuv3"}) {
    for (const int64_t S : {int64_t{1}, int64_t{5}}) {
      CAPTURE(cfg);
      CAPTURE(S);
      lower::Lowered grouped, per_head;
      // Tiles by the analytic cost alone (it counts the bytes moved), so that
      // both forms are tiled by the same rule; the simulated choice may trade
      // a second read of the keys for fewer cycles.
      lower::LowerOptions analytic;
      analytic.gemm_simulated_candidates = 1;
      CHECK(lower_and_run(build(S, false), cfg, 11, 2, &grouped, analytic).within(1e-5));
      CHECK(lower_and_run(build(S, true), cfg, 11, 2, &per_head, analytic).within(1e-5));
      // One batch loop (the KV heads) in the grouped GEMMs, two per head.
      auto batch_loops = [](const lower::Lowered& l) {
        size_t most = 0;
        for (const npu::Kernel& k : l.program.kernels)
          most = std::max<size_t>(most, std::count_if(k.loop_vars.begin(), k.loop_vars.end(), [](const std::string& v) {
                                    return v.rfind("batch", 0) == 0;
                                  }));
        return most;
      };
      CHECK(batch_loops(grouped) == 1);
      CHECK(batch_loops(per_head) == 2);
      // The grouped products move at least the G - 1 extra copies of the
      // keys and values fewer bytes.
      const target::NpuConfig config = target::load_config(cfg);
      const int64_t kv_bytes = 2 * Hkv * T * D * 4;
      CHECK(sim::run(grouped.program, config).dram_useful_bytes + (G - 1) * kv_bytes <=
            sim::run(per_head.program, config).dram_useful_bytes);
    }
  }
}

TEST_CASE("gemm: blocks loaded ahead keep their epilogue operands apart") {
  // One k tile and many column blocks of few rows: block j + 2's loads (its
  // bias among them) are issued before block j's steps, so every operand
  // buffer, the epilogue's too, needs a slot per block in flight.
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const int64_t N = std::string(cfg) == "toy" ? 96 : 2048;
    Graph g("gemv_bias");
    Tensor x = input(g, "x", DType::F32, {2, 64});
    Tensor w = weight(g, "w", DType::F32, {N, 64});
    Tensor b = weight(g, "b", DType::F32, {N});
    Tensor r = input(g, "r", DType::F32, {2, N});
    GemmAttr attr;  // x w^T + b + r: a per-column and a full epilogue operand
    attr.epilogue.instrs = {instr(Op::Add, 0, 1), instr(Op::Add, 2, 3)};
    output("y", Tensor(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge(), b.broadcast_to({2, N}).edge(), r.edge()},
                                 attr)));
    lower::LowerOptions analytic;
    analytic.gemm_simulated_candidates = 1;
    for (const lower::LowerOptions& options : {lower::LowerOptions{}, analytic})
      CHECK(lower_and_run(g, cfg, 5, 2, nullptr, options).within(1e-5));
  }
}

TEST_CASE("gemm: every kernel choice (tile, slots, loop order, placement) computes the same values") {
  // Several m blocks and column blocks, several k tiles, a per-column and a
  // full epilogue operand: every path of the generator a choice can take.
  for (const char* cfg : {"toy", "tpuv3", "tpuv4"}) {
    CAPTURE(cfg);
    const bool toy = std::string(cfg) == "toy";
    const int64_t M = toy ? 40 : 300, K = toy ? 70 : 600, N = toy ? 48 : 768;
    Graph g("gemm_choices");
    Tensor x = input(g, "x", DType::F32, {M, K});
    Tensor w = weight(g, "w", DType::F32, {N, K});
    Tensor b = weight(g, "b", DType::F32, {N});
    Tensor r = input(g, "r", DType::F32, {M, N});
    GemmAttr attr;
    attr.epilogue.instrs = {instr(Op::Add, 0, 1), instr(Op::Add, 2, 3)};
    output("y", Tensor(&g, g.add(Op::Gemm,
                                 {x.edge(), w.transpose(0, 1).edge(), b.broadcast_to({M, N}).edge(), r.edge()}, attr)));
    const int64_t tm = toy ? 16 : 64, tn = toy ? 16 : 256, tk = toy ? 16 : 128;
    std::vector<lower::KernelChoice> choices;
    for (int order : {1, 2})
      for (int64_t slots : {1, 2, 3}) {
        lower::KernelChoice c;
        c.tile_m = tm;
        c.tile_n = tn;
        c.tile_k = tk;
        c.order = order;
        c.slots = slots;
        choices.push_back(c);
      }
    lower::KernelChoice spread;
    spread.tile_m = tm;
    spread.cores = 2;
    choices.push_back(spread);
    lower::KernelChoice huge;  // the whole GEMM as one tile: it runs if it fits, else the tuner's tile does
    huge.tile_m = M;
    huge.tile_n = N;
    huge.tile_k = 1 << 20;
    huge.slots = 3;
    choices.push_back(huge);
    for (const lower::KernelChoice& c : choices) {
      CAPTURE(c.to_string());
      lower::LowerOptions options;
      options.choice = [c](const Graph&, NodeId) { return c; };
      lower::Lowered l;
      CHECK(lower_and_run(g, cfg, 7, 2, &l, options).within(1e-5));
      REQUIRE(!l.report.per_kernel.empty());
      const lower::KernelInfo& info = l.report.per_kernel.back();
      if (&c != &choices.back()) {
        CHECK(info.tile.rfind(fmt::format("m{} ", tm), 0) == 0);
      }
      if (c.cores == 2 && target::load_config(cfg).cores > 1) CHECK(info.core_split > 1);
    }
  }
}

TEST_CASE("gemm: one operand slot loads each tile after the previous one's steps, on every path") {
  // One slot cannot hold a tile ahead: the batched column pipeline (one m
  // block, an even number of column blocks, one k tile) and the k loop with
  // a ragged last tile both load a tile only once the steps before it are
  // issued, and the ragged tile's steps cover only its columns.
  for (const char* cfg : {"toy", "tpuv3"}) {
    CAPTURE(cfg);
    const bool toy = std::string(cfg) == "toy";
    const int64_t tm = toy ? 16 : 64, tn = toy ? 8 : 256, tk = toy ? 16 : 128;
    struct Shape3 {
      int64_t batch, m, k, n;
    };
    // Batched, one k tile, two column blocks; then k = 2.4 tiles (ragged).
    for (const Shape3 s : {Shape3{4, tm, tk / 2, 2 * tn}, Shape3{3, tm, tk * 2 + tk / 2 - 2, 2 * tn},
                           Shape3{1, 3 * tm, tk * 2 + 6, 3 * tn}}) {
      CAPTURE(s.batch);
      CAPTURE(s.k);
      Graph g("one_slot");
      Tensor a = input(g, "a", DType::F32, {s.batch, s.m, s.k});
      Tensor b = weight(g, "b", DType::F32, {s.batch, s.k, s.n});
      output("y", Tensor(&g, g.add(Op::Gemm, {a.edge(), b.edge()}, GemmAttr{})));
      for (int order : {1, 2}) {
        CAPTURE(order);
        lower::KernelChoice c;
        c.tile_m = tm;
        c.tile_n = tn;
        c.tile_k = tk;
        c.slots = 1;
        c.order = order;
        lower::LowerOptions options;
        options.choice = [c](const Graph&, NodeId) { return c; };
        lower::Lowered l;
        CHECK(lower_and_run(g, cfg, 11, 2, &l, options).within(1e-5));
        // The choice was taken: every operand buffer has one slot.
        const std::string text = npu::print(l.program);
        CHECK(text.find("spad %A : f32[") != std::string::npos);
        CHECK(text.find("] x1 at") != std::string::npos);
        CHECK(text.find("spad %A : f32[" + std::to_string(tm * tk) + "] x2") == std::string::npos);
      }
    }
  }
}

TEST_CASE("gemm: candidates timed only until they cannot win leave every tile choice as timing them in full") {
  // GEMMs whose candidates differ widely (one row, many columns, ragged
  // edges, an epilogue), on one core and two, with one thread timing the
  // candidates or several (the first wave, timed in full, is as wide as
  // the threads).
  for (const std::string cfg : {"toy", "tpuv3", "tpuv4"}) {
    CAPTURE(cfg);
    const bool toy = cfg == "toy";
    const target::NpuConfig config = target::load_config(cfg);
    Graph g("gemm_shapes");
    const std::vector<std::array<int64_t, 3>> shapes =
        toy ? std::vector<std::array<int64_t, 3>>{{1, 64, 200}, {40, 70, 48}, {96, 128, 24}}
            : std::vector<std::array<int64_t, 3>>{{1, 1024, 8192}, {300, 600, 768}, {512, 2048, 512}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto [M, K, N] = shapes[i];
      Tensor x = input(g, fmt::format("x{}", i), DType::BF16, {M, K});
      Tensor w = weight(g, fmt::format("w{}", i), DType::BF16, {N, K});
      Tensor r = input(g, fmt::format("r{}", i), DType::BF16, {M, N});
      GemmAttr attr;
      attr.epilogue.instrs = {instr(Op::Add, 0, 1)};
      output(fmt::format("y{}", i), Tensor(&g, g.add(Op::Gemm, {x.edge(), w.transpose(0, 1).edge(), r.edge()}, attr)));
    }
    const auto timer = sim::tile_timer(config);
    std::atomic<int> stopped{0};
    lower::LowerOptions early, full;
    early.tile_cycles = [&](const npu::Program& p, int64_t limit) {
      const int64_t c = timer(p, limit);
      if (c > limit) ++stopped;
      return c;
    };
    full.tile_cycles = [&](const npu::Program& p, int64_t) { return timer(p, INT64_MAX); };
    const std::string reference = npu::print(lower::to_npu(g, config, full).program);
    CHECK(npu::print(lower::to_npu(g, config, early).program) == reference);
    {
      tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
      CHECK(npu::print(lower::to_npu(g, config, early).program) == reference);
    }
    CHECK(stopped.load() > 0);  // some candidate was stopped early
  }
}
