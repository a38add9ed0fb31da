// `spool run MODEL` and `spool models`.
//
// `run` builds the model's HLIR (prefill or decode, random weights or a
// Hugging Face folder), runs the whole pipeline on it (pipeline::run: roll,
// saturate, extract or search, unroll, lower, simulate) and prints one
// report: each stage's figures, the simulated time as TTFT (prefill) or TPOT
// (decode), its rooflines, and — in functional mode, the default for tiny
// shapes — the simulated outputs checked against the reference interpreter.
// --interp runs the HLIR on the interpreter alone.

#include "commands.hpp"
#include "mpi_search.hpp"

#include <spool/lower/tile_cache.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/spool.hpp>

#include <nlohmann/json.hpp>

#include <spool/models/hf_weights.hpp>
#include <spool/models/registry.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

namespace spool::cli {

void print_tiles(const pipeline::Report& r) {
  const int timed = r.lowering.gemm_tiles_timed, known = r.lowering.gemm_tiles_known;
  if (timed + known == 0) return;
  if (r.tile_cache_file.empty()) {
    std::printf("tiles      %d distinct GEMM(s), tiles timed (no tile cache)\n", timed);
    return;
  }
  std::printf("tiles      %d distinct GEMM(s): %d tile(s) from the tile cache, %d timed%s (%s)\n", timed + known, known,
              timed,
              timed == 0           ? ""
              : r.tile_cache_saved ? " and added to it"
                                   : ", not saved",
              r.tile_cache_file.c_str());
}

namespace {

// The largest error, relative to the reference's scale, that --check-logits accepts.
constexpr double kLogitTolerance = 1e-4;

struct RunOptions {
  std::string model;
  models::ModelOptions model_options;
  bool interp = false;
  double interp_budget = kInterpWorkBudget;
  uint64_t seed = 0;
  std::string weights_dir;
  std::string tokens;
  std::string dump_logits;
  std::string check_logits;
  std::string dot_file;
  std::string hlir_file;
  std::string npu = "tpuv3";
  bool no_roll = false;
  bool timing_only = false;
  bool ignore_capacity = false;
  int sim_threads = 0;
  std::string tile_cache = lower::TileCache::default_dir().string();
  bool no_tile_cache = false;
  PrintAfter print;
  size_t search = 0;
  std::vector<std::string> rules;
  bool no_check_rules = false;
  std::string json_file;
  std::string trace_file;
  size_t top_kernels = 0;
  bool size_given = false;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<int64_t> parse_tokens(const std::string& text) {
  std::vector<int64_t> tokens;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    int64_t value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 0)
      fail("--tokens: '{}' is not a non-negative integer (expected a list like 1,2,3)", item);
    tokens.push_back(value);
    start = comma + 1;
  }
  return tokens;
}


// The graph of one call and the weights read for it (empty: seeded random).
struct Built {
  Graph graph;
  interp::Env weights;
  std::string shape;
};

Built build(const RunOptions& options, const models::ModelRef& ref, const models::Phase& phase) {
  if (!options.weights_dir.empty()) {
    std::optional<DType> dtype;
    if (!options.model_options.dtype.empty()) dtype = models::resolve_dtype(options.model_options);
    models::LoadedModel loaded = models::load_hf_model(ref.entry->name, options.weights_dir, phase, dtype);
    return {std::move(loaded.graph), std::move(loaded.weights), loaded.shape + " (from config.json)"};
  }
  models::ModelOptions model_options = options.model_options;
  model_options.variant = ref.variant;
  model_options.seq = phase.seq;
  model_options.context = phase.context;
  return {ref.entry->build(model_options), {}, models::shape_of(*ref.entry, model_options.size, ref.variant)};
}

// Values for every source: seeded random, then the checkpoint's weights and the given tokens.
interp::Env make_inputs(const Built& built, uint64_t seed, const std::vector<int64_t>& tokens) {
  interp::Env env = interp::random_inputs(built.graph, seed, /*integer_bound=*/16);
  for (const auto& [name, value] : built.weights) env[name] = value;
  if (!tokens.empty()) env["tokens"] = interp::HostTensor::from_i64({static_cast<int64_t>(tokens.size())}, tokens);
  return env;
}

void check_tokens(const Graph& graph, const std::vector<int64_t>& tokens, const std::string& model) {
  bool has_tokens = false;
  int64_t vocab = -1;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    if (node.op == Op::Input && std::get<NameAttr>(node.attr).name == "tokens") has_tokens = true;
    if (node.op == Op::Weight && std::get<NameAttr>(node.attr).name == "model.embed_tokens.weight")
      vocab = node.shape[0];
  }
  if (!has_tokens) fail("--tokens: {} takes no token ids", model);
  for (const int64_t token : tokens)
    if (vocab >= 0 && token >= vocab) fail("--tokens: token {} is outside the vocabulary of {} tokens", token, vocab);
}

void print_outputs(const std::map<std::string, interp::HostTensor>& outputs) {
  for (const auto& [name, value] : outputs) {
    double sum = 0.0, sum_abs = 0.0;
    bool finite = true;
    for (int64_t i = 0; i < value.size(); ++i) {
      sum += value.get(i);
      sum_abs += std::abs(value.get(i));
      finite = finite && std::isfinite(value.get(i));
    }
    std::printf("output     %s %s%s  checksum sum=%.6f mean|x|=%.6f%s\n", name.c_str(),
                std::string(dtype_name(value.dtype())).c_str(), shape_str(value.shape()).c_str(), sum,
                value.size() ? sum_abs / static_cast<double>(value.size()) : 0.0, finite ? "" : "  NOT FINITE");
  }
}

// Values of every source: seeded random weights (or the checkpoint's), the
// tokens, and for a decode with tokens the KV cache filled by a prefill of
// all tokens but the last on the interpreter.
interp::Env source_values(const RunOptions& options, const models::ModelRef& ref, const Built& built,
                          const models::Phase& phase, const std::vector<int64_t>& tokens) {
  if (!phase.has_cache() || tokens.empty()) return make_inputs(built, options.seed, tokens);
  const std::vector<int64_t> prompt(tokens.begin(), tokens.end() - 1);
  const Built prefill = build(options, ref, models::Phase::prefill(phase.context));
  const auto prefill_start = Clock::now();
  const auto prefill_out = interp::run(prefill.graph, make_inputs(prefill, options.seed, prompt));
  std::printf("prefill    %lld tokens on the interpreter to fill the KV cache (%.1f ms)\n",
              static_cast<long long>(phase.context), ms_since(prefill_start));
  interp::Env inputs = make_inputs(built, options.seed, {tokens.back()});
  for (auto& [cache_name, value] : models::next_cache(prefill_out, phase.seq)) inputs[cache_name] = std::move(value);
  return inputs;
}

bool has_logits(const Graph& graph) {
  const auto& outputs = graph.outputs();
  return std::any_of(outputs.begin(), outputs.end(), [](const auto& o) { return o.name == "logits"; });
}

// Layers as the weight names count them (`model.layers.N.`, `encoder.layer.N.`), or 1.
int64_t count_layers(const Graph& graph) {
  int64_t layers = 0;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    if (node.op != Op::Weight) continue;
    const std::string& weight = std::get<NameAttr>(node.attr).name;
    for (const std::string_view key : {".layers.", ".layer."}) {
      const size_t at = weight.find(key);
      if (at != std::string::npos && std::isdigit(static_cast<unsigned char>(weight[at + key.size()])))
        layers = std::max<int64_t>(layers, std::atoll(weight.c_str() + at + key.size()) + 1);
    }
  }
  return std::max<int64_t>(layers, 1);
}

std::string megabytes(int64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

void print_report(const pipeline::Report& r, const target::NpuConfig& config, const models::Phase& phase,
                  bool timing_only) {
  const compile::Report& c = r.compile;
  std::string trips;
  for (const int64_t t : c.roll.trips) trips += fmt::format("{}{}", trips.empty() ? "" : ",", t);
  std::printf("npu        %s: %d core(s) at %.0f MHz, %d arrays %lldx%lld, %lld lanes, %s scratchpad, %.0f GB/s DRAM\n",
              config.name.c_str(), config.cores, config.core_clock_mhz, config.systolic.arrays,
              static_cast<long long>(config.systolic.rows), static_cast<long long>(config.systolic.cols),
              static_cast<long long>(config.vector.lanes), megabytes(config.spad_bytes()).c_str(),
              config.dram_bytes_per_second() / 1e9);
  std::printf("roll       %lld loop(s)%s, hlir %zu -> %zu nodes, body %lld nodes\n",
              static_cast<long long>(c.roll.loops), trips.empty() ? "" : (" of " + trips + " trips").c_str(),
              c.roll.hlir_nodes_before, c.roll.hlir_nodes_after, static_cast<long long>(c.roll.body_nodes));
  std::printf("egraph     %zu e-graph(s) for %zu regions: %zu nodes, %zu classes, %zu iterations, stop %s\n",
              c.egraph.egraphs, c.egraph.regions, c.egraph.nodes, c.egraph.classes, c.egraph.iterations,
              std::string(egraph::stop_reason_name(c.egraph.stop)).c_str());
  for (const std::string& line : c.egraph.budget_stops) std::printf("egraph     budget: %s\n", line.c_str());
  std::printf("program    %zu LLIR nodes -> %d NPU kernels (%d fused, %d copies), %lld DRAM aliases\n",
              r.llir_nodes, r.lowering.kernels, r.lowering.fused_kernels, r.lowering.copy_kernels,
              static_cast<long long>(r.lowering.dram_aliases));
  print_tiles(r);
  if (r.search)
    std::printf("search     %zu genomes: greedy %lld cycles, searched %lld cycles (%.3fx)%s\n", r.search->genomes,
                static_cast<long long>(r.search->greedy_cycles), static_cast<long long>(r.search->best_cycles),
                r.search->best_cycles > 0
                    ? static_cast<double>(r.search->greedy_cycles) / static_cast<double>(r.search->best_cycles)
                    : 1.0,
                r.search->stopped_by_time ? " (stopped by time)" : "");
  if (r.search) {
    std::printf("search     %.1f s on %d rank%s, %zu lowering genes; %zu gene%s changed from greedy%s\n",
                r.search->ms / 1e3, r.search->ranks, r.search->ranks == 1 ? "" : "s", r.search->lowering_genes,
                r.search->changed_genes.size(), r.search->changed_genes.size() == 1 ? "" : "s",
                r.search->changed_genes.empty() ? "" : ":");
    for (const std::string& gene : r.search->changed_genes) std::printf("  changed  %s\n", gene.c_str());
  }
  std::printf("time ms    roll %.1f, saturate %.1f, extract %.1f, unroll %.1f, lower %.1f, simulate %.1f; total %.1f\n",
              c.times.roll_ms, c.times.saturate_ms, c.times.extract_ms, c.times.unroll_ms, r.lower_ms,
              r.simulate_ms, r.total_ms);
  const sim::SimProfile& sp = r.sim.profile;
  std::printf(
      "sim ms     verify %.1f, step %.1f%s (%lld kernels, %lld statements), replay %.1f (%lld kernels of a shape "
      "stepped before, %lld refused: DRAM differed); %lld DMA descriptors, %lld row sets walked ahead; %lld part%s "
      "side by side, %lld stepped again\n",
      sp.verify_ms, sp.step_ms, sp.parts > 1 ? " summed over the threads" : "",
      static_cast<long long>(sp.kernels_stepped), static_cast<long long>(sp.statements),
      sp.replay_ms, static_cast<long long>(sp.kernels_replayed), static_cast<long long>(sp.replays_refused),
      static_cast<long long>(sp.descriptors), static_cast<long long>(sp.rows_walked_ahead),
      static_cast<long long>(sp.parts), sp.parts == 1 ? "" : "s", static_cast<long long>(sp.parts_stepped_again));
  const sim::Report& s = r.sim;
  std::printf("sim        %lld cycles, DRAM %s read + %s written, %.2f GFLOP, scratchpad peak %s\n",
              static_cast<long long>(s.cycles), megabytes(s.dram_read_bytes).c_str(),
              megabytes(s.dram_write_bytes).c_str(), static_cast<double>(s.flops) / 1e9,
              megabytes(s.spad_peak_bytes).c_str());
  const double roofline_ms = static_cast<double>(s.roofline_cycles) / (config.core_clock_mhz * 1e3);
  std::printf("%s       %.4f ms at %.0f MHz; roofline %.4f ms (%.0f%% utilisation)\n",
              phase.has_cache() ? "TPOT" : "TTFT", s.time_ms, config.core_clock_mhz, roofline_ms,
              s.cycles > 0 ? 100.0 * static_cast<double>(s.roofline_cycles) / static_cast<double>(s.cycles) : 0.0);
  std::printf("memory     %s of weights and inputs must be read: %.4f ms at peak DRAM bandwidth, %.2fx of it\n",
              megabytes(r.source_bytes).c_str(), r.dram_roofline_ms,
              r.dram_roofline_ms > 0 ? s.time_ms / r.dram_roofline_ms : 0.0);
  const npu::DramFootprint& f = r.memory.footprint;
  std::printf("dram       footprint %s (weights %s, inputs %s, outputs %s, temporaries at peak %s) of %s: %s\n",
              format_bytes(f.total()).c_str(), format_bytes(f.weight_bytes).c_str(),
              format_bytes(f.input_bytes).c_str(), format_bytes(f.output_bytes).c_str(),
              format_bytes(f.temp_peak_bytes).c_str(), format_bytes(r.memory.capacity_bytes).c_str(),
              r.memory.fits ? "fits"
                            : fmt::format("DOES NOT FIT (needs {} cores' DRAM; simulated under --ignore-capacity)",
                                          r.memory.cores_needed)
                                  .c_str());
  if (r.check) {
    std::printf("check      simulated vs interpreter: max abs err %.3g, relative to scale %.3g (%s): %s\n",
                r.check->max_abs_err, r.check->max_rel_err, r.check->worst_output.c_str(),
                r.check->ok ? "ok" : "FAILED");
    if (r.check->non_finite > 0)
      std::printf("check      %lld values NaN or infinite (first in %s): NOT FINITE\n",
                  static_cast<long long>(r.check->non_finite), r.check->non_finite_output.c_str());
  }
  else if (timing_only)
    std::printf("check      none (timing only: no tensor data was allocated)\n");
  if (!r.outputs.empty()) print_outputs(r.outputs);
}

// Where the cycles go: the lowered kernels grouped by kind and tile, the
// `top` groups with the most simulated cycles (launch to end).
void print_top_kernels(const pipeline::Report& r, size_t top) {
  struct Group {
    std::string kind, tile, example;
    size_t kernels = 0;
    int64_t cycles = 0;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  const std::vector<sim::KernelStats>& stats = r.sim.kernel_stats;
  size_t k = 0;
  int64_t total = 0;
  for (const lower::KernelInfo& info : r.lowering.per_kernel) {
    Group& g = groups[{info.kind, info.tile}];
    g.kind = info.kind;
    g.tile = info.tile;
    if (g.example.empty()) g.example = info.name;
    for (int i = 0; i < info.core_split && k < stats.size(); ++i, ++k) {
      g.kernels += 1;
      g.cycles += stats[k].end_cycle - stats[k].launch_cycle;
      total += stats[k].end_cycle - stats[k].launch_cycle;
    }
  }
  std::vector<Group> sorted;
  for (auto& [key, g] : groups) sorted.push_back(std::move(g));
  std::sort(sorted.begin(), sorted.end(), [](const Group& a, const Group& b) {
    return a.cycles != b.cycles ? a.cycles > b.cycles : std::tie(a.kind, a.tile) < std::tie(b.kind, b.tile);
  });
  std::printf("kernels    by kind and tile, most cycles first (kernel launch to end; kernels may overlap):\n");
  for (size_t i = 0; i < std::min(top, sorted.size()); ++i) {
    const Group& g = sorted[i];
    std::printf("  %5.1f%%  %14lld cycles  %5zu x %-10s %-18s e.g. %s\n",
                total > 0 ? 100.0 * static_cast<double>(g.cycles) / static_cast<double>(total) : 0.0,
                static_cast<long long>(g.cycles), g.kernels, g.kind.c_str(), g.tile.empty() ? "-" : g.tile.c_str(),
                g.example.c_str());
  }
}

// The tokens fix the phase's length: a prefill of all of them, or a decode
// of the last one after a prefill of the others has filled the cache.
models::Phase phase_of(const RunOptions& options, const std::vector<int64_t>& tokens) {
  models::ModelOptions phase_options = options.model_options;
  if (!tokens.empty()) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (phase_options.phase == "prefill") {
      if (phase_options.seq != 0 && phase_options.seq != n)
        fail("--tokens gives {} tokens but --seq is {}", n, phase_options.seq);
      phase_options.seq = n;
    } else {
      if (n < 2)
        fail("--phase decode --tokens needs at least 2 tokens: the first ones fill the KV cache, the last is decoded");
      if (phase_options.context != 0 && phase_options.context != n - 1)
        fail("--tokens gives a cache of {} tokens but --context is {}", n - 1, phase_options.context);
      phase_options.context = n - 1;
    }
  }
  return models::resolve_phase(phase_options);
}

// Keeps `what` until the process exits, which returns its memory at once:
// the lowered program of a real model (half a million statements for
// llama-3-8B prefill) took 25-30 ms of a 0.3 s run to free piece by piece.
// Reachable to the end, so no leak to a leak checker.
void keep_until_exit(std::shared_ptr<const void> what) {
  static auto* const kept = new std::vector<std::shared_ptr<const void>>;
  kept->push_back(std::move(what));
}

// Compiles, lowers and simulates the model (checking it against the
// interpreter unless timing-only), prints the report and writes the
// requested files; returns the simulated outputs.
std::map<std::string, interp::HostTensor> run_pipeline(const RunOptions& options, const models::ModelRef& ref,
                                                       const Built& built, const models::Phase& phase,
                                                       const std::vector<int64_t>& tokens, bool timing_only,
                                                       const std::set<std::string>& weight_dtypes) {
  const std::string& name = ref.entry->name;
  pipeline::Options pipeline_options;
  pipeline_options.compile.roll = !options.no_roll;
  pipeline_options.compile.rule_files = rule_files_or_default(options.rules);
  pipeline_options.compile.print_after = stage_printer(options.print);
  pipeline_options.search_genomes = options.search;
  pipeline_options.search_seed = options.seed + 1;
  pipeline_options.search_progress = [](std::string_view line) { progress_detail(line); };
  pipeline_options.sim_progress = [](std::string_view line) { progress_detail(line); };
  if (!timing_only) pipeline_options.inputs = source_values(options, ref, built, phase, tokens);
  pipeline_options.ignore_capacity = options.ignore_capacity;
  pipeline_options.sim_threads = options.sim_threads;
  if (!options.no_tile_cache) pipeline_options.tile_cache_dir = options.tile_cache;
  const target::NpuConfig config = target::load_config(options.npu);
  sim::Trace trace;
  if (!options.trace_file.empty()) pipeline_options.trace = &trace;
  // Under mpirun: rank 0 runs the pipeline and spreads the search's
  // measurements over every rank; the other ranks only measure, then leave.
  std::unique_ptr<MpiSearch> mpi;
  if (launched_by_mpirun()) {
    mpi = std::make_unique<MpiSearch>();
    if (mpi->rank() != 0) {
      mpi->serve(config, pipeline_options.lower);
      mpi.reset();
      std::fflush(nullptr);
      std::exit(0);
    }
    if (options.search > 0) {
      pipeline_options.search_batch = mpi->batch(config, pipeline_options.lower);
      pipeline_options.search_ranks = mpi->size();
    }
  }

  const pipeline::Report report = pipeline::run(built.graph, config, pipeline_options);
  print_report(report, config, phase, timing_only);
  if (options.top_kernels > 0) print_top_kernels(report, options.top_kernels);
  if (!options.trace_file.empty()) {
    std::ostringstream text;
    trace.write_json(text);
    write_file(options.trace_file, text.str());
    std::printf("trace      written to %s (%zu events)\n", options.trace_file.c_str(), trace.events.size());
  }
  if (!options.json_file.empty()) {
    nlohmann::json j = report.to_json();
    j["model"] = ref.variant.empty() ? name : name + ":" + ref.variant;
    j["phase"] = phase.has_cache() ? "decode" : "prefill";
    j["layers"] = count_layers(built.graph);
    j["seq"] = phase.seq;
    j["context"] = phase.context;
    if (has_logits(built.graph)) j["logits"] = phase.last_token_logits ? "last" : "all";
    j["config"] = config.name;
    j["size"] = options.weights_dir.empty() ? options.model_options.size : "weights";
    j["mode"] = timing_only ? "timing" : "functional";
    j["dtype"] = fmt::format("{}", fmt::join(weight_dtypes, "+"));  // the weights' dtype(s): the model's
    write_file(options.json_file, j.dump(2) + "\n");
    std::printf("json       written to %s\n", options.json_file.c_str());
  }
  std::fflush(stdout);
  keep_until_exit(report.lowered);
  // A check never passes on values it cannot measure: NaN or infinity in
  // an output or in the interpreter's reference fails it, even where the two
  // agree (an all-NaN output matching an all-NaN reference says nothing).
  if (report.check && !report.check->ok && report.check->non_finite > 0)
    fail("the check cannot pass: {} values of the simulated outputs or the interpreter's are NaN or infinite "
         "(first in {}); the largest difference is {:.3g} relative to scale in {}",
         report.check->non_finite, report.check->non_finite_output, report.check->max_rel_err,
         report.check->worst_output);
  if (report.check && !report.check->ok)
    fail("the simulated program differs from the interpreter: {} by {:.3g} relative to scale (tolerance {:.0e})",
         report.check->worst_output, report.check->max_rel_err, report.check->tolerance);
  return report.outputs;
}

// --dump-logits and --check-logits on the run's outputs.
void write_or_check_logits(const RunOptions& options, const std::map<std::string, interp::HostTensor>& outputs,
                           const std::string& name) {
  if (options.dump_logits.empty() && options.check_logits.empty()) return;
  const auto logits = outputs.find("logits");
  if (logits == outputs.end()) fail("{} has no logits output", name);
  if (!options.dump_logits.empty()) {
    write_npy(options.dump_logits, logits->second.to_npy());
    std::printf("logits     written to %s\n", options.dump_logits.c_str());
  }
  if (!options.check_logits.empty()) {
    const interp::HostTensor expected =
        interp::HostTensor::from_npy(read_npy(options.check_logits), options.check_logits);
    if (expected.shape() != logits->second.shape())
      fail("--check-logits: {} holds {} but the logits are {}", options.check_logits, shape_str(expected.shape()),
           shape_str(logits->second.shape()));
    const interp::Difference diff = interp::compare(logits->second, expected);
    const double allowed = interp::check_tolerance(kLogitTolerance, logits->second.dtype());
    const bool ok = diff.max_rel_to_scale <= allowed && diff.non_finite == 0;
    if (diff.non_finite > 0)
      std::printf("check      %lld logits or reference values are NaN or infinite: NOT FINITE\n",
                  static_cast<long long>(diff.non_finite));
    std::printf("check      logits vs %s: max abs err %.3g, relative to scale %.3g (tolerance %.0e): %s\n",
                options.check_logits.c_str(), diff.max_abs, diff.max_rel_to_scale, allowed,
                ok ? "ok" : "FAILED");
    std::fflush(stdout);
    if (!ok)
      fail("logits differ from {} by {:.3g} relative to scale{}", options.check_logits, diff.max_rel_to_scale,
           diff.non_finite > 0 ? fmt::format(", {} values not finite", diff.non_finite) : "");
  }
}

void run(const RunOptions& options) {
  const models::ModelRef ref = models::find_model(options.model);
  const std::string& name = ref.entry->name;
  if (!options.weights_dir.empty()) {
    if (!ref.entry->reads_hf_weights) {
      std::string readers;
      for (const models::ModelEntry& entry : models::registry())
        if (entry.reads_hf_weights) readers += (readers.empty() ? "" : ", ") + entry.name;
      fail("--weights: reading Hugging Face folders is supported for {}, not {}", readers, name);
    }
    if (options.size_given || options.model_options.layers != 0 || !ref.variant.empty())
      fail("--weights: the shapes come from {}/config.json; drop --size, --layers and the variant",
           options.weights_dir);
  }

  const std::vector<int64_t> tokens = options.tokens.empty() ? std::vector<int64_t>{} : parse_tokens(options.tokens);
  const models::Phase phase = phase_of(options, tokens);

  progress_step(fmt::format("build {}", options.model));
  const std::jthread rules =
      options.interp ? std::jthread() : prepare_rules_beside(rule_files_or_default(options.rules));
  const auto build_start = Clock::now();
  const Built built = build(options, ref, phase);
  const double build_ms = ms_since(build_start);
  if (!options.dot_file.empty()) write_file(options.dot_file, graph_to_dot(built.graph));
  if (!options.hlir_file.empty()) write_file(options.hlir_file, print_graph(built.graph));

  const int64_t parameters = parameter_count(built.graph);
  const std::string source = options.weights_dir.empty() ? options.model_options.size : "weights from " + options.weights_dir;
  std::printf("model      %s%s (%s)\n", name.c_str(), ref.variant.empty() ? "" : (":" + ref.variant).c_str(),
              source.c_str());
  std::printf("shape      %s\n", built.shape.c_str());
  if (phase.has_cache())
    std::printf("phase      decode, %lld token after %lld cached\n", static_cast<long long>(phase.seq),
                static_cast<long long>(phase.context));
  else
    std::printf("seq        %lld tokens, prefill%s\n", static_cast<long long>(phase.seq),
                !has_logits(built.graph)     ? ""
                : phase.last_token_logits ? ", logits of the last token (as served)"
                                          : ", logits of every token");
  std::printf("hlir       %zu nodes, built in %.1f ms\n", built.graph.num_live(), build_ms);
  int64_t weight_bytes = 0;
  std::set<std::string> weight_dtypes;
  for (const NodeId id : built.graph.live_ids()) {
    const Node& node = built.graph.node(id);
    if (node.op != Op::Weight) continue;
    weight_bytes += num_elements(node.shape) * dtype_bytes(node.dtype);
    weight_dtypes.insert(std::string(dtype_name(node.dtype)));
  }
  std::printf("weights    %lld parameters, %.1f MB in %s\n", static_cast<long long>(parameters),
              static_cast<double>(weight_bytes) / 1e6, fmt::format("{}", fmt::join(weight_dtypes, "+")).c_str());
  std::fflush(stdout);  // the report comes before any error below, also through a pipe

  // Real shapes run timing-only unless a checkpoint gives the values.
  const bool timing_only =
      !options.interp && (options.timing_only || (options.model_options.size == "real" && options.weights_dir.empty()));
  if (!timing_only && parameters > kInterpParameterLimit)
    fail("the reference interpreter holds every value as a double and cannot run {} parameters; "
         "use --timing-only, --size tiny or a small checkpoint",
         parameters);
  // The interpreter runs this graph (and, for a decode with tokens, a
  // prefill of the others to fill the cache, about as big).
  if (!timing_only) check_interp_work(built.graph, options.interp_budget, name, "use --timing-only, or fewer tokens");
  if (!tokens.empty()) check_tokens(built.graph, tokens, name);
  if (timing_only && (!options.dump_logits.empty() || !options.check_logits.empty()))
    fail("--dump-logits and --check-logits need values: drop --timing-only");

  std::map<std::string, interp::HostTensor> outputs;
  if (options.interp) {
    progress_step(fmt::format("run the reference interpreter on {} ({} hlir nodes)", options.model,
                              built.graph.num_live()));
    const interp::Env inputs = source_values(options, ref, built, phase, tokens);
    const auto run_start = Clock::now();
    outputs = interp::run(built.graph, inputs);
    std::printf("interp     %.1f ms (reference interpreter, %s)\n", ms_since(run_start),
                options.weights_dir.empty() ? fmt::format("seed {}", options.seed).c_str() : "checkpoint weights");
    print_outputs(outputs);
  } else {
    progress_step(fmt::format("{}{}, lower and simulate {} ({} hlir nodes{})",
                              options.search > 0 ? "compile, search extractions" : "compile",
                              options.search > 0 ? fmt::format(" over {} genomes", options.search) : "",
                              options.model, built.graph.num_live(),
                              timing_only ? ", timing only" : ", then check against the interpreter"));
    outputs = run_pipeline(options, ref, built, phase, tokens, timing_only, weight_dtypes);
  }

  if (!options.dump_logits.empty() || !options.check_logits.empty()) progress_step("write or check the logits");
  write_or_check_logits(options, outputs, name);
}

}  // namespace

int64_t parameter_count(const Graph& graph) {
  int64_t count = 0;
  for (const NodeId id : graph.live_ids())
    if (graph.node(id).op == Op::Weight) count += num_elements(graph.node(id).shape);
  return count;
}

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run_cmd = app.add_subcommand("run", "Build an example model and run it");
  run_cmd->add_option("model", options->model, "Model name, or NAME:VARIANT (see `spool models`), or MODEL.onnx")->required();
  add_model_options(run_cmd, options->model_options);
  add_print_options(run_cmd, options->print);
  run_cmd->add_option("--weights", options->weights_dir,
                      "Hugging Face model folder (config.json, model.safetensors); shapes come from it");
  run_cmd->add_option("--tokens", options->tokens,
                      "Token ids, e.g. 1,2,3 (prefill: all of them; decode: the last, after a prefill of the others)");
  run_cmd->add_option("--dump-logits", options->dump_logits, "Write the logits as a .npy file");
  run_cmd->add_option("--check-logits", options->check_logits,
                      "Compare the logits with a .npy reference (fails beyond 1e-4 relative to its scale)");
  run_cmd->add_option("--npu", options->npu, "NPU config: a name in configs/ (tpuv3, tpuv4, toy) or a JSON file")
      ->capture_default_str();
  run_cmd->add_flag("--no-roll", options->no_roll, "Do not roll repeated layers (saturate the whole graph)");
  run_cmd->add_option("--search", options->search,
                      "Genetic extraction search over this many genomes (0: greedy extraction)")
      ->check(count(1'000'000));
  CLI::Option* timing_only =
      run_cmd->add_flag("--timing-only", options->timing_only,
                        "Simulate for time only: no values, no check (the default for --size real without --weights)");
  run_cmd->add_flag("--ignore-capacity", options->ignore_capacity,
                    "Simulate a program whose DRAM footprint exceeds the NPU's capacity (the report marks it)");
  add_sim_threads(run_cmd, options->sim_threads);
  CLI::Option* no_tile_cache = run_cmd->add_flag("--no-tile-cache", options->no_tile_cache,
                                                 "Time every GEMM's tile candidates; read and write no tile cache");
  run_cmd
      ->add_option("--tile-cache", options->tile_cache,
                   "Directory of the GEMM tile cache: tiles timed by earlier runs of this build on this NPU config "
                   "(default: $SPOOL_CACHE_DIR, $XDG_CACHE_HOME/spool or ~/.cache/spool)")
      ->excludes(no_tile_cache);
  run_cmd->add_option("--rules", options->rules, "Rule files (default: rules/default.rules), checked first")
      ->check(CLI::ExistingFile);
  run_cmd->add_flag("--no-check-rules", options->no_check_rules, "Do not check the --rules files on random tensors (they are still parsed, compiled and their checks run)");
  run_cmd->add_option("--json", options->json_file, "Write the report as JSON");
  run_cmd->add_option("--trace", options->trace_file, "Write the simulator's Chrome/Perfetto trace");
  run_cmd->add_option("--kernels", options->top_kernels,
                      "List the N kernel groups (by kind and tile) that take the most simulated cycles")
      ->check(count(100'000));
  run_cmd->add_flag("--interp", options->interp,
                    "Only run the HLIR on the reference interpreter (no compile, no simulation)");
  add_interp_budget(run_cmd, options->interp_budget)->excludes(timing_only);
  run_cmd->add_option("--seed", options->seed, "Seed of the random weights, tokens and cache")
      ->check(count(INT64_MAX))
      ->capture_default_str();
  run_cmd->add_option("--dot", options->dot_file, "Write a Graphviz picture of the HLIR");
  run_cmd->add_option("--hlir", options->hlir_file, "Write the HLIR in text form");
  const auto onnx_options = add_onnx_run_options(run_cmd);
  run_cmd->callback([options, run_cmd, onnx_options] {
    if (check_onnx_run_options(*run_cmd, options->model))
      return run_onnx(*onnx_options, {options->model, options->npu, options->rules, options->seed, options->json_file,
                                      options->no_roll, options->print, options->interp_budget,
                                      options->no_tile_cache ? std::string() : options->tile_cache});
    options->size_given = run_cmd->count("--size") > 0;
    // --interp runs the HLIR on the interpreter alone: options of the
    // compile, the lowering and the simulation would be ignored.
    if (options->interp)
      for (const char* flag : {"--json", "--trace", "--kernels", "--timing-only", "--search", "--npu", "--rules",
                               "--no-check-rules", "--no-roll", "--ignore-capacity", "--sim-threads", "--tile-cache",
                               "--no-tile-cache", "--print-after", "--print-dir"})
        if (run_cmd->count(flag) > 0)
          fail("{} does not apply to --interp, which runs the reference interpreter alone (no compile or simulation)",
               flag);
    if (run_cmd->count("--tokens") > 0 && options->tokens.empty())
      fail("--tokens: the list is empty (expected token ids like 1,2,3)");
    if (options->no_check_rules && options->rules.empty()) fail("--no-check-rules needs --rules FILE");
    if (!options->rules.empty()) check_rule_files(options->rules, !options->no_check_rules);
    with_unchecked_rules_note(options->rules, options->no_check_rules, [&] { run(*options); });
  });
}

void add_models_command(CLI::App& app) {
  app.add_subcommand("models", "List the example models and their shapes")->callback([] {
    for (const models::ModelEntry& entry : models::registry()) {
      std::printf("%-12s %s\n", entry.name.c_str(), entry.description.c_str());
      std::printf("%-12s   tiny: %s\n", "", entry.tiny_shape.c_str());
      std::printf("%-12s   real: %s\n", "", entry.real_shape.c_str());
      if (!entry.variants.empty()) {
        std::string variants;
        for (const auto& v : entry.variants) variants += (variants.empty() ? "" : ", ") + entry.name + ":" + v.first;
        std::printf("%-12s   variants (--size real): %s\n", "", variants.c_str());
      }
      if (entry.reads_hf_weights) std::printf("%-12s   --weights: Hugging Face folders\n", "");
    }
  });
}

}  // namespace spool::cli
