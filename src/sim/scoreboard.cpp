// The scratchpad scoreboard: recording reads and writes (see scoreboard.hpp).

#include "scoreboard.hpp"

#include <algorithm>

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
  st.written = 1;
}

// Moves regions[i], which now has a write, into [0, written).
void mark_written(SlotState& st, size_t i) {
  if (i < st.written) return;
  std::swap(st.regions[i], st.regions[st.written]);
  ++st.written;
}

}  // namespace

void record_read(SlotState& st, const Box& box, Time done) {
  for (SpadRegion& r : st.regions) {
    if (r.box == box) {
      r.read_done = std::max(r.read_done, done);
      return;
    }
  }
  st.regions.push_back(SpadRegion{box, 0, done, -1});  // no write: after [0, written)
  compact(st);
}

void record_write(SlotState& st, const Box& box, Time done, int array) {
  // Drop the regions the write covers, in order (so [0, written) stays the front).
  size_t kept = 0, written = 0;
  for (size_t i = 0; i < st.regions.size(); ++i) {
    if (contains(box, st.regions[i].box)) continue;
    if (i < st.written) ++written;
    st.regions[kept++] = st.regions[i];
  }
  st.regions.resize(kept);
  st.written = written;
  st.regions.push_back(SpadRegion{box, done, 0, array});
  mark_written(st, st.regions.size() - 1);
  ++st.generation;
  compact(st);
}

void record_accumulate(SlotState& st, const Box& box, Time done) {
  for (size_t i = 0; i < st.regions.size(); ++i) {
    if (st.regions[i].box == box) {
      st.regions[i].write_done = done;
      mark_written(st, i);
      break;  // boxes are distinct
    }
  }
  ++st.generation;
}

}  // namespace spool::sim::detail
