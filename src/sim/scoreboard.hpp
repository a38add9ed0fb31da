#pragma once
// The timing model's scratchpad scoreboard (internal to spool_sim): per
// buffer slot, the parts of it that ops wrote and read and when those
// accesses complete, so that an op waits exactly for the accesses it
// conflicts with (RAW, WAR and WAW).

#include "dram.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

namespace spool::sim::detail {

// The elements of one scratchpad slot an op touches: the interval [lo, hi)
// and, for a 2-D tile that does not wrap its row stride, the exact box of
// rows x columns at that stride, so that tiles side by side in one buffer
// (column blocks of two arrays, the column blocks of a score matrix) do not
// look like they overlap.
struct Box {
  int64_t lo = 0, hi = 0;
  int64_t ld = 0;  // 0: only the interval is known
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  bool operator==(const Box&) const = default;
};

// a / b and a % b for b > 0, which the simulator asks for a few times per
// matmul step: without a division when b is a power of two (a tile's row
// stride, a buffer's slot count: most of them), else by a 32-bit division
// when both fit (scratchpad offsets do), much cheaper than a 64-bit one.
inline std::pair<int64_t, int64_t> div_mod(int64_t a, int64_t b) {
  if (a >= 0) {
    if ((b & (b - 1)) == 0) return {a >> std::countr_zero(static_cast<uint64_t>(b)), a & (b - 1)};
    if (a <= UINT32_MAX && b <= UINT32_MAX) {
      const uint32_t q = static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
      return {q, a - static_cast<int64_t>(q) * b};
    }
  }
  return {a / b, a % b};
}

inline Box make_box(int64_t lo, int64_t rows, int64_t cols, int64_t ld) {
  Box b;
  b.lo = lo;
  b.hi = lo + (rows - 1) * ld + cols;
  if (rows > 1 && ld > 0) {
    const auto [row, col] = div_mod(lo, ld);
    if (col + cols <= ld) {
      b.ld = ld;
      b.r0 = row;
      b.r1 = b.r0 + rows;
      b.c0 = col;
      b.c1 = b.c0 + cols;
    }
  }
  return b;
}
inline Box make_interval(int64_t lo, int64_t hi) { return Box{lo, hi, 0, 0, 0, 0, 0}; }

inline bool overlaps(const Box& a, const Box& b) {
  if (a.hi <= b.lo || b.hi <= a.lo) return false;
  if (a.ld != 0 && a.ld == b.ld) return a.r0 < b.r1 && b.r0 < a.r1 && a.c0 < b.c1 && b.c0 < a.c1;
  return true;
}
inline bool contains(const Box& outer, const Box& inner) {
  if (outer.ld == 0) return outer.lo <= inner.lo && inner.hi <= outer.hi;
  if (outer.ld == inner.ld)
    return outer.r0 <= inner.r0 && inner.r1 <= outer.r1 && outer.c0 <= inner.c0 && inner.c1 <= outer.c1;
  return false;
}

// A part of one scratchpad slot with the times its last write and its reads
// complete.
struct SpadRegion {
  Box box;
  Time write_done = 0;
  Time read_done = 0;
  int array = -1;  // the array whose accumulators hold it (matmul results)
};

// A slot's regions have distinct boxes (a write replaces what it covers, a
// read adds a box only if it is new), so no answer depends on their order:
// every region with a write in flight or done (write_done > 0) is kept in
// [0, written), for read_ready(), and a tile's many reads after them (the
// k slices of an operand tile, read once per column tile).
struct SlotState {
  std::vector<SpadRegion> regions;
  size_t written = 0;
  uint64_t generation = 0;  // bumped by every write (weight-tile identity)
};

// When `box` may be read: its overlapping writes are done.
inline Time read_ready(const SlotState& st, const Box& box) {
  Time t = 0;
  for (size_t i = 0; i < st.written; ++i) {
    const SpadRegion& r = st.regions[i];
    if (overlaps(r.box, box)) t = std::max(t, r.write_done);
  }
  return t;
}
// When `box` may be written: its overlapping writes and reads are done.
inline Time write_ready(const SlotState& st, const Box& box) {
  Time t = 0;
  for (const SpadRegion& r : st.regions)
    if (overlaps(r.box, box)) t = std::max({t, r.write_done, r.read_done});
  return t;
}

// A read of `box` that completes at `done`.
void record_read(SlotState& st, const Box& box, Time done);
// A write of `box` that completes at `done`, into the accumulators of
// systolic array `array` (-1: none); it replaces the regions it covers.
void record_write(SlotState& st, const Box& box, Time done, int array);
// Another write into the accumulators that hold exactly `box` (an
// accumulating step continuing its chain): its time, not a new region.
void record_accumulate(SlotState& st, const Box& box, Time done);

}  // namespace spool::sim::detail
