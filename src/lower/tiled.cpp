// The vector-unit kernel template (tiled.hpp): tile choice by the scratchpad
// allocator's footprint, strided loads at each operand's logical shape,
// software-pipelined tile loops.

#include "tiled.hpp"

#include <spool/npu/verify.hpp>

#include <spool/support/error.hpp>
#include <spool/support/fault.hpp>

#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace spool::lower::detail {
namespace {

using namespace spool::npu;

enum class LoadKind : uint8_t { Full, PerCol, PerRow, Literal };

struct Layout {
  Shape shape;
  std::vector<int> outer;  // axes walked by loops (size > 1)
  int row = -1, col = -1;
  int64_t rows = 1, cols = 1;
};

// Adds a leading axis of size 1 when the domain has fewer than two axes, so
// every domain has a row and a column axis.
TiledSpec normalized(const TiledSpec& spec) {
  TiledSpec s = spec;
  auto widen = [](Access& a, size_t n) {
    while (a.shape.size() < n) {
      a.shape.insert(a.shape.begin(), 1);
      a.strides.insert(a.strides.begin(), 0);
    }
  };
  if (s.shape.size() >= 2) return s;
  const size_t add = 2 - s.shape.size();
  while (s.shape.size() < 2) s.shape.insert(s.shape.begin(), 1);
  for (Access& a : s.inputs) widen(a, 2);
  if (s.has_table) widen(s.table, 2);
  for (TiledOutput& o : s.outputs) widen(o.access, 2);
  s.col_axis = spec.shape.empty() ? 1 : spec.col_axis + static_cast<int>(add);
  s.row_axis = s.col_axis == 1 ? 0 : 1;
  return s;
}

// A kernel's share of the tiles when they are spread over cores: a range of
// the first outer axis, or of the row tiles when there is no outer axis.
struct Share {
  int64_t lo = 0, hi = -1;  // hi < 0: all
};

// A tile moved between DRAM and a [rows x ld] scratchpad tile, its two dims
// ordered so that DRAM is walked along its contiguous axis innermost: a tile
// of a transposed view (rows next to each other in DRAM, columns far apart)
// moves column by column, each column one run of requests, where row by row
// every element would be a request of its own.
Stmt tile_dma(bool load, int buffer, const Affine& off, int64_t row_stride, int64_t col_stride, const SpadRef& spad,
              int64_t ld, const Extent& rows, const Extent& cols, int tag) {
  if (row_stride == 1 && col_stride != 1 && col_stride != 0)
    return dma(load, buffer, off, {col_stride, row_stride}, spad, {1, ld}, {cols, rows}, tag);
  return dma(load, buffer, off, {row_stride, col_stride}, spad, {ld, 1}, {rows, cols}, tag);
}

class TiledKernel {
 public:
  TiledKernel(const TiledSpec& spec, const Layout& layout, int64_t TR, int64_t TC, Share share = Share{},
              std::string name = {})
      : s_(spec), l_(layout), TR_(TR), TC_(TC), RT_(ceil_div(layout.rows, TR)), CT_(ceil_div(layout.cols, TC)),
        share_(share), kb_(name.empty() ? spec.info.name : std::move(name)) {}

  Kernel build(int64_t& footprint) {
    // Scratchpad buffers: one per input at its logical tile shape, one per output.
    for (size_t i = 0; i < s_.inputs.size(); ++i) {
      const Access& a = s_.inputs[i];
      if (a.is_literal) {
        in_kind_.push_back(LoadKind::Literal);
        in_invariant_.push_back(true);
        in_buf_.push_back(-1);
        continue;
      }
      const bool col_b = l_.cols == 1 || a.strides[l_.col] == 0;
      const bool row_b = l_.rows == 1 || a.strides[l_.row] == 0;
      const LoadKind kind = !col_b && !row_b ? LoadKind::Full : !col_b ? LoadKind::PerCol : LoadKind::PerRow;
      bool invariant = kind != LoadKind::Full && CT_ == 1 && (kind == LoadKind::PerCol || RT_ == 1);
      for (int axis : l_.outer) invariant = invariant && a.strides[axis] == 0;
      const int64_t elems = kind == LoadKind::Full ? TR_ * TC_ : kind == LoadKind::PerCol ? TC_ : TR_;
      in_kind_.push_back(kind);
      in_invariant_.push_back(invariant);
      in_buf_.push_back(kb_.spad("in" + std::to_string(i), a.dtype, elems, invariant ? 1 : 2));
    }
    if (s_.has_table) {
      const int64_t len = s_.table.shape[l_.col];
      table_invariant_ = (l_.rows == 1 || s_.table.strides[l_.row] == 0);
      for (int axis : l_.outer) table_invariant_ = table_invariant_ && s_.table.strides[axis] == 0;
      table_buf_ = kb_.spad("table", s_.table.dtype, TR_ * len, table_invariant_ ? 1 : 2);
    }
    for (size_t o = 0; o < s_.outputs.size(); ++o) {
      const TiledOutput& out = s_.outputs[o];
      const int64_t elems = out.shape == TileOut::Full ? TR_ * TC_
                            : out.shape == TileOut::Row ? TR_
                            : out.shape == TileOut::Col ? TC_
                                                        : out.k * TR_;
      out_buf_.push_back(kb_.spad("out" + std::to_string(o), out.access.dtype, elems, 2));
    }
    // Loads that no loop changes, once.
    for (size_t i = 0; i < s_.inputs.size(); ++i)
      if (in_invariant_[i] && in_kind_[i] != LoadKind::Literal) load_input(i, Affine::of(0), Affine::of(0), Affine::of(0));
    if (s_.has_table && table_invariant_) load_table(Affine::of(0), Affine::of(0));
    open_outer(0);
    kb_.emit(Stmt{WaitOp{kStoreTag}});
    return kb_.finish(footprint);
  }

 private:
  void open_outer(size_t depth) {
    if (depth == l_.outer.size()) {
      tiles();
      return;
    }
    const int axis = l_.outer[depth];
    int64_t lo = 0, n = l_.shape[axis];
    if (depth == 0 && share_.hi >= 0) {
      lo = share_.lo;
      n = share_.hi - share_.lo;
    }
    const int var = n > 1 ? kb_.loop_begin("d" + std::to_string(axis), n) : -1;
    outer_vars_.push_back({axis, var, lo});
    open_outer(depth + 1);
    outer_vars_.pop_back();
    if (n > 1) kb_.loop_end();
  }

  void tiles() {
    // Row tiles [r0, r1): all of them, or this kernel's share when the rows are split.
    const bool rows_split = l_.outer.empty() && share_.hi >= 0;
    const int64_t r0 = rows_split ? share_.lo : 0, r1 = rows_split ? share_.hi : RT_;
    if (CT_ == 1) {
      pipelined(
          kb_, "r", r1 - r0, [&](const Affine& r) { load_all(r + Affine::of(r0), Affine::of(0), r); },
          [&](const Affine& r) { work(r + Affine::of(r0), Affine::of(0), r); });
      return;
    }
    Affine r = Affine::of(r0);
    if (r1 - r0 > 1) r = Affine::var(kb_.loop_begin("r", r1 - r0)) + Affine::of(r0);
    pipelined(
        kb_, "c", CT_, [&](const Affine& c) { load_all(r, c, c); }, [&](const Affine& c) { work(r, c, c); });
    if (r1 - r0 > 1) kb_.loop_end();
  }

  Affine offset_of(const Access& a, const Affine& r, const Affine& c) const {
    Affine off = Affine::of(a.offset);
    for (const auto& [axis, var, lo] : outer_vars_) {
      if (var >= 0) off = off + Affine::var(var, a.strides[axis]);
      off = off + Affine::of(lo * a.strides[axis]);
    }
    off = off + r * (TR_ * a.strides[l_.row]) + c * (TC_ * a.strides[l_.col]);
    return off;
  }

  void load_all(const Affine& r, const Affine& c, const Affine& slot) {
    for (size_t i = 0; i < s_.inputs.size(); ++i)
      if (!in_invariant_[i]) load_input(i, r, c, slot);
    if (s_.has_table && !table_invariant_) load_table(r, slot);
  }

  void load_table(const Affine& r, const Affine& slot) {
    const Access& a = s_.table;
    const int64_t len = a.shape[l_.col];
    const Affine off = offset_of(a, r, Affine::of(0));
    kb_.emit(dma(true, a.buffer, off, {l_.rows == 1 ? 0 : a.strides[l_.row], a.strides[l_.col]},
                 SpadRef{table_buf_, slot, Affine::of(0), 0}, {len, 1}, {ragged(TR_, l_.rows, r, RT_), Extent::of(len)},
                 kLoadTag));
  }

  void load_input(size_t i, const Affine& r, const Affine& c, const Affine& slot) {
    const Access& a = s_.inputs[i];
    const Extent re = ragged(TR_, l_.rows, r, RT_), ce = ragged(TC_, l_.cols, c, CT_);
    const SpadRef dst{in_buf_[i], slot, Affine::of(0), 0};
    const Affine off = offset_of(a, r, c);
    switch (in_kind_[i]) {
      case LoadKind::Full:
        kb_.emit(tile_dma(true, a.buffer, off, a.strides[l_.row], a.strides[l_.col], dst, TC_, re, ce, kLoadTag));
        break;
      case LoadKind::PerCol: kb_.emit(dma(true, a.buffer, off, {a.strides[l_.col]}, dst, {1}, {ce}, kLoadTag)); break;
      case LoadKind::PerRow:
        kb_.emit(dma(true, a.buffer, off, {l_.rows == 1 ? 0 : a.strides[l_.row]}, dst, {1}, {re}, kLoadTag));
        break;
      case LoadKind::Literal: break;
    }
  }

  void work(const Affine& r, const Affine& c, const Affine& slot) {
    Extent re = ragged(TR_, l_.rows, r, RT_);
    const Extent ce = ragged(TC_, l_.cols, c, CT_);
    if (fault::planted(fault::Fault::TileOffByOne))
      for (Affine& option : re.options) option = option + Affine::of(-1);
    VecBuilder vb(s_.info.kind, re, ce);
    std::vector<int> values;
    for (size_t i = 0; i < s_.inputs.size(); ++i) {
      const Affine sl = in_invariant_[i] ? Affine::of(0) : slot;
      const ScalarType t = value_type(s_.inputs[i].dtype);
      switch (in_kind_[i]) {
        case LoadKind::Full: values.push_back(vb.load(t, SpadRef{in_buf_[i], sl, Affine::of(0), TC_}, LoadBroadcast::Full)); break;
        case LoadKind::PerCol: values.push_back(vb.load(t, SpadRef{in_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Col)); break;
        case LoadKind::PerRow: values.push_back(vb.load(t, SpadRef{in_buf_[i], sl, Affine::of(0), 1}, LoadBroadcast::Row)); break;
        case LoadKind::Literal: values.push_back(vb.constant(t, s_.inputs[i].literal)); break;
      }
    }
    SpadRef table;
    if (s_.has_table)
      table = SpadRef{table_buf_, table_invariant_ ? Affine::of(0) : slot, Affine::of(0), s_.table.shape[l_.col]};
    const std::vector<int> results = s_.body(vb, values, s_.has_table ? &table : nullptr);
    size_t next = 0;
    for (size_t o = 0; o < s_.outputs.size(); ++o) {
      const TiledOutput& out = s_.outputs[o];
      const ScalarType t = value_type(out.access.dtype);
      auto typed = [&](int v) { return vb.type(v) == t ? v : vb.op(VecOp::Cast, t, {v}); };
      if (out.shape == TileOut::Full) {
        vb.store(SpadRef{out_buf_[o], slot, Affine::of(0), TC_}, vb.full(typed(results.at(next++))));
      } else if (out.shape == TileOut::Col) {
        const int v = typed(results.at(next++));
        SPOOL_ASSERT(vb.shape(v) == ValueShape::Col, "kernel '{}': a per-column output is not one value per column",
                     s_.info.name);
        vb.store(SpadRef{out_buf_[o], slot, Affine::of(0), 1}, v);
      } else {
        const int64_t k = out.shape == TileOut::Row ? 1 : out.k;
        for (int64_t j = 0; j < k; ++j) {
          const int v = results.at(next++);
          SPOOL_ASSERT(!vb.is_full(v), "kernel '{}': a per-row output is a full tile", s_.info.name);
          vb.store(SpadRef{out_buf_[o], slot, Affine::of(j * TR_), 1}, typed(v));
        }
      }
    }
    kb_.emit(vb.done());
    for (size_t o = 0; o < s_.outputs.size(); ++o) {
      const TiledOutput& out = s_.outputs[o];
      const Access& a = out.access;
      const SpadRef src{out_buf_[o], slot, Affine::of(0), 0};
      Affine off = Affine::of(a.offset);
      for (const auto& [axis, var, lo] : outer_vars_) {
        if (var >= 0) off = off + Affine::var(var, a.strides[axis]);
        off = off + Affine::of(lo * a.strides[axis]);
      }
      off = off + r * (TR_ * a.strides[l_.row]);
      switch (out.shape) {
        case TileOut::Full:
          off = off + c * (TC_ * a.strides[l_.col]);
          kb_.emit(tile_dma(false, a.buffer, off, a.strides[l_.row], a.strides[l_.col], src, TC_, re, ce, kStoreTag));
          break;
        case TileOut::Row: kb_.emit(dma(false, a.buffer, off, {a.strides[l_.row]}, src, {1}, {re}, kStoreTag)); break;
        case TileOut::Col:
          off = off + c * (TC_ * a.strides[l_.col]);
          kb_.emit(dma(false, a.buffer, off, {a.strides[l_.col]}, src, {1}, {ce}, kStoreTag));
          break;
        case TileOut::RowsK:
          kb_.emit(dma(false, a.buffer, off, {a.strides[l_.row], a.strides[l_.col]}, src, {1, TR_},
                       {re, Extent::of(out.k)}, kStoreTag));
          break;
      }
    }
  }

  const TiledSpec& s_;
  const Layout& l_;
  const int64_t TR_, TC_, RT_, CT_;
  const Share share_;
  KernelBuilder kb_;
  std::vector<LoadKind> in_kind_;
  std::vector<bool> in_invariant_;
  std::vector<int> in_buf_, out_buf_;
  int table_buf_ = -1;
  bool table_invariant_ = false;
  std::vector<std::tuple<int, int, int64_t>> outer_vars_;  // (axis, loop variable or -1, first index)
};

}  // namespace

// The tiles spread over the cores (the first outer axis, or the row tiles)
// when the parts write disjoint DRAM windows (the verifier's rule) and the
// caller's tile timer finds the split faster than the single kernel.
std::vector<Kernel> spread(Emitter& em, const TiledSpec& spec, const Layout& l, int64_t TR, int64_t TC,
                           const Kernel& single) {
  // Spreading is decided by timing both forms: no timer, no spreading.
  const int cores = em.options.multi_core && em.options.tile_cycles ? em.config.cores : 1;
  const int64_t units = l.outer.empty() ? ceil_div(l.rows, TR) : l.shape[static_cast<size_t>(l.outer[0])];
  if (cores <= 1 || units < 2) return {single};
  const int64_t parts = std::min<int64_t>(cores, units);
  std::vector<Kernel> kernels;
  for (int64_t p = 0; p < parts; ++p) {
    int64_t fp = 0;
    const Share share{units * p / parts, units * (p + 1) / parts};
    kernels.push_back(TiledKernel(spec, l, TR, TC, share, spec.info.name + ".c" + std::to_string(p)).build(fp));
  }
  npu::Program trial;
  trial.name = "spread";
  trial.spad_bytes = em.program.spad_bytes;
  trial.buffers = em.program.buffers;
  trial.kernels = kernels;
  for (Kernel& k : trial.kernels) k.deps.clear();
  if (!npu::verify(trial).empty()) return {single};
  npu::Program one = trial;
  one.kernels = {single};
  one.kernels[0].deps.clear();
  int64_t split_cycles = 0, single_cycles = 0;
  tbb::parallel_invoke([&] { split_cycles = em.options.tile_cycles(trial, INT64_MAX); },
                       [&] { single_cycles = em.options.tile_cycles(one, INT64_MAX); });
  if (split_cycles >= single_cycles) return {single};
  return kernels;
}

void emit_tiled(Emitter& em, const TiledSpec& original) {
  const TiledSpec spec = normalized(original);
  Layout l;
  l.shape = spec.shape;
  l.col = spec.col_axis;
  l.row = spec.row_axis;
  l.rows = spec.shape[static_cast<size_t>(l.row)];
  l.cols = spec.shape[static_cast<size_t>(l.col)];
  for (int axis = 0; axis < static_cast<int>(spec.shape.size()); ++axis)
    if (axis != l.row && axis != l.col && spec.shape[static_cast<size_t>(axis)] > 1) l.outer.push_back(axis);
  if (num_elements(spec.shape) == 0) fail("kernel '{}': empty tensors are not lowered", spec.info.name);

  // Tile choice: the largest tile whose allocated footprint fits the budget;
  // rows shrink first, then (when allowed) columns.
  // At least a register's sublanes of rows (VLEN / 32): a tile of one long
  // row (a decode's softmax over 32k keys) would fill one sublane of eight.
  const int64_t sublanes = std::max<int64_t>(1, em.config.vector.vlen_bits / 32);
  int64_t TC = spec.tile_cols ? std::min<int64_t>(l.cols, 2048) : l.cols;
  int64_t TR = std::min<int64_t>(l.rows, std::max<int64_t>(sublanes, 65536 / TC));
  TR = std::min<int64_t>(TR, 512);
  if (spec.whole_rows) {
    TR = l.rows;
    TC = std::min<int64_t>(l.cols, std::max<int64_t>(1, 65536 / TR));
  }
  while (true) {
    int64_t footprint = 0;
    Kernel kernel = TiledKernel(spec, l, TR, TC).build(footprint);
    if (footprint <= em.budget) {
      KernelInfo info = spec.info;
      info.tile = "rows " + std::to_string(TR) + " cols " + std::to_string(TC);
      std::vector<Kernel> kernels = spread(em, spec, l, TR, TC, kernel);
      em.add_kernels(std::move(kernels), info, footprint);
      return;
    }
    if (TR > 1 && !spec.whole_rows) {
      TR = (TR + 1) / 2;
    } else if (spec.tile_cols && TC > 1) {
      TC = (TC + 1) / 2;
    } else {
      fail("kernel '{}': a row of {} elements needs {} bytes of scratchpad, the budget is {}", spec.info.name, l.cols,
           footprint, em.budget);
    }
  }
}

void row_layout(TiledSpec& s, const Shape& shape, int64_t axis, bool widest) {
  const int r = static_cast<int>(shape.size());
  s.shape = shape;
  s.col_axis = static_cast<int>(axis);
  s.row_axis = r < 2 ? -1 : (axis == r - 1 ? r - 2 : r - 1);
  if (widest)
    for (int a = r - 1; a >= 0 && s.row_axis >= 0; --a)
      if (a != axis && shape[static_cast<size_t>(a)] > shape[static_cast<size_t>(s.row_axis)]) s.row_axis = a;
  s.tile_cols = false;
}

bool column_layout(TiledSpec& s, const Shape& shape, int64_t axis, int col_axis, int64_t budget, int64_t bytes) {
  // Two slots of an input and an output tile of 8 columns (a sublane row of
  // registers) of every row: below that, keep the transposing load.
  if (shape[static_cast<size_t>(axis)] * 8 * bytes * 4 > budget) return false;
  s.shape = shape;
  s.row_axis = static_cast<int>(axis);
  s.col_axis = col_axis;
  s.tile_cols = true;
  s.whole_rows = true;
  return true;
}

int contiguous_axis(const Access& a, int64_t axis) {
  if (a.is_literal || a.index_buffer >= 0 || a.strides[static_cast<size_t>(axis)] == 1) return -1;
  for (int i = static_cast<int>(a.shape.size()) - 1; i >= 0; --i)
    if (i != axis && a.strides[static_cast<size_t>(i)] == 1 && a.shape[static_cast<size_t>(i)] > 1) return i;
  return -1;
}

}  // namespace spool::lower::detail
