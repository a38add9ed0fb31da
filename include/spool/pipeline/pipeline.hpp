#pragma once
// pipeline::run: everything Spool does to one HLIR graph, end to end.
//
// compile (roll, saturate, greedy extraction, unroll), optionally a genetic
// search over the saturated e-graphs for a program with fewer simulated
// cycles, lowering to NPU kernels, the cycle simulator in timing mode, and —
// in functional mode — the simulator run on real values and compared with
// the reference interpreter. The report carries the JSON keys below; the
// `spool run` command prints it and writes it as JSON.

#include <spool/compile/compile.hpp>
#include <spool/interp/interp.hpp>
#include <spool/lower/lower.hpp>
#include <spool/search/genetic.hpp>
#include <spool/sim/sim.hpp>
#include <spool/target/npu.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace spool::pipeline {

struct Options {
  compile::Options compile;
  lower::LowerOptions lower;
  // Functional mode: run the simulator on these values of every graph input
  // and weight, and compare with the interpreter. nullopt: timing only, no
  // tensor data is ever allocated.
  std::optional<interp::Env> inputs;
  // Largest error relative to each output's scale; bf16 and f16 outputs
  // allow at least interp::check_tolerance's floor for their dtype.
  double tolerance = 1e-4;
  // Genetic search over the e-graphs' genomes (0: greedy extraction only).
  size_t search_genomes = 0;
  uint64_t search_seed = 1;
  double search_seconds = 0;  // 0: no time budget
  // The search's progress, as one line (genomes, best and greedy cycles).
  std::function<void(std::string_view)> search_progress;
  // The final simulation's progress, as one line (kernels ended, cycle).
  std::function<void(std::string_view)> sim_progress;
  // Search the lowering's choices for the GEMMs too (search::gemm_lowering_genes).
  bool search_lowering = true;
  // Measures the search's candidates in batches (an MPI run spreads them
  // over its ranks: mpi_search.hpp); empty: on this process's threads.
  search::BatchFn search_batch;
  int search_ranks = 1;
  sim::Trace* trace = nullptr;  // optional: the timing run's trace
  int sim_threads = 0;          // the timing run's sim::Options::threads
  // Simulate a program whose DRAM footprint exceeds the config's capacity
  // (the report marks it) instead of failing.
  bool ignore_capacity = false;
  // The directory of the GEMM tile cache (lower/tile_cache.hpp) the
  // lowering reads tuned tiles from and adds its new ones to; empty: none.
  // Used only with the simulator's own tile timer (lower.tile_cycles empty).
  std::string tile_cache_dir;
};

// The program's DRAM footprint against the config's capacity.
struct Memory {
  npu::DramFootprint footprint;
  int64_t capacity_bytes = 0;
  bool fits = true;
  bool ignored = false;  // it does not fit and ran anyway (Options::ignore_capacity)
  // How many cores' worth of the config's DRAM (capacity / cores each) the footprint needs.
  int64_t cores_needed = 1;
};

struct SearchFigures {
  size_t genomes = 0;
  // The whole programs simulated: greedy extraction's (the program a compile
  // without a search runs) and the search's best (in canonical form, see
  // search::canonical_program); the compile keeps the best only if it is
  // faster.
  int64_t greedy_cycles = 0, best_cycles = 0;
  // What the search ranked by: each kernel simulated alone, summed.
  int64_t greedy_kernel_cycles = 0, best_kernel_cycles = 0;
  bool stopped_by_time = false;
  double ms = 0;
  int ranks = 1;                           // processes that measured candidates
  size_t lowering_genes = 0;               // of the genome, next to the e-graph's genes
  std::vector<std::string> changed_genes;  // where the best genome differs from greedy's
  // The lowering choices of the program that runs (empty when greedy's runs).
  search::LoweringChoices lowering;
};

struct Check {
  bool ok = true;
  double max_abs_err = 0;
  double max_rel_err = 0;  // relative to the output's scale (largest |reference|)
  std::string worst_output;
  double tolerance = 0;    // what the worst output was allowed (interp::check_tolerance)
  // Elements of any output where the simulated or the reference value is
  // NaN or infinite: the check cannot vouch for them, so it fails.
  int64_t non_finite = 0;
  std::string non_finite_output;  // the first output holding one
  double interp_ms = 0, sim_ms = 0;
};

struct Report {
  compile::Report compile;
  double lower_ms = 0, simulate_ms = 0;
  size_t llir_nodes = 0;
  lower::LowerReport lowering;
  // The lowered program and its buffer names (moved out of the lowering
  // once the simulations are done).
  std::shared_ptr<const lower::Lowered> lowered;
  sim::Report sim;
  std::optional<SearchFigures> search;
  std::optional<Check> check;
  // Functional mode: the simulated program's outputs, by graph output name.
  std::map<std::string, interp::HostTensor> outputs;
  // DRAM bytes that any program must read: every source (weights, inputs
  // such as a KV cache) once, a table only gathered from (an embedding) for
  // the rows gathered; and the time that takes at the config's peak DRAM
  // bandwidth: the memory roofline of the whole program.
  int64_t source_bytes = 0;
  double dram_roofline_ms = 0;
  Memory memory;
  double total_ms = 0;  // wall time of the pipeline
  // The tile cache file used (empty: none), and whether the tiles timed
  // this run were written to it.
  std::string tile_cache_file;
  bool tile_cache_saved = false;

  // The JSON keys: compile, roll, egraph, program, sim, memory, search, check.
  nlohmann::json to_json() const;
};

// The bytes of the graph's sources (inputs and weights) that any program
// must read from DRAM: each source once, whole, except a table that is only
// ever gathered from (an embedding), of which at most the elements gathered.
int64_t required_source_bytes(const Graph& graph);

// Throws spool::Error for anything the pipeline cannot do with the graph
// (a bad rule file, an op that cannot be lowered, a shape that cannot be
// tiled), and, unless options.ignore_capacity, for a program whose DRAM
// footprint exceeds the config's capacity (before simulating it: the error
// names the footprint, the capacity and how many cores' DRAM it needs); a
// failed check is reported in Report::check, not thrown.
Report run(const Graph& hlir, const target::NpuConfig& config, const Options& options = {});

}  // namespace spool::pipeline
