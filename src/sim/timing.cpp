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
//
// This file schedules the kernels and runs the cores' front ends; the units
// are in timing_dma.cpp, timing_systolic.cpp and timing_vector.cpp, the
// scratchpad readiness in scoreboard.cpp.

#include "timing.hpp"

#include "rows_ahead.hpp"

#include <spool/npu/text.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <system_error>
#include <thread>

namespace spool::sim {
namespace detail {

using namespace spool::npu;

TimingSim::TimingSim(const Program& p, const target::NpuConfig& c, Trace* trace, bool replay)
    : p_(p),
      c_(c),
      trace_(trace),
      replay_(replay),
      dram_(c),
      core_period_(period_of(c.core_clock_mhz)),
      noc_period_(period_of(c.noc.clock_mhz)) {
  rtt_ = 2 * c.noc.latency_cycles * noc_period_ + c.dram.latency_cycles * dram_.period();
  base_ = npu::dram_addresses(p);
  report_.kernel_stats.resize(p.kernels.size());
  launch_t_.assign(p.kernels.size(), 0);
  start_t_.assign(p.kernels.size(), 0);
  end_t_.assign(p.kernels.size(), 0);
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

Report TimingSim::run() {
  // One core's strided DRAM rows walked ahead (rows_ahead.hpp).
  std::unique_ptr<RowsAhead> ahead;
  if (walk_ahead_ != WalkAhead::Off && c_.cores == 1 && stop_after_ == kNever &&
      (walk_ahead_ == WalkAhead::Patient || std::thread::hardware_concurrency() > 1)) {
    try {
      ahead = std::make_unique<RowsAhead>(
          c_, [this](const std::function<bool(const RowsKey&)>& call) { program_rows(p_, base_, call); }, 1024,
          walk_ahead_ == WalkAhead::Patient);
    } catch (const std::system_error&) {
      // No thread to be had: the run walks its own rows.
    }
  }
  struct Detach {
    DramModel& dram;
    ~Detach() { dram.set_ahead(nullptr); }
  } detach{dram_};
  dram_.set_ahead(ahead.get());
  if (!step(0, p_.kernels.size())) return std::move(report_);
  if (ahead) report_.profile.rows_walked_ahead = ahead->taken();
  return finish();
}

bool TimingSim::step(size_t first, size_t last) {
  const size_t n = p_.kernels.size();
  // The kernels before `first` are done, no later than the core is free.
  std::vector<Time> kernel_end(last, 0);
  std::fill(kernel_end.begin() + static_cast<std::ptrdiff_t>(first), kernel_end.end(), kNever);
  std::vector<bool> assigned(last, false);
  size_t finished = first;
  while (finished < last) {
    // Idle cores take the first kernel (in program order) whose dependencies are done.
    for (int ci = 0; ci < c_.cores; ++ci) {
      Core& core = cores_[ci];
      if (core.kernel >= 0) continue;
      for (size_t k = first; k < last; ++k) {
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
      ++report_.profile.statements;
      // The program ends no sooner than anything issued so far.
      if (const Time t = std::max(core.issue, core.end); t > stop_after_) {
        report_.cycles = cycles(t);
        return false;
      }
      continue;
    }
    end_memo(core);
    const Time end = std::max(core.issue, core.end);
    kernel_end[core.kernel] = end;
    end_t_[core.kernel] = end;
    if (trace_) record(core.kernel_track, p_.kernels[core.kernel].name, core.launch, end - core.launch);
    core.free = end;
    core.kernel = -1;
    ++finished;
    if (progress_) progress_(finished, n, cycles(end));
  }
  return true;
}

// The touch_rows() calls of a one-core run, in its order: kernels in
// program order (the core takes the first kernel whose dependencies are
// done, and a kernel depends only on earlier ones), statements in order,
// loops at their trip counts (a run-time count at its nominal value, as
// next_stmt() takes it). Stops when `call` returns false.
void program_rows(const Program& p, const std::vector<int64_t>& base, const std::function<bool(const RowsKey&)>& call) {
  std::vector<int64_t> vars;
  bool go = true;
  auto rows = [&](int64_t addr, int64_t bytes, int64_t count, int64_t stride) {
    go = call(RowsKey{addr, bytes, count, stride});
    return go;
  };
  for (const Kernel& k : p.kernels) {
    vars.assign(k.loop_vars.size(), 0);
    if (!for_each_dma(k.body, vars, [&](const DmaOp& d) {
          dma_runs(p, base, d, vars.data(), rows, [](int64_t, int64_t) {});
          return go;
        }))
      return;
  }
}

// ---- kernels ------------------------------------------------------------------
// How long kernel k's launch takes.
Time TimingSim::launch_time(int k) const {
  int64_t statements = 0;
  for_each_stmt(p_.kernels[k].body, [&](const Stmt&) { ++statements; });
  const int64_t code_bytes = statements * c_.launch.bytes_per_instruction;
  return c_.launch.fixed_cycles * core_period_ + rtt_ +
         ceil_div(code_bytes, c_.dma.requests_per_cycle * c_.dma.request_bytes) * core_period_;
}

void TimingSim::start_kernel(int ci, int k, Time ready) {
  Core& core = cores_[ci];
  const Kernel& kernel = p_.kernels[k];
  core.kernel = k;
  core.launch = ready;
  core.issue = ready + launch_time(k);
  launch_t_[k] = ready;
  start_t_[k] = core.issue;
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
  if (!begin_memo(core, k)) ++report_.profile.kernels_stepped;
}

const Stmt* TimingSim::next_stmt(Core& core) {
  for (;;) {
    Frame& f = core.stack.back();
    if (f.index < f.body->size()) {
      const Stmt& s = (*f.body)[f.index++];
      if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
        int64_t trips = loop->trips;
        if (loop->dynamic) {
          // A timing-only run has no values: the nominal count, once the
          // count has arrived (the core reads it before it loops).
          trips = loop->dynamic->nominal;
          const int64_t at = loop->dynamic->count.offset.eval(core.vars.data());
          SlotState& slot = slot_of(core, loop->dynamic->count);
          const Box box = make_interval(at, at + 1);
          core.issue = std::max(core.issue, read_ready(slot, box));
          record_read(slot, box, core.issue);
        }
        if (trips == 0) continue;
        core.vars[loop->var] = 0;
        core.stack.push_back(Frame{&loop->body, 0, loop->var, trips});
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

// ---- statements --------------------------------------------------------------
void TimingSim::execute(Core& core, const Stmt& s) {
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

// ---- report ------------------------------------------------------------------
Report TimingSim::finish() {
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
  for (size_t k = 0; k < p_.kernels.size(); ++k) {
    KernelStats& ks = r.kernel_stats[k];
    ks.launch_cycle = cycles(launch_t_[k]);
    ks.start_cycle = cycles(start_t_[k]);
    ks.end_cycle = cycles(end_t_[k]);
  }
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

}  // namespace detail

namespace {

void check_spad_fits(const npu::Program& program, const target::NpuConfig& config) {
  if (program.spad_bytes > config.spad_bytes())
    fail("program '{}' was allocated for a {}-byte scratchpad; config '{}' has {} bytes", program.name,
         program.spad_bytes, config.name, config.spad_bytes());
}

}  // namespace

int64_t timing_cycles(const npu::Program& program, const target::NpuConfig& config, int64_t limit) {
  check_spad_fits(program, config);
  detail::TimingSim sim(program, config, nullptr);
  sim.set_limit(limit);
  return sim.run().cycles;
}

Report simulate_timing(const npu::Program& program, const target::NpuConfig& config, Trace* trace, bool replay,
                       const ProgressFn& progress, bool walk_ahead, int threads) {
  check_spad_fits(program, config);
  const auto start = std::chrono::steady_clock::now();
  detail::PartsOptions in_parts;
  in_parts.threads = threads > 0 ? static_cast<size_t>(threads) : std::thread::hardware_concurrency();
  if (in_parts.threads > 1 && config.cores == 1 && trace == nullptr) {
    if (std::optional<Report> report = detail::simulate_parts(program, config, replay, progress, in_parts)) {
      report->profile.total_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      return std::move(*report);
    }
  }
  detail::TimingSim sim(program, config, trace, replay);
  sim.set_progress(progress);
  sim.set_walk_ahead(walk_ahead ? detail::TimingSim::WalkAhead::On : detail::TimingSim::WalkAhead::Off);
  Report report = sim.run();
  SimProfile& p = report.profile;
  p.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  p.step_ms = p.total_ms - p.replay_ms;
  return report;
}

}  // namespace spool::sim
