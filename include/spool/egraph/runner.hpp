#pragma once
// The equality-saturation runner: search, apply, rebuild, with budgets.
//
// Each iteration matches the active rules of one ruleset against the
// rebuilt graph (read-only, in parallel with TBB over fixed chunks of
// candidate classes, so the matches never depend on the thread count),
// applies the matches rule by rule in a fixed order, and rebuilds. Budgets
// (iterations, nodes, time) are checked inside the apply loop, before every
// match, not only between rules. A schedule (`run`, `repeat`, `saturate`,
// `seq` over rulesets) drives several rulesets in one e-graph.

#include <spool/egraph/rule.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace spool::egraph {

enum class StopReason { Saturated, IterLimit, NodeLimit, TimeLimit, Goal };
std::string_view stop_reason_name(StopReason reason);  // "saturated", "iter-limit", ...

enum class SchedulerKind { Simple, Backoff };

// The budgets (iterations, nodes, time) bound each step of a schedule: each
// top-level step (a top-level seq's children, or the schedule itself) and
// each `saturate` inside them gets them afresh (its own iterations, the
// nodes it adds, its own time), so that a step that keeps growing stops at
// its budget, is reported (RunReport::steps), and the steps after it still
// run.
struct RunnerConfig {
  size_t iter_limit = 30;
  size_t node_limit = 10'000;
  double time_limit_ms = 5'000;
  SchedulerKind scheduler = SchedulerKind::Backoff;
  // Backoff (egg's): a rule with more than match_limit << times_banned
  // matches in an iteration is banned for ban_length << times_banned
  // iterations and its matches are dropped.
  size_t match_limit = 1'000;
  size_t ban_length = 5;
  int threads = 0;  // 0: TBB's default; results never depend on it
  // Incremental matching: a plain rewrite (no guards, no custom appliers)
  // whose matches were all applied at generation G only reports matches that
  // may be new since G (a node added, or classes that must meet unioned,
  // since G; see search()); the others would rebuild what is already there.
  // The e-graph is the same either way; only the match counts and the time
  // differ (false: every match every iteration, as egg does).
  bool incremental = true;
  // Checked after every iteration; returning true stops with StopReason::Goal.
  std::function<bool(EGraph&)> stop_when;
  // EGraph::check_invariants() after every rebuild (tests: the whole graph
  // is walked each time, so it costs as much as a rebuild or more).
  bool check_invariants = false;
};

struct RuleReport {
  std::string name;
  size_t matches = 0;       // found by the search (new ones only, when incremental)
  size_t applications = 0;  // matches whose actions changed the graph
  double search_ms = 0;     // summed over the parallel chunks
  double apply_ms = 0;
  bool banned = false;      // skipped or dropped by the backoff scheduler
};

struct IterationReport {
  size_t index = 0;
  std::string ruleset;
  size_t nodes = 0;  // after rebuild
  size_t classes = 0;
  size_t unions = 0;           // merges done by actions
  size_t rebuild_unions = 0;   // merges done by rebuild (congruence, analysis)
  double search_ms = 0, apply_ms = 0, rebuild_ms = 0;
  std::vector<RuleReport> rules;
};

// A step that stopped at one of its budgets (the run went on with the steps
// after it).
struct StepReport {
  std::string schedule;  // the step, as Schedule::str() writes it
  StopReason stop = StopReason::IterLimit;
  size_t iterations = 0;  // the step's own
  size_t nodes_added = 0;
  double ms = 0;
};

struct RunReport {
  StopReason stop = StopReason::Saturated;  // of the run as a whole
  std::vector<StepReport> steps;            // saturate steps stopped by a budget, in order
  size_t iterations = 0;
  size_t nodes = 0;
  size_t classes = 0;
  double total_ms = 0, search_ms = 0, apply_ms = 0, rebuild_ms = 0;
  std::vector<IterationReport> per_iteration;

  nlohmann::json to_json() const;
  std::string summary() const;  // one line
};

struct RuleSet {
  std::string name;
  std::vector<Rule> rules;
};

// A schedule over named rulesets, as in egglog:
//   run R [n]      up to n iterations of ruleset R (stops early when R saturates)
//   repeat n S     S n times (stops early when S changes nothing)
//   saturate S     S until it changes nothing
//   seq S...       each in order
struct Schedule {
  enum class Kind { Run, Repeat, Saturate, Seq };
  Kind kind = Kind::Run;
  std::string ruleset;
  size_t count = 1;
  std::vector<Schedule> children;

  static Schedule run(std::string ruleset, size_t n = 1) { return {Kind::Run, std::move(ruleset), n, {}}; }
  static Schedule repeat(size_t n, Schedule s) { return {Kind::Repeat, {}, n, {std::move(s)}}; }
  static Schedule saturate(Schedule s) { return {Kind::Saturate, {}, 0, {std::move(s)}}; }
  static Schedule seq(std::vector<Schedule> s) { return {Kind::Seq, {}, 0, std::move(s)}; }
  std::string str() const;
};

class Runner {
 public:
  explicit Runner(RunnerConfig config = {});
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Saturates with one ruleset: `saturate (run all)` within the budgets.
  RunReport run(EGraph& graph, std::span<const Rule> rules);
  // Runs a schedule over named rulesets within the budgets (shared by the
  // whole schedule). An unknown ruleset name is a spool::Error.
  RunReport run(EGraph& graph, std::span<const RuleSet> rulesets, const Schedule& schedule);

  const RunnerConfig& config() const { return config_; }

 private:
  struct State;
  // A ruleset as the run reads it: its name and its rules, borrowed.
  struct SetRef {
    std::string_view name;
    std::span<const Rule> rules;
  };
  RunReport run_sets(EGraph& graph, std::vector<SetRef> sets, const Schedule& schedule);
  RunnerConfig config_;
};

}  // namespace spool::egraph
