// The GEMM/BMM generator. Loops: batch axes, column blocks of TN columns
// (whole multiples of arrays x array columns), m blocks of TM rows streamed
// through the arrays (software pipelined: a block's store is issued after
// the next block's loads), k tiles of TK (multiples of the array's rows).
// Prologues run on the vector unit over the loaded operand tiles; the
// epilogue runs on the accumulator tile before the store, with broadcast
// operands (a bias) loaded at their logical shape, one value per column.
//
// Tile selection: every candidate (TM, TN, TK) is scored by an analytic form
// of the timing model (timing.cpp: array steps, DRAM bytes at the channels'
// bandwidth, DMA descriptor setup, launch); in that order, the first few
// whose generated kernels fit the budget by the scratchpad allocator are run
// through the tile timer (LowerOptions::tile_cycles) and the fastest wins
// (ties within 0.5% go to the longest k tiles), so the footprint that chose
// it is the footprint that runs. Choices are cached by the GEMM's signature,
// so repeated layers cost one selection.

#include "gemm.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace spool::lower::detail {
namespace {

using namespace spool::npu;

enum class OperandLoad : uint8_t { Direct, Transposed, Prologue };
enum class EpiKind : uint8_t { Full, PerCol, PerRow, Literal };

struct Tile {
  int64_t TM = 0, TN = 0, TK = 0;
  double cost = 0;
  // Operand slots; 0: three for a block of few rows with three or more k
  // tiles, or one k tile and three or more column blocks; else two.
  int64_t slots = 0;
};

int64_t operand_slots(const Tile& t, int64_t K, int64_t N) {
  if (t.slots > 0) return t.slots;
  const int64_t kt = ceil_div(K, t.TK), blocks = N / t.TN;
  return t.TM <= 64 && (kt >= 3 || (kt == 1 && blocks >= 3)) ? 3 : 2;
}

// A kernel's share of the m blocks (or of batch axis 0) when the tiles are
// spread over cores.
struct Split {
  bool batch = false;
  int64_t lo = 0, hi = -1;  // hi < 0: all
};

class GemmKernel {
 public:
  GemmKernel(const GemmJob& job, const target::NpuConfig& c, const Tile& t, Split split = Split{}, std::string name = {})
      : j_(job), c_(c), t_(t), split_(split), kb_(name.empty() ? job.info.name : std::move(name)) {
    const Shape& as = job.a[0].shape;
    const size_t r = as.size();
    rank_ = r;
    M_ = as[r - 2];
    K_ = as[r - 1];
    N_ = job.b[0].shape[r - 1];
    Nr_ = c.systolic.rows;
    Nc_ = c.systolic.cols;
    MT_ = ceil_div(M_, t.TM);
    KT_ = ceil_div(K_, t.TK);
  }

  Kernel build(int64_t& footprint) {
    const int64_t TM = t_.TM, TN = t_.TN, TK = t_.TK;
    a_mode_ = operand_mode(j_.a, j_.a_program, rank_ - 2, rank_ - 1);
    b_mode_ = operand_mode(j_.b, j_.b_program, rank_ - 2, rank_ - 1);
    // A prologue over B inputs that are all stored k-contiguous (a K^T read
    // through views, e.g. the attention scores' keys behind a concat) loads
    // its tiles as rows of k, runs on the [n, k] layout (elementwise, so any
    // layout will do) and feeds the array with trans_b: loaded as [k, n]
    // every element would be its own strided request.
    b_prologue_t_ = b_mode_ == OperandLoad::Prologue && N_ > 1;
    for (const Access& b : j_.b)
      b_prologue_t_ = b_prologue_t_ && b.index_buffer < 0 && b.strides[rank_ - 2] == 1 && b.strides[rank_ - 1] != 1;
    // Operand buffers (the matmul's), then the prologue inputs.
    // Operand slots: the loads of k tile i + slots - 1 are issued before
    // the array steps of tile i. Two suffice when the arrays stream many
    // rows per weight tile; a block of few rows (a GEMV, decode attention)
    // is bound by its operand reads and by weight preloads about equally, and
    // with two slots the DMA engine would wait out each tile's round trip.
    slots_ = operand_slots(t_, K_, N_);
    A_ = kb_.spad("A", j_.dtype, TM * TK, slots_);
    B_ = kb_.spad("B", j_.dtype, TK * TN, slots_);
    if (a_mode_ == OperandLoad::Prologue)
      for (size_t i = 0; i < j_.a.size(); ++i)
        a_in_.push_back(kb_.spad("a" + std::to_string(i), j_.a[i].dtype, TM * TK, slots_));
    if (b_mode_ == OperandLoad::Prologue)
      for (size_t i = 0; i < j_.b.size(); ++i)
        b_in_.push_back(kb_.spad("b" + std::to_string(i), j_.b[i].dtype, TK * TN, slots_));
    C_ = kb_.spad("C", DType::F32, TM * TN, 2);
    // A block one array wide (TN within the array's columns) would keep one
    // array busy and leave the others idle: its k chunks alternate between
    // two accumulators, each a chain on its own array, added at the end.
    // Weight preloads (R cycles per chunk) bound such a block when M is small
    // (decode attention's P x V, M = the query heads of a KV group).
    split_k_ = c_.systolic.arrays >= 2 && TN <= Nc_ && TK >= 2 * Nr_ && (TK / Nr_) % 2 == 0 && K_ > Nr_;
    if (split_k_) C2_ = kb_.spad("C2", DType::F32, TM * TN, 2);
    for (size_t i = 0; i < j_.epilogue.size(); ++i) {
      const Access& e = j_.epilogue[i];
      if (e.is_literal) {
        epi_kind_.push_back(EpiKind::Literal);
        epi_buf_.push_back(-1);
        continue;
      }
      const bool col_b = e.strides[rank_ - 1] == 0 || N_ == 1, row_b = e.strides[rank_ - 2] == 0 || M_ == 1;
      const EpiKind kind = !col_b && !row_b ? EpiKind::Full : !col_b ? EpiKind::PerCol : EpiKind::PerRow;
      epi_kind_.push_back(kind);
      // As many slots as operand tiles in flight: a block's epilogue operands
      // load with its operands, up to slots - 1 blocks ahead (see columns).
      epi_buf_.push_back(kb_.spad("e" + std::to_string(i), e.dtype,
                                  kind == EpiKind::Full ? TM * TN : kind == EpiKind::PerCol ? TN : TM,
                                  std::max<int64_t>(2, slots_)));
    }
    has_epilogue_ = !j_.epilogue_program.instrs.empty() || !j_.epilogue.empty();
    in_place_ = j_.out.dtype == DType::F32;
    O_ = in_place_ ? C_ : kb_.spad("O", j_.out.dtype, TM * TN, 2);
    // Operands read through a fused gather: their index value of the current
    // batch, loaded at the top of the batch loop.
    for (const std::vector<Access>* ins : {&j_.a, &j_.b})
      for (const Access& a : *ins)
        if (a.index_buffer >= 0 && !index_bufs_.count({a.index_buffer, a.index_offset}))
          index_bufs_[{a.index_buffer, a.index_offset}] =
              kb_.spad("ix" + std::to_string(index_bufs_.size()), a.index_dtype, 1, 1);
    batches(0);
    kb_.emit(Stmt{WaitOp{kStoreTag}});
    return kb_.finish(footprint);
  }

 private:
  // How an operand tile reaches the array: straight from DRAM (rows along
  // `outer_axis` contiguous or not), or through a vector prologue.
  OperandLoad operand_mode(const std::vector<Access>& ins, const ProgramAttr& p, size_t outer_axis, size_t inner_axis) {
    if (ins.size() != 1 || !p.instrs.empty() || ins[0].dtype != j_.dtype) return OperandLoad::Prologue;
    const Access& a = ins[0];
    if (a.strides[inner_axis] != 1 && a.strides[outer_axis] == 1) return OperandLoad::Transposed;
    return OperandLoad::Direct;
  }

  void batches(size_t axis) {
    if (axis + 2 >= rank_) {
      columns();
      return;
    }
    int64_t lo = 0, n = j_.out.shape[axis];
    if (axis == 0 && split_.batch) {
      lo = split_.lo;
      n = split_.hi - split_.lo;
    }
    if (axis + 3 == rank_ && n > 1 && pipelines_across_batches()) {
      batches_pipelined(axis, lo, n);
      return;
    }
    const int var = n > 1 ? kb_.loop_begin("batch" + std::to_string(axis), n) : -1;
    if (axis == 0) load_indices(var, lo);
    batch_vars_.push_back({axis, var, lo});
    batches(axis + 1);
    batch_vars_.pop_back();
    if (n > 1) kb_.loop_end();
  }

  // The innermost batch loop can carry the column pipeline across its
  // iterations when each batch is one m block of an even number (>= 2) of
  // whole column blocks: the last block of a batch sits in the other C slot
  // from the next batch's first, so its store can wait until that block is
  // computed (and its loads issued). Without this the in-order DMA queue
  // idles at every batch boundary while the last block computes: the scores
  // and output GEMMs of attention lost about a third of their time to it.
  bool pipelines_across_batches() const {
    const int64_t mlo = split_.batch ? 0 : split_.lo, mhi = split_.batch || split_.hi < 0 ? MT_ : split_.hi;
    const int64_t full = N_ / t_.TN;
    return index_bufs_.empty() && mhi - mlo == 1 && N_ % t_.TN == 0 && full >= 2 && full % 2 == 0;
  }

  // Batches lo .. lo + n - 1 of the innermost batch axis, their column
  // pipelines chained: each batch's last store is issued after the next
  // batch's first block. The first batch is peeled (nothing to store before
  // it) and the last store follows the loop.
  void batches_pipelined(size_t axis, int64_t lo, int64_t n) {
    const int64_t TN = t_.TN, full = N_ / TN;
    const int64_t mlo = split_.batch ? 0 : split_.lo;
    const Affine m = Affine::of(mlo);
    // One k tile: a block's loads are issued before the previous block's
    // steps (see columns); the first block of a batch loads with the second.
    const bool early = KT_ == 1;
    auto loads = [&](const Affine& j) { compute(j * TN, TN, j, m, Part::Loads); };
    auto steps = [&](const Affine& j) { compute(j * TN, TN, j, m, Part::Steps); };
    auto first_block = [&] {
      if (early) {
        loads(Affine::of(0));
        loads(Affine::of(1));
        steps(Affine::of(0));
        return;
      }
      load_per_col(Affine::of(0), TN, Affine::of(0));
      compute(Affine::of(0), TN, Affine::of(0), m);
    };
    auto other_blocks = [&] {
      if (early) {
        if (full > 2) {
          const int nn = kb_.loop_begin("n", full - 2);
          loads(Affine::var(nn) + Affine::of(2));
          steps(Affine::var(nn) + Affine::of(1));
          store(Affine::var(nn, TN), TN, Affine::var(nn), m);
          kb_.loop_end();
        }
        steps(Affine::of(full - 1));
        store(Affine::of((full - 2) * TN), TN, Affine::of(full - 2), m);
        return;
      }
      const int nn = kb_.loop_begin("n", full - 1);
      load_per_col(Affine::var(nn, TN) + Affine::of(TN), TN, Affine::var(nn) + Affine::of(1));
      compute(Affine::var(nn, TN) + Affine::of(TN), TN, Affine::var(nn) + Affine::of(1), m);
      store(Affine::var(nn, TN), TN, Affine::var(nn), m);
      kb_.loop_end();
    };
    auto last_store = [&] { store(Affine::of((full - 1) * TN), TN, Affine::of(full - 1), m); };
    batch_vars_.push_back({axis, -1, lo});
    first_block();
    other_blocks();
    batch_vars_.pop_back();
    const int var = kb_.loop_begin("batch" + std::to_string(axis), n - 1);
    batch_vars_.push_back({axis, var, lo + 1});
    first_block();
    std::get<2>(batch_vars_.back()) = lo;  // the previous batch's last block
    last_store();
    std::get<2>(batch_vars_.back()) = lo + 1;
    other_blocks();
    batch_vars_.pop_back();
    kb_.loop_end();
    batch_vars_.push_back({axis, -1, lo + n - 1});
    last_store();
    batch_vars_.pop_back();
  }

  Affine base(const Access& a) const {
    Affine off = Affine::of(a.offset);
    for (const auto& [axis, var, lo] : batch_vars_) {
      if (var >= 0) off = off + Affine::var(var, a.strides[axis]);
      off = off + Affine::of(lo * a.strides[axis]);
    }
    return off;
  }

  void columns() {
    const int64_t TN = t_.TN;
    const int64_t full = N_ / TN, rest = N_ % TN;
    const int64_t mlo = split_.batch ? 0 : split_.lo, mhi = split_.batch || split_.hi < 0 ? MT_ : split_.hi;
    auto block = [&](const Affine& n0, int64_t W, const Affine& blk) {
      load_per_col(n0, W, blk);
      if (mhi - mlo > 1) {
        compute(n0, W, blk, Affine::of(mlo));
        const int mm = kb_.loop_begin("m", mhi - mlo - 1);
        compute(n0, W, blk, Affine::var(mm) + Affine::of(mlo + 1));
        store(n0, W, blk, Affine::var(mm) + Affine::of(mlo));
        kb_.loop_end();
        store(n0, W, blk, Affine::of(mhi - 1));
      } else {
        compute(n0, W, blk, Affine::of(mlo));
      }
    };
    if (mhi - mlo > 1) {
      if (full > 0) {
        const int nt = kb_.loop_begin("n", full);
        block(Affine::var(nt, TN), TN, Affine::var(nt));
        kb_.loop_end();
      }
      if (rest > 0) block(Affine::of(full * TN), rest, Affine::of(full));
      return;
    }
    // One m block: pipeline over the column blocks instead (C has two slots).
    if (KT_ == 1 && full >= 2) {
      // One k tile: block j + D's loads (D = operand slots - 1) are issued
      // before block j's steps. The in-order front end stalls while the
      // array's issue queue is full, so loads placed after a wide block's
      // steps (a decode's scores, 16 steps per block) reach the DMA engine
      // late and DRAM idles between blocks.
      const Affine m = Affine::of(mlo);
      const int64_t D = slots_ - 1;
      auto at = [](int64_t j) { return Affine::of(j); };
      auto loads = [&](const Affine& j) { compute(j * TN, TN, j, m, Part::Loads); };
      auto steps = [&](const Affine& j) { compute(j * TN, TN, j, m, Part::Steps); };
      for (int64_t j = 0; j < std::min(D, full); ++j) loads(at(j));
      if (D < full) loads(at(D));
      steps(at(0));
      if (full - D - 1 > 0) {
        const int nn = kb_.loop_begin("n", full - D - 1);
        loads(Affine::var(nn) + at(1 + D));
        steps(Affine::var(nn) + at(1));
        store(Affine::var(nn, TN), TN, Affine::var(nn), m);
        kb_.loop_end();
      }
      for (int64_t j = std::max<int64_t>(1, full - D); j < full; ++j) {
        steps(at(j));
        store(at((j - 1) * TN), TN, at(j - 1), m);
      }
      if (rest > 0) block(Affine::of(full * TN), rest, Affine::of(full));
      store(Affine::of((full - 1) * TN), TN, Affine::of(full - 1), m);
      if (rest > 0) store(Affine::of(full * TN), rest, Affine::of(full), m);
      return;
    }
    if (full > 0) {
      block(Affine::of(0), TN, Affine::of(0));
      if (full > 1) {
        const int nn = kb_.loop_begin("n", full - 1);
        block(Affine::var(nn, TN) + Affine::of(TN), TN, Affine::var(nn) + Affine::of(1));
        store(Affine::var(nn, TN), TN, Affine::var(nn), Affine::of(mlo));
        kb_.loop_end();
      }
    }
    if (rest > 0) block(Affine::of(full * TN), rest, Affine::of(full));
    if (full > 0) store(Affine::of((full - 1) * TN), TN, Affine::of(full - 1), Affine::of(mlo));
    if (rest > 0) store(Affine::of(full * TN), rest, Affine::of(full), Affine::of(mlo));
  }

  void load_per_col(const Affine& n0, int64_t W, const Affine& blk) {
    for (size_t i = 0; i < j_.epilogue.size(); ++i) {
      if (epi_kind_[i] != EpiKind::PerCol) continue;
      const Access& e = j_.epilogue[i];
      kb_.emit(dma(true, e.buffer, base(e) + n0 * e.strides[rank_ - 1], {e.strides[rank_ - 1]},
                   SpadRef{epi_buf_[i], blk, Affine::of(0), 0}, {1}, {Extent::of(W)}, kLoadTag));
    }
  }

  void load_indices(int var, int64_t lo) {
    for (const std::vector<Access>* ins : {&j_.a, &j_.b})
      for (const Access& a : *ins) {
        if (a.index_buffer < 0) continue;
        Affine off = Affine::of(a.index_offset + lo * a.index_stride);
        if (var >= 0 && a.index_stride != 0) off = off + Affine::var(var, a.index_stride);
        kb_.emit(dma(true, a.index_buffer, off, {1}, SpadRef{index_bufs_.at({a.index_buffer, a.index_offset}),
                                                             Affine::of(0), Affine::of(0), 0},
                     {1}, {Extent::of(1)}, kLoadTag));
      }
  }

  // A tile of an operand input: rows along `ra`, columns along `ca`. An input
  // read through a fused gather moves the rows of its batch's index.
  void load_tile(const Access& a, size_t ra, size_t ca, const Affine& r0, const Affine& c0, const Extent& re,
                 const Extent& ce, int buf, const Affine& slot, int64_t ld) {
    Stmt s = dma(true, a.buffer, base(a) + r0 * a.strides[ra] + c0 * a.strides[ca], {a.strides[ra], a.strides[ca]},
                 SpadRef{buf, slot, Affine::of(0), 0}, {ld, 1}, {re, ce}, kLoadTag);
    if (a.index_buffer >= 0) {
      DmaOp& d = std::get<DmaOp>(s.node);
      d.index = SpadRef{index_bufs_.at({a.index_buffer, a.index_offset}), Affine::of(0), Affine::of(0), 0};
      d.index_strides = {0, 0};
      d.index_scale = a.index_scale;
      d.index_limit = a.index_limit;
    }
    kb_.emit(std::move(s));
  }

  // An A prologue input constant along k (a norm's per-row scale): loaded at
  // its logical shape, one value per row, and broadcast by the vector unit;
  // expanded to the tile, its DMA would fetch the same element TK times.
  bool row_broadcast(const Access& a) const { return a.index_buffer < 0 && K_ > 1 && a.strides[rank_ - 1] == 0; }

  void prologue(const std::vector<int>& in_bufs, const std::vector<Access>& ins, const ProgramAttr& p, int dst,
                const Affine& slot, const Extent& re, const Extent& ce, int64_t ld, const char* label) {
    VecBuilder vb(label, re, ce);
    std::vector<int> values;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (dst == A_ && row_broadcast(ins[i]))
        values.push_back(vb.load(value_type(ins[i].dtype), SpadRef{in_bufs[i], slot, Affine::of(0), 1}, LoadBroadcast::Row));
      else
        values.push_back(vb.load(value_type(ins[i].dtype), SpadRef{in_bufs[i], slot, Affine::of(0), ld}, LoadBroadcast::Full));
    }
    int v = vb.full(emit_program(vb, p, values, {}));
    if (vb.type(v) != value_type(j_.dtype)) v = vb.op(VecOp::Cast, value_type(j_.dtype), {v});
    vb.store(SpadRef{dst, slot, Affine::of(0), ld}, v);
    kb_.emit(vb.done());
  }

  // What compute() emits: a block's loads and its steps, or one of them (a
  // block of one k tile whose loads are issued a block early, see columns).
  enum class Part : uint8_t { All, Loads, Steps };

  void compute(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt, Part part = Part::All) {
    const int64_t TM = t_.TM, TN = t_.TN, TK = t_.TK;
    const Affine cslot = blk * MT_ + mt;
    const Extent me = ragged(TM, M_, mt, MT_);
    const Affine m0 = mt * TM;
    const size_t rm = rank_ - 2, rk = rank_ - 1;  // A's axes; B's are (rank-2: k, rank-1: n)
    if (part != Part::All) SPOOL_ASSERT(KT_ == 1, "a block's loads are issued apart only with one k tile");
    if (part == Part::Loads) load_per_col(n0, W, blk);
    for (size_t i = 0; i < j_.epilogue.size() && part != Part::Steps; ++i) {
      const Access& e = j_.epilogue[i];
      if (epi_kind_[i] == EpiKind::Full)
        load_tile(e, rank_ - 2, rank_ - 1, m0, n0, me, Extent::of(W), epi_buf_[i], cslot, TN);
      else if (epi_kind_[i] == EpiKind::PerRow)
        kb_.emit(dma(true, e.buffer, base(e) + m0 * e.strides[rank_ - 2], {M_ == 1 ? 0 : e.strides[rank_ - 2]},
                     SpadRef{epi_buf_[i], cslot, Affine::of(0), 0}, {1}, {me}, kLoadTag));
    }
    // The k loop is software pipelined: the loads of k tile i + 1 are issued
    // before the array steps of tile i (they go to the other operand slot).
    // The front end issues in order and stalls once the array's issue queue
    // is full, so loads placed after a tile's steps would reach the DMA
    // engine only when most of those steps had started, leaving DRAM idle
    // for that time: a GEMV (M = 1), bound by its weight reads, lost ~20%.
    auto k_load = [&](const Affine& kidx, const Affine& slot) {
      const Extent ke = ragged(TK, K_, kidx, KT_);
      const Affine k0 = kidx * TK;
      switch (a_mode_) {
        case OperandLoad::Direct: load_tile(j_.a[0], rm, rk, m0, k0, me, ke, A_, slot, TK); break;
        case OperandLoad::Transposed: load_tile(j_.a[0], rk, rm, k0, m0, ke, me, A_, slot, TM); break;
        case OperandLoad::Prologue:
          for (size_t i = 0; i < j_.a.size(); ++i) {
            const Access& a = j_.a[i];
            if (row_broadcast(a))
              kb_.emit(dma(true, a.buffer, base(a) + m0 * a.strides[rm], {M_ == 1 ? 0 : a.strides[rm]},
                           SpadRef{a_in_[i], slot, Affine::of(0), 0}, {1}, {me}, kLoadTag));
            else
              load_tile(a, rm, rk, m0, k0, me, ke, a_in_[i], slot, TK);
          }
          break;
      }
      switch (b_mode_) {
        case OperandLoad::Direct: load_tile(j_.b[0], rank_ - 2, rank_ - 1, k0, n0, ke, Extent::of(W), B_, slot, TN); break;
        case OperandLoad::Transposed: load_tile(j_.b[0], rank_ - 1, rank_ - 2, n0, k0, Extent::of(W), ke, B_, slot, TK); break;
        case OperandLoad::Prologue:
          for (size_t i = 0; i < j_.b.size(); ++i) {
            if (b_prologue_t_)
              load_tile(j_.b[i], rank_ - 1, rank_ - 2, n0, k0, Extent::of(W), ke, b_in_[i], slot, TK);
            else
              load_tile(j_.b[i], rank_ - 2, rank_ - 1, k0, n0, ke, Extent::of(W), b_in_[i], slot, TN);
          }
          break;
      }
    };
    auto k_run = [&](const Affine& kidx, bool accumulate, const Affine& slot) {
      const Extent ke = ragged(TK, K_, kidx, KT_);
      if (a_mode_ == OperandLoad::Prologue) prologue(a_in_, j_.a, j_.a_program, A_, slot, me, ke, TK, "prologue.a");
      if (b_mode_ == OperandLoad::Prologue && b_prologue_t_)
        prologue(b_in_, j_.b, j_.b_program, B_, slot, Extent::of(W), ke, TK, "prologue.b");
      else if (b_mode_ == OperandLoad::Prologue)
        prologue(b_in_, j_.b, j_.b_program, B_, slot, ke, Extent::of(W), TN, "prologue.b");
      // Array steps: k chunks of the array's rows, column chunks of its
      // columns. Only the last k tile (peeled, so its index is a constant)
      // can be ragged: its chunks stop at K.
      const int64_t chunks = ceil_div(TK, Nr_);
      const int64_t rest = kidx.is_constant() ? std::min(TK, K_ - kidx.constant * TK) : TK;
      for (int64_t kc = 0; kc < chunks && kc * Nr_ < rest; ++kc) {
        Extent kce = ke;
        if (chunks > 1) kce = Extent::of(std::min(Nr_, rest - kc * Nr_));
        for (int64_t u = 0; u * Nc_ < W; ++u) {
          MatmulOp mm;
          mm.m = me;
          mm.k = kce;
          mm.n = Extent::of(std::min(Nc_, W - Nc_ * u));
          mm.c = SpadRef{C_, cslot, Affine::of(Nc_ * u), TN};
          if (a_mode_ == OperandLoad::Transposed) {
            mm.a = SpadRef{A_, slot, Affine::of(kc * Nr_ * TM), TM};
            mm.trans_a = true;
          } else {
            mm.a = SpadRef{A_, slot, Affine::of(kc * Nr_), TK};
          }
          if (b_mode_ == OperandLoad::Transposed || b_prologue_t_) {
            mm.b = SpadRef{B_, slot, Affine::of(Nc_ * u * TK + kc * Nr_), TK};
            mm.trans_b = true;
          } else {
            mm.b = SpadRef{B_, slot, Affine::of(kc * Nr_ * TN + Nc_ * u), TN};
          }
          mm.accumulate = accumulate || kc >= (split_k_ ? 2 : 1);
          if (split_k_ && kc % 2 == 1) mm.c.buffer = C2_;
          kb_.emit(Stmt{std::move(mm)});
        }
      }
    };
    // Software pipelined with distance D = slots - 1: tiles 0 .. D-1 load
    // first; tile i's steps follow the load of tile i + D; the last D tiles
    // (the last one possibly ragged) run after the loop without loads.
    const Affine slot0 = cslot * KT_;
    const int64_t D = slots_ - 1;
    auto at = [&](int64_t i) { return Affine::of(i); };
    if (part == Part::Loads) {
      k_load(at(0), slot0);
      return;
    }
    if (part == Part::All) {
      for (int64_t i = 0; i < std::min(D, KT_); ++i) k_load(at(i), slot0 + at(i));
      if (D < KT_) k_load(at(D), slot0 + at(D));
    }
    k_run(at(0), false, slot0);
    if (KT_ - D - 1 > 0) {
      const int kk = kb_.loop_begin("k", KT_ - D - 1);
      k_load(Affine::var(kk) + at(1 + D), slot0 + Affine::var(kk) + at(1 + D));
      k_run(Affine::var(kk) + at(1), true, slot0 + Affine::var(kk) + at(1));
      kb_.loop_end();
    }
    for (int64_t i = std::max<int64_t>(1, KT_ - D); i < KT_; ++i) k_run(at(i), true, slot0 + at(i));
    if (split_k_) {  // the second accumulator's chunks into the first
      VecBuilder vb("ksum", me, Extent::of(W));
      const int x = vb.load(ScalarType::F32, SpadRef{C_, cslot, Affine::of(0), TN}, LoadBroadcast::Full);
      const int y = vb.load(ScalarType::F32, SpadRef{C2_, cslot, Affine::of(0), TN}, LoadBroadcast::Full);
      vb.store(SpadRef{C_, cslot, Affine::of(0), TN}, vb.op(VecOp::Add, ScalarType::F32, {x, y}));
      kb_.emit(vb.done());
    }
    const bool round = j_.dtype != DType::F32;
    if (has_epilogue_ || round || !in_place_ || j_.row_softmax) {
      VecBuilder vb("epilogue", me, Extent::of(W));
      int acc = vb.load(ScalarType::F32, SpadRef{C_, cslot, Affine::of(0), TN}, LoadBroadcast::Full);
      if (round) acc = vb.op(VecOp::Cast, value_type(j_.dtype), {acc});  // the product in the operands' dtype
      std::vector<int> values{acc};
      for (size_t i = 0; i < j_.epilogue.size(); ++i) {
        const ScalarType t = value_type(j_.epilogue[i].dtype);
        const Affine sl = epi_kind_[i] == EpiKind::PerCol ? blk : cslot;
        switch (epi_kind_[i]) {
          case EpiKind::Full: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), TN}, LoadBroadcast::Full)); break;
          case EpiKind::PerCol: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Col)); break;
          case EpiKind::PerRow: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Row)); break;
          case EpiKind::Literal: values.push_back(vb.constant(t, j_.epilogue[i].literal)); break;
        }
      }
      int v = vb.full(emit_program(vb, j_.epilogue_program, values, {}));
      if (j_.row_softmax) {
        const ScalarType F = ScalarType::F32;
        if (vb.type(v) != F) v = vb.op(VecOp::Cast, F, {v});
        const int m = vb.op(VecOp::ReduceMax, F, {v});
        const int e = vb.op(VecOp::Exp, F, {vb.op(VecOp::Sub, F, {v, m})});
        v = vb.op(VecOp::Mul, F, {e, vb.op(VecOp::Recip, F, {vb.op(VecOp::ReduceSum, F, {e})})});
      }
      const ScalarType ot = value_type(j_.out.dtype);
      if (vb.type(v) != ot) v = vb.op(VecOp::Cast, ot, {v});
      vb.store(SpadRef{O_, cslot, Affine::of(0), TN}, v);
      kb_.emit(vb.done());
    }
  }

  void store(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt) {
    const Access& o = j_.out;
    kb_.emit(dma(false, o.buffer, base(o) + mt * (t_.TM * o.strides[rank_ - 2]) + n0 * o.strides[rank_ - 1],
                 {o.strides[rank_ - 2], o.strides[rank_ - 1]}, SpadRef{O_, blk * MT_ + mt, Affine::of(0), 0}, {t_.TN, 1},
                 {ragged(t_.TM, M_, mt, MT_), Extent::of(W)}, kStoreTag));
  }

  const GemmJob& j_;
  const target::NpuConfig& c_;
  const Tile t_;
  const Split split_;
  KernelBuilder kb_;
  size_t rank_ = 2;
  int64_t M_ = 0, K_ = 0, N_ = 0, Nr_ = 0, Nc_ = 0, MT_ = 0, KT_ = 0;
  OperandLoad a_mode_ = OperandLoad::Direct, b_mode_ = OperandLoad::Direct;
  bool b_prologue_t_ = false;  // B's prologue runs on [n, k] tiles (see build)
  int A_ = -1, B_ = -1, C_ = -1, O_ = -1;
  std::vector<int> a_in_, b_in_, epi_buf_;
  std::vector<EpiKind> epi_kind_;
  bool has_epilogue_ = false, in_place_ = true;
  bool split_k_ = false;  // k chunks alternate between C_ and C2_ (see build)
  int64_t slots_ = 2;     // operand slots (see build)
  int C2_ = -1;
  std::vector<std::tuple<size_t, int, int64_t>> batch_vars_;  // (axis, loop variable or -1, first index)
  std::map<std::pair<int, int64_t>, int> index_bufs_;         // (index buffer, offset) -> scratchpad buffer
};

bool has_iota(const ProgramAttr& p) {
  for (const ProgramInstr& in : p.instrs)
    if (in.op == Op::Iota) return true;
  return false;
}

// The analytic cost of a tiling, in core cycles: the arrays' steps (timing.cpp's
// chain formula), DRAM bytes at the channels' peak, DMA descriptor setup, and
// the vector work of prologues and epilogue; the arrays and DMA overlap.
double estimate(const GemmJob& job, const target::NpuConfig& c, const Tile& t) {
  const Shape& as = job.a[0].shape;
  const size_t r = as.size();
  const double M = double(as[r - 2]), K = double(as[r - 1]), N = double(job.b[0].shape[r - 1]);
  double batches = 1;
  for (size_t i = 0; i + 2 < r; ++i) batches *= double(as[i]);
  const double R = double(c.systolic.rows), Cc = double(c.systolic.cols);
  const double MT = std::ceil(M / double(t.TM)), NT = std::ceil(N / double(t.TN)), KT = std::ceil(K / double(t.TK));
  const double tm = std::min(double(t.TM), M);
  const double steps = batches * NT * MT * KT * std::ceil(double(t.TK) / R) * std::ceil(std::min(double(t.TN), N) / Cc);
  const double per_step = c.systolic.weight_buffers >= 2 ? std::max(tm, R) : 2 * R + tm + Cc;
  const double array_cycles = steps * per_step / double(c.systolic.arrays);
  const double eb = double(dtype_bytes(job.dtype));
  double bytes = batches * (NT * M * K * eb * double(job.a.size()) + MT * K * N * eb * double(job.b.size()) +
                            M * N * double(dtype_bytes(job.out.dtype)) * (1.0 + double(job.epilogue.size())));
  const double dram_per_cycle = double(c.dram.channels * c.dram.bytes_per_cycle) * c.dram.clock_mhz / c.core_clock_mhz;
  const double dram_cycles = bytes / dram_per_cycle;
  const double descriptors = batches * NT * MT * (KT * double(job.a.size() + job.b.size()) + 1.0 + double(job.epilogue.size()));
  const double setup = descriptors * double(c.dma.setup_cycles);
  const double lanes_elems = double(c.vector.lanes * c.vector.vlen_bits / 32);
  const double vector_cycles = batches * NT * MT * (double(c.vector.step_overhead_cycles) + tm * double(t.TN) / lanes_elems);
  return std::max({array_cycles, dram_cycles, vector_cycles}) + setup + double(c.launch.fixed_cycles);
}

std::vector<Tile> candidates(const GemmJob& job, const target::NpuConfig& c) {
  const Shape& as = job.a[0].shape;
  const size_t r = as.size();
  const int64_t M = as[r - 2], K = as[r - 1], N = job.b[0].shape[r - 1];
  const int64_t R = c.systolic.rows, Cc = c.systolic.cols;
  std::vector<int64_t> tks, tns, tms;
  if (K <= R) {
    tks.push_back(K);
  } else {
    // Any multiple of R up to 8R (the last k tile may be ragged).
    for (int64_t tk = R; tk <= 8 * R && (tks.empty() || tks.back() < K); tk *= 2)
      tks.push_back(std::min(tk, ceil_div(K, R) * R));
  }
  const int64_t unit = std::min(N, Cc * c.systolic.arrays);
  if (job.row_softmax) {
    tns.push_back(N);  // the softmax needs whole rows in one tile
  } else {
    for (int64_t tn = unit;; tn *= 2) {
      tns.push_back(std::min(tn, N));
      if (tn >= N || tn >= 64 * unit) break;
    }
  }
  for (int64_t tm = 8; tm < M && tm <= 4096; tm *= 2) tms.push_back(tm);
  if (M <= 4096) tms.push_back(M);
  if (tms.empty()) tms.push_back(4096);
  std::vector<Tile> out;
  for (int64_t tk : tks)
    for (int64_t tn : tns)
      for (int64_t tm : tms) {
        Tile t{tm, tn, tk, 0};
        t.cost = estimate(job, c, t);
        out.push_back(t);
      }
  std::sort(out.begin(), out.end(), [](const Tile& a, const Tile& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.TM != b.TM) return a.TM > b.TM;
    if (a.TN != b.TN) return a.TN > b.TN;
    return a.TK > b.TK;
  });
  std::vector<Tile> unique;
  for (const Tile& t : out)
    if (unique.empty() || t.TM != unique.back().TM || t.TN != unique.back().TN || t.TK != unique.back().TK)
      unique.push_back(t);
  return unique;
}

// What determines the kernel apart from buffer addresses.
std::string signature(const GemmJob& job) {
  std::string s = fmt::format("{}|{}|{}|{}|{}|", dtype_name(job.dtype), program_str(job.a_program),
                              program_str(job.b_program), program_str(job.epilogue_program), job.row_softmax);
  auto add = [&](const Access& a) {
    s += fmt::format("{}{}{}{}{};", dtype_name(a.dtype), shape_str(a.shape), shape_str(a.strides),
                     a.is_literal ? fmt::format("={}", a.literal) : "",
                     a.index_buffer >= 0 ? fmt::format("@{}x{}<{}", dtype_name(a.index_dtype), a.index_scale,
                                                       a.index_limit)
                                         : "");
  };
  for (const Access& a : job.a) add(a);
  s += "|";
  for (const Access& b : job.b) add(b);
  s += "|";
  for (const Access& e : job.epilogue) add(e);
  s += "|";
  add(job.out);
  return s;
}

// Cycles of the kernels alone (independent of each other), by the caller's tile timer.
int64_t simulated_cycles(const Emitter& em, const std::vector<Kernel>& kernels) {
  npu::Program p;
  p.name = "tile";
  p.spad_bytes = em.program.spad_bytes;
  p.buffers = em.program.buffers;
  p.kernels = kernels;
  for (Kernel& k : p.kernels) k.deps.clear();
  return em.options.tile_cycles(p);
}

// Batch axes next to M over which every B input is broadcast, folded into
// M: grouped-query attention multiplies [KV heads, group, S, D] by K^T read
// as [KV heads, 1, D, T], and as a batch of group x S-row products each
// query head would load the same keys again; as one product of group * S
// rows per KV head the keys are loaded once (and a decode step's one-row
// products become group-row ones). An axis folds only where every A input,
// epilogue input and the output step over it exactly as over a run of M rows
// (stride = M * the M stride), so the folded kernel reads and writes the same
// elements. Operands read through a fused gather keep their batch axes (the
// index is loaded per batch of axis 0).
GemmJob fold_broadcast_batches(GemmJob job) {
  auto gathered = [](const std::vector<Access>& ins) {
    return std::any_of(ins.begin(), ins.end(), [](const Access& a) { return a.index_buffer >= 0; });
  };
  if (gathered(job.a) || gathered(job.b)) return job;
  for (;;) {
    const size_t r = job.out.shape.size();
    if (r < 3) return job;
    const size_t x = r - 3, m = r - 2;
    const int64_t rows = job.out.shape[m];
    // With one row, any stride over the axis is the folded rows' stride.
    auto follows_rows = [&](const Access& a) {
      return a.shape.size() == r && a.strides.size() == r && a.shape[x] == job.out.shape[x] &&
             (rows == 1 || a.strides[x] == rows * a.strides[m]);
    };
    bool foldable = job.out.shape[x] > 1 && follows_rows(job.out);
    for (const Access& b : job.b) foldable = foldable && b.strides.size() == r && b.strides[x] == 0;
    for (const Access& a : job.a) foldable = foldable && follows_rows(a);
    for (const Access& e : job.epilogue) foldable = foldable && follows_rows(e);
    if (!foldable) return job;
    auto fold = [&](Access& a, bool into_rows) {
      if (into_rows && rows == 1) a.strides[m] = a.strides[x];
      if (into_rows) a.shape[m] *= a.shape[x];
      a.shape.erase(a.shape.begin() + static_cast<std::ptrdiff_t>(x));
      a.strides.erase(a.strides.begin() + static_cast<std::ptrdiff_t>(x));
    };
    for (Access& a : job.a) fold(a, true);
    for (Access& b : job.b) fold(b, false);
    for (Access& e : job.epilogue) fold(e, true);
    fold(job.out, true);
  }
}

}  // namespace

std::optional<std::string> emit_gemm(Emitter& em, const GemmJob& unfolded) {
  const GemmJob job = fold_broadcast_batches(unfolded);
  if (has_iota(job.a_program) || has_iota(job.b_program) || has_iota(job.epilogue_program))
    return std::string("a program reads an iota");
  if (!is_float(job.dtype)) fail("lower: {}: integer GEMMs do not run on the systolic arrays", job.info.name);
  // The kernels of a tile: one, or its independent tiles over the cores (the
  // m blocks, or batch axis 0: the splits whose DRAM windows are disjoint).
  auto group = [&](const Tile& t, bool allow_split, int64_t& peak) {
    const int cores = em.options.multi_core && allow_split ? em.config.cores : 1;
    const Shape& as = job.a[0].shape;
    const int64_t MT = ceil_div(as[as.size() - 2], t.TM);
    int64_t batches = 1;
    for (size_t i = 0; i + 2 < as.size(); ++i) batches *= as[i];
    const bool batch = batches > 1;
    const int64_t units = batch ? (as[0] >= cores ? as[0] : 1) : MT;
    std::vector<Kernel> kernels;
    peak = 0;
    const int64_t parts = cores <= 1 || units < 2 ? 1 : std::min<int64_t>(cores, units);
    for (int64_t p = 0; p < parts; ++p) {
      int64_t fp = 0;
      if (parts == 1) {
        kernels.push_back(GemmKernel(job, em.config, t).build(fp));
      } else {
        const Split split{batch, units * p / parts, units * (p + 1) / parts};
        kernels.push_back(GemmKernel(job, em.config, t, split, fmt::format("{}.c{}", job.info.name, p)).build(fp));
      }
      peak = std::max(peak, fp);
    }
    return kernels;
  };
  // Spreading over cores is decided by timing both forms: no timer, no spreading.
  const bool can_split = em.options.multi_core && em.config.cores > 1 && em.options.tile_cycles;
  auto emit = [&](const Tile& t, std::vector<Kernel> kernels, int64_t footprint) {
    KernelInfo info = job.info;
    info.tile = fmt::format("m{} n{} k{}", t.TM, t.TN, t.TK);
    em.add_kernels(std::move(kernels), info, footprint);
  };
  const std::string key = signature(job);
  if (auto it = em.gemm_tiles.find(key); it != em.gemm_tiles.end()) {
    const Tile t{it->second[0], it->second[1], it->second[2], 0, it->second[4]};
    int64_t footprint = 0;
    std::vector<Kernel> kernels = group(t, it->second[3] != 0, footprint);
    SPOOL_ASSERT(footprint <= em.budget, "a cached GEMM tile no longer fits");
    emit(t, std::move(kernels), footprint);
    return std::nullopt;
  }
  // In analytic cost order, the first candidates that fit (shrinking until
  // one does); the tile timer picks among them.
  int64_t smallest = -1;
  struct Fit {
    Tile tile;
    std::vector<Kernel> kernels;
    int64_t footprint;
    bool split;
  };
  std::vector<Fit> fits;
  const size_t wanted =
      em.options.tile_cycles ? static_cast<size_t>(std::max(1, em.options.gemm_simulated_candidates)) : 1;
  const int64_t K = job.a[0].shape[job.a[0].shape.size() - 1], N = job.b[0].shape[job.b[0].shape.size() - 1];
  for (Tile t : candidates(job, em.config)) {
    int64_t footprint = 0;
    std::vector<Kernel> kernels = group(t, false, footprint);
    if (footprint > em.budget && operand_slots(t, K, N) > 2) {  // the same tile with two operand slots
      t.slots = 2;
      kernels = group(t, false, footprint);
    }
    if (footprint > em.budget) {
      if (smallest < 0 || footprint < smallest) smallest = footprint;
      continue;
    }
    fits.push_back(Fit{t, std::move(kernels), footprint, false});
    if (can_split) {
      // The same tile spread over the cores, when it splits: the timer
      // weighs the launches against the parallel work.
      int64_t split_footprint = 0;
      std::vector<Kernel> parts = group(t, true, split_footprint);
      if (parts.size() > 1) fits.push_back(Fit{t, std::move(parts), split_footprint, true});
    }
    if (fits.size() >= wanted * (can_split ? 2 : 1)) break;
  }
  if (fits.empty())
    return fmt::format("the smallest tile needs {} bytes of scratchpad, the budget is {}", smallest, em.budget);
  size_t best = 0;
  if (fits.size() > 1) {
    std::vector<int64_t> cycles;
    for (const Fit& f : fits) cycles.push_back(simulated_cycles(em, f.kernels));
    const int64_t fastest = *std::min_element(cycles.begin(), cycles.end());
    // Within kTieTolerance of the fastest, the tile with the longest k
    // tiles wins (then the fastest): its operand rows are longer DMA runs,
    // so fewer descriptors, fewer DRAM rows opened, and a program that is
    // cheaper to simulate — which decides how long the largest models take.
    constexpr double kTieTolerance = 0.005;
    for (size_t i = 0; i < fits.size(); ++i) {
      if (static_cast<double>(cycles[i]) > static_cast<double>(fastest) * (1 + kTieTolerance)) continue;
      const bool tied_best = static_cast<double>(cycles[best]) <= static_cast<double>(fastest) * (1 + kTieTolerance);
      if (!tied_best || fits[i].tile.TK > fits[best].tile.TK ||
          (fits[i].tile.TK == fits[best].tile.TK && cycles[i] < cycles[best]))
        best = i;
    }
  }
  em.gemm_tiles[key] = {fits[best].tile.TM, fits[best].tile.TN, fits[best].tile.TK, fits[best].split ? 1 : 0,
                        operand_slots(fits[best].tile, K, N)};
  emit(fits[best].tile, std::move(fits[best].kernels), fits[best].footprint);
  return std::nullopt;
}

}  // namespace spool::lower::detail
