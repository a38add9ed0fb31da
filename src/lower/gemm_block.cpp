// One block of the GEMM/BMM generator (gemm_kernel.hpp): its k tiles of TK
// (multiples of the array's rows), software pipelined over the operand
// slots. Prologues run on the vector unit over the loaded operand tiles; the
// epilogue runs on the accumulator tile before the store, with broadcast
// operands (a bias) loaded at their logical shape, one value per column.

#include "gemm_kernel.hpp"

#include <spool/support/error.hpp>

#include <algorithm>

namespace spool::lower::detail {

using namespace spool::npu;

// A tile of an operand input: rows along `ra`, columns along `ca`. An input
// read through a fused gather moves the rows of its batch's index.
void GemmKernel::load_tile(const Access& a, size_t ra, size_t ca, const Affine& r0, const Affine& c0, const Extent& re,
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
bool GemmKernel::row_broadcast(const Access& a) const {
  return a.index_buffer < 0 && K_ > 1 && a.strides[rank_ - 1] == 0;
}

void GemmKernel::prologue(const std::vector<int>& in_bufs, const std::vector<Access>& ins, const ProgramAttr& p,
                          int dst, const Affine& slot, const Extent& re, const Extent& ce, int64_t ld,
                          const char* label) {
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

void GemmKernel::compute(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt, Part part) {
  const int64_t TM = t_.TM;
  const Affine cslot = slot_of(blk, mt);
  const Block b{n0, W, blk, mt, cslot, mt * TM, ragged(TM, M_, mt, MT_)};
  if (part != Part::All) SPOOL_ASSERT(KT_ == 1, "a block's loads are issued apart only with one k tile");
  if (part == Part::Loads) load_per_col(n0, W, blk);
  if (part != Part::Steps) load_epilogue_operands(b);
  // The k loop is software pipelined: the loads of k tile i + 1 are issued
  // before the array steps of tile i (they go to the other operand slot).
  // The front end issues in order and stalls once the array's issue queue
  // is full, so loads placed after a tile's steps would reach the DMA
  // engine only when most of those steps had started, leaving DRAM idle
  // for that time: a GEMV (M = 1), bound by its weight reads, lost ~20%.
  // The pipeline's distance is D = slots - 1: tiles 0 .. D-1 load first;
  // tile i's steps follow the load of tile i + D; the last D tiles (the last
  // one possibly ragged) run after the loop without loads. With one slot
  // (D = 0) there is no pipeline.
  const Affine slot0 = cslot * KT_;
  const int64_t D = slots_ - 1;
  auto at = [&](int64_t i) { return Affine::of(i); };
  if (part == Part::Loads) {
    k_load(b, at(0), slot0);
    return;
  }
  if (part == Part::All) {
    for (int64_t i = 0; i < std::min(D, KT_); ++i) k_load(b, at(i), slot0 + at(i));
    if (D < KT_) k_load(b, at(D), slot0 + at(D));
  }
  k_run(b, at(0), false, slot0);
  if (D == 0) {
    // One slot: each tile loads, then steps. The loop's steps take whole k
    // tiles, so the last tile (possibly ragged) is peeled after it.
    if (KT_ > 2) {
      const int kk = kb_.loop_begin("k", KT_ - 2);
      k_load(b, Affine::var(kk) + at(1), slot0 + Affine::var(kk) + at(1));
      k_run(b, Affine::var(kk) + at(1), true, slot0 + Affine::var(kk) + at(1));
      kb_.loop_end();
    }
    if (KT_ > 1) {
      k_load(b, at(KT_ - 1), slot0 + at(KT_ - 1));
      k_run(b, at(KT_ - 1), true, slot0 + at(KT_ - 1));
    }
  } else if (KT_ - D - 1 > 0) {
    const int kk = kb_.loop_begin("k", KT_ - D - 1);
    k_load(b, Affine::var(kk) + at(1 + D), slot0 + Affine::var(kk) + at(1 + D));
    k_run(b, Affine::var(kk) + at(1), true, slot0 + Affine::var(kk) + at(1));
    kb_.loop_end();
  }
  if (D > 0)
    for (int64_t i = std::max<int64_t>(1, KT_ - D); i < KT_; ++i) k_run(b, at(i), true, slot0 + at(i));
  if (split_k_) add_split_k(b);
  const bool round = j_.dtype != DType::F32;
  if (has_epilogue_ || round || !in_place_ || j_.softmax != FusedSoftmax::None) epilogue(b);
}

// The epilogue inputs of a whole tile or of one value per row; those of one
// value per column load with the column block (load_per_col).
void GemmKernel::load_epilogue_operands(const Block& b) {
  for (size_t i = 0; i < j_.epilogue.size(); ++i) {
    const Access& e = j_.epilogue[i];
    if (epi_kind_[i] == EpiKind::Full)
      load_tile(e, rank_ - 2, rank_ - 1, b.m0, b.n0, b.me, Extent::of(b.W), epi_buf_[i], b.cslot, t_.TN);
    else if (epi_kind_[i] == EpiKind::PerRow)
      kb_.emit(dma(true, e.buffer, base(e) + b.m0 * e.strides[rank_ - 2], {M_ == 1 ? 0 : e.strides[rank_ - 2]},
                   SpadRef{epi_buf_[i], b.cslot, Affine::of(0), 0}, {1}, {b.me}, kLoadTag));
  }
}

// The loads of k tile `kidx` into operand slot `slot`.
void GemmKernel::k_load(const Block& b, const Affine& kidx, const Affine& slot) {
  const int64_t TM = t_.TM, TN = t_.TN, TK = t_.TK;
  const size_t rm = rank_ - 2, rk = rank_ - 1;  // A's axes; B's are (rank-2: k, rank-1: n)
  const Extent ke = ragged(TK, K_, kidx, KT_);
  const Affine k0 = kidx * TK;
  const Extent we = Extent::of(b.W);
  switch (a_mode_) {
    case OperandLoad::Direct: load_tile(j_.a[0], rm, rk, b.m0, k0, b.me, ke, A_, slot, TK); break;
    case OperandLoad::Transposed: load_tile(j_.a[0], rk, rm, k0, b.m0, ke, b.me, A_, slot, TM); break;
    case OperandLoad::Prologue:
      for (size_t i = 0; i < j_.a.size(); ++i) {
        const Access& a = j_.a[i];
        if (row_broadcast(a))
          kb_.emit(dma(true, a.buffer, base(a) + b.m0 * a.strides[rm], {M_ == 1 ? 0 : a.strides[rm]},
                       SpadRef{a_in_[i], slot, Affine::of(0), 0}, {1}, {b.me}, kLoadTag));
        else
          load_tile(a, rm, rk, b.m0, k0, b.me, ke, a_in_[i], slot, TK);
      }
      break;
  }
  switch (b_mode_) {
    case OperandLoad::Direct: load_tile(j_.b[0], rank_ - 2, rank_ - 1, k0, b.n0, ke, we, B_, slot, TN); break;
    case OperandLoad::Transposed: load_tile(j_.b[0], rank_ - 1, rank_ - 2, b.n0, k0, we, ke, B_, slot, TK); break;
    case OperandLoad::Prologue:
      for (size_t i = 0; i < j_.b.size(); ++i) {
        if (b_prologue_t_)
          load_tile(j_.b[i], rank_ - 1, rank_ - 2, b.n0, k0, we, ke, b_in_[i], slot, TK);
        else
          load_tile(j_.b[i], rank_ - 2, rank_ - 1, k0, b.n0, ke, we, b_in_[i], slot, TN);
      }
      break;
  }
}

// The prologues and array steps of k tile `kidx` in operand slot `slot`.
void GemmKernel::k_run(const Block& b, const Affine& kidx, bool accumulate, const Affine& slot) {
  const int64_t TN = t_.TN, TK = t_.TK;
  const Extent ke = ragged(TK, K_, kidx, KT_);
  const Extent we = Extent::of(b.W);
  if (a_mode_ == OperandLoad::Prologue) prologue(a_in_, j_.a, j_.a_program, A_, slot, b.me, ke, TK, "prologue.a");
  if (b_mode_ == OperandLoad::Prologue && b_prologue_t_)
    prologue(b_in_, j_.b, j_.b_program, B_, slot, we, ke, TK, "prologue.b");
  else if (b_mode_ == OperandLoad::Prologue)
    prologue(b_in_, j_.b, j_.b_program, B_, slot, ke, we, TN, "prologue.b");
  array_steps(b, kidx, ke, accumulate, slot);
}

// Array steps: k chunks of the array's rows, column chunks of its columns.
// Only the last k tile (peeled, so its index is a constant) can be ragged:
// its chunks stop at K.
void GemmKernel::array_steps(const Block& b, const Affine& kidx, const Extent& ke, bool accumulate,
                             const Affine& slot) {
  const int64_t TM = t_.TM, TN = t_.TN, TK = t_.TK;
  const int64_t chunks = ceil_div(TK, Nr_);
  const int64_t rest = kidx.is_constant() ? std::min(TK, K_ - kidx.constant * TK) : TK;
  for (int64_t kc = 0; kc < chunks && kc * Nr_ < rest; ++kc) {
    Extent kce = ke;
    if (chunks > 1) kce = Extent::of(std::min(Nr_, rest - kc * Nr_));
    for (int64_t u = 0; u * Nc_ < b.W; ++u) {
      MatmulOp mm;
      mm.m = b.me;
      mm.k = kce;
      mm.n = Extent::of(std::min(Nc_, b.W - Nc_ * u));
      mm.c = SpadRef{C_, b.cslot, Affine::of(Nc_ * u), TN};
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
}

// The second accumulator's chunks into the first.
void GemmKernel::add_split_k(const Block& b) {
  const int64_t TN = t_.TN;
  VecBuilder vb("ksum", b.me, Extent::of(b.W));
  const int x = vb.load(ScalarType::F32, SpadRef{C_, b.cslot, Affine::of(0), TN}, LoadBroadcast::Full);
  const int y = vb.load(ScalarType::F32, SpadRef{C2_, b.cslot, Affine::of(0), TN}, LoadBroadcast::Full);
  vb.store(SpadRef{C_, b.cslot, Affine::of(0), TN}, vb.op(VecOp::Add, ScalarType::F32, {x, y}));
  kb_.emit(vb.done());
}

// The accumulator tile through the epilogue program (and the softmax)
// into the output tile, in the output's dtype.
void GemmKernel::epilogue(const Block& b) {
  const int64_t TN = t_.TN;
  const bool round = j_.dtype != DType::F32;
  VecBuilder vb("epilogue", b.me, Extent::of(b.W));
  int acc = vb.load(ScalarType::F32, SpadRef{C_, b.cslot, Affine::of(0), TN}, LoadBroadcast::Full);
  if (round) acc = vb.op(VecOp::Cast, value_type(j_.dtype), {acc});  // the product in the operands' dtype
  std::vector<int> values{acc};
  for (size_t i = 0; i < j_.epilogue.size(); ++i) {
    const ScalarType t = value_type(j_.epilogue[i].dtype);
    const Affine sl = epi_kind_[i] == EpiKind::PerCol ? b.blk : b.cslot;
    switch (epi_kind_[i]) {
      case EpiKind::Full: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), TN}, LoadBroadcast::Full)); break;
      case EpiKind::PerCol: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Col)); break;
      case EpiKind::PerRow: values.push_back(vb.load(t, SpadRef{epi_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Row)); break;
      case EpiKind::Literal: values.push_back(vb.constant(t, j_.epilogue[i].literal)); break;
    }
  }
  int v = vb.full(emit_program(vb, j_.epilogue_program, values, {}));
  if (j_.softmax != FusedSoftmax::None) {
    // Along the block's rows (the tile spans N), or down its columns (the
    // tile spans M: the block holds every row).
    const bool down = j_.softmax == FusedSoftmax::Columns;
    const ScalarType F = ScalarType::F32;
    if (vb.type(v) != F) v = vb.op(VecOp::Cast, F, {v});
    const int m = vb.op(down ? VecOp::ReduceMaxRows : VecOp::ReduceMax, F, {v});
    const int e = vb.op(VecOp::Exp, F, {vb.op(VecOp::Sub, F, {v, m})});
    v = vb.op(VecOp::Mul, F,
              {e, vb.op(VecOp::Recip, F, {vb.op(down ? VecOp::ReduceSumRows : VecOp::ReduceSum, F, {e})})});
  }
  const ScalarType ot = value_type(j_.out.dtype);
  if (vb.type(v) != ot) v = vb.op(VecOp::Cast, ot, {v});
  vb.store(SpadRef{O_, b.cslot, Affine::of(0), TN}, v);
  kb_.emit(vb.done());
}

}  // namespace spool::lower::detail
