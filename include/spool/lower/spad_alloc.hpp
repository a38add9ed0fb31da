#pragma once
// The scratchpad allocator: one liveness-aware placement used both by tile
// selection (to compute a candidate's footprint) and by code generation (to
// place the emitted kernel's buffers), so the budget that chose a tile is
// exactly the footprint that runs.
//
// Buffers whose live ranges ([first, last] statement, see npu::spad_liveness)
// do not overlap may share space. Placement is first fit in order of first
// use, larger buffers first on ties, at 64-byte alignment.

#include <spool/npu/kernel.hpp>

#include <cstdint>
#include <vector>

namespace spool::lower {

struct SpadRequest {
  int64_t bytes = 0;
  int first = 0, last = 0;  // live range, inclusive
};

struct SpadPlacement {
  std::vector<int64_t> offsets;  // per request
  int64_t footprint = 0;         // highest end of any placed buffer
  int64_t max_live = 0;          // largest sum of (aligned) sizes live at one point
};

inline constexpr int64_t kSpadAlign = 64;

SpadPlacement place_spad(const std::vector<SpadRequest>& requests);

// Places the kernel's scratchpad buffers (sets their offsets) from their
// liveness and returns the footprint in bytes.
int64_t allocate_kernel_spad(npu::Kernel& kernel);

}  // namespace spool::lower
