#pragma once
// Internal to the timing model (the model and its formulas: timing.cpp).
// TimingSim is one class over several files, one per seam: timing.cpp the
// kernel scheduling and the front ends, timing_dma.cpp the DMA engine,
// timing_systolic.cpp the systolic arrays, timing_vector.cpp the vector
// unit; scoreboard.hpp tracks the scratchpad accesses they all wait on.

#include <spool/sim/sim.hpp>

#include "dram.hpp"
#include "scoreboard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace spool::sim::detail {

constexpr Time kNever = INT64_MAX / 4;

inline Time period_of(double mhz) { return static_cast<Time>(std::llround(1e9 / mhz)); }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Ring of the start times of a unit's last `depth` ops: the front end may
// queue a new op once the op `depth` places earlier has started.
class IssueQueue {
 public:
  // The start times, oldest first, clamped below at `floor` (a start
  // before the floor is as free as one at it: timing_memo.cpp).
  std::vector<Time> relative(Time floor) const {
    std::vector<Time> out;
    for (size_t i = 0; i < starts_.size(); ++i)
      out.push_back(std::max<Time>(starts_[(head_ + i) % starts_.size()] - floor, 0));
    return out;
  }
  void set_relative(const std::vector<Time>& rel, Time floor) {
    for (size_t i = 0; i < starts_.size(); ++i) starts_[i] = floor + rel[i];
    head_ = 0;
  }
  // Every start `by` later (a run continued from a later part's).
  void shift(Time by) {
    for (Time& t : starts_) t += by;
  }
  bool all_before(Time t) const {
    return std::all_of(starts_.begin(), starts_.end(), [&](Time s) { return s <= t; });
  }
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
  const std::vector<npu::Stmt>* body = nullptr;
  size_t index = 0;
  int var = -1;  // -1: the kernel's top level
  int64_t trips = 0;
};

// The DRAM runs of descriptor `d` at loop variables `vars` (buffer b at
// byte address base[b]), in the order the DRAM model is given them:
// rows(addr, bytes, count, stride) for each set of equally strided runs
// (dimensions contiguous in DRAM merged first), or single(addr, bytes) for
// a descriptor of one element. Stops early when rows() returns false.
//
// Indirect transfers: timing-only runs have no index values, so requests
// are modelled as if the indices were consecutive (index value = its
// position in the index tile: a row gather reads consecutive rows). The
// number of bytes moved is exact; only the addresses are assumed.
template <typename Rows, typename Single>
void dma_runs(const npu::Program& p, const std::vector<int64_t>& base, const npu::DmaOp& d, const int64_t* vars,
              Rows&& rows, Single&& single) {
  const int64_t elem = dtype_bytes(p.buffers[d.dram].dtype);
  int64_t dims[4], strides[4];
  int nd = 0;
  for (size_t i = 0; i < d.dims.size(); ++i) {
    const int64_t e = d.dims[i].eval(vars);
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
  const int64_t start = base[d.dram] + d.dram_offset.eval(vars) * elem;
  if (nd == 0) {
    single(start, elem);
    return;
  }
  const bool contiguous = strides[nd - 1] == elem;
  const int64_t run = contiguous ? dims[nd - 1] * elem : elem;
  const int outer = contiguous ? nd - 1 : nd;
  // The innermost outer dimension's runs go to the DRAM model at once.
  const int64_t count = outer > 0 ? dims[outer - 1] : 1;
  const int64_t row_stride = outer > 0 ? strides[outer - 1] : 0;
  const int rest = std::max(outer - 1, 0);
  int64_t idx[4] = {0, 0, 0, 0};
  for (;;) {
    int64_t addr = start;
    for (int i = 0; i < rest; ++i) addr += idx[i] * strides[i];
    if (!rows(addr, run, count, row_stride)) return;
    int i = rest - 1;
    for (; i >= 0; --i) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

// Calls dma(op) for each DMA statement of `body` in issue order, with
// `vars` set as the statement sees them (loops at their trip counts; a
// run-time count at its nominal value, as a timing-only run takes it, see
// TimingSim::next_stmt). Stops, returning false, when dma() does.
template <typename Dma>
bool for_each_dma(const std::vector<npu::Stmt>& body, std::vector<int64_t>& vars, Dma&& dma) {
  for (const npu::Stmt& s : body) {
    if (const auto* loop = std::get_if<npu::LoopOp>(&s.node)) {
      const int64_t trips = loop->dynamic ? loop->dynamic->nominal : loop->trips;
      for (int64_t i = 0; i < trips; ++i) {
        vars[loop->var] = i;
        if (!for_each_dma(loop->body, vars, dma)) return false;
      }
    } else if (const auto* d = std::get_if<npu::DmaOp>(&s.node)) {
      if (!dma(*d)) return false;
    }
  }
  return true;
}

// The touch_rows() calls a one-core run of `p` makes, in order (timing.cpp).
void program_rows(const npu::Program& p, const std::vector<int64_t>& base,
                  const std::function<bool(const RowsKey&)>& call);

// Per vector step, resolved once: config timing of each instruction.
struct VecInstrTiming {
  int64_t interval = 1, latency = 1, bits = 32;
  int unit = 0;  // target::VectorUnit
  bool reduce = false, counts = false, flop = false;
  bool reduce_rows = false;  // down the rows (one value per column)
  bool col_load = false;     // one row loaded once and broadcast down the rows
};
struct VecStatic {
  std::vector<VecInstrTiming> instrs;
  std::vector<npu::ValueShape> shapes;
  target::VectorOpTiming store;
};

// A kernel's simulated outcome, kept so that a later kernel of the same
// shape need not be stepped again (timing_memo.cpp): what each of its DMA
// descriptors met in DRAM, in issue order, and every state of the core the
// kernel changed, as times relative to the time its front end started (T0).
struct KernelMemo {
  struct Descriptor {
    Time arrival = 0, last_arrival = 0;  // its first and last requests reach the channels
    Time served = 0;                     // serve()'s result
    int64_t requests = 0, useful_bytes = 0;
    bool operator==(const Descriptor&) const = default;
  };
  int kernel = -1;    // the kernel it was recorded on (its shape)
  int refusals = 0;   // replays refused since the last one taken
  int64_t skips = 0;  // kernels of the shape stepped without trying a replay
  std::vector<Descriptor> dram;
  Time issue = 0, end = 0, vector_free = 0, dma_free = 0;
  std::vector<Time> vector_queue, dma_queue;  // oldest first
  struct Array {
    Time stream_free = 0, preload_free = 0, drained = 0, busy = 0;
    std::vector<Time> queue;
  };
  std::vector<Array> arrays;
  Time vector_busy = 0, dma_busy = 0;
  int64_t matmul_flops = 0, vector_flops = 0, vector_element_ops = 0, dram_useful_bytes = 0;
};

// A one-core run (no trace, no limit) in parts side by side
// (timing_parts.cpp).
struct PartsOptions {
  size_t threads = 2;             // taking the parts, the calling one included
  size_t parts_per_thread = 4;    // parts cut (a thread done with one takes the next)
  size_t guess_kernels = 16;      // kernels walked back from a part's start for its guess, at most
  int64_t min_part_work = 20000;  // statements (a DMA as four) below which a part is not worth a thread
};
// nullopt if the program has too little work for two parts (or one thread).
std::optional<Report> simulate_parts(const npu::Program& program, const target::NpuConfig& config, bool replay,
                                     const ProgressFn& progress, const PartsOptions& options);

class TimingSim {
 public:
  TimingSim(const npu::Program& p, const target::NpuConfig& c, Trace* trace, bool replay = true);

  Report run();
  void set_progress(ProgressFn progress) { progress_ = std::move(progress); }
  // Stop as soon as the cycles are sure to exceed `limit` (run() then
  // returns a report whose cycles are a lower bound above it, nothing else).
  void set_limit(int64_t limit) { stop_after_ = limit >= kNever / core_period_ ? kNever : limit * core_period_; }
  // Walk DRAM rows ahead on a second thread (sim::Options::walk_ahead);
  // Patient: the run waits for it at every call (RowsAhead, for tests).
  enum class WalkAhead { Off, On, Patient };
  void set_walk_ahead(WalkAhead mode) { walk_ahead_ = mode; }

  // The simulator's own breakdown (Report::profile).
  SimProfile& profile() { return report_.profile; }

  // A one-core run in parts (timing_parts.cpp). Kernels [first, last) from
  // the state the run is in (the kernels before `first` done); false if it
  // stopped at the limit (set_limit).
  bool step(size_t first, size_t last);
  // This run as a later part: its kernels start at `first`, from time 0 and
  // the open rows `guess`, and it records the rows it first asks for.
  void start_part(const std::vector<int64_t>& guess);
  // The rows the kernels just before `first` leave open, as far as a walk
  // of their DMA addresses (no timing) back over at most `kernels` of them
  // finds them; -1 where it finds none.
  std::vector<int64_t> guess_open_rows(size_t first, size_t kernels) const;
  // Whether `later`, the part of kernels from `first` started from
  // `guess`, ran as this run would continue: kernel `first` starts with
  // every unit and channel free (timing_memo.cpp's canonical start: the
  // kernel's timeline relative to its start is then a function of its
  // statements and the DRAM rows it meets), and the DRAM rows it met are
  // met alike.
  bool continues(const TimingSim& later, size_t first, const std::vector<int64_t>& guess) const;
  // Continues this run with `later`'s kernels [first, last) (continues()).
  void append(const TimingSim& later, size_t first, size_t last);
  // The run's result, once every kernel has run.
  Report finish();
  int64_t kernel_end_cycle(size_t k) const { return cycles(end_t_[k]); }

 private:
  ProgressFn progress_;
  Time stop_after_ = kNever;  // set_limit()
  WalkAhead walk_ahead_ = WalkAhead::Off;
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

  // A slot number modulo the buffer's slot count: one, two or three slots
  // (single, double, triple buffering) by a constant, so without a division.
  static int64_t slot_index(int64_t slot, size_t slots) {
    if (slot >= 0) {
      const auto s = static_cast<uint64_t>(slot);
      switch (slots) {
        case 1: return 0;
        case 2: return static_cast<int64_t>(s & 1);
        case 3: return static_cast<int64_t>(s % 3);
        default: return div_mod(slot, static_cast<int64_t>(slots)).second;
      }
    }
    return slot % static_cast<int64_t>(slots);
  }
  SlotState& slot_of(Core& core, const npu::SpadRef& r) {
    auto& slots = core.spad[r.buffer];
    return slots[static_cast<size_t>(slot_index(r.slot.eval(core.vars.data()), slots.size()))];
  }

  // Kernels and front ends (timing.cpp).
  Time launch_time(int k) const;
  void start_kernel(int ci, int k, Time ready);
  const npu::Stmt* next_stmt(Core& core);
  void execute(Core& core, const npu::Stmt& s);

  // Kernels of one shape stepped once (timing_memo.cpp).
  bool memo_enabled() const;
  bool canonical(const Core& core) const;
  bool free_by(const Core& core, Time t0) const;  // every unit, queue and channel
  bool begin_memo(Core& core, int k);  // true: replayed
  bool replay(Core& core, int k, const KernelMemo& m);
  void end_memo(Core& core);
  bool replay_dram(const std::vector<npu::Stmt>& body, std::vector<int64_t>& vars, const KernelMemo& m, size_t& at,
                   Time t0);

  // The DMA engine (timing_dma.cpp).
  void dma(Core& core, const npu::DmaOp& d);
  DmaCost request_dram(const npu::DmaOp& d, const int64_t* vars);

  // The systolic arrays (timing_systolic.cpp).
  void matmul(Core& core, const npu::MatmulOp& mm);

  // The vector unit (timing_vector.cpp).
  const VecStatic& vec_static(const npu::VectorOp& v);
  void vector(Core& core, const npu::VectorOp& v);

  const npu::Program& p_;
  const target::NpuConfig& c_;
  Trace* trace_;
  bool replay_;
  DramModel dram_;
  Time core_period_, noc_period_, rtt_ = 0;
  std::vector<int64_t> base_;
  std::vector<Core> cores_;
  // Per kernel: its launch, its front end's start and its end (finish()
  // converts them to the report's cycles).
  std::vector<Time> launch_t_, start_t_, end_t_;
  std::vector<int> channel_tracks_;
  std::unordered_map<const npu::VectorOp*, VecStatic> vec_cache_;
  std::vector<int64_t> latency_scratch_;
  // Kernel memos by shape hash; the memo being recorded (-1: none), its T0
  // and the counters at its start.
  std::unordered_map<uint64_t, std::vector<size_t>> memo_index_;
  std::vector<KernelMemo> memos_;
  KernelMemo* recording_ = nullptr;
  Time record_t0_ = 0;
  KernelMemo record_base_;
  DramModel::Snapshot snapshot_;
  Report report_;
};

}  // namespace spool::sim::detail
