// Compile time, rolled against unrolled, on llama-3-8B-shaped HLIR (hidden
// 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256; prefill of 512
// tokens; shapes only, no data) at 1-32 layers, with the shipped rule set
// (rules/default.rules) unless rule files are given. Prints per-stage times,
// the e-graphs (count, nodes, classes), the unrolled/rolled ratio of
// roll+saturate+extract+unroll, whether both give the same program, and the
// extraction cost of each program; then two bounds on the ratio at the
// largest depth (the rolled graph compiled without the roll; the largest
// region's saturation alone) and greedy extraction alone (tree cost against
// DAG cost) on the largest unrolled e-graph. Each figure is the best
// of at least 5 runs that take 300 ms or more in all, all measured in this
// one process; at each depth the rolled and unrolled runs alternate.
//
// --cold measures what a user's one-shot run pays instead: it runs the
// spool tool as a fresh process per compile (`spool run llama --size real
// --layers N --timing-only`, with and without --no-roll, alternating) and
// reads each run's compile time (roll to unroll) and the stages after it
// from its JSON report; it prints every run, the medians and the ratio of
// the medians. The lowering's GEMM tiles come from a tile cache filled
// first, as in a user's later runs; a third mode times them, as a first
// run does, for the lowering and wall time of both.

#include <spool/compile/compile.hpp>
#include <spool/hlir/cost.hpp>
#include <spool/roll/roll.hpp>

#include <spool/models/llama.hpp>

#include "../fresh_run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace spool;

namespace {

// The fastest of at least `runs` compiles, repeated until they have taken
// `min_ms` in all: a cheap compile is timed over as long as an expensive
// one, so that both minimums are as close to the machine's quiet speed.
compile::Compiled best_of(const Graph& g, const compile::Options& options, int runs, double min_ms = 0) {
  compile::Compiled best = compile::run(g, options);
  double spent = best.report.times.total_ms;
  for (int i = 1; i < runs || spent < min_ms; ++i) {
    compile::Compiled r = compile::run(g, options);
    spent += r.report.times.total_ms;
    if (r.report.times.total_ms < best.report.times.total_ms) best = std::move(r);
  }
  return best;
}

// The fastest compile under each of two options, timed alternately: the mode
// that has spent less time so far runs next, so the cheap mode runs many
// times between two runs of the expensive one, and both are timed until each
// has at least `runs` compiles and `min_ms` in all. A drift in the machine's
// speed while they run (other load, clock changes) then moves both minimums
// alike instead of the ratio between them.
std::pair<compile::Compiled, compile::Compiled> best_of_pair(const Graph& g, const compile::Options& a, const compile::Options& b,
                                                     int runs, double min_ms) {
  struct Mode {
    explicit Mode(const compile::Options& o) : options(o) {}
    const compile::Options& options;
    std::optional<compile::Compiled> best;
    double spent = 0;
    int count = 0;
    bool done(int runs, double min_ms) const { return count >= runs && spent >= min_ms; }
    void run(const Graph& g) {
      compile::Compiled r = compile::run(g, options);
      spent += r.report.times.total_ms;
      ++count;
      if (!best || r.report.times.total_ms < best->report.times.total_ms) best = std::move(r);
    }
  };
  Mode x(a), y(b);
  while (!x.done(runs, min_ms) || !y.done(runs, min_ms)) (x.spent <= y.spent ? x : y).run(g);
  return {std::move(*x.best), std::move(*y.best)};
}

// The extraction cost of a program's own nodes (each distinct node once).
double program_cost(const Graph& program) {
  return hlir::program_cost(program);
}

// Best-of-`runs` milliseconds of `f()`.
template <typename F>
double best_ms(int runs, F f) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    const auto t = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

// Tree-cost and DAG-cost greedy extraction alone on the unrolled e-graph of
// `layers` layers: time, and the DAG cost of the term each extracts.
void extraction_alone(int layers, const compile::Options& base) {
  models::LlamaConfig config = models::LlamaConfig::llama3_8b();
  config.layers = layers;
  const Graph g = models::build_llama(config, models::Phase::prefill(512));
  compile::Options options = base;
  options.roll = false;
  const compile::Saturated s = compile::saturate(g, options);
  if (s.regions.size() != 1) return;
  const compile::RegionEGraph& region = s.regions[0];
  const std::unique_ptr<egraph::CostFunction> cost = compile::extraction_cost(region);
  double tree_cost = 0, dag_cost = 0;
  const double tree_ms =
      best_ms(5, [&] { tree_cost = egraph::Extractor(*region.egraph, *cost).extract(region.roots).dag_cost; });
  const double dag_ms =
      best_ms(5, [&] { dag_cost = egraph::DagExtractor(*region.egraph, *cost).extract(region.roots).dag_cost; });
  std::printf(
      "extraction alone, %d layers unrolled (%zu e-nodes, %zu classes): tree %.2f ms (term cost %.4g), "
      "DAG %.2f ms (term cost %.4g)\n",
      layers, region.egraph->num_nodes(), region.egraph->num_classes(), tree_ms, tree_cost, dag_ms, dag_cost);
}

// Where the rolled compile's time goes at `layers` layers, against the
// unrolled compile's `unrolled_ms`: the same compile of the already rolled
// graph with rolling off (the roll costs nothing: a bound on what a faster
// roll could give), and the largest region's saturation alone (a bound on
// the ratio if the roll, the split, the other regions, extraction, stitch
// and unroll all cost nothing).
void rolled_bounds(int layers, double unrolled_ms, const compile::Options& base) {
  models::LlamaConfig config = models::LlamaConfig::llama3_8b();
  config.layers = layers;
  const Graph g = models::build_llama(config, models::Phase::prefill(512));
  const Graph rolled = roll::auto_roll(g).graph;
  compile::Options no_roll = base;
  no_roll.roll = false;
  const compile::Compiled pre = best_of(rolled, no_roll, 5, 300);
  double region_ms = 1e300;
  for (double spent = 0; spent < 300;) {
    const compile::Saturated s = compile::saturate(g, base);
    double largest = 0;
    for (const compile::RegionEGraph& r : s.regions) largest = std::max(largest, r.saturation.total_ms);
    region_ms = std::min(region_ms, largest);
    spent += s.report.times.roll_ms + s.report.times.saturate_ms;
  }
  std::printf("rolled at %d layers without the roll (the rolled graph compiled with rolling off): %.2f ms, %.1fx\n",
              layers, pre.report.times.total_ms, unrolled_ms / pre.report.times.total_ms);
  std::printf("largest region's saturation alone: %.2f ms, %.1fx (unrolled / it: the ratio if nothing else cost)\n",
              region_ms, unrolled_ms / region_ms);
}

using bench::median;

// One fresh `spool run` process of llama; `tile_cache` empty: --no-tile-cache.
bench::FreshRun run_cli(const std::string& spool, int layers, bool roll, const std::string& tile_cache,
                        const std::string& json_path) {
  const std::string command = fmt::format(
      "'{}' run llama --size real --layers {} --timing-only --json '{}'{} {} > /dev/null 2>&1", spool, layers,
      json_path, roll ? "" : " --no-roll",
      tile_cache.empty() ? std::string("--no-tile-cache") : fmt::format("--tile-cache '{}'", tile_cache));
  return bench::run_fresh(command, json_path);
}

// The cold mode: `runs` fresh processes per mode, the modes in turn
// (rolled and unrolled with the GEMM tiles in a tile cache filled by one
// run of each first, and rolled timing every tile as a first run does).
int cold(const std::string& spool, int layers, int runs) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  const std::string json_path = (tmp / fmt::format("compile_bench_cold_{}.json", ::getpid())).string();
  const std::string cache = (tmp / fmt::format("compile_bench_cold_tiles_{}", ::getpid())).string();
  struct Mode {
    const char* name;
    bool roll;
    std::string tile_cache;
    std::vector<double> compile, roll_ms, saturate, lower, simulate, pipeline, wall;
  } modes[3] = {{"rolled", true, cache, {}, {}, {}, {}, {}, {}, {}},
                {"unrolled", false, cache, {}, {}, {}, {}, {}, {}, {}},
                {"timed", true, "", {}, {}, {}, {}, {}, {}, {}}};
  std::printf(
      "compile_bench --cold: %s run llama --size real --layers %d --timing-only [--no-roll], %d fresh "
      "processes each, in turn; rolled and unrolled take the GEMM tiles from a tile cache, timed is rolled "
      "with --no-tile-cache (a first run)\n",
      spool.c_str(), layers, runs);
  run_cli(spool, layers, true, cache, json_path);
  run_cli(spool, layers, false, cache, json_path);
  std::printf("%4s %8s | %8s %7s %8s | %8s %8s %9s | %8s\n", "run", "mode", "compile", "roll", "saturate", "lower",
              "simulate", "pipeline", "wall ms");
  for (int i = 0; i < runs; ++i)
    for (int m = 0; m < 3; ++m) {
      // Each run starts with another mode, so none always runs first.
      Mode& r = modes[(i + m) % 3];
      const bench::FreshRun run = run_cli(spool, layers, r.roll, r.tile_cache, json_path);
      const double wall = run.wall_ms;
      const nlohmann::json& c = run.report.at("compile");
      r.compile.push_back(c.at("total_ms").get<double>());
      r.roll_ms.push_back(c.at("roll_ms").get<double>());
      r.saturate.push_back(c.at("saturate_ms").get<double>());
      r.lower.push_back(c.at("lower_ms").get<double>());
      r.simulate.push_back(c.at("simulate_ms").get<double>());
      r.pipeline.push_back(c.at("pipeline_ms").get<double>());
      r.wall.push_back(wall);
      std::printf("%4d %8s | %8.1f %7.1f %8.1f | %8.1f %8.1f %9.1f | %8.1f\n", i + 1, r.name, r.compile.back(),
                  r.roll_ms.back(), r.saturate.back(), r.lower.back(), r.simulate.back(), r.pipeline.back(), wall);
    }
  std::filesystem::remove(json_path);
  std::filesystem::remove_all(cache);
  for (const Mode& r : modes)
    std::printf("median %8s | %8.1f %7.1f %8.1f | %8.1f %8.1f %9.1f | %8.1f\n", r.name, median(r.compile),
                median(r.roll_ms), median(r.saturate), median(r.lower), median(r.simulate), median(r.pipeline),
                median(r.wall));
  const double rolled = median(modes[0].compile), unrolled = median(modes[1].compile);
  std::printf(
      "cold compile (roll to unroll), median of %d fresh processes each: rolled %.1f ms, unrolled %.1f ms, "
      "%.1fx\n",
      runs, rolled, unrolled, rolled > 0 ? unrolled / rolled : 0.0);
  std::printf("cold lowering: %.1f ms with the tiles cached, %.1f ms timing them; whole run %.1f ms and %.1f ms\n",
              median(modes[0].lower), median(modes[2].lower), median(modes[0].wall), median(modes[2].wall));
  return 0;
}

int run(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"Compile time, rolled against unrolled, on llama-3-8B-shaped HLIR"};
  std::vector<std::string> rules;
  int max_layers = 32;
  std::string profile;
  int runs = 5;
  int runner_threads = 0;
  int threads = 0;
  bool backoff = false, verbose = false;
  app.add_option("rules", rules, "rule files (default: rules/default.rules)")->check(CLI::ExistingFile);
  app.add_option("--max-layers", max_layers, "stop after this many layers")->check(CLI::Range(1, 1024));
  app.add_option("--profile", profile,
                 "only compile max-layers rolled or unrolled, --runs times, and print the best (for profiling)")
      ->check(CLI::IsMember({"rolled", "unrolled"}));
  app.add_option("--runs", runs, "compiles for --profile, processes per mode for --cold")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "regions saturated at once (0: TBB's default)")->check(CLI::Range(0, 1024));
  app.add_option("--runner-threads", runner_threads, "threads of each region's runner (0: TBB's default)")
      ->check(CLI::Range(0, 1024));
  app.add_flag("--backoff", backoff, "the backoff scheduler instead of the simple one");
  app.add_flag("--verbose", verbose, "log every stage");
  bool cold_mode = false;
  int cold_layers = 32;
  std::string spool = SPOOL_CLI_PATH;
  app.add_flag("--cold", cold_mode, "run the spool tool as a fresh process per compile (see the top of this file)");
  app.add_option("--layers", cold_layers, "layers for --cold")->check(CLI::Range(1, 1024));
  app.add_option("--spool", spool, "the spool tool --cold runs");
  CLI11_PARSE(app, argc, argv);
  if (verbose) spdlog::set_level(spdlog::level::debug);
  if (cold_mode) return cold(spool, cold_layers, runs);
  // Every rewrite applied (the shipped schedule bounds the iterations): the
  // backoff scheduler bans a rule by its match count, which grows with the
  // unrolled graph, so an unrolled compile would skip rewrites a rolled one
  // applies and the programs could not be compared.
  const egraph::SchedulerKind scheduler = backoff ? egraph::SchedulerKind::Backoff : egraph::SchedulerKind::Simple;
  if (rules.empty()) rules.push_back(std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules");
  // The options of every compile here (rolled unless told otherwise).
  auto base_options = [&] {
    compile::Options options;
    options.rule_files = rules;
    options.runner.node_limit = 2'000'000;
    options.runner.scheduler = scheduler;
    options.runner.threads = runner_threads;
    options.threads = threads;
    return options;
  };
  if (!profile.empty()) {
    models::LlamaConfig config = models::LlamaConfig::llama3_8b();
    config.layers = max_layers;
    const Graph g = models::build_llama(config, models::Phase::prefill(512));
    compile::Options options = base_options();
    options.roll = profile == "rolled";
    const compile::Compiled r = best_of(g, options, runs);
    const compile::Times& t = r.report.times;
    std::printf("%s, %d layers, best of %d: roll %.2f, saturate %.2f, extract %.2f, unroll %.2f, total %.2f ms\n",
                profile.c_str(), max_layers, runs, t.roll_ms, t.saturate_ms, t.extract_ms, t.unroll_ms, t.total_ms);
    return 0;
  }
  std::printf("compile_bench: llama-3-8B shapes, prefill 512, %s scheduler, rules:",
              scheduler == egraph::SchedulerKind::Simple ? "simple" : "backoff");
  for (const std::string& r : rules) std::printf(" %s", r.c_str());
  std::printf("\n");
  std::printf("%6s %8s | %7s %8s %7s %7s %8s | %3s %7s %7s | %5s %7s | %7s | %6s %9s\n", "layers", "mode", "roll",
              "saturate", "extract", "unroll", "total ms", "eg", "enodes", "classes", "hlir", "program", "ratio",
              "same", "cost");
  constexpr double kMinMs = 300;  // per mode and depth
  {
    // Untimed warm-up: the first second of compiles in a process runs
    // slower (up to 1.5x here) than the rest, which would count against
    // the depths measured first.
    models::LlamaConfig config = models::LlamaConfig::llama3_8b();
    config.layers = max_layers;
    const Graph g = models::build_llama(config, models::Phase::prefill(512));
    compile::Options unrolled_options = base_options();
    unrolled_options.roll = false;
    best_of_pair(g, base_options(), unrolled_options, 1, 500);
  }
  double rolled_at_2 = 0, rolled_last = 0, unrolled_last = 0;
  for (int layers : {1, 2, 4, 8, 16, 32}) {
    if (layers > max_layers) break;
    models::LlamaConfig config = models::LlamaConfig::llama3_8b();
    config.layers = layers;
    const Graph g = models::build_llama(config, models::Phase::prefill(512));
    const compile::Options rolled_options = base_options();
    compile::Options unrolled_options = base_options();
    unrolled_options.roll = false;
    const auto [rolled, unrolled] = best_of_pair(g, rolled_options, unrolled_options, 5, kMinMs);
    if (layers == 2) rolled_at_2 = rolled.report.times.total_ms;
    rolled_last = rolled.report.times.total_ms;
    unrolled_last = unrolled.report.times.total_ms;
    const bool same = compacted(cse(rolled.program)) == compacted(cse(unrolled.program));
    for (const compile::Compiled* r : {&rolled, &unrolled}) {
      const compile::Report& rep = r->report;
      std::printf("%6d %8s | %7.1f %8.1f %7.1f %7.1f %8.1f | %3zu %7zu %7zu | %5zu %7zu |", layers,
                  r == &rolled ? "rolled" : "unrolled", rep.times.roll_ms, rep.times.saturate_ms, rep.times.extract_ms,
                  rep.times.unroll_ms, rep.times.total_ms, rep.egraph.egraphs, rep.egraph.nodes, rep.egraph.classes,
                  g.num_live(), r->program.num_live());
      if (r == &unrolled)
        std::printf(" %6.1fx | %6s", unrolled.report.times.total_ms / rolled.report.times.total_ms,
                    same ? "yes" : "no");
      else
        std::printf(" %7s | %6s", "", "");
      std::printf(" %9.4g\n", program_cost(r->program));
    }
  }
  if (rolled_at_2 > 0 && max_layers >= 32)
    std::printf("rolled at 32 layers / rolled at 2 layers: %.2fx\n", rolled_last / rolled_at_2);
  rolled_bounds(std::min(max_layers, 32), unrolled_last, base_options());
  extraction_alone(std::min(max_layers, 32), base_options());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compile_bench: error: %s\n", e.what());
    return 1;
  }
}
