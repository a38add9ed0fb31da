// A one-core timing run in parts, simulated side by side (the model:
// timing.cpp; the canonical start: timing_memo.cpp).
//
// One core runs its kernels one after another, each from the time the
// last one ended. A kernel that starts with every unit, queue and channel
// free (canonical) has a timeline relative to its start that is a function
// of its statements and of the DRAM rows its requests meet; and which row
// each DRAM bank holds open is a function of the addresses requested so
// far in program order alone, not of their times. So the kernels are cut
// into contiguous parts of about equal work, a few per thread. The first
// part is the run itself, on the calling thread; every thread (the
// calling one once done with it) takes the next part not taken and
// simulates it in a run of its own from time 0, with the open rows the few
// kernels before it leave (walked without timing: the guess), recording
// the row each (bank, channel) is first asked for.
//
// The parts are then joined in order. A later part continues the run so
// far exactly when its first kernel starts canonically after the run so
// far, and, at every (bank, channel) whose guessed row differs from the
// row the run so far left open, its first request hits or misses alike
// under both (later requests meet the rows the part itself opened). Its
// kernels' times are then shifted by the time the run so far ended, and
// its counters added; otherwise the run so far steps the part's kernels
// itself. Cycles, byte counts and row hits are therefore exactly those of
// a run in one part.

#include "timing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

namespace spool::sim::detail {

using namespace spool::npu;

namespace {

// A part's work for balancing: statements stepped, a DMA counted as a few
// (its addresses are walked and served); at most kMaxWork (a program of
// more would never finish anyway).
constexpr int64_t kMaxWork = int64_t{1} << 52;
int64_t stmt_work(const std::vector<Stmt>& body) {
  int64_t w = 0;
  for (const Stmt& s : body) {
    if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
      const int64_t trips = std::max<int64_t>(0, loop->dynamic ? loop->dynamic->nominal : loop->trips);
      const int64_t inner = stmt_work(loop->body);
      w += 1 + (trips > 0 && inner > kMaxWork / trips ? kMaxWork : trips * inner);
    } else {
      w += std::holds_alternative<DmaOp>(s.node) ? 4 : 1;
    }
    w = std::min(w, kMaxWork);
  }
  return w;
}

}  // namespace

void TimingSim::start_part(const std::vector<int64_t>& guess) {
  dram_.set_open_rows(guess);
  dram_.track_first_rows();
}

std::vector<int64_t> TimingSim::guess_open_rows(size_t first, size_t kernels) const {
  DramModel walk(c_);
  const size_t entries = walk.open_rows().size();
  // Rows are never negative: a walk's untouched entries keep kUntouched.
  const std::vector<int64_t> untouched(entries, DramModel::kUntouched);
  std::vector<int64_t> guess(entries, DramModel::kUntouched);
  size_t unknown = entries;
  for (size_t k = first; k-- > 0 && first - k <= kernels && unknown > 0;) {
    walk.set_open_rows(untouched);
    const Kernel& kernel = p_.kernels[k];
    std::vector<int64_t> vars(kernel.loop_vars.size(), 0);
    for_each_dma(kernel.body, vars, [&](const DmaOp& d) {
      walk.begin();
      dma_runs(
          p_, base_, d, vars.data(),
          [&](int64_t addr, int64_t bytes, int64_t count, int64_t stride) {
            walk.touch_rows(addr, bytes, count, stride);
            return true;
          },
          [&](int64_t addr, int64_t bytes) { walk.touch(addr, bytes); });
      return true;
    });
    // The last row kernel k left in each entry no later kernel touched.
    const std::vector<int64_t>& rows = walk.open_rows();
    for (size_t i = 0; i < entries; ++i) {
      if (guess[i] != DramModel::kUntouched || rows[i] == DramModel::kUntouched) continue;
      guess[i] = rows[i];
      --unknown;
    }
  }
  for (int64_t& row : guess)
    if (row == DramModel::kUntouched) row = -1;
  return guess;
}

bool TimingSim::continues(const TimingSim& later, size_t first, const std::vector<int64_t>& guess) const {
  const Core& core = cores_[0];
  return free_by(core, core.free + launch_time(static_cast<int>(first))) && dram_.guess_held(guess, later.dram_);
}

void TimingSim::append(const TimingSim& later, size_t first, size_t last) {
  Core& a = cores_[0];
  const Core& b = later.cores_[0];
  const Time shift = a.free;
  for (size_t k = first; k < last; ++k) {
    launch_t_[k] = later.launch_t_[k] + shift;
    start_t_[k] = later.start_t_[k] + shift;
    end_t_[k] = later.end_t_[k] + shift;
    report_.kernel_stats[k] = later.report_.kernel_stats[k];  // name and core; finish() converts the times
  }
  a.free = b.free + shift;
  a.launch = b.launch + shift;
  a.issue = b.issue + shift;
  a.end = b.end + shift;
  a.vector_free = b.vector_free + shift;
  a.dma_free = b.dma_free + shift;
  a.vector_queue = b.vector_queue;
  a.vector_queue.shift(shift);
  a.dma_queue = b.dma_queue;
  a.dma_queue.shift(shift);
  a.vector_busy += b.vector_busy;
  a.dma_busy += b.dma_busy;
  for (size_t i = 0; i < a.arrays.size(); ++i) {
    ArrayState& x = a.arrays[i];
    const ArrayState& y = b.arrays[i];
    x.stream_free = y.stream_free + shift;
    x.preload_free = y.preload_free + shift;
    x.drained = y.drained + shift;
    x.weights = y.weights;
    x.queue = y.queue;
    x.queue.shift(shift);
    x.busy += y.busy;
  }
  dram_.append(later.dram_, shift);
  const Report& r = later.report_;
  report_.matmul_flops += r.matmul_flops;
  report_.vector_flops += r.vector_flops;
  report_.vector_element_ops += r.vector_element_ops;
  report_.dram_useful_bytes += r.dram_useful_bytes;
  SimProfile& p = report_.profile;
  p.kernels_stepped += r.profile.kernels_stepped;
  p.kernels_replayed += r.profile.kernels_replayed;
  p.replays_refused += r.profile.replays_refused;
  p.statements += r.profile.statements;
  p.descriptors += r.profile.descriptors;
  p.replay_ms += r.profile.replay_ms;
}

std::optional<Report> simulate_parts(const Program& program, const target::NpuConfig& config, bool replay,
                                     const ProgressFn& progress, const PartsOptions& options) {
  const size_t n = program.kernels.size();
  // Cut where the work so far passes each part's share.
  std::vector<int64_t> work(n);
  int64_t total = 0;
  for (size_t k = 0; k < n; ++k) total = std::min(total + (work[k] = stmt_work(program.kernels[k].body)), kMaxWork);
  const size_t threads_wanted = std::max<size_t>(1, options.threads);
  size_t parts = std::min({threads_wanted * std::max<size_t>(1, options.parts_per_thread), n,
                           static_cast<size_t>(total / std::max<int64_t>(1, options.min_part_work))});
  if (threads_wanted < 2 || parts < 2) return std::nullopt;
  std::vector<size_t> cut{0};
  int64_t sum = 0;
  for (size_t k = 0; k + 1 < n && cut.size() < parts; ++k) {
    sum = std::min(sum + work[k], kMaxWork);
    if (static_cast<__int128>(sum) * static_cast<__int128>(parts) >=
        static_cast<__int128>(total) * static_cast<__int128>(cut.size()))
      cut.push_back(k + 1);
  }
  cut.push_back(n);
  parts = cut.size() - 1;
  if (parts < 2) return std::nullopt;  // the work is in one kernel

  // Part 0 is the run itself, on the calling thread; then every thread
  // takes the next part not taken, each in a run of its own.
  struct Part {
    std::unique_ptr<TimingSim> sim;
    std::vector<int64_t> guess;
    double ms = 0;
    bool ran = false;
  };
  std::vector<Part> later(parts);
  std::atomic<size_t> next{1};
  auto take_parts = [&] {
    for (size_t j = next.fetch_add(1); j < parts; j = next.fetch_add(1)) {
      Part& part = later[j];
      const auto start = std::chrono::steady_clock::now();
      try {
        part.sim = std::make_unique<TimingSim>(program, config, nullptr, replay);
        part.guess = part.sim->guess_open_rows(cut[j], options.guess_kernels);
        part.sim->start_part(part.guess);
        part.ran = part.sim->step(cut[j], cut[j + 1]);
      } catch (...) {
        // Stepped again from the run's state below, where the error, if
        // the run meets it there too, is the run's.
        part.ran = false;
      }
      part.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(threads_wanted, parts); ++t) {
    try {
      threads.emplace_back(take_parts);
    } catch (const std::system_error&) {
      break;  // no thread to be had: fewer take the parts
    }
  }
  struct Join {
    std::vector<std::thread>& threads;
    void operator()() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
    ~Join() { (*this)(); }
  } join{threads};

  const auto start = std::chrono::steady_clock::now();
  TimingSim sim(program, config, nullptr, replay);
  sim.set_progress(progress);
  sim.step(0, cut[1]);
  double own_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  take_parts();
  join();
  double part_ms = 0;
  int64_t stepped_again = 0;
  for (size_t j = 1; j < parts; ++j) {
    const Part& part = later[j];
    part_ms += part.ms;
    if (part.ran && sim.continues(*part.sim, cut[j], part.guess)) {
      sim.append(*part.sim, cut[j], cut[j + 1]);
      if (progress) progress(cut[j + 1], n, sim.kernel_end_cycle(cut[j + 1] - 1));
      continue;
    }
    // The part's start did not hold (or it failed): step it from the run's state.
    ++stepped_again;
    const auto again = std::chrono::steady_clock::now();
    sim.step(cut[j], cut[j + 1]);
    own_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - again).count();
  }
  Report report = sim.finish();
  SimProfile& p = report.profile;
  p.parts = static_cast<int64_t>(parts);
  p.parts_stepped_again = stepped_again;
  p.step_ms = own_ms + part_ms - p.replay_ms;
  return report;
}

}  // namespace spool::sim::detail
