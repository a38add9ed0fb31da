// The whole pipeline on one graph, top to bottom; each stage is one call and
// is logged.

#include <spool/ir/text.hpp>
#include <spool/lower/tile_cache.hpp>
#include <spool/npu/text.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/search/fitness.hpp>
#include <spool/search/genetic.hpp>
#include <spool/search/space.hpp>
#include <spool/support/error.hpp>
#include <spool/support/units.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace spool::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Greedy extraction, or the genetic search when asked; fills the compile
// report's extract/unroll times either way.
Graph extract_program(const Graph& hlir, const target::NpuConfig& config, const Options& options, Report& report) {
  if (options.search_genomes == 0) {
    compile::Compiled compiled = compile::run(hlir, options.compile);
    report.compile = compiled.report;
    return std::move(compiled.program);
  }
  const auto start = Clock::now();
  const compile::Saturated saturated = compile::saturate(hlir, options.compile);
  report.compile = saturated.report;
  const auto search_start = Clock::now();
  search::SearchSpace space = search::search_space(saturated);
  // Next to the e-graph's choices, the lowering's for every distinct GEMM
  // of the greedy program (its tuned tile is their default).
  if (options.search_lowering)
    space.add_lowering_genes(
        search::gemm_lowering_genes(search::canonical_program(space.program(space.greedy())), config, options.lower));
  // The search ranks candidates by the sum of their kernels simulated alone
  // (memoised: kernels repeat across layers and genomes) and decides between
  // the few it ranks best by simulating their whole programs.
  const search::SimulatedCycles cycles(config, options.lower);
  const search::LoweredFitnessFn fitness = [&](const Graph& program, const search::LoweringChoices& lowering) {
    return cycles.kernels(program, lowering);
  };
  const search::LoweredFitnessFn exact = [&](const Graph& program, const search::LoweringChoices& lowering) {
    return cycles.whole(program, lowering);
  };
  search::SearchOptions search_options;
  search_options.batch = options.search_batch;
  search_options.ranks = options.search_ranks;
  search_options.max_genomes = options.search_genomes;
  search_options.seed = options.search_seed;
  search_options.max_seconds = options.search_seconds;
  search_options.threads = options.compile.threads;
  if (options.search_progress)
    search_options.on_progress = [&](const search::SearchResult& r, double seconds) {
      options.search_progress(fmt::format("{} genomes in {:.1f}s, best {} cycles (greedy {}, x{:.3f})", r.genomes,
                                          seconds, r.best_cycles, r.greedy_cycles, r.ratio()));
    };
  search::SearchResult result = search::genetic(space, fitness, exact, search_options);
  // The search measures programs in canonical form (their CSE), which can
  // lower to more or fewer cycles than the program compile builds from the
  // same greedy terms: the baseline is the program a compile without a
  // search runs, simulated whole, and the search's best replaces it only if
  // it is faster.
  Graph greedy = saturated.program(compile::extract_greedy(saturated, options.compile.threads));
  SearchFigures figures;
  figures.genomes = result.genomes;
  figures.greedy_kernel_cycles = result.greedy_rank_cycles;
  figures.best_kernel_cycles = result.best_rank_cycles;
  figures.greedy_cycles = cycles.whole(greedy);
  figures.best_cycles = result.best_cycles;
  figures.stopped_by_time = result.stopped_by_time;
  figures.ms = ms_since(search_start);
  figures.ranks = result.ranks;
  figures.lowering_genes = space.num_lowering_genes();
  if (figures.best_cycles < figures.greedy_cycles) {
    figures.changed_genes = result.changed_genes;
    figures.lowering = result.best_lowering;
  }
  report.search = figures;
  spdlog::info("search: {} (canonical programs); compile's greedy program {} cycles", result.summary(),
               figures.greedy_cycles);
  for (const std::string& gene : result.changed_genes) spdlog::info("search: changed {}", gene);
  Graph chosen = figures.best_cycles < figures.greedy_cycles ? std::move(result.best_program) : std::move(greedy);
  if (options.compile.print_after) {
    options.compile.print_after("extract", fmt::format("; the genetic search extracts whole unrolled programs; the {} "
                                                       "program is the unroll stage's\n",
                                                       figures.best_cycles < figures.greedy_cycles ? "searched" : "greedy"));
    options.compile.print_after("unroll", print_graph(chosen));
  }
  // The search built every candidate program (extraction and unrolling
  // included): its time is the extraction time of this compile.
  report.compile.times.extract_ms = figures.ms;
  report.compile.times.total_ms = ms_since(start);
  return chosen;
}

Check check_outputs(const Graph& hlir, const lower::Lowered& lowered, const target::NpuConfig& config,
                    const interp::Env& inputs, double tolerance, sim::Report& sim_report,
                    std::map<std::string, interp::HostTensor>& outputs) {
  Check check;
  auto t = Clock::now();
  const std::map<std::string, interp::HostTensor> expected = interp::run(hlir, inputs);
  check.interp_ms = ms_since(t);
  t = Clock::now();
  std::map<std::string, interp::HostTensor> sources;
  for (const auto& [name, buffer] : lowered.inputs) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) fail("functional run: no value for the program's source '{}'", name);
    sources.emplace(name, it->second);
  }
  sim::Executed executed = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, sources);
  check.sim_ms = ms_since(t);
  sim_report = std::move(executed.report);
  for (const auto& [name, want] : expected) {
    const auto got = executed.outputs.find(name);
    if (got == executed.outputs.end()) fail("functional run: the lowered program has no output '{}'", name);
    if (got->second.shape() != want.shape())
      fail("functional run: output '{}' is {} but the interpreter gives {}", name, shape_str(got->second.shape()),
           shape_str(want.shape()));
    const interp::Difference diff = interp::compare(got->second, want);
    if (diff.non_finite > 0 && check.non_finite == 0) check.non_finite_output = name;
    check.non_finite += diff.non_finite;
    check.max_abs_err = std::max(check.max_abs_err, diff.max_abs);
    const double allowed = interp::check_tolerance(tolerance, want.dtype());
    if (diff.max_rel_to_scale > allowed) check.ok = false;
    if (diff.max_rel_to_scale >= check.max_rel_err) {
      check.max_rel_err = diff.max_rel_to_scale;
      check.worst_output = name;
      check.tolerance = allowed;
    }
  }
  if (check.non_finite != 0) check.ok = false;
  outputs = std::move(executed.outputs);
  return check;
}

// The footprint against the capacity; fails when it does not fit, unless ignored.
Memory check_memory(const npu::DramFootprint& footprint, const target::NpuConfig& config, bool ignore, bool final) {
  Memory m;
  m.footprint = footprint;
  m.capacity_bytes = config.dram.capacity_bytes;
  const int64_t per_core = std::max<int64_t>(1, config.dram.capacity_bytes / config.cores);
  m.cores_needed = std::max<int64_t>(1, (footprint.total() + per_core - 1) / per_core);
  m.fits = footprint.total() <= m.capacity_bytes;
  m.ignored = !m.fits && ignore;
  if (!m.fits && !ignore) {
    const std::string parts =
        final ? fmt::format("weights {}, inputs {}, outputs {}, temporaries at peak {}",
                            format_bytes(footprint.weight_bytes), format_bytes(footprint.input_bytes),
                            format_bytes(footprint.output_bytes), format_bytes(footprint.temp_peak_bytes))
              : fmt::format("weights {}, inputs {}, outputs {}, before any temporary",
                            format_bytes(footprint.weight_bytes), format_bytes(footprint.input_bytes),
                            format_bytes(footprint.output_bytes));
    fail(
        "the program needs {} of DRAM ({}) but {} has {}: it would need the DRAM of {} {} core{} ({} each); "
        "--ignore-capacity simulates it anyway",
        format_bytes(footprint.total()), parts, config.name, format_bytes(m.capacity_bytes), m.cores_needed,
        config.name, m.cores_needed == 1 ? "" : "s", format_bytes(per_core));
  }
  return m;
}

// What the graph's sources and outputs take in DRAM whatever the program: a
// lower bound, so that nothing that fits is refused. An output with the name
// and type of an input (a KV cache) may be that input updated in place, so
// it is not counted twice here; the footprint of the lowered program, checked
// again before simulating, says whether it was.
npu::DramFootprint graph_footprint(const Graph& graph) {
  npu::DramFootprint f;
  std::map<std::string, TensorType, std::less<>> inputs;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    const int64_t bytes = num_elements(node.shape) * dtype_bytes(node.dtype);
    if (node.op == Op::Weight) f.weight_bytes += bytes;
    if (node.op == Op::Input) {
      f.input_bytes += bytes;
      inputs.emplace(std::get<NameAttr>(node.attr).name, TensorType{node.dtype, node.shape});
    }
  }
  for (const Output& output : graph.outputs()) {
    const TensorType type = graph.edge_type(output.edge);
    const auto input = inputs.find(output.name);
    if (input != inputs.end() && input->second == type) continue;
    f.output_bytes += num_elements(type.shape) * dtype_bytes(type.dtype);
  }
  return f;
}

}  // namespace

Report run(const Graph& hlir, const target::NpuConfig& config, const Options& options) {
  Report report;
  const auto start = Clock::now();
  report.source_bytes = required_source_bytes(hlir);
  report.dram_roofline_ms = static_cast<double>(report.source_bytes) / config.dram_bytes_per_second() * 1e3;
  // A model too big for the DRAM fails before it is compiled.
  report.memory = check_memory(graph_footprint(hlir), config, options.ignore_capacity, /*final=*/false);

  // 1. Compile: roll, saturate, extract (greedy or searched), unroll; the
  // extraction prices kernels for this config.
  Options compile_options = options;
  compile_options.compile.cost = hlir::cost_config(config);
  const Graph program = extract_program(hlir, config, compile_options, report);
  report.llir_nodes = program.num_live();

  // 2. Lower to NPU kernels.
  auto t = Clock::now();
  lower::LowerOptions lower_options = options.lower;
  if (report.search) lower_options = search::with_choices(lower_options, report.search->lowering);
  std::optional<lower::TileCache> cache;
  if (!lower_options.tile_cycles) {
    lower_options.tile_cycles = sim::tile_timer(config);
    if (!options.tile_cache_dir.empty()) cache.emplace(options.tile_cache_dir, config, lower_options);
    if (cache && cache->usable()) {
      lower_options.tuned = &cache->tiles();
      report.tile_cache_file = cache->file().string();
    }
  }
  lower::Lowered lowered = lower::to_npu(program, config, lower_options);
  if (!report.tile_cache_file.empty()) report.tile_cache_saved = cache->save(lowered.tuned);
  report.lower_ms = ms_since(t);
  report.lowering = lowered.report;
  if (options.compile.print_after) options.compile.print_after("lower", npu::print(lowered.program));
  spdlog::info("lower: {} kernels ({} fused, {} copies; {} GEMMs reused an earlier one's kernels) in {:.1f} ms",
               lowered.report.kernels, lowered.report.fused_kernels, lowered.report.copy_kernels,
               lowered.report.gemms_reused, report.lower_ms);

  // 3. Simulate for time (never allocates tensor data), if the program fits.
  report.memory = check_memory(npu::dram_footprint(lowered.program), config, options.ignore_capacity, /*final=*/true);
  t = Clock::now();
  sim::Options sim_options;
  sim_options.trace = options.trace;
  sim_options.threads = options.sim_threads;
  sim_options.verified = true;  // by lower::to_npu
  if (options.sim_progress)
    sim_options.progress = [&](size_t finished, size_t total, int64_t cycle) {
      options.sim_progress(fmt::format("{} of {} kernels simulated, to cycle {}", finished, total, cycle));
    };
  report.sim = sim::run(lowered.program, config, sim_options);
  report.simulate_ms = ms_since(t);
  spdlog::info("simulate: {} cycles ({:.3f} ms at the NPU clock) in {:.1f} ms", report.sim.cycles,
               report.sim.time_ms, report.simulate_ms);
  if (options.compile.print_after) options.compile.print_after("simulate", report.sim.to_text());

  // 4. Functional mode: the same program on real values, against the interpreter.
  if (options.inputs) {
    sim::Report functional;
    report.check = check_outputs(hlir, lowered, config, *options.inputs, options.tolerance, functional,
                                 report.outputs);
    if (functional.cycles != report.sim.cycles)
      fail("the functional and timing runs of the same program took {} and {} cycles", functional.cycles,
           report.sim.cycles);
    spdlog::info("check: max error {:.3g} relative to scale: {}", report.check->max_rel_err,
                 report.check->ok ? "ok" : "FAILED");
  }
  report.lowered = std::make_shared<const lower::Lowered>(std::move(lowered));
  report.total_ms = ms_since(start);
  return report;
}

int64_t required_source_bytes(const Graph& graph) {
  std::map<uint32_t, int64_t> gathered;  // source -> elements gathered from it
  std::map<uint32_t, bool> other_use;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const uint32_t src = node.inputs[i].src.value;
      if (node.op == Op::Gather && i == 0)
        gathered[src] += num_elements(node.shape);
      else
        other_use[src] = true;
    }
  }
  for (const Output& output : graph.outputs()) other_use[output.edge.src.value] = true;
  int64_t bytes = 0;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    if (node.op != Op::Input && node.op != Op::Weight) continue;
    int64_t elements = num_elements(node.shape);
    if (!other_use.contains(id.value)) {
      const auto it = gathered.find(id.value);
      elements = it == gathered.end() ? 0 : std::min(elements, it->second);
    }
    bytes += elements * dtype_bytes(node.dtype);
  }
  return bytes;
}

nlohmann::json Report::to_json() const {
  nlohmann::json j = compile::to_json(compile);
  j["compile"]["lower_ms"] = lower_ms;
  j["compile"]["simulate_ms"] = simulate_ms;
  j["compile"]["pipeline_ms"] = total_ms;
  const sim::SimProfile& sp = sim.profile;
  j["compile"]["simulate_profile"] = {{"verify_ms", sp.verify_ms},
                                      {"step_ms", sp.step_ms},
                                      {"replay_ms", sp.replay_ms},
                                      {"kernels_stepped", sp.kernels_stepped},
                                      {"kernels_replayed", sp.kernels_replayed},
                                      {"replays_refused", sp.replays_refused},
                                      {"statements", sp.statements},
                                      {"descriptors", sp.descriptors},
                                      {"rows_walked_ahead", sp.rows_walked_ahead},
                                      {"parts", sp.parts},
                                      {"parts_stepped_again", sp.parts_stepped_again}};
  j["program"] = {{"llir_nodes", llir_nodes},
                  {"kernels", lowering.kernels},
                  {"fused_kernels", lowering.fused_kernels},
                  {"copy_kernels", lowering.copy_kernels},
                  {"dram_aliases", lowering.dram_aliases},
                  {"gemms_reused", lowering.gemms_reused},
                  {"gemm_tiles_timed", lowering.gemm_tiles_timed},
                  {"gemm_tiles_known", lowering.gemm_tiles_known},
                  {"tile_cache", tile_cache_file}};
  j["sim"] = {{"cycles", sim.cycles},
              {"time_ms", sim.time_ms},
              {"dram_bytes", sim.dram_read_bytes + sim.dram_write_bytes},
              {"dram_read_bytes", sim.dram_read_bytes},
              {"dram_write_bytes", sim.dram_write_bytes},
              {"flops", sim.flops},
              {"spad_peak_bytes", sim.spad_peak_bytes},
              {"roofline_cycles", sim.roofline_cycles},
              {"source_bytes", source_bytes},
              {"dram_roofline_ms", dram_roofline_ms}};
  j["memory"] = {{"footprint_bytes", memory.footprint.total()},
                 {"weight_bytes", memory.footprint.weight_bytes},
                 {"input_bytes", memory.footprint.input_bytes},
                 {"output_bytes", memory.footprint.output_bytes},
                 {"temp_peak_bytes", memory.footprint.temp_peak_bytes},
                 {"capacity_bytes", memory.capacity_bytes},
                 {"fits", memory.fits},
                 {"ignored_capacity", memory.ignored},
                 {"cores_needed", memory.cores_needed}};
  if (search)
    j["search"] = {{"genomes", search->genomes},
                   {"greedy_cycles", search->greedy_cycles},
                   {"best_cycles", search->best_cycles},
                   {"greedy_kernel_cycles", search->greedy_kernel_cycles},
                   {"best_kernel_cycles", search->best_kernel_cycles},
                   {"stopped_by_time", search->stopped_by_time},
                   {"ms", search->ms},
                   {"seconds", search->ms / 1e3},
                   {"ranks", search->ranks},
                   {"lowering_genes", search->lowering_genes},
                   {"changed_genes", search->changed_genes}};
  if (check)
    j["check"] = {{"ok", check->ok},
                  {"max_abs_err", check->max_abs_err},
                  {"max_rel_err", check->max_rel_err},
                  {"worst_output", check->worst_output},
                  {"non_finite", check->non_finite}};
  return j;
}

}  // namespace spool::pipeline
