// Gather and ScatterAdd lowered to indirect DMA (indexing.hpp). A gather tile
// loads its index values by a plain DMA, then reads the data by a DMA whose
// offset along the gathered axis comes from those values; an index broadcast
// over the trailing axes (embedding, MoE token rows, expert matrices) stays
// one value per row in the scratchpad and moves a whole contiguous row. A
// scatter_add first copies data into the output, then walks the index one
// position along the axis at a time, in order: load the rows it names, add the
// source on the vector unit, store them back by index, and wait for the store,
// so duplicate indices accumulate in index order exactly as the reference does.

#include "indexing.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>

namespace spool::lower::detail {
namespace {

using namespace spool::npu;

// A domain walked tile by tile: axes [block, rank) form the DMA block, every
// axis before it is looped with a tile of 1.
struct Grid {
  Shape shape;
  Shape tile;
  size_t block = 0;
  size_t rank() const { return shape.size(); }
  int64_t tiles(size_t a) const { return ceil_div(shape[a], tile[a]); }
  int64_t tile_elements() const {
    int64_t n = 1;
    for (size_t a = block; a < rank(); ++a) n *= tile[a];
    return n;
  }
};

using TileIndex = std::vector<Affine>;  // the tile number along each axis

// Tiles of at most `cap` elements over the last `block_axes` axes, filled from
// the innermost axis out; axis `one` (if >= 0) keeps a tile of 1.
Grid make_grid(const Shape& shape, size_t block_axes, int64_t cap, int64_t one) {
  Grid g;
  g.shape = shape;
  g.tile.assign(shape.size(), 1);
  g.block = shape.size() - std::min(block_axes, shape.size());
  int64_t room = std::max<int64_t>(cap, 1);
  for (size_t a = shape.size(); a-- > g.block;) {
    if (static_cast<int64_t>(a) == one) continue;
    g.tile[a] = std::clamp<int64_t>(room, 1, shape[a]);
    room = std::max<int64_t>(1, room / g.tile[a]);
  }
  return g;
}

std::string tile_text(const Grid& g) {
  std::string s = "tile";
  for (size_t a = 0; a < g.rank(); ++a) s += fmt::format("{}{}", a ? "x" : " ", g.tile[a]);
  return s;
}

// Calls load(tile, slot) and work(tile, slot) for every tile in row-major
// order, software pipelined over the innermost axis that has several tiles
// (the slot alternates with it).
using TileFn = std::function<void(const TileIndex&, const Affine&)>;
void walk(KernelBuilder& kb, const Grid& g, const std::string& prefix, const TileFn& load, const TileFn& work) {
  std::vector<size_t> looped;
  for (size_t a = 0; a < g.rank(); ++a)
    if (g.tiles(a) > 1) looped.push_back(a);
  TileIndex t(g.rank(), Affine::of(0));
  if (looped.empty()) {
    load(t, Affine::of(0));
    work(t, Affine::of(0));
    return;
  }
  for (size_t i = 0; i + 1 < looped.size(); ++i)
    t[looped[i]] = Affine::var(kb.loop_begin(fmt::format("{}{}", prefix, looped[i]), g.tiles(looped[i])));
  const size_t last = looped.back();
  auto at = [&](const TileFn& f) {
    return [&, f](const Affine& x) {
      TileIndex u = t;
      u[last] = x;
      f(u, x);
    };
  };
  pipelined(kb, fmt::format("{}{}", prefix, last), g.tiles(last), at(load), at(work));
  for (size_t i = 0; i + 1 < looped.size(); ++i) kb.loop_end();
}

// The DRAM offset of a tile's first element; axis `skip` (the indexed axis) contributes nothing.
Affine tile_offset(const Access& a, const Grid& g, const TileIndex& t, int64_t skip) {
  Affine off = Affine::of(a.offset);
  for (size_t x = 0; x < g.rank(); ++x)
    if (static_cast<int64_t>(x) != skip && a.strides[x] != 0) off = off + t[x] * (g.tile[x] * a.strides[x]);
  return off;
}

std::vector<Extent> block_dims(const Grid& g, const TileIndex& t) {
  std::vector<Extent> dims;
  for (size_t a = g.block; a < g.rank(); ++a) dims.push_back(ragged(g.tile[a], g.shape[a], t[a], g.tiles(a)));
  return dims;
}

std::vector<int64_t> block_strides(const Access& a, const Grid& g, int64_t zero) {
  std::vector<int64_t> s;
  for (size_t x = g.block; x < g.rank(); ++x) s.push_back(static_cast<int64_t>(x) == zero ? 0 : a.strides[x]);
  return s;
}

// Row-major strides of a full tile in the scratchpad.
std::vector<int64_t> dense_block(const Grid& g) {
  std::vector<int64_t> s(g.rank() - g.block);
  int64_t e = 1;
  for (size_t a = g.rank(); a-- > g.block;) {
    s[a - g.block] = e;
    e *= g.tile[a];
  }
  return s;
}

// The index values of a tile in the scratchpad: dense over the block axes the
// index varies on, stride 0 on the axes it is broadcast over (so an index
// expanded over whole rows holds one value per row). A literal index is one
// value written by the vector unit.
struct IndexTile {
  std::vector<int64_t> spad_strides;  // per block axis
  int64_t elements = 1;
};

IndexTile index_tile(const Access& index, const Grid& g) {
  IndexTile it;
  it.spad_strides.assign(g.rank() - g.block, 0);
  if (index.is_literal) return it;
  for (size_t a = g.rank(); a-- > g.block;) {
    if (index.strides[a] == 0 || g.tile[a] == 1) continue;
    it.spad_strides[a - g.block] = it.elements;
    it.elements *= g.tile[a];
  }
  return it;
}

// Loads a tile's index values (or, for a literal index, nothing: see fill_literal).
void load_index(KernelBuilder& kb, const Access& index, const IndexTile& it, const Grid& g, const TileIndex& t,
                int buffer, const Affine& slot) {
  if (index.is_literal) return;
  std::vector<Extent> dims = block_dims(g, t);
  std::vector<int64_t> strides;
  for (size_t a = g.block; a < g.rank(); ++a) {
    const bool varies = it.spad_strides[a - g.block] != 0;
    if (!varies) dims[a - g.block] = Extent::of(1);
    strides.push_back(varies ? index.strides[a] : 0);
  }
  kb.emit(dma(true, index.buffer, tile_offset(index, g, t, -1), strides, SpadRef{buffer, slot, Affine::of(0), 0},
              it.spad_strides, dims, kLoadTag));
}

// A literal written once into a scratchpad buffer of `rows` x `cols` elements.
void fill_literal(KernelBuilder& kb, int buffer, ScalarType type, double value, int64_t rows, int64_t cols) {
  VecBuilder vb("fill", Extent::of(rows), Extent::of(cols));
  vb.store(SpadRef{buffer, Affine::of(0), Affine::of(0), cols}, vb.full(vb.constant(type, value)));
  kb.emit(vb.done());
}

// The indirect transfer of a tile of `target` (data of a gather, output of a
// scatter) at the tile's coordinates, its `axis` coordinate taken from the index.
Stmt indirect(bool load, const Access& target, int64_t axis, const Grid& g, const TileIndex& t, const SpadRef& spad,
              const IndexTile& it, int index_buffer, const Affine& index_slot, int tag) {
  Stmt s = dma(load, target.buffer, tile_offset(target, g, t, axis), block_strides(target, g, axis), spad,
               dense_block(g), block_dims(g, t), tag);
  DmaOp& d = std::get<DmaOp>(s.node);
  d.index = SpadRef{index_buffer, index_slot, Affine::of(0), 0};
  d.index_strides = it.spad_strides;
  d.index_scale = target.strides[static_cast<size_t>(axis)];
  d.index_limit = target.shape[static_cast<size_t>(axis)];
  return s;
}

void check_index(const std::string& name, const Access& index, const Shape& other, int64_t axis, size_t rank) {
  if (index.dtype != DType::I32 && index.dtype != DType::I64)
    fail("lower: {}: the index has dtype {} (i32 or i64 expected)", name, dtype_name(index.dtype));
  if (index.shape.size() != rank || other.size() != rank || axis < 0 || axis >= static_cast<int64_t>(rank))
    fail("lower: {}: index {} and data {} along axis {} do not match", name, shape_str(index.shape), shape_str(other),
         axis);
  if (num_elements(index.shape) == 0) fail("lower: {}: empty tensors are not lowered", name);
}

int64_t normalized_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// Builds kernels with tiles of at most `cap` elements, halving it until the
// allocator's footprint fits the budget.
void fit(Emitter& em, const std::string& name, const std::string& kind, int64_t cap,
         const std::function<Kernel(int64_t cap, int64_t& footprint, std::string& tile)>& build) {
  for (;;) {
    int64_t footprint = 0;
    std::string tile;
    Kernel k = build(cap, footprint, tile);
    if (footprint <= em.budget) {
      em.add_kernels({std::move(k)}, KernelInfo{name, kind, false, 0, tile, 1}, footprint);
      return;
    }
    if (cap == 1)
      fail("kernel '{}': a single-element tile needs {} bytes of scratchpad, the budget is {}", name, footprint,
           em.budget);
    cap = (cap + 1) / 2;
  }
}

}  // namespace

std::optional<Access> fused_gather(const Access& data, const Access& index, const Shape& out_shape, int64_t axis) {
  const size_t rank = out_shape.size();
  if (rank < 2 || normalized_axis(axis, rank) != 0 || data.is_literal || index.is_literal) return std::nullopt;
  if (index.dtype != DType::I32 && index.dtype != DType::I64) return std::nullopt;
  if (data.shape.size() != rank || index.shape != out_shape) return std::nullopt;
  for (size_t a = 1; a < rank; ++a)
    if (index.strides[a] != 0 || data.shape[a] != out_shape[a]) return std::nullopt;
  Access out = data;
  out.shape = out_shape;
  out.strides[0] = 0;
  out.index_buffer = index.buffer;
  out.index_dtype = index.dtype;
  out.index_offset = index.offset;
  out.index_stride = index.strides[0];
  out.index_scale = data.strides[0];
  out.index_limit = data.shape[0];
  return out;
}

bool gather_by_dma(const Shape& out_shape, int64_t axis) {
  return normalized_axis(axis, out_shape.size()) + 1 != static_cast<int64_t>(out_shape.size());
}

void emit_gather(Emitter& em, const std::string& name, const Access& data, const Access& index, int64_t axis_in,
                 const Access& out) {
  const size_t rank = index.shape.size();
  const int64_t axis = normalized_axis(axis_in, rank);
  check_index(name, index, data.shape, axis, rank);
  if (data.is_literal) fail("lower: {}: a gather from a constant is not lowered (fold it first)", name);
  // The first try sizes the double-buffered data tile alone: an index
  // broadcast over whole rows takes little room (fit() shrinks otherwise).
  fit(em, name, "gather", std::max<int64_t>(1, em.budget / (2 * dtype_bytes(data.dtype))),
      [&](int64_t cap, int64_t& footprint, std::string& tile) {
        const Grid g = make_grid(index.shape, 3, cap, -1);
        tile = tile_text(g);
        const IndexTile it = index_tile(index, g);
        KernelBuilder kb(name);
        const int ib = kb.spad("idx", index.dtype, it.elements, index.is_literal ? 1 : 2);
        const int db = kb.spad("data", data.dtype, g.tile_elements(), 2);
        if (index.is_literal) fill_literal(kb, ib, register_type(index.dtype), index.literal, 1, 1);
        walk(
            kb, g, "t",
            [&](const TileIndex& t, const Affine& slot) {
              load_index(kb, index, it, g, t, ib, slot);
              kb.emit(indirect(true, data, axis, g, t, SpadRef{db, slot, Affine::of(0), 0}, it, ib,
                               index.is_literal ? Affine::of(0) : slot, kLoadTag));
            },
            [&](const TileIndex& t, const Affine& slot) {
              kb.emit(dma(false, out.buffer, tile_offset(out, g, t, -1), block_strides(out, g, -1),
                          SpadRef{db, slot, Affine::of(0), 0}, dense_block(g), block_dims(g, t), kStoreTag));
            });
        kb.emit(Stmt{WaitOp{kStoreTag}});
        return kb.finish(footprint);
      });
}

void emit_scatter_add(Emitter& em, const std::string& name, const Access& data, const Access& index, const Access& src,
                      int64_t axis_in, const Access& out) {
  const size_t rank = index.shape.size();
  const int64_t axis = normalized_axis(axis_in, rank);
  check_index(name, index, data.shape, axis, rank);
  if (src.shape.size() != rank)
    fail("lower: {}: source {} does not match index {}", name, shape_str(src.shape), shape_str(index.shape));
  for (size_t a = 0; a < rank; ++a)
    if (index.shape[a] > src.shape[a] || (static_cast<int64_t>(a) != axis && index.shape[a] > data.shape[a]))
      fail("lower: {}: index {} exceeds source {} or data {}", name, shape_str(index.shape), shape_str(src.shape),
           shape_str(data.shape));
  const ScalarType T = register_type(out.dtype);
  if (T == ScalarType::I1) fail("lower: {}: scatter_add of bool values is not lowered", name);
  const int64_t bytes = 2 * dtype_bytes(out.dtype) + dtype_bytes(src.dtype) + dtype_bytes(index.dtype);
  fit(em, name, "scatter_add", std::max<int64_t>(1, em.budget / (2 * bytes)),
      [&](int64_t cap, int64_t& footprint, std::string& tile) {
        KernelBuilder kb(name);
        // out = data, tile by tile (a literal is written into the scratchpad once).
        const Grid gi = make_grid(out.shape, 3, cap, -1);
        const int64_t cols = gi.tile.back(), rows = gi.tile_elements() / cols;
        const int init = kb.spad("init", out.dtype, gi.tile_elements(), data.is_literal ? 1 : 2);
        if (data.is_literal) fill_literal(kb, init, T, data.literal, rows, cols);
        walk(
            kb, gi, "i",
            [&](const TileIndex& t, const Affine& slot) {
              if (!data.is_literal)
                kb.emit(dma(true, data.buffer, tile_offset(data, gi, t, -1), block_strides(data, gi, -1),
                            SpadRef{init, slot, Affine::of(0), 0}, dense_block(gi), block_dims(gi, t), kLoadTag));
            },
            [&](const TileIndex& t, const Affine& slot) {
              const Affine s = data.is_literal ? Affine::of(0) : slot;
              kb.emit(dma(false, out.buffer, tile_offset(out, gi, t, -1), block_strides(out, gi, -1),
                          SpadRef{init, s, Affine::of(0), 0}, dense_block(gi), block_dims(gi, t), kStoreTag));
            });
        kb.emit(Stmt{WaitOp{kStoreTag}});

        // One index position along the axis per tile, tiles in order; each
        // read-modify-write finishes before the next tile reads the output.
        const Grid g = make_grid(index.shape, 2, cap, axis);
        tile = tile_text(g);
        const IndexTile it = index_tile(index, g);
        const int ib = kb.spad("idx", index.dtype, it.elements, index.is_literal ? 1 : 2);
        const int sb = src.is_literal ? -1 : kb.spad("src", src.dtype, g.tile_elements(), 2);
        const int db = kb.spad("dst", out.dtype, g.tile_elements(), 1);
        if (index.is_literal) fill_literal(kb, ib, register_type(index.dtype), index.literal, 1, 1);
        const int64_t ld = g.tile.back();
        walk(
            kb, g, "t",
            [&](const TileIndex& t, const Affine& slot) {
              load_index(kb, index, it, g, t, ib, slot);
              if (!src.is_literal)
                kb.emit(dma(true, src.buffer, tile_offset(src, g, t, -1), block_strides(src, g, -1),
                            SpadRef{sb, slot, Affine::of(0), 0}, dense_block(g), block_dims(g, t), kLoadTag));
            },
            [&](const TileIndex& t, const Affine& slot) {
              const Affine islot = index.is_literal ? Affine::of(0) : slot;
              const SpadRef dst{db, Affine::of(0), Affine::of(0), 0};
              kb.emit(indirect(true, out, axis, g, t, dst, it, ib, islot, kLoadTag));
              const std::vector<Extent> dims = block_dims(g, t);
              VecBuilder vb("scatter_add", dims.size() > 1 ? dims[0] : Extent::of(1), dims.back());
              const int old = vb.load(T, SpadRef{db, Affine::of(0), Affine::of(0), ld}, LoadBroadcast::Full);
              int add = src.is_literal ? vb.constant(register_type(src.dtype), src.literal)
                                       : vb.load(register_type(src.dtype), SpadRef{sb, slot, Affine::of(0), ld},
                                                 LoadBroadcast::Full);
              int sum = 0;
              if (T == ScalarType::BF16 || register_type(src.dtype) != T) {
                // Mixed or bf16 operands add in f32 (integers in i64) and round once, as the reference does.
                const ScalarType wide = is_float(T) ? ScalarType::F32 : ScalarType::I64;
                auto widen = [&](int v) { return vb.type(v) == wide ? v : vb.op(VecOp::Cast, wide, {v}); };
                sum = vb.op(VecOp::Cast, T, {vb.op(VecOp::Add, wide, {widen(old), widen(add)})});
              } else {
                sum = vb.op(VecOp::Add, T, {old, add});
              }
              vb.store(SpadRef{db, Affine::of(0), Affine::of(0), ld}, vb.full(sum));
              kb.emit(vb.done());
              kb.emit(indirect(false, out, axis, g, t, dst, it, ib, islot, kStoreTag));
              kb.emit(Stmt{WaitOp{kStoreTag}});
            });
        return kb.finish(footprint);
      });
}

}  // namespace spool::lower::detail
