// The liveness-aware scratchpad allocator (see spad_alloc.hpp): first fit in
// order of first use. For buffers of equal size this is optimal on interval
// lifetimes (the footprint equals the largest live sum); with mixed sizes
// it may leave holes, and the footprint it reports is the one that runs.

#include <spool/lower/spad_alloc.hpp>
#include <spool/support/fault.hpp>

#include <algorithm>
#include <numeric>

namespace spool::lower {
namespace {

int64_t aligned(int64_t bytes) { return (bytes + kSpadAlign - 1) / kSpadAlign * kSpadAlign; }

}  // namespace

SpadPlacement place_spad(const std::vector<SpadRequest>& requests) {
  SpadPlacement out;
  out.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].first != requests[b].first) return requests[a].first < requests[b].first;
    return aligned(requests[a].bytes) > aligned(requests[b].bytes);
  });
  std::vector<size_t> placed;
  for (size_t r : order) {
    const SpadRequest& req = requests[r];
    const int64_t size = aligned(req.bytes);
    // The intervals [offset, end) of placed buffers live at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t p : placed)
      if (requests[p].first <= req.last && req.first <= requests[p].last)
        busy.push_back({out.offsets[p], out.offsets[p] + aligned(requests[p].bytes)});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    out.offsets[r] = offset;
    if (size > 0) out.footprint = std::max(out.footprint, offset + size);
    placed.push_back(r);
  }
  // The largest live sum, by a sweep over the interval endpoints.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const SpadRequest& req : requests) {
    events.push_back({2 * static_cast<int64_t>(req.first), aligned(req.bytes)});
    events.push_back({2 * static_cast<int64_t>(req.last) + 1, -aligned(req.bytes)});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  for (const auto& [point, delta] : events) {
    live += delta;
    out.max_live = std::max(out.max_live, live);
  }
  return out;
}

int64_t allocate_kernel_spad(npu::Kernel& kernel) {
  const npu::SpadLiveness liveness = npu::spad_liveness(kernel);
  std::vector<SpadRequest> requests;
  std::vector<size_t> used;
  for (size_t b = 0; b < kernel.spad.size(); ++b) {
    if (liveness.range[b].first < 0) {
      kernel.spad[b].offset = 0;  // never used: occupies nothing
      continue;
    }
    requests.push_back({kernel.spad[b].footprint_bytes(), liveness.range[b].first, liveness.range[b].second});
    used.push_back(b);
  }
  const SpadPlacement placement = place_spad(requests);
  for (size_t i = 0; i < used.size(); ++i) kernel.spad[used[i]].offset = placement.offsets[i];
  if (fault::planted(fault::Fault::SpadOverlap) && used.size() >= 2)
    kernel.spad[used[1]].offset = kernel.spad[used[0]].offset;
  return placement.footprint;
}

}  // namespace spool::lower
