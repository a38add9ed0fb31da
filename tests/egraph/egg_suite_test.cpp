// egg's own test suites on the engine: every goal of egg 0.9.5's
// tests/math.rs and tests/lambda.rs (https://github.com/egraphs-good/egg,
// tag v0.9.5), with egg's rules, analyses, schedulers and limits, proven
// (or, for egg's should_panic goals, not proven), and the e-graph each run
// ends with compared with egg's.
//
// Sizes are those of egg's runner report after the test: number_of_classes()
// and total_number_of_nodes() (the nodes listed in classes: the math suite's
// pruned nodes are not; egg's `memo` figure is not compared, as egg keeps
// stale hashcons entries for nodes whose children were merged). egg's
// iteration count includes the iteration its goal hook stops at (the hook
// runs at the start of an iteration, before the search), one more than the
// iterations that searched and applied.

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

// egg 0.9.5 built in release, each test's runner report: classes, nodes
// (total_number_of_nodes), iterations.
const std::map<std::string, Sizes>& egg_math_sizes() {
  static const std::map<std::string, Sizes> m = {
      {"math_associate_adds", {127, 1939, 7}},  // stopped by its iteration limit
      {"math_fail", {5, 18, 4}},                // saturated
      {"math_simplify_add", {9, 36, 5}},
      {"math_powers", {9, 21, 2}},
      {"math_simplify_const", {7, 14, 3}},
      {"math_simplify_root", {37, 211, 8}},
      {"math_simplify_factor", {20, 142, 7}},
      {"math_diff_same", {3, 5, 2}},
      {"math_diff_different", {4, 8, 2}},
      {"math_diff_simple1", {6, 20, 5}},
      {"math_diff_simple2", {6, 26, 4}},
      {"math_diff_ln", {5, 12, 2}},
      {"diff_power_simple", {19, 80, 6}},
      // egg runs this test with explanations on: the same classes and nodes.
      {"diff_power_harder", {90, 409, 8}},
      {"integ_one", {3, 6, 2}},
      {"integ_sin", {5, 12, 2}},
      {"integ_x", {6, 12, 2}},
      {"integ_part1", {171, 486, 5}},
      {"integ_part2", {678, 1991, 6}},
      {"integ_part3", {55, 144, 5}},
  };
  return m;
}

const std::map<std::string, Sizes>& egg_lambda_sizes() {
  static const std::map<std::string, Sizes> m = {
      {"lambda_under", {7, 10, 3}},
      {"lambda_if_elim", {8, 19, 5}},
      {"lambda_let_simple", {8, 18, 4}},
      {"lambda_capture", {4, 5, 2}},              // saturated
      {"lambda_capture_free", {9, 12, 4}},        // saturated
      {"lambda_closure_not_seven", {15, 39, 8}},  // saturated
      {"lambda_compose", {31, 78, 15}},
      {"lambda_if_simple", {4, 6, 2}},
      {"lambda_compose_many", {61, 284, 18}},
      {"lambda_function_repeat", {6825, 32636, 59}},
      {"lambda_if", {15, 42, 9}},
      {"lambda_fib", {4996, 14582, 57}},
  };
  return m;
}

// Iterations as egg's report counts them.
size_t egg_iterations(const RunReport& r) { return r.iterations + (r.stop == StopReason::Goal ? 1 : 0); }

}  // namespace

TEST_CASE("egg math: every goal proven as in egg, with egg's e-graph sizes") {
  auto L = math::make_language();
  const auto rules = math::egg_rules(*L);
  const auto assoc = math::assoc_comm_rules(*L);
  CHECK(rules.size() == 36);  // egg 0.9.5: 29 simplification and derivative rules, 7 integration rules
  for (const math::EggGoal& goal : math::egg_goals()) {
    CAPTURE(goal.name);
    const math::EggResult r = math::run_egg_goal(*L, goal, goal.assoc_only ? std::span<const Rule>(assoc) : rules, 1,
                                                 /*check=*/true);
    CHECK(r.proven == goal.provable);
    if (goal.assoc_only) CHECK(r.classes == 127);  // egg's @check
    const auto it = egg_math_sizes().find(goal.name);
    REQUIRE(it != egg_math_sizes().end());
    CHECK(r.classes == it->second.classes);
    CHECK(r.class_nodes == it->second.nodes);
    CHECK(egg_iterations(r.report) == it->second.iterations);
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
    const math::EggResult r = math::run_egg_goal(*L, goal, rules, 1, /*check=*/true);
    CHECK(r.proven);
    CHECK(r.report.iterations == 1);
    CHECK(r.classes == 3);
    CHECK(r.class_nodes == 5);
    CHECK(r.nodes == 8);  // x, 0, 1, (+ x 0), (* x 1); pruned: (d x x), (+ 1 0), (* 1 1)
  }
}

TEST_CASE("egg lambda: every goal proven as in egg, with egg's e-graph sizes") {
  auto L = lambda::make_language();
  const auto rules = lambda::rules(*L);
  CHECK(rules.size() == 17);
  for (const lambda::Goal& goal : lambda::goals()) {
    if (goal.slow) continue;
    CAPTURE(goal.name);
    const lambda::Result r = lambda::run_goal(*L, goal, rules, 1, /*check=*/true);
    CHECK(r.proven == goal.provable);
    const auto it = egg_lambda_sizes().find(goal.name);
    REQUIRE(it != egg_lambda_sizes().end());
    CHECK(r.classes == it->second.classes);
    CHECK(r.nodes == it->second.nodes);
    CHECK(egg_iterations(r.report) == it->second.iterations);
  }
}

TEST_CASE("egg lambda: the long goals, lambda_function_repeat and lambda_fib") {
  auto L = lambda::make_language();
  const auto rules = lambda::rules(*L);
  for (const lambda::Goal& goal : lambda::goals()) {
    if (!goal.slow) continue;
    CAPTURE(goal.name);
    const lambda::Result r = lambda::run_goal(*L, goal, rules, 1, /*check=*/true);
    CHECK(r.proven == goal.provable);
    const auto it = egg_lambda_sizes().find(goal.name);
    REQUIRE(it != egg_lambda_sizes().end());
    CHECK(r.classes == it->second.classes);
    CHECK(r.nodes == it->second.nodes);
    CHECK(egg_iterations(r.report) == it->second.iterations);
  }
}
