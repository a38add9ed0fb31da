// The e-graph engine benchmark.
//
// One line per workload: e-nodes, e-classes, iterations, total time,
// search/apply/rebuild time, e-nodes per second, bytes per e-node and the
// process's peak resident memory. Each workload runs --repeat times, each
// time on a fresh e-graph, and the line shows the fastest run (sizes are
// identical across runs: the engine is deterministic). Lines are one-thread
// figures; --threads N (N > 1) adds a line per workload with N search
// threads, labelled so.
//
// Every line runs alone: without --only, the bench runs itself once per
// workload (`--only NAME`) in a fresh process, so no line depends on what
// ran before it and the peak memory is that workload's.
//
//   assoc-add-7       comm/assoc of + on a 7-term sum, simple scheduler, 7 iterations
//   assoc-add-10      the same on a 10-term sum, to saturation (1,023 classes, 57,012 nodes)
//   math-suite        the 15 goals of the simplification suite, 100,000-node budget each,
//                     egg's constant folding (with pruning); one line per goal
//   egg-math          every goal of egg 0.9.5's tests/math.rs with its limits; one line per goal
//   egg-lambda        every goal of egg 0.9.5's tests/lambda.rs with its limits; one line per goal
//   hlir-llama-block  one tiny-llama layer (prefill 8) saturated with the shipped
//                     rules (rules/algebra.rules, rules/loops.rules), each file's schedule
//
// The same workloads in egg 0.9.5 (the Rust reference,
// https://github.com/egraphs-good/egg) are what the engine is to be compared
// against: each run in a fresh process, the two alternated, best of 16 on
// both sides. egg-math and egg-lambda end every goal with egg's e-graph
// (tests/egraph/egg_suite_test.cpp checks each size). Under the backoff
// scheduler every match is found in every iteration, as egg does (it bans
// rules by match count, so finding only new matches would change the
// e-graph); under the simple scheduler (the assoc lines, egg's
// math_associate_adds) only new matches are, which builds the same e-graph
// (--full-matching finds all of them in the assoc lines too).
//
// Measured on a quiet 2-core machine (load average 0.1-0.4; best of 16, one
// fresh process per run, egg and spool alternated, ratios from runs in the
// same minute; the small lines three rounds, the egg-lambda and
// assoc-add-10 rows two rounds of best of 6; peaks over 16 runs on both
// sides):
//   line          egg 0.9.5          spool             egg/spool  peak RSS egg / spool
//   assoc-add-7    2.79-2.89 ms       1.31-1.36 ms     2.1-2.2        4.4 /  3.3 MB
//   assoc-add-10    542-590 ms         175-201 ms      2.93-3.09      70.6 / 48.5 MB
//   math-suite     1.38-1.40 ms       0.62-0.63 ms     2.22-2.23      3.4 /  2.5 MB
//   egg-math       8.48-8.55 ms       4.11-4.17 ms     2.05-2.08      4.4 /  3.4 MB
//   egg-lambda      786-835 ms         228-241 ms      3.26-3.67      34.0 / 30.7 MB
// (Three of 47 assoc-add-7 processes ran at 1.65-1.76 ms, two of them
// right after egg's runs; the other 44 at 1.31-1.36.)
// The spool peaks are this binary's: static and single-threaded (see
// bench/egraph/CMakeLists.txt), with the lambda analysis keeping each
// distinct free-variable set once. Its best-of-16 times equal those of
// the dynamic, TBB-linked egraph_bench_hlir on the same lines (egg-math
// 4.17 and 4.17 ms, assoc-add-7 1.37 and 1.34, math-suite 0.62 and 0.63,
// eight alternated rounds). The process alone (--help) peaks at 2.4 MB
// here and at 4.5 MB dynamically linked (libstdc++, libc, libm, oneTBB
// and fmt mapped); egg's test binary starts at 2.8 MB. The big lines'
// peak over 16 runs is 1-3 MB above a single run's (egg-lambda: 28.5 MB
// for one): the memory a run frees stays in the process, see main().

// Two binaries are built from this file: egraph_bench_hlir (SPOOL_BENCH_HLIR
// = 1) holds every workload; egraph_bench holds the engine's own and runs
// egraph_bench_hlir (SPOOL_BENCH_HLIR_EXE) for hlir-llama-block, so the
// small lines' process does not load the HLIR language, the rule files'
// compiler and the model builders it never uses.
#ifndef SPOOL_BENCH_HLIR
#define SPOOL_BENCH_HLIR 0
#endif

#include <math_language/lambda.hpp>
#include <math_language/math.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/runner.hpp>

#if SPOOL_BENCH_HLIR
#include <spool/hlir/appliers.hpp>
#include <spool/hlir/language.hpp>
#include <spool/models/llama.hpp>
#include <spool/rules/rule_file.hpp>
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

using namespace spool::egraph;
#if SPOOL_BENCH_HLIR
namespace hlir = spool::hlir;
#endif

namespace {

struct Measure {
  size_t nodes = 0, classes = 0, iterations = 0, bytes = 0;
  double total_ms = 0, search_ms = 0, apply_ms = 0, rebuild_ms = 0;
  size_t goals = 0, proven = 0;
  size_t matches = 0;  // found by the searches (the backoff scheduler's banned searches stop early)
  std::string stop;
  std::vector<std::string> details;  // per-goal lines (egg-math)
};

size_t matches_of(const RunReport& r) {
  size_t n = 0;
  for (const IterationReport& it : r.per_iteration)
    for (const RuleReport& rule : it.rules) n += rule.matches;
  return n;
}

// A run's iterations, matches and times added to `m`.
void add_times(Measure& m, const RunReport& r) {
  m.iterations += r.iterations;
  m.matches += matches_of(r);
  m.total_ms += r.total_ms;
  m.search_ms += r.search_ms;
  m.apply_ms += r.apply_ms;
  m.rebuild_ms += r.rebuild_ms;
}

void add_run(Measure& m, const RunReport& r, const EGraph& g) {
  add_times(m, r);
  m.nodes += g.num_nodes();
  m.classes += g.num_classes();
  m.bytes += g.memory_bytes();
  m.stop = std::string(stop_reason_name(r.stop));
}

bool g_incremental = true;

Measure assoc(int terms, size_t iter_limit, int threads) {
  auto L = math::make_language();
  EGraph g(L->language);  // no analysis: constant folding would merge equal sums
  add_expr(g, math::sum_chain(terms));
  RunnerConfig c;
  c.scheduler = SchedulerKind::Simple;
  c.iter_limit = iter_limit;
  c.node_limit = 10'000'000;
  c.time_limit_ms = 600'000;
  c.threads = threads;
  c.incremental = g_incremental;
  const auto rules = math::assoc_comm_rules(*L);
  Measure m;
  add_run(m, Runner(c).run(g, rules), g);
  return m;
}

Measure math_suite(int threads) {
  auto L = math::make_language();
  const auto rules = math::simplify_rules(*L);
  Measure m;
  for (const math::Goal& goal : math::goals()) {
    auto g = math::make_egraph(*L, /*prune=*/true);  // egg's constant folding
    const ClassId lhs = add_expr(*g, goal.lhs);
    RunnerConfig c;
    c.iter_limit = 30;
    c.node_limit = 100'000;
    c.time_limit_ms = 60'000;
    c.threads = threads;
    c.incremental = false;
    Vars vars;
    const Pattern target = parse_pattern(L->language, goal.rhs, vars).take();
    c.stop_when = [&](EGraph& e) {
      auto rhs = lookup_ground(e, target);
      return rhs && e.find(*rhs) == e.find(lhs);
    };
    const RunReport r = Runner(c).run(*g, rules);
    add_run(m, r, *g);
    ++m.goals;
    m.proven += r.stop == StopReason::Goal;
    m.details.push_back(fmt::format("  {:<22} classes={:>6} class-nodes={:>6} iters={:>2} {}", goal.name, g->num_classes(),
                                    g->num_class_nodes(), r.iterations, stop_reason_name(r.stop)));
  }
  m.stop = fmt::format("{}/{} goals proven", m.proven, m.goals);
  return m;
}

Measure egg_math(int threads) {
  auto L = math::make_language();
  const auto rules = math::egg_rules(*L);
  const auto assoc_rules = math::assoc_comm_rules(*L);
  Measure m;
  for (const math::EggGoal& goal : math::egg_goals()) {
    const math::EggResult r =
        math::run_egg_goal(*L, goal, goal.assoc_only ? std::span<const Rule>(assoc_rules) : rules, threads);
    m.nodes += r.nodes;
    m.classes += r.classes;
    add_times(m, r.report);
    ++m.goals;
    const bool as_expected = r.proven == goal.provable;
    m.proven += as_expected;
    m.details.push_back(fmt::format("  {:<22} classes={:>6} nodes={:>6} class-nodes={:>6} iters={:>2} {:<10} {:>8.2f}ms {}",
                                    goal.name, r.classes, r.nodes, r.class_nodes, r.report.iterations,
                                    stop_reason_name(r.report.stop), r.report.total_ms,
                                    goal.provable ? (r.proven ? "proven" : "NOT PROVEN")
                                                  : (r.proven ? "PROVEN (egg cannot)" : "not proven, as in egg")));
  }
  m.stop = fmt::format("{}/{} goals as in egg", m.proven, m.goals);
  return m;
}

Measure egg_lambda(int threads) {
  auto L = lambda::make_language();
  const auto rules = lambda::rules(*L);
  Measure m;
  for (const lambda::Goal& goal : lambda::goals()) {
    const lambda::Result r = lambda::run_goal(*L, goal, rules, threads);
    m.nodes += r.nodes;
    m.classes += r.classes;
    add_times(m, r.report);
    ++m.goals;
    m.proven += r.proven == goal.provable;
    m.details.push_back(fmt::format("  {:<26} classes={:>6} nodes={:>6} iters={:>2} {:<10} {:>8.2f}ms {}", goal.name,
                                    r.classes, r.nodes, r.report.iterations, stop_reason_name(r.report.stop),
                                    r.report.total_ms,
                                    goal.provable ? (r.proven ? "proven" : "NOT PROVEN")
                                                  : (r.proven ? "PROVEN (egg cannot)" : "not proven, as in egg")));
  }
  m.stop = fmt::format("{}/{} goals as in egg", m.proven, m.goals);
  return m;
}

#if SPOOL_BENCH_HLIR
Measure llama_block(int threads) {
  spool::models::LlamaConfig config = spool::models::LlamaConfig::tiny();
  config.layers = 1;
  const spool::Graph graph = spool::models::build_llama(config, spool::models::Phase::prefill(8));
  hlir::HlirLanguage lang;
  auto g = hlir::make_egraph(lang);
  hlir::add_graph(*g, lang, graph);
  g->rebuild();
  Measure m;
  for (const char* name : {"algebra.rules", "loops.rules"}) {
    const std::string path = std::string(SPOOL_SOURCE_DIR) + "/rules/" + name;
    spool::Result<spool::rules::RuleFile> file = spool::rules::load_rule_file(path);
    if (!file) throw spool::Error(file.error().render());
    auto sets = spool::rules::compile_rules(file.value(), lang.language(), hlir::registry(), lang.parse_options());
    if (!sets) throw spool::Error(sets.error().render());
    RunnerConfig c;
    c.iter_limit = 30;
    c.node_limit = 100'000;
    c.time_limit_ms = 60'000;
    c.threads = threads;
    c.incremental = g_incremental;
    const RunReport r = Runner(c).run(*g, sets.value(), spool::rules::schedule_of(file.value()));
    add_times(m, r);
    m.stop += (m.stop.empty() ? "" : ", ") + std::string(name) + ": " + std::string(stop_reason_name(r.stop));
  }
  m.nodes = g->num_nodes();
  m.classes = g->num_classes();
  m.bytes = g->memory_bytes();
  m.stop = fmt::format("{} HLIR nodes; {}", graph.num_live(), m.stop);
  return m;
}
#endif

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void print(const std::string& label, const Measure& m, int repeat) {
  const double per_s = m.total_ms > 0 ? m.nodes / (m.total_ms / 1000.0) : 0.0;
  fmt::print(
      "{:<30} nodes={:>7} classes={:>6} iters={:>3} matches={:>8} best-of-{}={:>9.2f}ms search={:>8.2f}ms apply={:>8.2f}ms "
      "rebuild={:>8.2f}ms nodes/s={:>10.0f} bytes/node={:>6.1f} peak={:>6.1f}MB  ({})\n",
      label, m.nodes, m.classes, m.iterations, m.matches, repeat, m.total_ms, m.search_ms, m.apply_ms, m.rebuild_ms, per_s,
      m.nodes ? static_cast<double>(m.bytes) / m.nodes : 0.0, peak_rss_mb(), m.stop);
  for (const std::string& d : m.details) fmt::print("{}\n", d);
  std::fflush(stdout);
}

template <typename F>
Measure best_of(int repeat, F&& run) {
  Measure best;
  best.total_ms = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeat; ++i) {
    Measure m = run();
    if (m.total_ms < best.total_ms) best = std::move(m);
  }
  return best;
}

const std::vector<std::string> kWorkloads = {"assoc-add-7", "assoc-add-10", "math-suite", "egg-math",
                                             "egg-lambda",  "hlir-llama-block"};

Measure run_workload(const std::string& name, int threads) {
  if (name == "assoc-add-7") return assoc(7, 7, threads);
  if (name == "assoc-add-10") return assoc(10, 1000, threads);
  if (name == "math-suite") return math_suite(threads);
  if (name == "egg-math") return egg_math(threads);
  if (name == "egg-lambda") return egg_lambda(threads);
#if SPOOL_BENCH_HLIR
  if (name == "hlir-llama-block") return llama_block(threads);
#endif
  throw spool::Error(fmt::format("unknown workload '{}'", name));
}

// The binary that runs workload `name`: this one, or egraph_bench_hlir for
// the HLIR line when this one was built without it, and for any line with
// more than one search thread when this one's engine is the serial build.
const char* binary_for(const std::string& name, int threads) {
#if !SPOOL_BENCH_HLIR
  if (name == "hlir-llama-block") return SPOOL_BENCH_HLIR_EXE;
  if (SPOOL_EGRAPH_SERIAL && threads != 1) return SPOOL_BENCH_HLIR_EXE;
#endif
  (void)name;
  (void)threads;
  return "/proc/self/exe";
}

// Runs this binary (or the one holding the workload) again with `--only
// name` and the other options; returns its exit status.
int run_alone(const char* self, const std::string& name, int repeat, int threads, bool full) {
  std::vector<std::string> args = {self, "--only", name, "--repeat", std::to_string(repeat), "--threads",
                                   std::to_string(threads)};
  if (full) args.push_back("--full-matching");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) throw spool::Error("fork failed");
  if (pid == 0) {
    execv(binary_for(name, threads), argv.data());
    std::_Exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) throw spool::Error("waitpid failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int run(int argc, char** argv) {
  CLI::App app{"Spool e-graph engine benchmark"};
  int repeat = 16;
  int threads = 1;
  std::string only;
  app.add_option("--repeat", repeat, "runs per workload, each on a fresh e-graph (the fastest is shown)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "also print each workload with this many search threads (0: TBB's default)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--only", only, "run one workload in this process")->check(CLI::IsMember(kWorkloads));
  bool full = false;
  app.add_flag("--full-matching", full, "apply every match every iteration in the assoc lines too");
  CLI11_PARSE(app, argc, argv);
  g_incremental = !full;
  if (only.empty()) {
    int failures = 0;
    for (const std::string& name : kWorkloads) failures += run_alone(argv[0], name, repeat, threads, full) != 0;
    return failures == 0 ? 0 : 1;
  }
  if (std::string_view(binary_for(only, threads)) != "/proc/self/exe")
    return run_alone(argv[0], only, repeat, threads, full);
  print(only, best_of(repeat, [&] { return run_workload(only, 1); }), repeat);
  if (threads != 1) {
    const std::string label = fmt::format("{} [{} threads]", only, threads == 0 ? "default" : std::to_string(threads));
    print(label, best_of(repeat, [&] { return run_workload(only, threads); }), repeat);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Each run frees its e-graph, and glibc then hands the top of the heap
  // back to the kernel (once 128 KiB of it is free) and serves large blocks
  // with fresh mappings: every --repeat run faulted its memory in again
  // (about 90 page faults a run on assoc-add-7, a tenth of its time; egg's
  // harness, which runs each test on a thread of its own, faults about 28
  // a run). Freed memory stays in the process instead, so repeats time the
  // engine rather than the kernel (the peak over many runs can then exceed
  // a single run's by what fragmentation keeps: 1-3 MB on the big lines).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "egraph_bench: error: %s\n", e.what());
    return 1;
  }
}
