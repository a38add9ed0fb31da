// The e-graph engine benchmark.
//
// Prints one line per workload: e-nodes, e-classes, iterations, total time,
// search/apply/rebuild time, e-nodes per second and bytes per e-node. Each
// workload runs --repeat times; the line shows the run with the median
// total time (sizes are identical across runs: the engine is deterministic).
//
//   assoc-add-7       comm/assoc of + on a 7-term sum, simple scheduler, 7 iterations
//   assoc-add-10      the same on a 10-term sum, to saturation (1,023 classes, 57,012 nodes)
//   math-suite        every goal of the simplification suite, 100,000-node budget each
//   hlir-llama-block  one tiny-llama layer (prefill 8) saturated with the shipped
//                     rules (rules/algebra.rules, rules/loops.rules), each file's schedule
//
// The same workloads in egg (the Rust reference) are what the engine is to be
// compared against; --full-matching makes the runner apply every match in
// every iteration, as egg's does, for a like-for-like comparison.

#include <spool/hlir/language.hpp>
#include <math_language/math.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/runner.hpp>

#include <spool/rules/rule_file.hpp>

#include <spool/models/llama.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

using namespace spool::egraph;
namespace hlir = spool::hlir;

namespace {

struct Measure {
  size_t nodes = 0, classes = 0, iterations = 0, bytes = 0;
  double total_ms = 0, search_ms = 0, apply_ms = 0, rebuild_ms = 0;
  size_t goals = 0, proven = 0;
  std::string stop;
};

void add_run(Measure& m, const RunReport& r, const EGraph& g) {
  m.nodes += g.num_nodes();
  m.classes += g.num_classes();
  m.iterations += r.iterations;
  m.bytes += g.memory_bytes();
  m.total_ms += r.total_ms;
  m.search_ms += r.search_ms;
  m.apply_ms += r.apply_ms;
  m.rebuild_ms += r.rebuild_ms;
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
    auto g = math::make_egraph(*L);
    const ClassId lhs = add_expr(*g, goal.lhs);
    RunnerConfig c;
    c.iter_limit = 30;
    c.node_limit = 100'000;
    c.time_limit_ms = 60'000;
    c.threads = threads;
    c.incremental = g_incremental;
    c.stop_when = [&](EGraph& e) {
      auto rhs = lookup_expr(e, goal.rhs);
      return rhs && e.find(*rhs) == e.find(lhs);
    };
    const RunReport r = Runner(c).run(*g, rules);
    add_run(m, r, *g);
    ++m.goals;
    m.proven += r.stop == StopReason::Goal;
  }
  m.stop = fmt::format("{}/{} goals proven", m.proven, m.goals);
  return m;
}

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
    const Registry registry;
    auto sets = spool::rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
    if (!sets) throw spool::Error(sets.error().render());
    RunnerConfig c;
    c.iter_limit = 30;
    c.node_limit = 100'000;
    c.time_limit_ms = 60'000;
    c.threads = threads;
    c.incremental = g_incremental;
    const RunReport r = Runner(c).run(*g, sets.value(), spool::rules::schedule_of(file.value()));
    m.iterations += r.iterations;
    m.total_ms += r.total_ms;
    m.search_ms += r.search_ms;
    m.apply_ms += r.apply_ms;
    m.rebuild_ms += r.rebuild_ms;
    m.stop += (m.stop.empty() ? "" : ", ") + std::string(name) + ": " + std::string(stop_reason_name(r.stop));
  }
  m.nodes = g->num_nodes();
  m.classes = g->num_classes();
  m.bytes = g->memory_bytes();
  m.stop = fmt::format("{} HLIR nodes; {}", graph.num_live(), m.stop);
  return m;
}

void print(const std::string& name, const Measure& m) {
  const double per_s = m.total_ms > 0 ? m.nodes / (m.total_ms / 1000.0) : 0.0;
  fmt::print(
      "{:<17} nodes={:>7} classes={:>6} iters={:>3} total={:>9.2f}ms search={:>8.2f}ms apply={:>8.2f}ms "
      "rebuild={:>8.2f}ms nodes/s={:>10.0f} bytes/node={:>6.1f}  ({})\n",
      name, m.nodes, m.classes, m.iterations, m.total_ms, m.search_ms, m.apply_ms, m.rebuild_ms, per_s,
      m.nodes ? static_cast<double>(m.bytes) / m.nodes : 0.0, m.stop);
  std::fflush(stdout);
}

template <typename F>
Measure median_of(int repeat, F&& run) {
  std::vector<Measure> runs;
  for (int i = 0; i < repeat; ++i) runs.push_back(run());
  std::sort(runs.begin(), runs.end(), [](const Measure& a, const Measure& b) { return a.total_ms < b.total_ms; });
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Spool e-graph engine benchmark"};
  int repeat = 3;
  int threads = 0;
  std::vector<std::string> only;
  app.add_option("--repeat", repeat, "runs per workload (the median is shown)")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "search threads (0: TBB's default)");
  app.add_option("--only", only, "workloads to run (default: all)");
  bool full = false;
  app.add_flag("--full-matching", full, "apply every match every iteration, as egg does (no incremental matching)");
  CLI11_PARSE(app, argc, argv);
  g_incremental = !full;
  auto wanted = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };

  if (wanted("assoc-add-7")) print("assoc-add-7", median_of(repeat, [&] { return assoc(7, 7, threads); }));
  if (wanted("assoc-add-10")) print("assoc-add-10", median_of(repeat, [&] { return assoc(10, 1000, threads); }));
  if (wanted("math-suite")) print("math-suite", median_of(repeat, [&] { return math_suite(threads); }));
  if (wanted("hlir-llama-block")) print("hlir-llama-block", median_of(repeat, [&] { return llama_block(threads); }));
  return 0;
}
