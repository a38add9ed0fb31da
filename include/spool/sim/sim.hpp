#pragma once
// The NPU cycle simulator.
//
// run() verifies the program, then simulates it on a config:
//  - timing (always): a tile-level, event-driven model of every core's units
//    (systolic arrays, vector unit, DMA engine), the on-chip network and the
//    DRAM channels, with separate clock domains; no tensor data is allocated,
//    so billion-parameter shapes simulate in well under a second;
//  - functional (Mode::Functional): additionally executes every kernel on the
//    values in a Memory, in f32 arithmetic with bf16/f16 rounding on stores.
// The same program runs in both modes. See timing.cpp for the model and its
// formulas, functional.cpp for the value semantics.

#include <spool/interp/host_tensor.hpp>
#include <spool/npu/kernel.hpp>
#include <spool/target/npu.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spool::sim {

enum class Mode : uint8_t { Timing, Functional };

// DRAM contents for functional mode: every root buffer as doubles already
// rounded to its dtype (integers exact up to 2^53).
class Memory {
 public:
  explicit Memory(const npu::Program& program);

  // Writes a whole buffer (a root or an alias), rounding to its dtype.
  void write(std::string_view buffer, std::span<const double> values);
  std::vector<double> read(std::string_view buffer) const;

  // Element 0 of a buffer (aliases point into their root).
  double* data(int buffer);
  const double* data(int buffer) const;

 private:
  int index(std::string_view buffer) const;
  const npu::Program* program_;
  std::vector<std::vector<double>> roots_;  // indexed by buffer; empty for aliases
};

// Chrome/Perfetto trace events ("X" complete events), one track per unit.
struct Trace {
  struct Event {
    int track = 0;
    std::string name;
    double start_us = 0;
    double duration_us = 0;
  };
  std::vector<std::string> tracks;  // names, by id; the process is the NPU
  std::vector<Event> events;

  int track(const std::string& name);  // id of the track, created on first use
  void write_json(std::ostream& out) const;
};

struct UnitStats {
  std::string name;  // "core0.array0", "core0.vector", "core0.dma", "dram.ch3"
  int64_t busy_cycles = 0;  // in the core clock
  double utilisation = 0;   // busy / total cycles
};

struct KernelStats {
  std::string name;
  int core = 0;
  int64_t launch_cycle = 0;  // the launch begins
  int64_t start_cycle = 0;   // the first statement may issue (after launch overhead)
  int64_t end_cycle = 0;     // every unit and DMA of the kernel is done
};

// Where the simulator's wall time went. A kernel whose shape (its
// statements, with DRAM buffers by element size) was simulated before, from
// the same unit state, is replayed: its DRAM addresses are walked through
// the row-buffer model and, if every descriptor meets the DRAM exactly as
// the recorded one did, the recorded outcome is applied, shifted in time;
// otherwise it is stepped. Cycles are the same either way.
struct SimProfile {
  int64_t kernels_stepped = 0;   // simulated statement by statement
  int64_t kernels_replayed = 0;  // applied from an earlier kernel of the same shape
  int64_t replays_refused = 0;   // same shape, but the DRAM differed: stepped
  int64_t statements = 0;        // statements stepped
  int64_t descriptors = 0;       // DMA descriptors walked through the DRAM model (stepped or replayed)
  int64_t rows_walked_ahead = 0;  // strided row sets a second thread walked for the run (Options::walk_ahead)
  int64_t parts = 1;              // parts simulated side by side (Options::threads)
  int64_t parts_stepped_again = 0;  // of them, parts whose start did not hold: stepped again after the one before
  double verify_ms = 0;           // checking the program before simulating (0: the caller had: Options::verified)
  double step_ms = 0;             // stepping kernels (in parts: the parts' threads' time, summed)
  double replay_ms = 0;           // replays, refused ones included (likewise)
  double total_ms = 0;
};

struct Report {
  std::string program;
  std::string config;
  Mode mode = Mode::Timing;
  int64_t cycles = 0;       // core clock cycles until the last kernel ends
  double time_ms = 0;
  int64_t dram_read_bytes = 0;   // moved on the DRAM bus (whole requests)
  int64_t dram_write_bytes = 0;
  int64_t dram_useful_bytes = 0; // bytes the descriptors asked for
  int64_t dram_row_hits = 0;     // requests that found their row open
  int64_t dram_row_misses = 0;   // row activations
  int64_t flops = 0;             // matmul (2mkn) + vector arithmetic on floats
  int64_t matmul_flops = 0;
  int64_t vector_flops = 0;
  int64_t vector_element_ops = 0;
  int64_t spad_peak_bytes = 0;   // largest live scratchpad footprint of any kernel
  int64_t roofline_cycles = 0;   // max(matmul peak, vector peak, DRAM bandwidth) bound
  int64_t kernels = 0;
  std::vector<UnitStats> units;
  std::vector<KernelStats> kernel_stats;
  SimProfile profile;  // wall time, not part of the simulated result

  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Called as each kernel of a timing run ends: kernels finished, kernels in
// the program, the cycle the kernel ended at (where a Ctrl-C report reads
// how far a long simulation got).
using ProgressFn = std::function<void(size_t finished, size_t total, int64_t cycle)>;

struct Options {
  Mode mode = Mode::Timing;
  Memory* memory = nullptr;  // required for Mode::Functional
  Trace* trace = nullptr;    // optional: records every unit's activity
  // Replay kernels of a shape simulated before (SimProfile); false steps
  // every kernel. The result is the same either way.
  bool replay = true;
  // On a one-core NPU, walk the DMA descriptors' strided DRAM rows ahead of
  // the run on a second thread (which blocks a row set visits is a function
  // of its addresses alone; applying that to the open rows stays with the
  // run). The result is the same either way; a caller that already runs
  // simulations in parallel turns it off.
  bool walk_ahead = true;
  // On a one-core NPU, the threads that simulate the kernels in
  // contiguous parts side by side (four per thread, a thread done with one
  // taking the next), joined exactly (SimProfile::parts; a part whose
  // guessed start does not hold is stepped again): 0, one per hardware
  // thread; 1, in one run. The result is the same either way. A traced
  // run, or one with too little work for two parts, runs in one. A run in
  // parts walks no rows ahead; a caller that already runs simulations in
  // parallel asks for 1.
  int threads = 0;
  // The caller has verified this very program (lower::to_npu verifies what
  // it returns): run() does not verify it again.
  bool verified = false;
  ProgressFn progress;  // optional
};

// Verifies and simulates. Throws spool::Error for an invalid program, a
// program that does not fit the config (scratchpad, array size), or a
// functional-mode runtime error.
Report run(const npu::Program& program, const target::NpuConfig& config, const Options& options = {});

// The timing model alone (run() calls it); the program must be verified.
Report simulate_timing(const npu::Program& program, const target::NpuConfig& config, Trace* trace, bool replay = true,
                       const ProgressFn& progress = {}, bool walk_ahead = true, int threads = 0);
// The timing model's cycles for the program, or, as soon as they are sure
// to exceed `limit`, a count above `limit` (a lower bound of them: the
// simulation stops there). Exactly simulate_timing's cycles otherwise.
int64_t timing_cycles(const npu::Program& program, const target::NpuConfig& config, int64_t limit);
// The functional model alone; the program must be verified.
void execute_functional(const npu::Program& program, Memory& memory);

// A program run in functional mode on host tensors: DRAM filled from the
// values named by `inputs` (value name -> DRAM buffer: a lowered program's
// graph inputs and weights), the outputs read back as host tensors of their
// buffers' types, by the names of `outputs`. Throws spool::Error for a
// missing value or one whose type or shape differs from its buffer's.
struct Executed {
  std::map<std::string, interp::HostTensor> outputs;
  Report report;
};
using BufferNames = std::vector<std::pair<std::string, std::string>>;
Executed run_functional(const npu::Program& program, const target::NpuConfig& config, const BufferNames& inputs,
                        const BufferNames& outputs, const std::map<std::string, interp::HostTensor>& values);

// The lowering's tile timer (lower::LowerOptions::tile_cycles): the timing
// model's cycles for a program of independent kernels on `config`, or, once
// they exceed `limit`, a count above it (the run stops there). The timer
// keeps its own copy of the config.
std::function<int64_t(const npu::Program&, int64_t limit)> tile_timer(const target::NpuConfig& config);

}  // namespace spool::sim
