// The timing model's systolic arrays (the model: timing.cpp).

#include "timing.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace spool::sim::detail {

using namespace spool::npu;

void TimingSim::matmul(Core& core, const MatmulOp& mm) {
  const int64_t* vars = core.vars.data();
  const int64_t m = mm.m.eval(vars), k = mm.k.eval(vars), n = mm.n.eval(vars);
  const int64_t R = c_.systolic.rows;
  if (k > R || n > c_.systolic.cols)
    fail("kernel '{}': matmul tile k={} n={} exceeds the {}x{} systolic array of config '{}'",
         p_.kernels[core.kernel].name, k, n, R, c_.systolic.cols, c_.name);
  auto range = [&](const SpadRef& r, int64_t rows, int64_t cols) {
    return make_box(r.offset.eval(vars), rows, cols, r.ld);
  };
  const Box abox = mm.trans_a ? range(mm.a, k, m) : range(mm.a, m, k);
  const Box bbox = mm.trans_b ? range(mm.b, n, k) : range(mm.b, k, n);
  const Box cbox = range(mm.c, m, n);
  SlotState& sa = slot_of(core, mm.a);
  SlotState& sb = slot_of(core, mm.b);
  SlotState& sc = slot_of(core, mm.c);
  const Time a_ready = read_ready(sa, abox);
  const Time b_ready = read_ready(sb, bbox);

  // An accumulating step continues a chain in one array's accumulators.
  int bound = -1;
  if (mm.accumulate)
    for (const SpadRegion& r : sc.regions)
      if (r.box == cbox && r.array >= 0) bound = r.array;
  // C is ready for array `a` when its readers are done and every earlier
  // write to it is done, except writes by `a` itself: an array writes its
  // accumulators in order, so those need no wait.
  auto c_ready_for = [&](int a) {
    Time t = 0;
    for (const SpadRegion& r : sc.regions)
      if (overlaps(r.box, cbox)) t = std::max({t, r.read_done, r.array == a ? Time{0} : r.write_done});
    return t;
  };
  const WeightTile tile{mm.b.buffer,
                        slot_index(mm.b.slot.eval(vars), core.spad[mm.b.buffer].size()),
                        bbox.lo,
                        mm.b.ld,
                        k,
                        n,
                        mm.trans_b,
                        sb.generation};
  const Time preload = R * core_period_;

  struct Plan {
    Time issue, preload_start, start;
    bool resident;
  };
  auto plan_for = [&](int index) {
    ArrayState& a = core.arrays[index];
    Plan pl;
    pl.issue = std::max(core.issue, a.queue.slot_free());
    pl.resident = a.weights == tile;
    const Time operands = std::max({pl.issue, a_ready, c_ready_for(index)});
    if (pl.resident) {
      pl.preload_start = 0;
      pl.start = std::max(a.stream_free, operands);
    } else if (c_.systolic.weight_buffers >= 2) {
      pl.preload_start = std::max({a.preload_free, b_ready, pl.issue});
      pl.start = std::max({a.stream_free, pl.preload_start + preload, operands});
    } else {
      pl.preload_start = std::max({a.drained, a.stream_free, b_ready, pl.issue});
      pl.start = std::max(pl.preload_start + preload, operands);
    }
    return pl;
  };
  // A step that names its array runs there (unless it continues a chain).
  if (bound < 0 && mm.array >= 0) bound = mm.array % static_cast<int>(core.arrays.size());
  int chosen = bound;
  Plan plan{};
  if (chosen >= 0) {
    plan = plan_for(chosen);
  } else {
    for (int i = 0; i < static_cast<int>(core.arrays.size()); ++i) {
      const Plan pl = plan_for(i);
      if (chosen < 0 || pl.start < plan.start) {
        chosen = i;
        plan = pl;
      }
    }
  }
  ArrayState& a = core.arrays[chosen];
  const Time done = plan.start + (m + R + n - 1) * core_period_;
  if (!plan.resident) {
    a.weights = tile;
    a.preload_free = plan.start;
    // Weights without a shadow buffer hold the array while they load; with
    // one they load behind the tile streaming through it, and counting
    // them too would put a saturated array above 100%.
    if (c_.systolic.weight_buffers < 2) a.busy += preload;
  }
  a.stream_free = plan.start + m * core_period_;
  a.drained = done;
  a.busy += m * core_period_;
  a.queue.push(plan.start);
  core.issue = plan.issue + core_period_;
  core.end = std::max(core.end, done);
  record_read(sa, abox, plan.start + m * core_period_);
  record_read(sb, bbox, plan.resident ? plan.start : plan.preload_start + preload);
  if (mm.accumulate && bound >= 0) {
    record_accumulate(sc, cbox, done);
  } else {
    record_write(sc, cbox, done, chosen);
  }
  report_.matmul_flops += 2 * m * k * n;
  if (trace_) {
    if (!plan.resident) record(a.track, "preload", plan.preload_start, preload);
    record(a.track, fmt::format("matmul {}x{}x{}", m, k, n), plan.start, done - plan.start);
  }
}

}  // namespace spool::sim::detail
