// The timing model: tile-level and event driven, no tensor data.
//
// Every core runs one kernel at a time. Its in-order front end walks the
// kernel's loop nest and issues one statement per core cycle into the queue
// of the unit that executes it (systolic arrays, vector unit, DMA engine);
// it stalls when that queue holds issue_queue_depth ops that have not
// started. A unit runs its ops in order; an op starts when its unit is free
// and its scratchpad operands are ready. Readiness is tracked per
// scratchpad buffer slot and element range (RAW, WAR and WAW), so DMA and
// compute overlap exactly as far as the kernel allocated buffers for it:
// with one slot the next load waits for the compute reading the slot, with
// two it proceeds. `wait TAG` blocks the front end until those DMAs finish.
// Cores advance in global time order (the core whose front end is earliest
// goes next), so DRAM channels see requests from all cores in time order.
//
// Time is kept in femtoseconds; each unit converts its cycles with its own
// clock (core, DRAM, network), so clock domains are separate.
//
// Systolic array (weight-stationary, R x C = systolic.rows x cols), one tile
// step C[m x n] (+)= A[m x k] * B[k x n], k <= R, n <= C:
//   preload   = R cycles: weight rows shift down through all R rows (rows >= k
//               are zero-filled), one row per cycle;
//   stream    = m cycles: one row of A enters per cycle (skewed);
//   fill/drain: row t's result for column j leaves the array at
//               t + R + j, so the step is done at start + m + R + n - 1.
//   Resident weights (the same tile as the array's last one): no preload.
//   weight_buffers = 2 (shadow weight registers): the next tile preloads
//     while the current one streams; start = max(stream_free, preload_end),
//     stream_free = start + m. A chain of T tiles of equal m, n therefore takes
//       R + (T - 1) * max(m, R) + m + R + n - 1 cycles.
//   weight_buffers = 1: the preload waits for the previous tile to drain:
//     each tile takes R + m + R + n - 1 cycles, back to back.
//   Accumulation (+=) happens in the array's output accumulators, so a chain
//   of accumulating steps stays on one array and pipelines.
//
// Vector unit: a register holds lanes x VLEN bits (tpuv3: 128 lanes of 8
//   sublanes x 32 bits). A step over a rows x cols tile puts the columns
//   across the lanes and the rows across the sublanes (VLEN / b rows of a
//   b-bit type per register), so a full value takes
//     regs = ceil(rows / (VLEN / b)) * ceil(cols / lanes)
//   registers (a ragged edge fills a whole register), a per-row value one
//   register per row group. Every op class runs on one unit (vector.ops.
//   CLASS.unit: alu, eup for transcendentals, load, store) and keeps one of
//   its slots busy `interval` cycles per register. A reduction across the
//   columns combines a row group's ceil(cols / lanes) registers on the ALUs,
//   then reduces the last one across its lanes on the cross-lane unit (xlu:
//   lane_reduce.interval per row group, lane_reduce.latency); a reduction
//   down the rows (the .rows forms, one value per column) combines the row
//   groups' registers and then the sublanes of the last on the ALUs
//   (ceil(log2 sublanes) shift-and-combine steps), with no cross-lane work.
//   A per-column value takes one register per group of lanes. The units
//   issue side by side (VLIW slots, vector.slots.UNIT per cycle), the step
//   strip-mined and software pipelined:
//     busy = step_overhead + max over units ceil(sum(regs * interval) / slots)
//   and the step is done after busy + the body's critical-path latency.
//
// DMA engine: a descriptor of Q requests (see dram.hpp) occupies the engine
// for
//   issue = max(setup + ceil(Q / requests_per_cycle),           (issue rate)
//               ceil(Q * RTT / max_outstanding),                  (Little's law)
//               ceil(bytes / (noc ports * port bytes)) [noc clock], (network)
//               ceil(bytes / (lanes * spad port bytes)))          (scratchpad)
// with RTT = 2 * noc latency + DRAM latency. Requests reach the channels one
// network latency after issue; the descriptor completes when the last
// channel has served it plus DRAM latency and the network's return latency.
// The engine is one in-order queue: a store waiting for its data blocks the
// loads behind it, so kernels issue prefetches before stores. A store has
// read its scratchpad slot when its last request has been issued.
//
// Kernel launch: fixed_cycles, plus fetching the kernel's code (statements *
// bytes_per_instruction) from DRAM: RTT + bytes / (requests_per_cycle *
// request_bytes).

#include <spool/sim/sim.hpp>

#include "dram.hpp"

#include <spool/npu/text.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace spool::sim {
namespace {

using detail::Time;
using namespace spool::npu;

constexpr Time kNever = INT64_MAX / 4;

Time period_of(double mhz) { return static_cast<Time>(std::llround(1e9 / mhz)); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t ceil_log2(int64_t v) {
  int64_t stages = 0;
  while ((int64_t{1} << stages) < v) ++stages;
  return stages;
}

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

Box make_box(int64_t lo, int64_t rows, int64_t cols, int64_t ld) {
  Box b;
  b.lo = lo;
  b.hi = lo + (rows - 1) * ld + cols;
  if (rows > 1 && ld > 0 && lo % ld + cols <= ld) {
    b.ld = ld;
    b.r0 = lo / ld;
    b.r1 = b.r0 + rows;
    b.c0 = lo % ld;
    b.c1 = b.c0 + cols;
  }
  return b;
}
Box make_interval(int64_t lo, int64_t hi) { return Box{lo, hi, 0, 0, 0, 0, 0}; }

bool overlaps(const Box& a, const Box& b) {
  if (a.hi <= b.lo || b.hi <= a.lo) return false;
  if (a.ld != 0 && a.ld == b.ld) return a.r0 < b.r1 && b.r0 < a.r1 && a.c0 < b.c1 && b.c0 < a.c1;
  return true;
}
bool contains(const Box& outer, const Box& inner) {
  if (outer.ld == 0) return outer.lo <= inner.lo && inner.hi <= outer.hi;
  if (outer.ld == inner.ld)
    return outer.r0 <= inner.r0 && inner.r1 <= outer.r1 && outer.c0 <= inner.c0 && inner.c1 <= outer.c1;
  return false;
}

// A part of one scratchpad slot with the times its last write and its reads
// complete.
struct Region {
  Box box;
  Time write_done = 0;
  Time read_done = 0;
  int array = -1;  // the array whose accumulators hold it (matmul results)
};

struct SlotState {
  std::vector<Region> regions;
  uint64_t generation = 0;  // bumped by every write (weight-tile identity)
};

// Ring of the start times of a unit's last `depth` ops: the front end may
// queue a new op once the op `depth` places earlier has started.
class IssueQueue {
 public:
  explicit IssueQueue(int64_t depth = 1) : starts_(static_cast<size_t>(depth), 0) {}
  Time slot_free() const { return starts_[head_]; }
  void push(Time start) {
    starts_[head_] = start;
    head_ = (head_ + 1) % starts_.size();
  }

 private:
  std::vector<Time> starts_;
  size_t head_ = 0;
};

struct WeightTile {
  int buffer = -1;
  int64_t slot = 0, offset = 0, ld = 0, k = 0, n = 0;
  bool trans = false;
  uint64_t generation = 0;
  bool operator==(const WeightTile&) const = default;
};

struct ArrayState {
  Time stream_free = 0;   // the next tile's first row may enter
  Time preload_free = 0;  // the shadow weight registers are free
  Time drained = 0;       // the last tile's results have left
  WeightTile weights;
  IssueQueue queue;
  Time busy = 0;  // streaming rows, and loading weights when there is no shadow buffer
  int track = -1;
};

struct Frame {
  const std::vector<Stmt>* body = nullptr;
  size_t index = 0;
  int var = -1;  // -1: the kernel's top level
  int64_t trips = 0;
};

// Per vector step, resolved once: config timing of each instruction.
struct VecInstrTiming {
  int64_t interval = 1, latency = 1, bits = 32;
  int unit = 0;  // target::VectorUnit
  bool reduce = false, counts = false, flop = false;
  bool reduce_rows = false;  // down the rows (one value per column)
  bool col_load = false;  // one row loaded once and broadcast down the rows
};
struct VecStatic {
  std::vector<VecInstrTiming> instrs;
  std::vector<ValueShape> shapes;
  target::VectorOpTiming store;
};

class TimingSim {
 public:
  TimingSim(const Program& p, const target::NpuConfig& c, Trace* trace)
      : p_(p), c_(c), trace_(trace), dram_(c), core_period_(period_of(c.core_clock_mhz)),
        noc_period_(period_of(c.noc.clock_mhz)) {
    rtt_ = 2 * c.noc.latency_cycles * noc_period_ + c.dram.latency_cycles * dram_.period();
    // DRAM layout: root buffers in order, 4 KiB aligned.
    int64_t next = 0;
    base_.assign(p.buffers.size(), 0);
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      if (p.buffers[i].alias_of >= 0) continue;
      base_[i] = next;
      next += ceil_div(p.buffer_elements(static_cast<int>(i)) * dtype_bytes(p.buffers[i].dtype), 4096) * 4096;
    }
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const DramBuffer& b = p.buffers[i];
      if (b.alias_of >= 0) base_[i] = base_[b.alias_of] + b.alias_offset * dtype_bytes(b.dtype);
    }
    cores_.resize(c.cores);
    for (int i = 0; i < c.cores; ++i) {
      Core& core = cores_[i];
      core.arrays.resize(c.systolic.arrays);
      for (int a = 0; a < c.systolic.arrays; ++a) {
        core.arrays[a].queue = IssueQueue(c.issue_queue_depth);
        if (trace_) core.arrays[a].track = trace_->track(fmt::format("core{}.array{}", i, a));
      }
      core.vector_queue = IssueQueue(c.issue_queue_depth);
      core.dma_queue = IssueQueue(c.issue_queue_depth);
      if (trace_) {
        core.kernel_track = trace_->track(fmt::format("core{}.kernels", i));
        core.vector_track = trace_->track(fmt::format("core{}.vector", i));
        core.dma_track = trace_->track(fmt::format("core{}.dma", i));
      }
    }
    if (trace_)
      for (int ch = 0; ch < c.dram.channels; ++ch) channel_tracks_.push_back(trace_->track(fmt::format("dram.ch{}", ch)));
  }

  Report run() {
    const size_t n = p_.kernels.size();
    std::vector<Time> kernel_end(n, kNever);
    std::vector<bool> assigned(n, false);
    report_.kernel_stats.resize(n);
    size_t finished = 0;
    while (finished < n) {
      // Idle cores take the first kernel (in program order) whose dependencies are done.
      for (int ci = 0; ci < c_.cores; ++ci) {
        Core& core = cores_[ci];
        if (core.kernel >= 0) continue;
        for (size_t k = 0; k < n; ++k) {
          if (assigned[k]) continue;
          Time ready = core.free;
          bool deps_done = true;
          for (int d : p_.kernels[k].deps) {
            if (kernel_end[d] == kNever) deps_done = false;
            else ready = std::max(ready, kernel_end[d]);
          }
          if (!deps_done) continue;
          assigned[k] = true;
          start_kernel(ci, static_cast<int>(k), ready);
          break;
        }
      }
      // Step the running core whose front end is earliest.
      int best = -1;
      for (int ci = 0; ci < c_.cores; ++ci)
        if (cores_[ci].kernel >= 0 && (best < 0 || cores_[ci].issue < cores_[best].issue)) best = ci;
      SPOOL_ASSERT(best >= 0, "no runnable kernel although {} of {} are unfinished", n - finished, n);
      Core& core = cores_[best];
      const Stmt* stmt = next_stmt(core);
      if (stmt) {
        execute(core, *stmt);
        continue;
      }
      const Time end = std::max(core.issue, core.end);
      kernel_end[core.kernel] = end;
      KernelStats& ks = report_.kernel_stats[core.kernel];
      ks.end_cycle = cycles(end);
      if (trace_) record(core.kernel_track, p_.kernels[core.kernel].name, core.launch, end - core.launch);
      core.free = end;
      core.kernel = -1;
      ++finished;
    }
    return finish();
  }

 private:
  struct Core {
    int kernel = -1;
    Time free = 0;    // the core finished its last kernel
    Time launch = 0;  // the current kernel's launch began
    Time issue = 0;   // the front end's time
    Time end = 0;     // latest completion of anything the kernel issued
    std::vector<Frame> stack;
    std::vector<int64_t> vars;
    std::vector<std::vector<SlotState>> spad;  // per buffer, per slot
    std::vector<std::pair<int, Time>> tags;
    std::vector<ArrayState> arrays;
    Time vector_free = 0, dma_free = 0;
    IssueQueue vector_queue, dma_queue;
    Time vector_busy = 0, dma_busy = 0;
    int kernel_track = -1, vector_track = -1, dma_track = -1;
  };

  int64_t cycles(Time t) const { return ceil_div(t, core_period_); }

  void record(int track, const std::string& name, Time start, Time duration) {
    trace_->events.push_back({track, name, static_cast<double>(start) * 1e-9, static_cast<double>(duration) * 1e-9});
  }

  // ---- kernels ------------------------------------------------------------------
  void start_kernel(int ci, int k, Time ready) {
    Core& core = cores_[ci];
    const Kernel& kernel = p_.kernels[k];
    int64_t statements = 0;
    for_each_stmt(kernel.body, [&](const Stmt&) { ++statements; });
    const int64_t code_bytes = statements * c_.launch.bytes_per_instruction;
    const Time launch = c_.launch.fixed_cycles * core_period_ + rtt_ +
                        ceil_div(code_bytes, c_.dma.requests_per_cycle * c_.dma.request_bytes) * core_period_;
    core.kernel = k;
    core.launch = ready;
    core.issue = ready + launch;
    core.end = core.issue;
    core.stack.assign(1, Frame{&kernel.body, 0, -1, 0});
    core.vars.assign(kernel.loop_vars.size(), 0);
    core.spad.assign(kernel.spad.size(), {});
    for (size_t b = 0; b < kernel.spad.size(); ++b) core.spad[b].resize(kernel.spad[b].slots);
    core.tags.clear();
    // The units are free no earlier than the launch completes.
    for (ArrayState& a : core.arrays) {
      a.stream_free = std::max(a.stream_free, core.issue);
      a.preload_free = std::max(a.preload_free, core.issue);
      a.drained = std::max(a.drained, core.issue);
      a.weights = WeightTile{};  // weight identity is per kernel's buffers
    }
    core.vector_free = std::max(core.vector_free, core.issue);
    core.dma_free = std::max(core.dma_free, core.issue);
    KernelStats& ks = report_.kernel_stats[k];
    ks.name = kernel.name;
    ks.core = ci;
    ks.launch_cycle = cycles(ready);
    ks.start_cycle = cycles(core.issue);
  }

  const Stmt* next_stmt(Core& core) {
    for (;;) {
      Frame& f = core.stack.back();
      if (f.index < f.body->size()) {
        const Stmt& s = (*f.body)[f.index++];
        if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
          core.vars[loop->var] = 0;
          core.stack.push_back(Frame{&loop->body, 0, loop->var, loop->trips});
          continue;
        }
        return &s;
      }
      if (f.var < 0) return nullptr;
      if (++core.vars[f.var] < f.trips) {
        f.index = 0;
        continue;
      }
      core.stack.pop_back();
    }
  }

  // ---- scratchpad scoreboard -------------------------------------------------
  SlotState& slot_of(Core& core, const SpadRef& r) {
    auto& slots = core.spad[r.buffer];
    const int64_t s = r.slot.eval(core.vars.data()) % static_cast<int64_t>(slots.size());
    return slots[s];
  }

  static Time read_ready(const SlotState& st, const Box& box) {
    Time t = 0;
    for (const Region& r : st.regions)
      if (overlaps(r.box, box)) t = std::max(t, r.write_done);
    return t;
  }
  static Time write_ready(const SlotState& st, const Box& box) {
    Time t = 0;
    for (const Region& r : st.regions)
      if (overlaps(r.box, box)) t = std::max({t, r.write_done, r.read_done});
    return t;
  }
  // Bounds the scoreboard: many distinct regions collapse into one
  // conservative interval with the latest times.
  static void compact(SlotState& st) {
    if (st.regions.size() <= 32) return;
    Region all{make_interval(INT64_MAX, INT64_MIN), 0, 0, -1};
    for (const Region& r : st.regions) {
      all.box.lo = std::min(all.box.lo, r.box.lo);
      all.box.hi = std::max(all.box.hi, r.box.hi);
      all.write_done = std::max(all.write_done, r.write_done);
      all.read_done = std::max(all.read_done, r.read_done);
    }
    st.regions.assign(1, all);
  }
  static void record_read(SlotState& st, const Box& box, Time done) {
    for (Region& r : st.regions) {
      if (r.box == box) {
        r.read_done = std::max(r.read_done, done);
        return;
      }
    }
    st.regions.push_back(Region{box, 0, done, -1});
    compact(st);
  }
  static void record_write(SlotState& st, const Box& box, Time done, int array) {
    std::erase_if(st.regions, [&](const Region& r) { return contains(box, r.box); });
    st.regions.push_back(Region{box, done, 0, array});
    ++st.generation;
    compact(st);
  }

  // ---- statements --------------------------------------------------------------
  void execute(Core& core, const Stmt& s) {
    if (const auto* d = std::get_if<DmaOp>(&s.node)) {
      dma(core, *d);
    } else if (const auto* m = std::get_if<MatmulOp>(&s.node)) {
      matmul(core, *m);
    } else if (const auto* v = std::get_if<VectorOp>(&s.node)) {
      vector(core, *v);
    } else if (const auto* w = std::get_if<WaitOp>(&s.node)) {
      for (const auto& [tag, done] : core.tags)
        if (tag == w->tag) core.issue = std::max(core.issue, done);
      core.issue += core_period_;
    }
  }

  void dma(Core& core, const DmaOp& d) {
    const int64_t* vars = core.vars.data();
    const int64_t elem = dtype_bytes(p_.buffers[d.dram].dtype);
    // Resolve and merge dimensions that are contiguous in DRAM.
    int64_t dims[4], strides[4];
    int nd = 0;
    int64_t spad_last = 0;
    // Indirect transfers: timing-only runs have no index values, so requests
    // are modelled as if the indices were consecutive (index value = its
    // position in the index tile: a row gather reads consecutive rows). The
    // number of bytes moved is exact; only the addresses are assumed.
    int64_t index_last = 0;
    for (size_t i = 0; i < d.dims.size(); ++i) {
      const int64_t e = d.dims[i].eval(vars);
      spad_last += (e - 1) * d.spad_strides[i];
      if (d.indirect()) index_last += (e - 1) * d.index_strides[i];
      if (e == 1) continue;
      dims[nd] = e;
      strides[nd] = (d.dram_strides[i] + (d.indirect() ? d.index_strides[i] * d.index_scale : 0)) * elem;
      ++nd;
    }
    for (int i = nd - 1; i > 0; --i) {
      if (strides[i - 1] == dims[i] * strides[i]) {
        dims[i - 1] *= dims[i];
        strides[i - 1] = strides[i];
        for (int j = i; j + 1 < nd; ++j) {
          dims[j] = dims[j + 1];
          strides[j] = strides[j + 1];
        }
        --nd;
      }
    }
    const int64_t base = base_[d.dram] + d.dram_offset.eval(vars) * elem;
    dram_.begin();
    if (nd == 0) {
      dram_.touch(base, elem);
    } else {
      const bool contiguous = strides[nd - 1] == elem;
      const int64_t run = contiguous ? dims[nd - 1] * elem : elem;
      const int outer = contiguous ? nd - 1 : nd;
      // The innermost outer dimension's runs go to the DRAM model at once.
      const int64_t rows = outer > 0 ? dims[outer - 1] : 1;
      const int64_t row_stride = outer > 0 ? strides[outer - 1] : 0;
      const int rest = std::max(outer - 1, 0);
      int64_t idx[4] = {0, 0, 0, 0};
      for (;;) {
        int64_t addr = base;
        for (int i = 0; i < rest; ++i) addr += idx[i] * strides[i];
        dram_.touch_rows(addr, run, rows, row_stride);
        int i = rest - 1;
        for (; i >= 0; --i) {
          if (++idx[i] < dims[i]) break;
          idx[i] = 0;
        }
        if (i < 0) break;
      }
    }
    const detail::DmaCost cost = dram_.cost();

    // Scratchpad side: a load writes the slot range, a store reads it.
    SlotState& st = slot_of(core, d.spad);
    const int64_t lo = d.spad.offset.eval(vars);
    Box box = make_interval(lo, lo + spad_last + 1);
    const size_t nsd = d.dims.size();
    if (nsd >= 2 && d.spad_strides[nsd - 1] == 1) {
      bool outer_unit = true;  // every dimension but the last two has extent 1
      for (size_t i = 0; i + 2 < nsd; ++i) outer_unit = outer_unit && d.dims[i].eval(vars) == 1;
      if (outer_unit)
        box = make_box(lo, d.dims[nsd - 2].eval(vars), d.dims[nsd - 1].eval(vars), d.spad_strides[nsd - 2]);
    }
    Time ready = d.load ? write_ready(st, box) : read_ready(st, box);
    Box index_box;
    if (d.indirect()) {  // the index values must have arrived
      const int64_t ilo = d.index.offset.eval(vars);
      index_box = make_interval(ilo, ilo + index_last + 1);
      ready = std::max(ready, read_ready(slot_of(core, d.index), index_box));
    }

    core.issue = std::max(core.issue, core.dma_queue.slot_free());
    const Time start = std::max({core.issue, core.dma_free, ready});
    const int64_t bus_bytes = cost.requests * c_.dma.request_bytes;
    const Time issue_time = std::max(
        {(c_.dma.setup_cycles + ceil_div(cost.requests, c_.dma.requests_per_cycle)) * core_period_,
         ceil_div(cost.requests * rtt_, c_.dma.max_outstanding),
         ceil_div(bus_bytes, c_.noc.ports_per_core * c_.noc.port_bytes_per_cycle) * noc_period_,
         ceil_div(cost.useful_bytes, c_.vector.lanes * c_.scratchpad.port_bytes_per_cycle) * core_period_});
    const Time issue_end = start + issue_time;
    const Time one_way = c_.noc.latency_cycles * noc_period_;
    const Time served = dram_.serve(start + one_way, issue_end + one_way, !d.load, [&](int ch, Time s, Time dur) {
      if (trace_) record(channel_tracks_[ch], d.load ? "read" : "write", s, dur);
    });
    const Time done = std::max(served, issue_end + one_way) + c_.dram.latency_cycles * dram_.period() + one_way;

    core.dma_queue.push(start);
    core.dma_free = issue_end;
    core.dma_busy += issue_time;
    core.issue += core_period_;
    core.end = std::max(core.end, done);
    if (d.indirect()) record_read(slot_of(core, d.index), index_box, issue_end);
    if (d.load) {
      record_write(st, box, done, -1);
    } else {
      // A store has read its scratchpad data once its last request left.
      record_read(st, box, issue_end);
    }
    bool found = false;
    for (auto& [tag, t] : core.tags) {
      if (tag == d.tag) {
        t = std::max(t, done);
        found = true;
      }
    }
    if (!found) core.tags.push_back({d.tag, done});
    report_.dram_useful_bytes += cost.useful_bytes;
    if (trace_)
      record(core.dma_track, fmt::format("{} @{}", d.load ? "load" : "store", p_.buffers[d.dram].name), start,
             done - start);
  }

  void matmul(Core& core, const MatmulOp& mm) {
    const int64_t* vars = core.vars.data();
    const int64_t m = mm.m.eval(vars), k = mm.k.eval(vars), n = mm.n.eval(vars);
    const int64_t R = c_.systolic.rows;
    if (k > R || n > c_.systolic.cols)
      fail("kernel '{}': matmul tile k={} n={} exceeds the {}x{} systolic array of config '{}'", p_.kernels[core.kernel].name, k, n,
           R, c_.systolic.cols, c_.name);
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
      for (const Region& r : sc.regions)
        if (r.box == cbox && r.array >= 0) bound = r.array;
    // C is ready for array `a` when its readers are done and every earlier
    // write to it is done, except writes by `a` itself: an array writes its
    // accumulators in order, so those need no wait.
    auto c_ready_for = [&](int a) {
      Time t = 0;
      for (const Region& r : sc.regions)
        if (overlaps(r.box, cbox)) t = std::max({t, r.read_done, r.array == a ? Time{0} : r.write_done});
      return t;
    };
    const WeightTile tile{mm.b.buffer,
                          mm.b.slot.eval(vars) % static_cast<int64_t>(core.spad[mm.b.buffer].size()),
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
      for (Region& r : sc.regions)
        if (r.box == cbox) r.write_done = done;
      ++sc.generation;
    } else {
      record_write(sc, cbox, done, chosen);
    }
    report_.matmul_flops += 2 * m * k * n;
    if (trace_) {
      if (!plan.resident) record(a.track, "preload", plan.preload_start, preload);
      record(a.track, fmt::format("matmul {}x{}x{}", m, k, n), plan.start, done - plan.start);
    }
  }

  const VecStatic& vec_static(const VectorOp& v) {
    auto it = vec_cache_.find(&v);
    if (it != vec_cache_.end()) return it->second;
    VecStatic s;
    s.shapes.reserve(v.body.size());
    for (size_t i = 0; i < v.body.size(); ++i) {
      const VecInstr& in = v.body[i];
      const target::VectorOpTiming& t = c_.vector.ops.at(std::string(vec_op_timing_class(in.op)));
      VecInstrTiming vt;
      vt.interval = t.interval;
      vt.latency = t.latency;
      vt.unit = static_cast<int>(t.unit);
      vt.bits = scalar_bits(in.type);
      const VecOpKind kind = vec_op_kind(in.op);
      vt.reduce = kind == VecOpKind::Reduce;
      vt.col_load = kind == VecOpKind::Load && in.broadcast == LoadBroadcast::Col;
      vt.counts = kind != VecOpKind::Load && kind != VecOpKind::Const && kind != VecOpKind::Iota;
      vt.flop = vt.counts && is_float(in.type) &&
                (kind == VecOpKind::Arith || kind == VecOpKind::FloatUnary || kind == VecOpKind::Reduce);
      vt.reduce_rows = vec_op_reduces_rows(in.op);
      s.shapes.push_back(value_shape(in, v.body, s.shapes));
      s.instrs.push_back(vt);
    }
    s.store = c_.vector.ops.at("store");
    return vec_cache_.emplace(&v, std::move(s)).first->second;
  }

  void vector(Core& core, const VectorOp& v) {
    const int64_t* vars = core.vars.data();
    const int64_t rows = v.rows.eval(vars), cols = v.cols.eval(vars);
    const VecStatic& vs = vec_static(v);
    const int64_t lanes = c_.vector.lanes, vlen = c_.vector.vlen_bits;

    // Operand readiness.
    Time ready = 0;
    auto ref_range = [&](const SpadRef& r, ValueShape shape, LoadBroadcast bc) {
      const int64_t lo = r.offset.eval(vars);
      if (bc == LoadBroadcast::Col) return make_interval(lo, lo + cols);
      if (shape == ValueShape::Row) return make_interval(lo, lo + rows);
      if (shape == ValueShape::Col) return make_interval(lo, lo + cols);
      return make_box(lo, rows, cols, r.ld);
    };
    // A gather may read any column of its rows: the whole [rows x ld] tile.
    auto read_range = [&](const VecInstr& in, size_t i) {
      return in.op == VecOp::Gather ? make_box(in.ref.offset.eval(vars), rows, in.ref.ld, in.ref.ld)
                                    : ref_range(in.ref, vs.shapes[i], in.broadcast);
    };
    for (size_t i = 0; i < v.body.size(); ++i) {
      const VecInstr& in = v.body[i];
      if (in.op != VecOp::Load && in.op != VecOp::Gather) continue;
      ready = std::max(ready, read_ready(slot_of(core, in.ref), read_range(in, i)));
    }
    for (const VecStore& st : v.stores) {
      ready = std::max(ready, write_ready(slot_of(core, st.ref), ref_range(st.ref, vs.shapes[st.value], LoadBroadcast::Full)));
    }

    // Issue cycles and critical path. A tile's columns lie across the lanes
    // of a register, its rows across the register's sublanes (VLEN / bits
    // rows: narrower types pack more); a per-row value takes one register per
    // group of rows, a per-column value (load.col) one per group of lanes.
    int64_t unit_busy[target::kVectorUnits] = {};
    std::vector<int64_t>& lat = latency_scratch_;
    lat.assign(v.body.size(), 0);
    int64_t critical = 0;
    const int64_t col_regs = ceil_div(cols, lanes);
    auto row_groups = [&](int64_t bits) { return ceil_div(rows, std::max<int64_t>(1, vlen / bits)); };
    auto registers = [&](int64_t bits, ValueShape shape) {
      return shape == ValueShape::Full ? row_groups(bits) * col_regs
             : shape == ValueShape::Row ? row_groups(bits)
                                        : col_regs;
    };
    for (size_t i = 0; i < v.body.size(); ++i) {
      const VecInstrTiming& t = vs.instrs[i];
      const int64_t elems = t.col_load || vs.shapes[i] == ValueShape::Col ? (t.reduce ? rows * cols : cols)
                            : vs.shapes[i] == ValueShape::Full || t.reduce ? rows * cols
                                                                            : rows;
      int64_t l = t.latency;
      if (t.reduce_rows) {
        // Down the rows: the row groups' registers of each column block are
        // combined on the ALUs, then the sublanes of the one left in a
        // ceil(log2 sublanes)-step tree of shifts and combines; no
        // cross-lane unit.
        const int64_t groups = row_groups(t.bits);
        const int64_t sublane_steps = ceil_log2(std::min(rows, std::max<int64_t>(1, vlen / t.bits)));
        unit_busy[t.unit] += ((groups - 1) + sublane_steps) * col_regs * t.interval;
        l = (ceil_log2(groups) + sublane_steps) * t.latency;
      } else if (t.reduce) {
        // The registers of a row group are combined on the unit of the reduce
        // class (a tree of depth ceil(log2 col_regs)), then the one left is
        // reduced across its lanes by the cross-lane unit.
        const int64_t groups = row_groups(t.bits);
        unit_busy[t.unit] += groups * (col_regs - 1) * t.interval;
        unit_busy[static_cast<int>(target::VectorUnit::Xlu)] += groups * c_.vector.lane_reduce.interval;
        l = ceil_log2(col_regs) * t.latency + c_.vector.lane_reduce.latency;
      } else if (t.col_load) {
        unit_busy[t.unit] += col_regs * t.interval;
      } else {
        unit_busy[t.unit] += registers(t.bits, vs.shapes[i]) * t.interval;
      }
      int64_t before = 0;
      for (int o : v.body[i].operands) before = std::max(before, lat[o]);
      lat[i] = before + l;
      critical = std::max(critical, lat[i]);
      if (t.counts) report_.vector_element_ops += elems;
      if (t.flop) report_.vector_flops += elems;
    }
    for (const VecStore& st : v.stores) {
      const int64_t bits = scalar_bits(v.body[st.value].type);
      unit_busy[static_cast<int>(vs.store.unit)] += registers(bits, vs.shapes[st.value]) * vs.store.interval;
      critical = std::max(critical, lat[st.value] + vs.store.latency);
    }
    // The units issue side by side (VLIW slots): the step takes as long as
    // its busiest unit.
    int64_t issue = 0;
    for (int u = 0; u < target::kVectorUnits; ++u) issue = std::max(issue, ceil_div(unit_busy[u], c_.vector.slots[u]));
    issue += c_.vector.step_overhead_cycles;

    core.issue = std::max(core.issue, core.vector_queue.slot_free());
    const Time start = std::max({core.issue, core.vector_free, ready});
    const Time busy_end = start + issue * core_period_;
    const Time done = busy_end + critical * core_period_;
    core.vector_queue.push(start);
    core.vector_free = busy_end;
    core.vector_busy += issue * core_period_;
    core.issue += core_period_;
    core.end = std::max(core.end, done);
    for (size_t i = 0; i < v.body.size(); ++i) {
      const VecInstr& in = v.body[i];
      if (in.op != VecOp::Load && in.op != VecOp::Gather) continue;
      record_read(slot_of(core, in.ref), read_range(in, i), done);
    }
    for (const VecStore& st : v.stores) {
      record_write(slot_of(core, st.ref), ref_range(st.ref, vs.shapes[st.value], LoadBroadcast::Full), done, -1);
    }
    if (trace_) record(core.vector_track, v.label, start, done - start);
  }

  // ---- report ------------------------------------------------------------------
  Report finish() {
    Report& r = report_;
    Time end = 0;
    for (const Core& core : cores_) end = std::max(end, core.free);
    r.program = p_.name;
    r.config = c_.name;
    r.cycles = cycles(end);
    r.time_ms = static_cast<double>(end) * 1e-12;
    r.dram_read_bytes = dram_.read_bytes();
    r.dram_write_bytes = dram_.write_bytes();
    r.dram_row_hits = dram_.row_hits();
    r.dram_row_misses = dram_.row_misses();
    r.flops = r.matmul_flops + r.vector_flops;
    r.kernels = static_cast<int64_t>(p_.kernels.size());
    for (const Kernel& k : p_.kernels) r.spad_peak_bytes = std::max(r.spad_peak_bytes, spad_liveness(k).peak_bytes);
    auto unit = [&](std::string name, Time busy) {
      UnitStats u;
      u.name = std::move(name);
      u.busy_cycles = cycles(busy);
      u.utilisation = r.cycles > 0 ? static_cast<double>(u.busy_cycles) / static_cast<double>(r.cycles) : 0.0;
      r.units.push_back(std::move(u));
    };
    for (int ci = 0; ci < c_.cores; ++ci) {
      for (size_t a = 0; a < cores_[ci].arrays.size(); ++a)
        unit(fmt::format("core{}.array{}", ci, a), cores_[ci].arrays[a].busy);
      unit(fmt::format("core{}.vector", ci), cores_[ci].vector_busy);
      unit(fmt::format("core{}.dma", ci), cores_[ci].dma_busy);
    }
    for (int ch = 0; ch < c_.dram.channels; ++ch) unit(fmt::format("dram.ch{}", ch), dram_.channel_busy()[ch]);

    // Roofline: no unit can beat its peak rate.
    const double matmul_peak = static_cast<double>(c_.cores) * c_.systolic.arrays * 2.0 *
                               static_cast<double>(c_.systolic.rows * c_.systolic.cols);
    const double vector_peak = static_cast<double>(c_.cores) * static_cast<double>(c_.vector.lanes) *
                               static_cast<double>(std::max<int64_t>(1, c_.vector.vlen_bits / 32));
    const double dram_bytes_per_core_cycle = c_.dram_bytes_per_second() / (c_.core_clock_mhz * 1e6);
    const double bound = std::max({static_cast<double>(r.matmul_flops) / matmul_peak,
                                   static_cast<double>(r.vector_element_ops) / vector_peak,
                                   static_cast<double>(r.dram_useful_bytes) / dram_bytes_per_core_cycle});
    r.roofline_cycles = static_cast<int64_t>(std::floor(bound));
    return std::move(report_);
  }

  const Program& p_;
  const target::NpuConfig& c_;
  Trace* trace_;
  detail::DramModel dram_;
  Time core_period_, noc_period_, rtt_ = 0;
  std::vector<int64_t> base_;
  std::vector<Core> cores_;
  std::vector<int> channel_tracks_;
  std::unordered_map<const VectorOp*, VecStatic> vec_cache_;
  std::vector<int64_t> latency_scratch_;
  Report report_;
};

}  // namespace

Report simulate_timing(const Program& program, const target::NpuConfig& config, Trace* trace) {
  if (program.spad_bytes > config.spad_bytes())
    fail("program '{}' was allocated for a {}-byte scratchpad; config '{}' has {} bytes", program.name,
         program.spad_bytes, config.name, config.spad_bytes());
  return TimingSim(program, config, trace).run();
}

}  // namespace spool::sim
