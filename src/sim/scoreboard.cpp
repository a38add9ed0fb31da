// The scratchpad scoreboard: recording reads and writes (see scoreboard.hpp).

#include "scoreboard.hpp"

namespace spool::sim::detail {
namespace {

// Bounds the scoreboard: many distinct regions collapse into one
// conservative interval with the latest times.
void compact(SlotState& st) {
  if (st.regions.size() <= 32) return;
  SpadRegion all{make_interval(INT64_MAX, INT64_MIN), 0, 0, -1};
  for (const SpadRegion& r : st.regions) {
    all.box.lo = std::min(all.box.lo, r.box.lo);
    all.box.hi = std::max(all.box.hi, r.box.hi);
    all.write_done = std::max(all.write_done, r.write_done);
    all.read_done = std::max(all.read_done, r.read_done);
  }
  st.regions.assign(1, all);
}

}  // namespace

void record_read(SlotState& st, const Box& box, Time done) {
  for (SpadRegion& r : st.regions) {
    if (r.box == box) {
      r.read_done = std::max(r.read_done, done);
      return;
    }
  }
  st.regions.push_back(SpadRegion{box, 0, done, -1});
  compact(st);
}

void record_write(SlotState& st, const Box& box, Time done, int array) {
  std::erase_if(st.regions, [&](const SpadRegion& r) { return contains(box, r.box); });
  st.regions.push_back(SpadRegion{box, done, 0, array});
  ++st.generation;
  compact(st);
}

}  // namespace spool::sim::detail
