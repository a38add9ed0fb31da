// grouped_matmul (lowering.hpp): one kernel that walks the groups, reading
// each group's matrix once and streaming only that group's rows through it.
//
// The group sizes are values (an MoE layer's per-expert row counts), so the
// kernel reads them at run time: its loops over a group's rows have run-time
// trip counts (npu::DynamicTrips), ceil(rows / 8) chunks of 8 rows. A chunk's
// rows are gathered by indirect DMA through indices the vector unit computes
// from the group's offset (an exclusive prefix sum of the counts, computed in
// the kernel) and count; indices past the group's last row repeat that row,
// so a ragged chunk computes the last row again and stores the same value
// to the same place, and no row outside the group is read or written.
//
// Loop nest, for each group g:
//   rows:   rem = min(count, B); for each chunk: indices, gather the rows (A{g})
//   steps:  for each column tile nt of W[g] (all of K, prefetched one step
//           ahead, across groups when W is one dense [G*N, K] matrix):
//             for each k tile and array column half, for each chunk: matmul
//             (the tile stays in the array while the chunks stream through)
//             for each chunk: round to the output dtype, store by the indices
//   overflow: rows past the first B (a group larger than the block) in
//           further blocks of B rows, W reloaded per block; nominally none.
// A timing-only run has no counts: it assumes every group has ceil(R / G)
// rows (balanced routing).

#include "lowering.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace spool::lower::detail {

using namespace spool::npu;

namespace {

constexpr int64_t kChunk = 8;  // rows per matmul step: one f32 register's sublanes

struct GroupedShape {
  int64_t R = 0, K = 0, N = 0, G = 0;
  int64_t B = 0;      // rows per block
  int64_t TN = 0;     // columns per step
  int64_t NT = 0;     // column tiles
  int64_t TK = 0;     // k rows per array pass
  int64_t KT = 0;     // k tiles
  int64_t blocks = 0;  // ceil(R / B): the most blocks a group can have
  bool w_nk = true;   // W[g] stored [N, K] (k contiguous); else [K, N]
  bool prefetch_across = false;
  // Steps W is loaded ahead when prefetched across groups: two when a group
  // has two steps or more, so a step's stores (which wait for its arrays)
  // never hold the DMA engine up in front of the tile two steps on.
  int64_t distance = 1;
};

class GroupedKernel {
 public:
  GroupedKernel(const Emitter& em, const std::string& name, const Access& rows, const Access& w, const Access& counts,
                const Access& out, const GroupedShape& s)
      : em_(em), kb_(name), rows_(rows), w_(w), counts_(counts), out_(out), s_(s) {}

  Kernel build(int64_t& footprint) {
    const DType dt = rows_.dtype;
    const int64_t wtile = s_.TN * s_.K;
    cnt_ = kb_.spad("count", counts_.dtype, s_.G, 1);
    off_ = kb_.spad("offset", DType::I64, s_.G, 1);
    over_ = kb_.spad("over", DType::I64, s_.G, 1);
    pos_ = kb_.spad("position", DType::I64, s_.blocks * s_.B, 1);
    // Slot g: a group's rows are prepared while the previous group computes.
    rem_ = kb_.spad("rem", DType::I64, 1, 2);
    idx_ = kb_.spad("idx", DType::I64, s_.B, 2);
    a_ = kb_.spad("A", dt, s_.B * s_.K, 2);
    w_buf_ = kb_.spad("W", dt, wtile, static_cast<int>(s_.distance + 1));
    w2_ = kb_.spad("W2", dt, wtile, 1);
    c_ = kb_.spad("C", DType::F32, s_.B * s_.TN, 2);
    if (out_.dtype != DType::F32) o_ = kb_.spad("O", out_.dtype, s_.B * s_.TN, 2);

    kb_.emit(dma(true, counts_.buffer, Affine::of(counts_.offset), {counts_.strides[0]}, ref(cnt_), {1},
                 {Extent::of(s_.G)}, kLoadTag));
    kb_.emit(Stmt{WaitOp{kLoadTag}});
    prologue();
    if (s_.prefetch_across) {
      // The last group is peeled: its last `distance` steps have nothing to prefetch.
      for (int64_t t = 0; t < s_.distance; ++t)
        for (int64_t kt = 0; kt < s_.KT; ++kt) load_step(Affine::of(t), kt);
      prepare(Affine::of(0));
      if (s_.G > 1) {
        const int g = kb_.loop_begin("g", s_.G - 1);
        group(Affine::var(g), false);
        kb_.loop_end();
      }
      group(Affine::of(s_.G - 1), true);
    } else {
      const int g = kb_.loop_begin("g", s_.G);
      group(Affine::var(g), false);
      kb_.loop_end();
    }
    kb_.emit(Stmt{WaitOp{kStoreTag}});
    return kb_.finish(footprint);
  }

 private:
  static SpadRef ref(int buffer, Affine offset = Affine::of(0), Affine slot = Affine::of(0), int64_t ld = 0) {
    return SpadRef{buffer, std::move(slot), std::move(offset), ld};
  }
  // One element (or a row of them) at `offset`, as a vector step reads it.
  static SpadRef element(int buffer, Affine offset = Affine::of(0), Affine slot = Affine::of(0)) {
    return ref(buffer, std::move(offset), std::move(slot), 1);
  }
  ScalarType it() const { return value_type(counts_.dtype); }

  // offset[g] = sum of the counts before g, over[g] = max(count[g] - B, 0),
  // position[q] = q.
  void prologue() {
    {
      VecBuilder vb("group offsets", Extent::of(s_.G), Extent::of(s_.G));
      const int all = vb.op(VecOp::Cast, ScalarType::I64, {vb.load(it(), element(cnt_), LoadBroadcast::Col)});
      const int mine = vb.op(VecOp::Cast, ScalarType::I64, {vb.load(it(), element(cnt_), LoadBroadcast::Row)});
      const int r = vb.op(VecOp::Cast, ScalarType::I64, {vb.iota(false)});
      const int q = vb.op(VecOp::Cast, ScalarType::I64, {vb.iota(true)});
      const int before = vb.op(VecOp::CmpLt, ScalarType::I1, {q, r});
      const int zero = vb.constant(ScalarType::I64, 0);
      const int part = vb.op(VecOp::Select, ScalarType::I64, {before, all, zero});
      vb.store(element(off_), vb.op(VecOp::ReduceSum, ScalarType::I64, {part}));
      const int over = vb.op(VecOp::Max, ScalarType::I64,
                             {vb.op(VecOp::Sub, ScalarType::I64, {mine, vb.constant(ScalarType::I64, double(s_.B))}), zero});
      vb.store(element(over_), over);
      kb_.emit(vb.done());
    }
    VecBuilder vb("positions", Extent::of(s_.blocks * s_.B / kChunk), Extent::of(kChunk));
    const int r = vb.op(VecOp::Cast, ScalarType::I64, {vb.iota(false)});
    const int c = vb.op(VecOp::Cast, ScalarType::I64, {vb.iota(true)});
    const int q = vb.op(VecOp::Add, ScalarType::I64,
                        {vb.op(VecOp::Mul, ScalarType::I64, {r, vb.constant(ScalarType::I64, double(kChunk))}), c});
    vb.store(ref(pos_, Affine::of(0), Affine::of(0), kChunk), q);
    kb_.emit(vb.done());
  }

  // rem = clamp(count[g] - first, 0, B), the rows of the block starting at
  // row `first` of the group (position[first] holds first).
  void block_rows(const Affine& g, const Affine& first) {
    VecBuilder vb("block rows", Extent::of(1), Extent::of(1));
    const int count = vb.op(VecOp::Cast, ScalarType::I64, {vb.load(it(), element(cnt_, g), LoadBroadcast::Row)});
    const int p = vb.load(ScalarType::I64, element(pos_, first), LoadBroadcast::Row);
    const int left = vb.op(VecOp::Sub, ScalarType::I64, {count, p});
    const int clamped = vb.op(VecOp::Min, ScalarType::I64,
                              {vb.op(VecOp::Max, ScalarType::I64, {left, vb.constant(ScalarType::I64, 0)}),
                               vb.constant(ScalarType::I64, double(s_.B))});
    vb.store(element(rem_, Affine::of(0), g), clamped);
    kb_.emit(vb.done());
  }

  // A loop over the block's chunks (run-time trips: ceil(rem / 8)).
  int chunks(const char* name, const Affine& g) {
    const int64_t nominal_rows = std::min(s_.B, ceil_div(s_.R, s_.G));
    return kb_.loop_begin(name, s_.B / kChunk,
                          DynamicTrips{ref(rem_, Affine::of(0), g), kChunk, std::max<int64_t>(1, ceil_div(nominal_rows, kChunk))});
  }

  // The chunk's row indices (idx[j*8 ..]) and its rows gathered into A{g}.
  void gather_rows(const Affine& g, const Affine& first) {
    const Affine j = Affine::var(chunks("j", g));
    {
      VecBuilder vb("row indices", Extent::of(1), Extent::of(kChunk));
      const int p = vb.load(ScalarType::I64, ref(pos_, first + j * kChunk, Affine::of(0), kChunk), LoadBroadcast::Full);
      const int count = vb.op(VecOp::Cast, ScalarType::I64, {vb.load(it(), element(cnt_, g), LoadBroadcast::Row)});
      const int start = vb.load(ScalarType::I64, element(off_, g), LoadBroadcast::Row);
      const int last = vb.op(VecOp::Sub, ScalarType::I64,
                             {vb.op(VecOp::Add, ScalarType::I64, {start, count}), vb.constant(ScalarType::I64, 1)});
      const int row = vb.op(VecOp::Add, ScalarType::I64, {start, p});
      const int valid = vb.op(VecOp::CmpLt, ScalarType::I1, {p, count});
      vb.store(ref(idx_, j * kChunk, g, kChunk), vb.op(VecOp::Select, ScalarType::I64, {valid, row, last}));
      kb_.emit(vb.done());
    }
    kb_.emit(by_rows(dma(true, rows_.buffer, Affine::of(rows_.offset), {0, rows_.strides[1]},
                         ref(a_, j * (kChunk * s_.K), g), {s_.K, 1}, {Extent::of(kChunk), Extent::of(s_.K)}, kLoadTag),
                     g, j, rows_.strides[0]));
    kb_.loop_end();
  }

  // A chunk's DMA moving row idx{g}[j*8 + i] of DRAM (rows `row_stride`
  // elements apart) for its row i.
  Stmt by_rows(Stmt s, const Affine& g, const Affine& j, int64_t row_stride) const {
    DmaOp& d = std::get<DmaOp>(s.node);
    d.index = ref(idx_, j * kChunk, g);
    d.index_strides = {1, 0};
    d.index_scale = row_stride;
    d.index_limit = s_.R;
    return s;
  }

  // All of K for column tile nt of W[g] into `buffer` (slot `slot`).
  void load_w(const Affine& g, const Affine& nt, const Affine& slot, int buffer) {
    const Affine off = Affine::of(w_.offset) + g * w_.strides[0] + nt * (s_.TN * w_.strides[1]);
    const Extent n = ragged(s_.TN, s_.N, nt, s_.NT);
    if (s_.w_nk)
      kb_.emit(dma(true, w_.buffer, off, {w_.strides[1], w_.strides[2]}, ref(buffer, Affine::of(0), slot),
                   {s_.K, 1}, {n, Extent::of(s_.K)}, kLoadTag));
    else
      kb_.emit(dma(true, w_.buffer, off, {w_.strides[2], w_.strides[1]}, ref(buffer, Affine::of(0), slot),
                   {s_.TN, 1}, {Extent::of(s_.K), n}, kLoadTag));
  }

  // One column tile: the array steps over k tiles and halves for every
  // chunk, then the chunks rounded and stored through their indices.
  // `prefetch(kt)`, when given, issues k tile kt of the next step's W before
  // this step's array work on k tile kt, so the DMA and the arrays
  // interleave instead of the front end waiting on one large transfer.
  void step(const Affine& g, const Affine& nt, int wbuf, const Affine& wslot, const Affine& cslot,
            const std::function<void(int64_t)>& prefetch = {}) {
    const int64_t cols = c_cols();
    const Extent n_tile = ragged(s_.TN, s_.N, nt, s_.NT);
    for (int64_t kt = 0; kt < s_.KT; ++kt) {
      if (prefetch) prefetch(kt);
      const int64_t k = std::min(s_.TK, s_.K - kt * s_.TK);
      // Column tiles of TN = several array widths divide N; a ragged last tile
      // has TN = one array width (see lower_grouped).
      for (int64_t h = 0; h * cols < s_.TN; ++h) {
        const Extent n = s_.N % s_.TN == 0 ? Extent::of(std::min(cols, s_.TN - h * cols)) : n_tile;
        const Affine j = Affine::var(chunks("j", g));
        MatmulOp mm;
        mm.c = ref(c_, j * (kChunk * s_.TN) + Affine::of(h * cols), cslot, s_.TN);
        mm.a = ref(a_, j * (kChunk * s_.K) + Affine::of(kt * s_.TK), g, s_.K);
        if (s_.w_nk) {
          mm.b = ref(wbuf, Affine::of(h * cols * s_.K + kt * s_.TK), wslot, s_.K);
          mm.trans_b = true;
        } else {
          mm.b = ref(wbuf, Affine::of(kt * s_.TK * s_.TN + h * cols), wslot, s_.TN);
        }
        mm.m = Extent::of(kChunk);
        mm.k = Extent::of(k);
        mm.n = n;
        mm.accumulate = kt > 0;
        // Each column half keeps its array, so a tile streams all the chunks
        // once loaded (an array's queue full of 8-row steps would otherwise
        // spill chunks to the other array, which then loads the tile too).
        mm.array = static_cast<int>(h % em_.config.systolic.arrays);
        kb_.emit(Stmt{std::move(mm)});
        kb_.loop_end();
      }
    }
    const Affine j = Affine::var(chunks("j", g));
    SpadRef from = ref(c_, j * (kChunk * s_.TN), cslot, s_.TN);
    if (o_ >= 0) {
      VecBuilder vb("round", Extent::of(kChunk), n_tile);
      const int v = vb.load(ScalarType::F32, from, LoadBroadcast::Full);
      vb.store(ref(o_, j * (kChunk * s_.TN), cslot, s_.TN), vb.op(VecOp::Cast, value_type(out_.dtype), {v}));
      kb_.emit(vb.done());
      from = ref(o_, j * (kChunk * s_.TN), cslot, s_.TN);
    }
    from.ld = 0;  // a DMA ref: its strides say the layout
    kb_.emit(by_rows(dma(false, out_.buffer, Affine::of(out_.offset) + nt * (s_.TN * out_.strides[1]),
                         {0, out_.strides[1]}, from, {s_.TN, 1}, {Extent::of(kChunk), n_tile}, kStoreTag),
                     g, j, out_.strides[0]));
    kb_.loop_end();
  }

  int64_t c_cols() const { return std::min<int64_t>(em_.config.systolic.cols, s_.TN); }

  // The group's first block of rows: their count, indices and gather.
  void prepare(const Affine& g) {
    block_rows(g, Affine::of(0));
    gather_rows(g, Affine::of(0));
  }

  void group(const Affine& g, bool last_group) {
    // With W prefetched across groups, the next group's rows are prepared
    // (into the other slots of rem, idx and A) while this group computes.
    if (!s_.prefetch_across) prepare(g);
    if (s_.prefetch_across && !last_group) prepare(g + Affine::of(1));
    // Step t = g * NT + nt uses W slot t and C slot t.
    auto at = [&](const Affine& nt) { return g * s_.NT + nt; };
    if (s_.prefetch_across) {
      // W[g][nt] was loaded `distance` steps ahead; this step loads the one
      // that far on. The last group's last steps have none to load.
      const int64_t trips = last_group ? s_.NT - s_.distance : s_.NT;
      if (trips > 0) {
        const int nt = kb_.loop_begin("nt", trips);
        const Affine t = at(Affine::var(nt));
        step(g, Affine::var(nt), w_buf_, t, t, [&](int64_t kt) { load_step(t + Affine::of(s_.distance), kt); });
        kb_.loop_end();
      }
      if (last_group)
        for (int64_t nt = s_.NT - s_.distance; nt < s_.NT; ++nt)
          step(g, Affine::of(nt), w_buf_, at(Affine::of(nt)), at(Affine::of(nt)));
    } else {
      pipelined(
          kb_, "nt", s_.NT, [&](const Affine& nt) { load_w(g, nt, at(nt), w_buf_); },
          [&](const Affine& nt) { step(g, nt, w_buf_, at(nt), at(nt)); });
    }
    overflow(g);
  }

  // K tile kt of step t's W when W is one dense [G*N, K] matrix: rows
  // t*TN onwards, columns kt*TK onwards.
  // Pieces of kPieceTiles k tiles: runs of a few KB per row keep the DMA
  // descriptors efficient while the pieces still interleave with the arrays.
  static constexpr int64_t kPieceTiles = 8;
  void load_step(const Affine& t, int64_t kt) {
    if (kt % kPieceTiles != 0) return;
    const int64_t width = std::min(kPieceTiles * s_.TK, s_.K - kt * s_.TK);
    kb_.emit(dma(true, w_.buffer, Affine::of(w_.offset + kt * s_.TK) + t * (s_.TN * s_.K), {s_.K, 1},
                 ref(w_buf_, Affine::of(kt * s_.TK), t), {s_.K, 1}, {Extent::of(s_.TN), Extent::of(width)}, kLoadTag));
  }

  // Blocks of B rows past the first: W reloaded per block into W2.
  void overflow(const Affine& g) {
    if (s_.blocks == 1) return;  // R <= B: no group has rows past its first block
    const int b = kb_.loop_begin("b", s_.blocks - 1,
                                 DynamicTrips{ref(over_, g), s_.B, 0});
    const Affine first = (Affine::var(b) + Affine::of(1)) * s_.B;
    block_rows(g, first);
    gather_rows(g, first);
    const int nt = kb_.loop_begin("nt", s_.NT);
    load_w(g, Affine::var(nt), Affine::of(0), w2_);
    step(g, Affine::var(nt), w2_, Affine::of(0), Affine::var(nt));
    kb_.loop_end();
    kb_.loop_end();
  }

  const Emitter& em_;
  KernelBuilder kb_;
  const Access rows_, w_, counts_, out_;
  const GroupedShape s_;
  int cnt_ = -1, off_ = -1, over_ = -1, pos_ = -1, rem_ = -1, idx_ = -1, a_ = -1, w_buf_ = -1, w2_ = -1, c_ = -1,
      o_ = -1;
};

}  // namespace

void Lowering::lower_grouped(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  Access rows = read(n.inputs[0], name), w = read(n.inputs[1], name), counts = read(n.inputs[2], name);
  if (rows.is_literal || rows.strides[1] != 1) rows = materialize(rows, name);
  if (counts.is_literal) counts = materialize(counts, name);
  if (w.is_literal || (w.strides[2] != 1 && w.strides[1] != 1)) w = materialize(w, name);
  rows = em_.through_alias(rows, "rows");
  w = em_.through_alias(w, "w");
  counts = em_.through_alias(counts, "counts");
  Access out = output_buffer(id);
  if (out.strides[1] != 1) fail("lower: {}: the output is not stored row by row", name);
  out = em_.through_alias(out, "out");

  GroupedShape s;
  s.R = rows.shape[0];
  s.K = rows.shape[1];
  s.G = w.shape[0];
  s.N = w.shape[1];
  if (s.R == 0 || s.N == 0 || s.G == 0) fail("lower: {}: empty grouped_matmul is not lowered", name);
  s.w_nk = w.strides[2] == 1;
  s.TK = std::min<int64_t>(em_.config.systolic.rows, s.K);
  s.KT = ceil_div(s.K, s.TK);
  const int64_t cols = em_.config.systolic.cols, wide = cols * em_.config.systolic.arrays;
  // One tile of N columns, tiles of all the arrays' width, or (a ragged N)
  // tiles of one array's width.
  s.TN = s.N <= wide ? s.N : s.N % wide == 0 ? wide : cols;
  // Wider steps where W's rows are short: a step's stores and its W piece
  // are a few DMA descriptors whatever its width, so up to 1 MiB of W per
  // step keeps their setup small against the step's transfer.
  while (s.TN % wide == 0 && s.N % (2 * s.TN) == 0 && 2 * s.TN * s.K * dtype_bytes(rows.dtype) <= (int64_t{1} << 20))
    s.TN *= 2;
  s.NT = ceil_div(s.N, s.TN);
  // W as one dense [G*N, K] matrix: the next step's tile is the next TN rows.
  s.prefetch_across = s.w_nk && s.N % s.TN == 0 && w.strides[1] == s.K && w.strides[0] == s.N * s.K;
  s.distance = s.prefetch_across && s.NT >= 2 ? 2 : 1;
  const std::string kernel = em_.unique_name(name);
  // Blocks of B rows, a power of two: at most 512, no more than R needs.
  // When even 8-row blocks do not fit, W is loaded one step ahead instead
  // of two, then in narrower steps (long rows of K: deepseek-v3 in f32).
  int64_t first_block = kChunk;
  while (first_block < 512 && first_block < s.R) first_block *= 2;
  int64_t smallest = -1;
  for (;;) {
    for (int64_t b = first_block;; b /= 2) {
      s.B = b;
      s.blocks = ceil_div(s.R, s.B);
      int64_t footprint = 0;
      Kernel k = GroupedKernel(em_, kernel, rows, w, counts, out, s).build(footprint);
      if (footprint <= em_.budget) {
        em_.add_kernels({std::move(k)}, KernelInfo{kernel, "grouped_gemm", false, 0,
                                                    fmt::format("rows {} n{} k{}", s.B, s.TN, s.TK), 1},
                        footprint);
        values_[id.value] = out;
        return;
      }
      if (smallest < 0 || footprint < smallest) smallest = footprint;
      if (b == kChunk) break;
    }
    if (s.distance > 1) {
      s.distance = 1;
    } else if (s.TN > cols && s.TN % 2 == 0 && s.N % (s.TN / 2) == 0) {
      s.TN /= 2;
      s.NT = ceil_div(s.N, s.TN);
    } else {
      fail("lower: {}: the smallest grouped tile needs {} bytes of scratchpad, the budget is {}", name, smallest,
           em_.budget);
    }
  }
}

}  // namespace spool::lower::detail
