// TopK along the last axis (topk.hpp).
//
// Rounds: each of the k rounds takes the row's maximum and the lowest index
// attaining it, then masks that element out.
//
// Network, for a TopK that keeps a whole row of integers (k = n, a sort):
// the row is padded to N = 2^m lanes with the lowest value (padding lanes
// have indices past n, so they come after any real lane of that value), and
// each of the m(m+1)/2 compare-exchange stages is one vector step over the
// row: every lane reads its partner (lane XOR d) by a gather from the
// previous stage's tile and keeps its own value or the partner's. The order
// is TopK's: larger values first, equal values by lower index, a strict
// order on (value, index) pairs, which is what makes the network's result
// exact. A stage's stores take effect after its step, so consecutive stages
// alternate between two pairs of tiles.

#include "topk.hpp"

#include "tiled.hpp"

#include <spool/support/fault.hpp>

#include <fmt/format.h>

#include <limits>
#include <vector>

namespace spool::lower::detail {

using namespace spool::npu;

namespace {

// Rows shorter than this keep the rounds: a decode step's 8 routed pairs
// would take 6 stages of about twice a round's work, against 8 rounds.
constexpr int64_t kMinSortedRow = 64;

// Whether the network lowers this TopK: k is the whole last axis (at least
// kMinSortedRow) of integer values, the indices are i64, and the row's four
// tiles fit the budget.
bool sorts_as_network(const Access& in, const Access& out, int64_t k, int64_t budget) {
  if (in.shape.empty() || k != in.shape.back() || k < kMinSortedRow) return false;
  if ((in.dtype != DType::I32 && in.dtype != DType::I64) || out.dtype != DType::I64 || in.is_literal) return false;
  int64_t lanes = 1;
  while (lanes < k) lanes *= 2;
  return 4 * lanes * static_cast<int64_t>(sizeof(int64_t)) <= budget;
}

void emit_sort(Emitter& em, const std::string& name, const Access& in, const Access& out) {
  const size_t rank = in.shape.size();
  const int64_t n = in.shape.back();
  int64_t N = 1;
  while (N < n) N *= 2;
  const ScalarType vt = value_type(in.dtype), it = ScalarType::I64;
  const double lowest = in.dtype == DType::I32 ? static_cast<double>(std::numeric_limits<int32_t>::min())
                                               : static_cast<double>(std::numeric_limits<int64_t>::min());
  KernelBuilder kb(name);
  const int xs[2] = {kb.spad("x0", in.dtype, N, 1), kb.spad("x1", in.dtype, N, 1)};
  const int is[2] = {kb.spad("i0", DType::I64, N, 1), kb.spad("i1", DType::I64, N, 1)};
  auto tile = [](int buffer, int64_t ld) { return SpadRef{buffer, Affine::of(0), Affine::of(0), ld}; };

  // One row per iteration of the leading axes.
  Affine in_off = Affine::of(in.offset), out_off = Affine::of(out.offset);
  for (size_t a = 0; a + 1 < rank; ++a) {
    if (in.shape[a] == 1) continue;
    const int v = kb.loop_begin("r" + std::to_string(a), in.shape[a]);
    in_off = in_off + Affine::var(v, in.strides[a]);
    out_off = out_off + Affine::var(v, out.strides[a]);
  }
  if (N > n) {  // the padding lanes hold the lowest value
    VecBuilder fill("sort.pad", Extent::of(1), Extent::of(N));
    fill.store(tile(xs[0], N), fill.full(fill.constant(vt, lowest)));
    kb.emit(fill.done());
  }
  kb.emit(dma(true, in.buffer, in_off, {in.strides.back()}, tile(xs[0], 0), {1}, {Extent::of(n)}, kLoadTag));

  int from = 0;
  bool first_stage = true;
  for (int64_t size = 2; size <= N; size *= 2) {
    for (int64_t d = size / 2; d >= 1; d /= 2) {
      VecBuilder vb(fmt::format("sort.{}.{}", size, d), Extent::of(1), Extent::of(N));
      const int col = vb.op(VecOp::Cast, it, {vb.iota(true)});
      const int x = vb.load(vt, tile(xs[from], N), LoadBroadcast::Full);
      const int idx = first_stage ? col : vb.load(it, tile(is[from], N), LoadBroadcast::Full);
      auto c = [&](int64_t value) { return vb.constant(it, static_cast<double>(value)); };
      auto half = [&](int64_t span) { return vb.op(VecOp::Mod, it, {vb.op(VecOp::Div, it, {col, c(span)}), c(2)}); };
      // The partner lane, col XOR d: col + d below it, col - d above.
      const int upper = half(d);
      const int partner = vb.op(VecOp::Sub, it, {vb.op(VecOp::Add, it, {col, c(d)}), vb.op(VecOp::Mul, it, {upper, c(2 * d)})});
      const int at = vb.op(VecOp::Cast, ScalarType::Index, {partner});
      const int px = vb.gather(vt, at, tile(xs[from], N));
      const int pi = first_stage ? partner : vb.gather(it, at, tile(is[from], N));
      // Whether this lane's element comes before its partner's.
      const int ahead = vb.op(VecOp::Or, ScalarType::I1,
                              {vb.op(VecOp::CmpLt, ScalarType::I1, {px, x}),
                               vb.op(VecOp::And, ScalarType::I1,
                                     {vb.op(VecOp::CmpEq, ScalarType::I1, {x, px}),
                                      fault::planted(fault::Fault::TopkTie)
                                          ? vb.op(VecOp::CmpLt, ScalarType::I1, {pi, idx})
                                          : vb.op(VecOp::CmpLt, ScalarType::I1, {idx, pi})})});
      // The lower lane of a pair keeps the earlier element in blocks of
      // `size` that run forward (even blocks) and the later one in blocks
      // that run backward; the upper lane the other.
      const int wants_earlier = vb.op(VecOp::CmpEq, ScalarType::I1, {upper, half(size)});
      const int keep = vb.op(VecOp::CmpEq, ScalarType::I1,
                             {vb.op(VecOp::Cast, it, {wants_earlier}), vb.op(VecOp::Cast, it, {ahead})});
      vb.store(tile(xs[1 - from], N), vb.op(VecOp::Select, vt, {keep, x, px}));
      vb.store(tile(is[1 - from], N), vb.op(VecOp::Select, it, {keep, idx, pi}));
      kb.emit(vb.done());
      from = 1 - from;
      first_stage = false;
    }
  }
  kb.emit(dma(false, out.buffer, out_off, {out.strides.back()}, tile(is[from], 0), {1}, {Extent::of(n)}, kStoreTag));
  for (size_t a = 0; a + 1 < rank; ++a)
    if (in.shape[a] != 1) kb.loop_end();
  kb.emit(Stmt{WaitOp{kStoreTag}});
  int64_t footprint = 0;
  Kernel k = kb.finish(footprint);
  em.add_kernels({std::move(k)}, KernelInfo{name, "topk", false, 0, fmt::format("sort {}", N), 1}, footprint);
}

// k rounds of (max, lowest index attaining it, mask it out), the indices
// compared and selected as explicit i64/index values.
void emit_rounds(Emitter& em, const std::string& name, const Access& in, const Access& out, int64_t k) {
  TiledSpec s;
  s.info = KernelInfo{name, "topk", false, 0, "", 1};
  row_layout(s, in.shape, static_cast<int64_t>(in.shape.size()) - 1);
  s.inputs.push_back(in);
  s.outputs = {TiledOutput{out, TileOut::RowsK, k}};
  const int64_t cols = in.shape.back();
  s.body = [k, cols](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
    int x = in[0];
    ScalarType t = vb.type(x);
    if (t == ScalarType::BF16 || t == ScalarType::I1) {
      t = t == ScalarType::I1 ? ScalarType::I64 : ScalarType::F32;
      x = vb.op(VecOp::Cast, t, {x});
    }
    const int col = vb.op(VecOp::Cast, ScalarType::I64, {vb.iota(true)});
    const int none = vb.constant(ScalarType::I64, static_cast<double>(cols));
    std::vector<int> out;
    // Masked-out elements are excluded by a flag, not by a sentinel value,
    // so -inf and NaN inputs keep their order.
    int taken = vb.op(VecOp::CmpLt, ScalarType::I1, {col, vb.constant(ScalarType::I64, 0.0)});
    const int neg_col = vb.op(VecOp::Sub, ScalarType::I64, {vb.constant(ScalarType::I64, 0.0), col});
    for (int64_t j = 0; j < k; ++j) {
      const int low = is_float(t) ? vb.constant(t, -std::numeric_limits<double>::infinity())
                                  : vb.constant(t, static_cast<double>(std::numeric_limits<int32_t>::min()));
      const int avail = vb.op(VecOp::Select, t, {taken, low, x});
      const int m = vb.op(VecOp::ReduceMax, t, {avail});
      // The maximum propagates NaN, which equals nothing: a NaN element
      // attains a NaN maximum (NaN ranks largest, as in the interpreter).
      int attains = vb.op(VecOp::CmpEq, ScalarType::I1, {avail, m});
      if (is_float(t))
        attains = vb.op(VecOp::Or, ScalarType::I1,
                        {attains, vb.op(VecOp::And, ScalarType::I1,
                                        {vb.op(VecOp::CmpNe, ScalarType::I1, {avail, avail}),
                                         vb.op(VecOp::CmpNe, ScalarType::I1, {m, m})})});
      const int hit = vb.op(VecOp::And, ScalarType::I1,
                            {attains, vb.op(VecOp::CmpEq, ScalarType::I1, {taken, vb.constant(ScalarType::I1, 0.0)})});
      int idx = -1;
      if (fault::planted(fault::Fault::TopkTie)) {
        // The highest index attaining the maximum.
        const int cand = vb.op(VecOp::Select, ScalarType::I64, {hit, col, vb.constant(ScalarType::I64, -1.0)});
        idx = vb.op(VecOp::ReduceMax, ScalarType::I64, {cand});
      } else {
        const int cand = vb.op(VecOp::Select, ScalarType::I64, {hit, neg_col, vb.op(VecOp::Sub, ScalarType::I64, {vb.constant(ScalarType::I64, 0.0), none})});
        idx = vb.op(VecOp::Sub, ScalarType::I64, {vb.constant(ScalarType::I64, 0.0), vb.op(VecOp::ReduceMax, ScalarType::I64, {cand})});
      }
      out.push_back(idx);
      taken = vb.op(VecOp::Or, ScalarType::I1, {taken, vb.op(VecOp::CmpEq, ScalarType::I1, {col, idx})});
    }
    return out;
  };
  emit_tiled(em, s);
}

}  // namespace

void emit_topk(Emitter& em, const std::string& name, const Access& in, const Access& out, int64_t k) {
  if (sorts_as_network(in, out, k, em.budget))
    emit_sort(em, name, in, out);
  else
    emit_rounds(em, name, in, out, k);
}

}  // namespace spool::lower::detail
