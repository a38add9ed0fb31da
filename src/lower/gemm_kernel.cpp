// The GEMM/BMM generator (gemm_kernel.hpp), its buffers and loops: batch
// axes, column blocks of TN columns (whole multiples of arrays x array
// columns), m blocks of TM rows streamed through the arrays (software
// pipelined: a block's store is issued after the next block's loads). A
// block's k tiles, prologues and epilogue are built by gemm_block.cpp.

#include "gemm_kernel.hpp"

#include <spool/support/error.hpp>

#include <algorithm>
#include <tuple>

namespace spool::lower::detail {

using namespace spool::npu;

int64_t operand_slots(const GemmTile& t, int64_t K, int64_t N) {
  if (t.slots > 0) return t.slots;
  const int64_t kt = ceil_div(K, t.TK), blocks = N / t.TN;
  return t.TM <= 64 && (kt >= 3 || (kt == 1 && blocks >= 3)) ? 3 : 2;
}

GemmKernel::GemmKernel(const GemmJob& job, const target::NpuConfig& c, const GemmTile& t, GemmSplit split,
                       std::string name)
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
  NB_ = ceil_div(N_, t.TN);
}

Kernel GemmKernel::build(int64_t& footprint) {
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
  // the array steps of tile i (one slot, a choice: no prefetch). Two
  // suffice when the arrays stream many rows per weight tile; a block of
  // few rows (a GEMV, decode attention) is bound by its operand reads and
  // by weight preloads about equally, and with two slots the DMA engine
  // would wait out each tile's round trip.
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

// How an operand tile reaches the array: straight from DRAM (rows along
// `outer_axis` contiguous or not), or through a vector prologue.
GemmKernel::OperandLoad GemmKernel::operand_mode(const std::vector<Access>& ins, const ProgramAttr& p,
                                                 size_t outer_axis, size_t inner_axis) {
  if (ins.size() != 1 || !p.instrs.empty() || ins[0].dtype != j_.dtype) return OperandLoad::Prologue;
  const Access& a = ins[0];
  if (a.strides[inner_axis] != 1 && a.strides[outer_axis] == 1) return OperandLoad::Transposed;
  return OperandLoad::Direct;
}

void GemmKernel::batches(size_t axis) {
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
bool GemmKernel::pipelines_across_batches() const {
  const int64_t mlo = split_.batch ? 0 : split_.lo, mhi = split_.batch || split_.hi < 0 ? MT_ : split_.hi;
  const int64_t full = N_ / t_.TN;
  return index_bufs_.empty() && mhi - mlo == 1 && N_ % t_.TN == 0 && full >= 2 && full % 2 == 0;
}

// Batches lo .. lo + n - 1 of the innermost batch axis, their column
// pipelines chained: each batch's last store is issued after the next
// batch's first block. The first batch is peeled (nothing to store before
// it) and the last store follows the loop.
void GemmKernel::batches_pipelined(size_t axis, int64_t lo, int64_t n) {
  const int64_t TN = t_.TN, full = N_ / TN;
  const int64_t mlo = split_.batch ? 0 : split_.lo;
  const Affine m = Affine::of(mlo);
  // One k tile: a block's loads are issued before the previous block's
  // steps (see columns); the first block of a batch loads with the second.
  // That needs a second operand slot: with one, each block loads, then steps.
  const bool early = KT_ == 1 && slots_ >= 2;
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

Affine GemmKernel::base(const Access& a) const {
  Affine off = Affine::of(a.offset);
  for (const auto& [axis, var, lo] : batch_vars_) {
    if (var >= 0) off = off + Affine::var(var, a.strides[axis]);
    off = off + Affine::of(lo * a.strides[axis]);
  }
  return off;
}

void GemmKernel::columns() {
  const int64_t TN = t_.TN;
  const int64_t full = N_ / TN, rest = N_ % TN;
  const int64_t mlo = split_.batch ? 0 : split_.lo, mhi = split_.batch || split_.hi < 0 ? MT_ : split_.hi;
  if (t_.rows_outer && mhi - mlo > 1 && full + (rest > 0 ? 1 : 0) > 1) {
    rows_outer();
    return;
  }
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

// The other loop order: m blocks outer, each m block's column blocks
// inner, a block's store issued after the next block's loads and steps
// (C's two slots alternate over the column blocks of one m block; the last
// store of an m block follows its loop). Per-column epilogue operands load
// with every block.
void GemmKernel::rows_outer() {
  const int64_t TN = t_.TN;
  const int64_t full = N_ / TN, rest = N_ % TN;
  const int64_t mlo = split_.batch ? 0 : split_.lo, mhi = split_.batch || split_.hi < 0 ? MT_ : split_.hi;
  const int mm = kb_.loop_begin("m", mhi - mlo);
  const Affine mt = Affine::var(mm) + Affine::of(mlo);
  auto block = [&](const Affine& n0, int64_t W, const Affine& blk) {
    load_per_col(n0, W, blk);
    compute(n0, W, blk, mt);
  };
  if (full > 0) {
    block(Affine::of(0), TN, Affine::of(0));
    if (full > 1) {
      const int nn = kb_.loop_begin("n", full - 1);
      block(Affine::var(nn, TN) + Affine::of(TN), TN, Affine::var(nn) + Affine::of(1));
      store(Affine::var(nn, TN), TN, Affine::var(nn), mt);
      kb_.loop_end();
    }
  }
  if (rest > 0) block(Affine::of(full * TN), rest, Affine::of(full));
  if (full > 0) store(Affine::of((full - 1) * TN), TN, Affine::of(full - 1), mt);
  if (rest > 0) store(Affine::of(full * TN), rest, Affine::of(full), mt);
  kb_.loop_end();
}

void GemmKernel::load_per_col(const Affine& n0, int64_t W, const Affine& blk) {
  for (size_t i = 0; i < j_.epilogue.size(); ++i) {
    if (epi_kind_[i] != EpiKind::PerCol) continue;
    const Access& e = j_.epilogue[i];
    kb_.emit(dma(true, e.buffer, base(e) + n0 * e.strides[rank_ - 1], {e.strides[rank_ - 1]},
                 SpadRef{epi_buf_[i], blk, Affine::of(0), 0}, {1}, {Extent::of(W)}, kLoadTag));
  }
}

void GemmKernel::load_indices(int var, int64_t lo) {
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

void GemmKernel::store(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt) {
  const Access& o = j_.out;
  kb_.emit(dma(false, o.buffer, base(o) + mt * (t_.TM * o.strides[rank_ - 2]) + n0 * o.strides[rank_ - 1],
               {o.strides[rank_ - 2], o.strides[rank_ - 1]}, SpadRef{O_, slot_of(blk, mt), Affine::of(0), 0},
               {t_.TN, 1}, {ragged(t_.TM, M_, mt, MT_), Extent::of(W)}, kStoreTag));
}

}  // namespace spool::lower::detail
