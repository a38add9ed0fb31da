#pragma once
// Internal to the lower stage: the vector-unit kernel template. A domain of
// any rank is walked as [outer axes...] x rows x cols: one loop per outer
// axis, row tiles and (when allowed) column tiles, software pipelined over the
// innermost tile loop with double-buffered scratchpad tiles. Each input is
// loaded by strided DMA at its logical shape: a full tile, one value per
// column (broadcast down the rows, e.g. a bias) or one value per row; loads
// that no loop changes are hoisted out of the loops. The body is a callback
// that builds the vector step from the loaded values.

#include "builder.hpp"

namespace spool::lower::detail {

enum class TileOut : uint8_t {
  Full,   // a [rows x cols] tile
  Row,    // one value per row (a reduction); the access's col axis is ignored
  RowsK,  // k values per row (top-k); the access's col axis has k elements
  Col,    // one value per column (a reduction down the rows); the access's row axis is ignored
};

struct TiledOutput {
  Access access;  // over the domain's axes (RowsK: the col axis has k elements)
  TileOut shape = TileOut::Full;
  int64_t k = 1;
};

struct TiledSpec {
  KernelInfo info;
  Shape shape;       // the domain
  int row_axis = -1; // -1: rank < 2 (one row)
  int col_axis = 0;
  bool tile_cols = true;  // false: a row is one tile (reductions along cols)
  bool whole_rows = false;  // true: a tile holds every row (reductions down the rows); columns are tiled
  std::vector<Access> inputs;
  std::vector<TiledOutput> outputs;
  // A table read by gather: whole rows along the col axis (`table.shape` has
  // the table's length there), loaded per row tile, never tiled by columns.
  bool has_table = false;
  Access table;
  // Builds the step from the loaded inputs (and the table's tile, if any);
  // returns one value per output (k values for a RowsK output, in order).
  std::function<std::vector<int>(VecBuilder&, const std::vector<int>&, const SpadRef*)> body;
};

void emit_tiled(Emitter& em, const TiledSpec& spec);

// A domain for kernels along one axis (reductions, norms, top-k): that axis
// as the columns, whole rows per tile; the last other axis as the rows, or
// with `widest` the longest other axis (the last on a tie), so that a
// per-head norm of [tokens, heads, dim] takes tiles of many tokens rather
// than one token's few heads (each other axis is walked one index per tile).
void row_layout(TiledSpec& s, const Shape& shape, int64_t axis, bool widest = false);

// A domain for a reduction down `axis` that DRAM does not hold contiguous:
// that axis as the rows, every row in each tile, and `col_axis` (the
// contiguous one) as the columns, tiled; the reduction runs down the
// sublanes (the .rows ops) instead of across lanes after a transposing load.
// False when a few columns of every row (`bytes` per element) would not fit
// the scratchpad budget: the caller keeps row_layout.
bool column_layout(TiledSpec& s, const Shape& shape, int64_t axis, int col_axis, int64_t budget, int64_t bytes);

// The axis `a` reads contiguously (stride 1, more than one element), other
// than `axis`; -1 if none, or if `axis` is itself contiguous.
int contiguous_axis(const Access& a, int64_t axis);

}  // namespace spool::lower::detail
