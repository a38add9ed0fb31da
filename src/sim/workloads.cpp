// Built-in workloads as hand-written, config-tiled NPU kernels (see
// workloads.hpp). Three kernel templates cover them all: a tiled GEMM with an
// optional bias / residual / ReLU epilogue, a row-wise kernel (softmax,
// LayerNorm), and fused attention. Kernel dependencies are derived from the
// DRAM buffers each kernel reads and writes.

#include <spool/sim/workloads.hpp>

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace spool::sim {
namespace {

using namespace spool::npu;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
Affine C(int64_t v) { return Affine::of(v); }
Affine V(int id, int64_t coeff = 1) { return Affine::var(id, coeff); }

// Extent of tile `index` (0..tiles-1) of `tile` elements out of `total`:
// min(tile, total - tile * index), simplified where it is constant.
Extent ragged(int64_t tile, int64_t total, const Affine& index, int64_t tiles) {
  if (tiles == 1) return Extent::of(std::min(tile, total));
  if (total % tile == 0) return Extent::of(tile);
  if (index.is_constant()) return Extent::of(std::min(tile, total - tile * index.constant));
  return Extent::min(C(tile), C(total) + index * -tile);
}

SpadRef ref(int buffer, Affine slot, Affine offset, int64_t ld = 0) {
  return SpadRef{buffer, std::move(slot), std::move(offset), ld};
}

Stmt dma(bool load, int dram, Affine dram_offset, std::vector<int64_t> dram_strides, SpadRef spad,
         std::vector<int64_t> spad_strides, std::vector<Extent> dims, int tag) {
  DmaOp d;
  d.load = load;
  d.dram = dram;
  d.dram_offset = std::move(dram_offset);
  d.dram_strides = std::move(dram_strides);
  d.spad = std::move(spad);
  d.spad_strides = std::move(spad_strides);
  d.dims = std::move(dims);
  d.tag = tag;
  return Stmt{std::move(d)};
}

class ProgramBuilder {
 public:
  ProgramBuilder(std::string name, const NpuConfig& config) {
    program.name = std::move(name);
    program.spad_bytes = config.spad_bytes();
  }

  int buffer(std::string name, Shape shape, BufferKind kind) {
    program.buffers.push_back(DramBuffer{std::move(name), DType::F32, std::move(shape), kind, -1, 0});
    return static_cast<int>(program.buffers.size()) - 1;
  }
  int alias(std::string name, int root, Shape shape) {
    program.buffers.push_back(
        DramBuffer{std::move(name), DType::F32, std::move(shape), program.buffers[root].kind, root, 0});
    return static_cast<int>(program.buffers.size()) - 1;
  }

  // Appends a kernel depending on every earlier kernel it conflicts with in
  // DRAM (read after write, write after read, write after write), minus the
  // ones already implied through another dependency.
  void add(Kernel kernel) {
    auto access = [&](const Kernel& k, std::set<int>& reads, std::set<int>& writes) {
      for_each_stmt(k.body, [&](const Stmt& s) {
        if (const auto* d = std::get_if<DmaOp>(&s.node)) (d->load ? reads : writes).insert(program.root_of(d->dram));
      });
    };
    std::set<int> reads, writes;
    access(kernel, reads, writes);
    std::vector<int> direct;
    for (size_t j = 0; j < program.kernels.size(); ++j) {
      std::set<int> r, w;
      access(program.kernels[j], r, w);
      bool conflict = false;
      for (int b : reads) conflict = conflict || w.count(b);
      for (int b : writes) conflict = conflict || w.count(b) || r.count(b);
      if (conflict) direct.push_back(static_cast<int>(j));
    }
    std::set<int> implied;
    for (int d : direct) ancestors(d, implied);
    for (int d : direct)
      if (!implied.count(d)) kernel.deps.push_back(d);
    program.kernels.push_back(std::move(kernel));
  }

  Program program;

 private:
  void ancestors(int k, std::set<int>& out) const {
    for (int d : program.kernels[k].deps)
      if (out.insert(d).second) ancestors(d, out);
  }
};

class KernelBuilder {
 public:
  KernelBuilder(std::string name, int64_t spad_bytes) : spad_bytes_(spad_bytes) { kernel_.name = std::move(name); }

  int spad(std::string name, int64_t elements, int slots) {
    SpadBuffer b{std::move(name), DType::F32, elements, slots, next_};
    next_ += ceil_div(b.footprint_bytes(), kAlign) * kAlign;
    SPOOL_ASSERT(next_ <= spad_bytes_, "kernel '{}' over-allocates the scratchpad", kernel_.name);
    kernel_.spad.push_back(std::move(b));
    return static_cast<int>(kernel_.spad.size()) - 1;
  }
  static int64_t aligned(int64_t bytes) { return ceil_div(bytes, kAlign) * kAlign; }

  int loop_begin(std::string name, int64_t trips) {
    const int var = static_cast<int>(kernel_.loop_vars.size());
    kernel_.loop_vars.push_back(std::move(name));
    open_.push_back(LoopOp{var, trips, {}});
    return var;
  }
  void loop_end() {
    LoopOp loop = std::move(open_.back());
    open_.pop_back();
    emit(Stmt{std::move(loop)});
  }
  void emit(Stmt s) { (open_.empty() ? kernel_.body : open_.back().body).push_back(std::move(s)); }

  Kernel finish() {
    SPOOL_ASSERT(open_.empty(), "kernel '{}' has an open loop", kernel_.name);
    return std::move(kernel_);
  }

 private:
  static constexpr int64_t kAlign = 64;
  Kernel kernel_;
  int64_t spad_bytes_;
  int64_t next_ = 0;
  std::vector<LoopOp> open_;
};

class VecBuilder {
 public:
  VecBuilder(std::string label, Extent rows, Extent cols) {
    v.label = std::move(label);
    v.rows = std::move(rows);
    v.cols = std::move(cols);
  }
  int load(std::string name, SpadRef r, LoadBroadcast broadcast = LoadBroadcast::Full) {
    VecInstr in;
    in.name = std::move(name);
    in.op = VecOp::Load;
    in.ref = std::move(r);
    in.broadcast = broadcast;
    return push(std::move(in));
  }
  int constant(std::string name, double value) {
    VecInstr in;
    in.name = std::move(name);
    in.op = VecOp::Const;
    in.literal = value;
    return push(std::move(in));
  }
  int op(std::string name, VecOp op, std::vector<int> operands) {
    VecInstr in;
    in.name = std::move(name);
    in.op = op;
    in.operands = std::move(operands);
    return push(std::move(in));
  }
  void store(SpadRef r, int value) { v.stores.push_back(VecStore{std::move(r), value}); }
  Stmt done() { return Stmt{std::move(v)}; }

 private:
  int push(VecInstr in) {
    v.body.push_back(std::move(in));
    return static_cast<int>(v.body.size()) - 1;
  }
  VectorOp v;
};

constexpr int kLoadTag = 0;
constexpr int kStoreTag = 1;

// ---- GEMM ---------------------------------------------------------------------

struct GemmSpec {
  std::string name;
  int a = -1, b = -1, out = -1;
  int bias = -1, residual = -1;
  bool relu = false;
  bool b_transposed = false;  // b is N x K (a Linear weight), else K x N
  int64_t M = 0, K = 0, N = 0;
};

// out[M x N] = a[M x K] * b (+ bias) (+ residual) (ReLU). Loops: column
// blocks of TN columns (sub-blocks of the array's width), m blocks of
// TM rows streamed through the arrays, k tiles of the array's rows; the
// sub-blocks of a column block go to whichever array is free first. The first
// k step overwrites the accumulators, the rest accumulate; the epilogue runs
// in place on the accumulator tile before it is stored.
void emit_gemm(ProgramBuilder& pb, const NpuConfig& c, const GemmSpec& g) {
  const int64_t Nr = c.systolic.rows, Nc = c.systolic.cols;
  const int64_t TK = std::min(Nr, g.K);
  const int64_t budget = pb.program.spad_bytes;
  auto footprint = [&](int64_t TM, int64_t TN) {
    int64_t bytes = KernelBuilder::aligned(2 * TM * TK * 4) + KernelBuilder::aligned(2 * TK * TN * 4) +
                    KernelBuilder::aligned(2 * TM * TN * 4);
    if (g.residual >= 0) bytes += KernelBuilder::aligned(2 * TM * TN * 4);
    if (g.bias >= 0) bytes += KernelBuilder::aligned(2 * TN * 4);
    return bytes;
  };
  // Tile choice: the (TM, TN) that fits the scratchpad with the least DRAM
  // traffic: a is read once per column block, b once per m block. Column
  // blocks are whole multiples of arrays * array columns (one sub-block per
  // array at least); ties go to the longer stream (larger TM).
  const int64_t unit = std::min(c.systolic.arrays * Nc, g.N);
  int64_t TM = 0, TN = 0;
  double best = 0;
  for (int64_t tn = unit;; tn *= 2) {
    const int64_t tn_eff = std::min(tn, g.N);
    for (int64_t tm = 1;; tm *= 2) {
      const int64_t tm_eff = std::min(tm, g.M);
      if (tm_eff <= 4096 && footprint(tm_eff, tn_eff) <= budget) {
        const double traffic = static_cast<double>(ceil_div(g.N, tn_eff)) * static_cast<double>(g.M * g.K) +
                               static_cast<double>(ceil_div(g.M, tm_eff)) * static_cast<double>(g.K * g.N);
        if (TM == 0 || traffic < best || (traffic == best && tm_eff > TM)) {
          TM = tm_eff;
          TN = tn_eff;
          best = traffic;
        }
      }
      if (tm_eff == g.M) break;
    }
    if (tn_eff == g.N) break;
  }
  if (TM == 0)
    fail("workload kernel '{}': a {}x{} tile does not fit the {}-byte scratchpad", g.name, TK, unit, budget);
  const int64_t MT = ceil_div(g.M, TM), KT = ceil_div(g.K, TK);

  KernelBuilder kb(g.name, budget);
  const int A = kb.spad("A", TM * TK, 2);
  const int B = kb.spad("B", TK * TN, 2);
  const int Cb = kb.spad("C", TM * TN, 2);
  const int R = g.residual >= 0 ? kb.spad("R", TM * TN, 2) : -1;
  const int Bi = g.bias >= 0 ? kb.spad("bias", TN, 2) : -1;

  // One output block (m block `mt` of a column block): the residual load, the
  // k steps and the epilogue. Its store is emitted separately so the loads
  // of the next block can be issued before it.
  auto compute = [&](const Affine& n0, int64_t W, const Affine& block, const Affine& mt) {
    const Affine cslot = block * MT + mt;
    const Extent m_ext = ragged(TM, g.M, mt, MT);
    const Affine row0 = mt * TM;
    if (R >= 0)
      kb.emit(dma(true, g.residual, row0 * g.N + n0, {g.N, 1}, ref(R, cslot, C(0)), {TN, 1}, {m_ext, Extent::of(W)},
                  kLoadTag));
    auto k_step = [&](const Affine& kidx, bool accumulate, const Affine& slot) {
      const Extent k_ext = ragged(TK, g.K, kidx, KT);
      kb.emit(dma(true, g.a, row0 * g.K + kidx * TK, {g.K, 1}, ref(A, slot, C(0)), {TK, 1}, {m_ext, k_ext}, kLoadTag));
      if (g.b_transposed)
        kb.emit(dma(true, g.b, n0 * g.K + kidx * TK, {g.K, 1}, ref(B, slot, C(0)), {TK, 1}, {Extent::of(W), k_ext},
                    kLoadTag));
      else
        kb.emit(dma(true, g.b, kidx * (TK * g.N) + n0, {g.N, 1}, ref(B, slot, C(0)), {TN, 1}, {k_ext, Extent::of(W)},
                    kLoadTag));
      for (int64_t u = 0; u * Nc < W; ++u) {
        MatmulOp mm;
        mm.m = m_ext;
        mm.k = k_ext;
        mm.n = Extent::of(std::min(Nc, W - Nc * u));
        mm.c = ref(Cb, cslot, C(Nc * u), TN);
        mm.a = ref(A, slot, C(0), TK);
        mm.b = g.b_transposed ? ref(B, slot, C(Nc * u * TK), TK) : ref(B, slot, C(Nc * u), TN);
        mm.trans_b = g.b_transposed;
        mm.accumulate = accumulate;
        kb.emit(Stmt{std::move(mm)});
      }
    };
    const Affine slot0 = cslot * KT;
    k_step(C(0), false, slot0);
    if (KT > 1) {
      const int kk = kb.loop_begin("k", KT - 1);
      k_step(V(kk) + C(1), true, slot0 + V(kk) + C(1));
      kb.loop_end();
    }
    if (Bi >= 0 || R >= 0 || g.relu) {
      VecBuilder vb("epilogue", m_ext, Extent::of(W));
      int acc = vb.load("acc", ref(Cb, cslot, C(0), TN));
      if (Bi >= 0) acc = vb.op("biased", VecOp::Add, {acc, vb.load("bias", ref(Bi, block, C(0), 1), LoadBroadcast::Col)});
      if (R >= 0) acc = vb.op("residual", VecOp::Add, {acc, vb.load("res", ref(R, cslot, C(0), TN))});
      if (g.relu) acc = vb.op("relu", VecOp::Max, {acc, vb.constant("zero", 0.0)});
      vb.store(ref(Cb, cslot, C(0), TN), acc);
      kb.emit(vb.done());
    }
  };
  auto store = [&](const Affine& n0, int64_t W, const Affine& block, const Affine& mt) {
    kb.emit(dma(false, g.out, mt * (TM * g.N) + n0, {g.N, 1}, ref(Cb, block * MT + mt, C(0)), {TN, 1},
                {ragged(TM, g.M, mt, MT), Extent::of(W)}, kStoreTag));
  };
  auto load_bias = [&](const Affine& n0, int64_t W, const Affine& block) {
    if (Bi >= 0) kb.emit(dma(true, g.bias, n0, {1}, ref(Bi, block, C(0)), {1}, {Extent::of(W)}, kLoadTag));
  };

  // The DMA engine runs in order, so a block's store (which waits for the
  // block's epilogue) is issued after the next block's loads: software
  // pipelining over the m blocks of a column block, or, with one m block,
  // over the column blocks (the C tile has two slots).
  const int64_t full_blocks = g.N / TN, rest = g.N % TN;
  if (MT > 1) {
    auto column_block = [&](const Affine& n0, int64_t W, const Affine& block) {
      load_bias(n0, W, block);
      compute(n0, W, block, C(0));
      const int mm = kb.loop_begin("m", MT - 1);
      compute(n0, W, block, V(mm) + C(1));
      store(n0, W, block, V(mm));
      kb.loop_end();
      store(n0, W, block, C(MT - 1));
    };
    if (full_blocks > 0) {
      const int nt = kb.loop_begin("n", full_blocks);
      column_block(V(nt, TN), TN, V(nt));
      kb.loop_end();
    }
    if (rest > 0) column_block(C(full_blocks * TN), rest, C(full_blocks));
  } else {
    auto column = [&](const Affine& block, int64_t W) {
      load_bias(block * TN, W, block);
      compute(block * TN, W, block, C(0));
    };
    if (full_blocks > 0) {
      column(C(0), TN);
      if (full_blocks > 1) {
        const int nn = kb.loop_begin("n", full_blocks - 1);
        column(V(nn) + C(1), TN);
        store(V(nn, TN), TN, V(nn), C(0));
        kb.loop_end();
      }
    }
    if (rest > 0) column(C(full_blocks), rest);
    if (full_blocks > 0) store(C((full_blocks - 1) * TN), TN, C(full_blocks - 1), C(0));
    if (rest > 0) store(C(full_blocks * TN), rest, C(full_blocks), C(0));
  }
  kb.emit(Stmt{WaitOp{kStoreTag}});
  pb.add(kb.finish());
}

// ---- row kernels: softmax and LayerNorm ------------------------------------------

enum class RowKind { Softmax, LayerNorm };

// out[R x C] = softmax(in * scale) or LayerNorm(in) * gamma + beta, row tiles
// of TR rows, computed in place in the double-buffered tile.
void emit_rows(ProgramBuilder& pb, const NpuConfig& c, const std::string& name, RowKind kind, int in, int out,
               int64_t R, int64_t Cols, int gamma = -1, int beta = -1) {
  const int64_t budget = pb.program.spad_bytes;
  auto footprint = [&](int64_t TR) {
    return KernelBuilder::aligned(2 * TR * Cols * 4) + (kind == RowKind::LayerNorm ? 2 * KernelBuilder::aligned(Cols * 4) : 0);
  };
  int64_t TR = std::min<int64_t>(R, c.vector.lanes);
  while (TR > 1 && footprint(TR) > budget) TR = (TR + 1) / 2;
  if (footprint(TR) > budget)
    fail("workload kernel '{}': a row of {} elements does not fit the {}-byte scratchpad", name, Cols, budget);
  const int64_t RT = ceil_div(R, TR);

  KernelBuilder kb(name, budget);
  const int X = kb.spad("X", TR * Cols, 2);
  int G = -1, Bt = -1;
  if (kind == RowKind::LayerNorm) {
    G = kb.spad("gamma", Cols, 1);
    Bt = kb.spad("beta", Cols, 1);
    kb.emit(dma(true, gamma, C(0), {1}, ref(G, C(0), C(0)), {1}, {Extent::of(Cols)}, kLoadTag));
    kb.emit(dma(true, beta, C(0), {1}, ref(Bt, C(0), C(0)), {1}, {Extent::of(Cols)}, kLoadTag));
  }
  auto load = [&](const Affine& r) {
    kb.emit(dma(true, in, r * (TR * Cols), {Cols, 1}, ref(X, r, C(0)), {Cols, 1},
                {ragged(TR, R, r, RT), Extent::of(Cols)}, kLoadTag));
  };
  auto compute = [&](const Affine& r) {
    const SpadRef tile = ref(X, r, C(0), Cols);
    VecBuilder vb(kind == RowKind::Softmax ? "softmax" : "layernorm", ragged(TR, R, r, RT), Extent::of(Cols));
    const int x = vb.load("x", tile);
    if (kind == RowKind::Softmax) {
      const int m = vb.op("max", VecOp::ReduceMax, {x});
      const int e = vb.op("e", VecOp::Exp, {vb.op("shifted", VecOp::Sub, {x, m})});
      const int s = vb.op("sum", VecOp::ReduceSum, {e});
      vb.store(tile, vb.op("y", VecOp::Mul, {e, vb.op("inv", VecOp::Recip, {s})}));
    } else {
      const int inv_n = vb.constant("inv_n", 1.0 / static_cast<double>(Cols));
      const int mean = vb.op("mean", VecOp::Mul, {vb.op("sum", VecOp::ReduceSum, {x}), inv_n});
      const int d = vb.op("d", VecOp::Sub, {x, mean});
      const int var =
          vb.op("var", VecOp::Mul, {vb.op("sq_sum", VecOp::ReduceSum, {vb.op("sq", VecOp::Mul, {d, d})}), inv_n});
      const int rstd = vb.op("rstd", VecOp::Rsqrt, {vb.op("var_eps", VecOp::Add, {var, vb.constant("eps", 1e-5)})});
      const int norm = vb.op("norm", VecOp::Mul, {d, rstd});
      const int scaled = vb.op("scaled", VecOp::Mul, {norm, vb.load("g", ref(G, C(0), C(0), 1), LoadBroadcast::Col)});
      vb.store(tile, vb.op("y", VecOp::Add, {scaled, vb.load("b", ref(Bt, C(0), C(0), 1), LoadBroadcast::Col)}));
    }
    kb.emit(vb.done());
  };
  auto store = [&](const Affine& r) {
    kb.emit(dma(false, out, r * (TR * Cols), {Cols, 1}, ref(X, r, C(0)), {Cols, 1},
                {ragged(TR, R, r, RT), Extent::of(Cols)}, kStoreTag));
  };
  // Software pipelined: the load of tile r + 1 is issued before the store of
  // tile r, so the in-order DMA engine never holds a load behind a store that
  // waits for the vector unit.
  load(C(0));
  if (RT > 1) {
    const int rt = kb.loop_begin("r", RT - 1);
    load(V(rt) + C(1));
    compute(V(rt));
    store(V(rt));
    kb.loop_end();
  }
  compute(C(RT - 1));
  store(C(RT - 1));
  kb.emit(Stmt{WaitOp{kStoreTag}});
  pb.add(kb.finish());
}

// ---- attention ----------------------------------------------------------------------

// out[h] (D x S) = v[h]^T softmax_dim0(k[h] q[h]^T / sqrt(D)), per head and
// query tile of TQ columns: P = softmax over keys of (q_tile k^T) * scale is
// the transpose of the score columns, then out[:, tile] = v^T P^T. Both
// products use the arrays' transposed operand paths, so nothing is
// transposed in memory.
void emit_attention(ProgramBuilder& pb, const NpuConfig& c, const std::string& name, int q, int k, int v, int out,
                    int64_t H, int64_t S, int64_t D) {
  const int64_t Nr = c.systolic.rows, Nc = c.systolic.cols;
  const int64_t TQ = std::min(S, Nc);
  const int64_t TI = std::min({S, Nr, Nc});
  const int64_t budget = pb.program.spad_bytes;
  const int64_t footprint = KernelBuilder::aligned(2 * TQ * D * 4) + 2 * KernelBuilder::aligned(2 * TI * D * 4) +
                            KernelBuilder::aligned(2 * TQ * S * 4) + KernelBuilder::aligned(2 * D * TQ * 4);
  if (footprint > budget)
    fail("workload kernel '{}': attention tiles need {} bytes, the scratchpad has {}", name, footprint, budget);
  const int64_t JT = ceil_div(S, TQ), IT = ceil_div(S, TI), DK = ceil_div(D, Nr);

  KernelBuilder kb(name, budget);
  const int Qs = kb.spad("q", TQ * D, 2);
  const int Ks = kb.spad("k", TI * D, 2);
  const int Vs = kb.spad("v", TI * D, 2);
  const int Sc = kb.spad("scores", TQ * S, 2);
  const int O = kb.spad("o", D * TQ, 2);
  const int h = kb.loop_begin("h", H);
  const Affine head = V(h, S * D);

  // Scores of query tile j: P = softmax over keys of (q_tile k^T) / sqrt(D),
  // one key block at a time.
  auto scores = [&](const Affine& j) {
    const Affine pair = V(h, JT) + j;
    const Extent tq = ragged(TQ, S, j, JT);
    kb.emit(dma(true, q, head + j * (TQ * D), {D, 1}, ref(Qs, pair, C(0)), {D, 1}, {tq, Extent::of(D)}, kLoadTag));
    const int it = kb.loop_begin("i", IT);
    const Affine slot = pair * IT + V(it);
    const Extent ti = ragged(TI, S, V(it), IT);
    kb.emit(dma(true, k, head + V(it, TI * D), {D, 1}, ref(Ks, slot, C(0)), {D, 1}, {ti, Extent::of(D)}, kLoadTag));
    for (int64_t dc = 0; dc < DK; ++dc) {
      MatmulOp mm;
      mm.m = tq;
      mm.k = Extent::of(std::min(Nr, D - Nr * dc));
      mm.n = ti;
      mm.c = ref(Sc, pair, V(it, TI), S);
      mm.a = ref(Qs, pair, C(Nr * dc), D);
      mm.b = ref(Ks, slot, C(Nr * dc), D);
      mm.trans_b = true;
      mm.accumulate = dc > 0;
      kb.emit(Stmt{std::move(mm)});
    }
    kb.loop_end();
    const SpadRef tile = ref(Sc, pair, C(0), S);
    VecBuilder vb("softmax", tq, Extent::of(S));
    const int x = vb.op("x", VecOp::Mul, {vb.load("s", tile), vb.constant("scale", 1.0 / std::sqrt(static_cast<double>(D)))});
    const int m = vb.op("max", VecOp::ReduceMax, {x});
    const int e = vb.op("e", VecOp::Exp, {vb.op("shifted", VecOp::Sub, {x, m})});
    const int sum = vb.op("sum", VecOp::ReduceSum, {e});
    vb.store(tile, vb.op("p", VecOp::Mul, {e, vb.op("inv", VecOp::Recip, {sum})}));
    kb.emit(vb.done());
  };
  // Output columns of query tile j: out[:, tile] = v^T P^T, accumulated over key blocks.
  auto output = [&](const Affine& j) {
    const Affine pair = V(h, JT) + j;
    const Extent tq = ragged(TQ, S, j, JT);
    auto pv_step = [&](const Affine& iidx, bool accumulate) {
      const Affine slot = pair * IT + iidx;
      const Extent ti = ragged(TI, S, iidx, IT);
      kb.emit(dma(true, v, head + iidx * (TI * D), {D, 1}, ref(Vs, slot, C(0)), {D, 1}, {ti, Extent::of(D)}, kLoadTag));
      MatmulOp mm;
      mm.m = Extent::of(D);
      mm.k = ti;
      mm.n = tq;
      mm.c = ref(O, pair, C(0), TQ);
      mm.a = ref(Vs, slot, C(0), D);
      mm.trans_a = true;
      mm.b = ref(Sc, pair, iidx * TI, S);
      mm.trans_b = true;
      mm.accumulate = accumulate;
      kb.emit(Stmt{std::move(mm)});
    };
    pv_step(C(0), false);
    if (IT > 1) {
      const int ii = kb.loop_begin("i", IT - 1);
      pv_step(V(ii) + C(1), true);
      kb.loop_end();
    }
    kb.emit(dma(false, out, V(h, D * S) + j * TQ, {S, 1}, ref(O, pair, C(0)), {TQ, 1}, {Extent::of(D), tq}, kStoreTag));
  };
  // Software pipelined over query tiles (the scores buffer has two slots):
  // the scores of tile j + 1 are issued before the output of tile j, so the
  // vector unit's softmax overlaps the arrays and the next tile's loads are
  // not queued behind this tile's store in the in-order DMA engine.
  scores(C(0));
  if (JT > 1) {
    const int jj = kb.loop_begin("j", JT - 1);
    scores(V(jj) + C(1));
    output(V(jj));
    kb.loop_end();
  }
  output(C(JT - 1));
  kb.loop_end();
  kb.emit(Stmt{WaitOp{kStoreTag}});
  pb.add(kb.finish());
}

// ---- specs ---------------------------------------------------------------------------

std::vector<int64_t> parse_dims(std::string_view spec, std::string_view text, size_t count) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    int64_t value = 0;
    const std::string_view part = text.substr(pos, end - pos);
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || value <= 0)
      fail("workload '{}': '{}' is not a positive integer", spec, part);
    dims.push_back(value);
    pos = end + 1;
  }
  if (dims.size() != count) fail("workload '{}': expected {} dimensions separated by 'x'", spec, count);
  return dims;
}

Workload bert(std::string_view spec, std::string_view size, const NpuConfig& c) {
  int64_t hidden = 0, heads = 0;
  if (size == "base") {
    hidden = 768;
    heads = 12;
  } else if (size == "large") {
    hidden = 1024;
    heads = 16;
  } else if (size == "xlarge") {
    hidden = 2048;
    heads = 32;
  } else {
    fail("workload '{}': bert size must be base, large or xlarge", spec);
  }
  const int64_t S = 512, D = hidden / heads, F = 4 * hidden;
  ProgramBuilder pb(std::string(spec), c);
  using BK = BufferKind;
  const int x = pb.buffer("x", {S, hidden}, BK::Input);
  auto weight = [&](const std::string& n, Shape s) { return pb.buffer(n, std::move(s), BK::Weight); };
  const int wq = weight("wq", {hidden, hidden}), bq = weight("bq", {hidden});
  const int wk = weight("wk", {hidden, hidden}), bk = weight("bk", {hidden});
  const int wv = weight("wv", {hidden, hidden}), bv = weight("bv", {hidden});
  const int wo = weight("wo", {hidden, hidden}), bo = weight("bo", {hidden});
  const int ln1_w = weight("ln1_w", {hidden}), ln1_b = weight("ln1_b", {hidden});
  const int w1 = weight("w1", {F, hidden}), b1 = weight("b1", {F});
  const int w2 = weight("w2", {hidden, F}), b2 = weight("b2", {hidden});
  const int ln2_w = weight("ln2_w", {hidden}), ln2_b = weight("ln2_b", {hidden});
  const int q = pb.buffer("q", {S, hidden}, BK::Temp);
  const int k = pb.buffer("k", {S, hidden}, BK::Temp);
  const int v = pb.buffer("v", {S, hidden}, BK::Temp);
  const int q3 = pb.alias("q_heads", q, {heads, S, D});
  const int k3 = pb.alias("k_heads", k, {heads, S, D});
  const int v3 = pb.alias("v_heads", v, {heads, S, D});
  const int att = pb.buffer("att", {heads, D, S}, BK::Temp);
  const int att2 = pb.alias("att_rows", att, {S, hidden});
  const int t1 = pb.buffer("t1", {S, hidden}, BK::Temp);
  const int y1 = pb.buffer("y1", {S, hidden}, BK::Temp);
  const int h = pb.buffer("h", {S, F}, BK::Temp);
  const int t2 = pb.buffer("t2", {S, hidden}, BK::Temp);
  const int y2 = pb.buffer("y", {S, hidden}, BK::Output);

  auto linear = [&](const std::string& name, int in, int w, int b, int out, int64_t K, int64_t N, int residual,
                    bool relu) {
    GemmSpec g;
    g.name = name;
    g.a = in;
    g.b = w;
    g.bias = b;
    g.out = out;
    g.residual = residual;
    g.relu = relu;
    g.b_transposed = true;
    g.M = S;
    g.K = K;
    g.N = N;
    emit_gemm(pb, c, g);
  };
  linear("q_proj", x, wq, bq, q, hidden, hidden, -1, false);
  linear("k_proj", x, wk, bk, k, hidden, hidden, -1, false);
  linear("v_proj", x, wv, bv, v, hidden, hidden, -1, false);
  emit_attention(pb, c, "attention", q3, k3, v3, att, heads, S, D);
  linear("out_proj", att2, wo, bo, t1, hidden, hidden, att2, false);
  emit_rows(pb, c, "ln1", RowKind::LayerNorm, t1, y1, S, hidden, ln1_w, ln1_b);
  linear("ffn_up", y1, w1, b1, h, hidden, F, -1, true);
  linear("ffn_down", h, w2, b2, t2, F, hidden, y1, false);
  emit_rows(pb, c, "ln2", RowKind::LayerNorm, t2, y2, S, hidden, ln2_w, ln2_b);
  return Workload{std::string(spec), std::move(pb.program),
                  {"x", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "ln1_w", "ln1_b", "w1", "b1", "w2", "b2",
                   "ln2_w", "ln2_b"},
                  {"y"}};
}

}  // namespace

std::vector<std::string> workload_forms() {
  return {"gemm:MxKxN", "layernorm:RxC", "softmax:RxC", "attention:HxSxD", "bert:base|large|xlarge"};
}

Workload make_workload(std::string_view spec, const NpuConfig& config) {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos)
    fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view args = spec.substr(colon + 1);
  ProgramBuilder pb(std::string(spec), config);
  if (kind == "gemm") {
    const auto d = parse_dims(spec, args, 3);
    GemmSpec g;
    g.name = "gemm";
    g.M = d[0];
    g.K = d[1];
    g.N = d[2];
    g.a = pb.buffer("a", {g.M, g.K}, BufferKind::Input);
    g.b = pb.buffer("w", {g.K, g.N}, BufferKind::Weight);
    g.out = pb.buffer("out", {g.M, g.N}, BufferKind::Output);
    emit_gemm(pb, config, g);
    return Workload{std::string(spec), std::move(pb.program), {"a", "w"}, {"out"}};
  }
  if (kind == "softmax" || kind == "layernorm") {
    const auto d = parse_dims(spec, args, 2);
    const int x = pb.buffer("x", {d[0], d[1]}, BufferKind::Input);
    if (kind == "softmax") {
      const int out = pb.buffer("out", {d[0], d[1]}, BufferKind::Output);
      emit_rows(pb, config, "softmax", RowKind::Softmax, x, out, d[0], d[1]);
      return Workload{std::string(spec), std::move(pb.program), {"x"}, {"out"}};
    }
    const int w = pb.buffer("weight", {d[1]}, BufferKind::Weight);
    const int b = pb.buffer("bias", {d[1]}, BufferKind::Weight);
    const int out = pb.buffer("out", {d[0], d[1]}, BufferKind::Output);
    emit_rows(pb, config, "layernorm", RowKind::LayerNorm, x, out, d[0], d[1], w, b);
    return Workload{std::string(spec), std::move(pb.program), {"x", "weight", "bias"}, {"out"}};
  }
  if (kind == "attention") {
    const auto d = parse_dims(spec, args, 3);
    const int q = pb.buffer("q", {d[0], d[1], d[2]}, BufferKind::Input);
    const int k = pb.buffer("k", {d[0], d[1], d[2]}, BufferKind::Input);
    const int v = pb.buffer("v", {d[0], d[1], d[2]}, BufferKind::Input);
    const int out = pb.buffer("out", {d[0], d[2], d[1]}, BufferKind::Output);
    emit_attention(pb, config, "attention", q, k, v, out, d[0], d[1], d[2]);
    return Workload{std::string(spec), std::move(pb.program), {"q", "k", "v"}, {"out"}};
  }
  if (kind == "bert") return bert(spec, args, config);
  fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
}

}  // namespace spool::sim
