// The runner: budgets and stop reasons, determinism across thread counts,
// schedules over rulesets, the backoff scheduler, guards, multi-pattern
// rules, custom appliers, reports.

#include <spool/egraph/dump.hpp>
#include <spool/egraph/extract.hpp>
#include <math_language/math.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>
#include <chrono>
#include <nlohmann/json.hpp>

using namespace spool::egraph;

namespace {

RunnerConfig config(SchedulerKind kind, size_t iters, size_t nodes, double ms) {
  RunnerConfig c;
  c.scheduler = kind;
  c.iter_limit = iters;
  c.node_limit = nodes;
  c.time_limit_ms = ms;
  return c;
}

}  // namespace

TEST_CASE("node budget: the runner stops within 10% of it, inside the apply loop") {
  auto L = math::make_language();
  for (size_t budget : {2'000u, 5'000u, 20'000u}) {
    CAPTURE(budget);
    EGraph g(L->language);
    add_expr(g, math::sum_chain(10));
    Runner runner(config(SchedulerKind::Simple, 100, budget, 60'000));
    const RunReport r = runner.run(g, math::assoc_comm_rules(*L));
    CHECK(r.stop == StopReason::NodeLimit);
    // Checked before every match, so it overshoots by at most one match's
    // nodes; rebuild() may then drop duplicates congruence found.
    CHECK(g.num_nodes() <= budget + budget / 10);
    CHECK(r.per_iteration.back().nodes <= budget + budget / 10);
    g.check_invariants();
  }
}

TEST_CASE("time budget: a budget of zero stops before the first iteration") {
  auto L = math::make_language();
  EGraph g(L->language);
  add_expr(g, math::sum_chain(6));
  const size_t nodes = g.num_nodes();
  const RunReport r = Runner(config(SchedulerKind::Simple, 100, 1'000'000, 0)).run(g, math::assoc_comm_rules(*L));
  CHECK(r.stop == StopReason::TimeLimit);
  CHECK(r.iterations == 0);
  CHECK(r.per_iteration.empty());
  CHECK(g.num_nodes() == nodes);
}

TEST_CASE("time budget: the clock is read before every match of a custom applier") {
  // 2,000 matches of a custom applier; the tenth call alone outlasts the
  // whole budget. The runner must stop right after it, in the middle of the
  // apply loop: the deadline has passed by then on any machine, so no later
  // call may come (a clock read every 64 matches, or only between
  // iterations, would let them through). Nothing here depends on how fast
  // the machine is.
  static constexpr size_t kStallingCall = 10;
  static constexpr double kBudgetMs = 50;
  Language lang;
  const OpId f = lang.ops.add("f", 1);
  lang.ops.number_op = lang.ops.add("n", 0);
  Registry reg;
  size_t calls = 0;
  reg.add_applier("stall", [&calls](EGraph&, const MatchView&) -> std::optional<ClassId> {
    if (++calls == kStallingCall) {
      // The runner started before this call, so its deadline is no later
      // than `until` (both round the budget the same way).
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double, std::milli>(kBudgetMs));
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    return std::nullopt;
  });
  RuleSpec spec;
  spec.name = "stall";
  spec.lhs.push_back({"", "(f ?x)", {}});
  ActionSpec act;
  act.kind = ActionSpec::Kind::Apply;
  act.applier = "stall";
  spec.actions.push_back(act);
  std::vector<Rule> rules;
  rules.push_back(compile_rule(lang, reg, spec).take());
  EGraph g(lang);
  for (int i = 0; i < 2000; ++i) {
    const ClassId x = g.add_leaf(lang.ops.number_op, lang.attrs.intern_int(i));
    g.add(f, AttrId{}, std::span<const ClassId>(&x, 1));
  }
  const RunReport r = Runner(config(SchedulerKind::Simple, 10, 1'000'000, kBudgetMs)).run(g, rules);
  CHECK(r.stop == StopReason::TimeLimit);
  CHECK(r.iterations <= 1);
  CHECK(calls <= kStallingCall);
}

TEST_CASE("time budget on a growing e-graph") {
  auto L = math::make_language();
  EGraph g(L->language);
  add_expr(g, math::sum_chain(14));  // would take far longer than the budget
  const RunReport r = Runner(config(SchedulerKind::Simple, 1000, 100'000'000, 150)).run(g, math::assoc_comm_rules(*L));
  CHECK(r.stop == StopReason::TimeLimit);
  CHECK(r.iterations < 1000);
  g.check_invariants();
}

TEST_CASE("iteration budget and saturation are reported") {
  auto L = math::make_language();
  EGraph g(L->language);
  add_expr(g, math::sum_chain(5));
  const auto rules = math::assoc_comm_rules(*L);
  const RunReport r1 = Runner(config(SchedulerKind::Simple, 2, 1'000'000, 60'000)).run(g, rules);
  CHECK(r1.stop == StopReason::IterLimit);
  CHECK(r1.iterations == 2);
  const RunReport r2 = Runner(config(SchedulerKind::Simple, 100, 1'000'000, 60'000)).run(g, rules);
  CHECK(r2.stop == StopReason::Saturated);
  CHECK(g.num_classes() == 31);
  // The last iteration of a saturated run changes nothing.
  CHECK(r2.per_iteration.back().unions == 0);
  CHECK(r2.per_iteration.back().nodes == g.num_nodes());
}

namespace {

struct RunResult {
  size_t nodes, classes;
  std::string dump, best;
};

RunResult run_with_threads(int threads, const std::string& start, bool math_rules) {
  auto L = math::make_language();
  auto g = math_rules ? math::make_egraph(*L) : std::make_unique<EGraph>(L->language);
  const ClassId root = add_expr(*g, start);
  RunnerConfig c = config(math_rules ? SchedulerKind::Backoff : SchedulerKind::Simple, 8, 60'000, 60'000);
  c.threads = threads;
  const auto rules = math_rules ? math::simplify_rules(*L) : math::assoc_comm_rules(*L);
  Runner(c).run(*g, rules);
  AstSize size;
  return {g->num_nodes(), g->num_classes(), dump_text(*g), Extractor(*g, size).extract(root).term.str(L->language)};
}

}  // namespace

TEST_CASE("determinism: 1 and 2 threads give identical e-graphs") {
  for (bool math_rules : {false, true}) {
    const std::string start =
        math_rules ? "(d x (+ (* 3 (pow x 2)) (* (ln x) (sin x))))" : math::sum_chain(8);
    const RunResult one = run_with_threads(1, start, math_rules);
    const RunResult two = run_with_threads(2, start, math_rules);
    const RunResult dflt = run_with_threads(0, start, math_rules);
    CHECK(one.nodes == two.nodes);
    CHECK(one.classes == two.classes);
    CHECK(one.best == two.best);
    CHECK(one.dump == two.dump);  // same ids everywhere, not only the same sizes
    CHECK(one.dump == dflt.dump);
  }
}

TEST_CASE("backoff scheduler bans a rule that matches too much, then lifts the ban") {
  auto L = math::make_language();
  EGraph g(L->language);
  add_expr(g, math::sum_chain(8));
  RunnerConfig c = config(SchedulerKind::Backoff, 100, 1'000'000, 60'000);
  c.match_limit = 50;
  c.ban_length = 2;
  const RunReport r = Runner(c).run(g, math::assoc_comm_rules(*L));
  CHECK(r.stop == StopReason::Saturated);
  bool banned = false;
  for (const auto& it : r.per_iteration)
    for (const auto& rule : it.rules) banned |= rule.banned;
  CHECK(banned);
  // Bans delay rules but never lose them: the saturated graph is complete.
  CHECK(g.num_classes() == 255);
  CHECK(g.num_nodes() == 6058);  // 3^8 - 2^9 + 1 ordered splits, plus 8 leaves
}

TEST_CASE("backoff scheduler: a rule's search stops once it is over its threshold") {
  auto L = math::make_language();
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    EGraph g(L->language);
    add_expr(g, math::sum_chain(9));
    RunnerConfig c = config(SchedulerKind::Backoff, 4, 1'000'000, 60'000);
    c.match_limit = 40;
    c.threads = threads;
    c.incremental = false;
    const RunReport r = Runner(c).run(g, math::assoc_comm_rules(*L));
    // Iteration 3 finds far more than 40 matches of each rule (the graph
    // has hundreds of + nodes); the search of a rule stops at 41 in one
    // thread, and soon after 41 in several (each chunk stops when the
    // chunks before it finished over the threshold).
    bool banned = false;
    for (const IterationReport& it : r.per_iteration)
      for (const RuleReport& rule : it.rules) {
        if (!rule.banned || rule.matches == 0) continue;
        banned = true;
        // The threshold doubles with every ban: 40, 80, 160, ...
        size_t threshold = 40;
        while (rule.matches > 2 * threshold) threshold *= 2;
        CHECK(rule.matches > threshold);
        if (threads == 1) CHECK(rule.matches == threshold + 1);
        CHECK(rule.matches < threshold + 1 + 2 * 128);
      }
    CHECK(banned);
    g.check_invariants();
  }
}

TEST_CASE("schedules: run, repeat, saturate and seq over rulesets") {
  auto L = math::make_language();
  Language& lang = L->language;
  std::vector<RuleSet> sets(2);
  sets[0].name = "comm";
  sets[0].rules.push_back(rewrite(lang, "comm-add", "(+ ?a ?b)", "(+ ?b ?a)"));
  sets[1].name = "assoc";
  sets[1].rules.push_back(rewrite(lang, "assoc-add", "(+ ?a (+ ?b ?c))", "(+ (+ ?a ?b) ?c)"));
  const RunnerConfig c = config(SchedulerKind::Simple, 1000, 1'000'000, 60'000);

  {
    EGraph g(lang);
    add_expr(g, "(+ 1 (+ 2 3))");
    const RunReport r = Runner(c).run(g, sets, Schedule::run("comm"));
    CHECK(r.iterations == 1);
    CHECK(r.per_iteration[0].ruleset == "comm");
    CHECK(lookup_expr(g, "(+ (+ 2 3) 1)").has_value());
    CHECK_FALSE(lookup_expr(g, "(+ (+ 1 2) 3)").has_value());
  }
  {
    EGraph g(lang);
    add_expr(g, "(+ 1 (+ 2 3))");
    const Schedule s = Schedule::saturate(Schedule::seq({Schedule::run("comm"), Schedule::run("assoc")}));
    CHECK(s.str() == "(saturate (seq (run comm) (run assoc)))");
    const RunReport r = Runner(c).run(g, sets, s);
    CHECK(r.stop == StopReason::Saturated);
    CHECK(g.num_classes() == 7);
    CHECK(g.num_nodes() == 15);  // 12 splits + 3 leaves
  }
  {
    EGraph g(lang);
    add_expr(g, "(+ 1 (+ 2 3))");
    const RunReport r = Runner(c).run(g, sets, Schedule::repeat(2, Schedule::run("assoc", 1)));
    CHECK(r.iterations == 2);  // the second changes nothing
    CHECK(lookup_expr(g, "(+ (+ 1 2) 3)").has_value());
  }
  {
    EGraph g(lang);
    CHECK_THROWS_WITH_AS(Runner(c).run(g, sets, Schedule::run("nope")),
                         "schedule: unknown ruleset 'nope'", spool::Error);
  }
}

TEST_CASE("schedules: each step has budgets of its own; one that runs out is reported and the rest run") {
  auto L = math::make_language();
  Language& lang = L->language;
  std::vector<RuleSet> sets(2);
  sets[0].name = "grow";  // a sum of 8 under associativity and commutativity: thousands of nodes
  for (const Rule& rule : math::assoc_comm_rules(*L)) sets[0].rules.push_back(rule);
  sets[1].name = "comm";
  sets[1].rules.push_back(rewrite(lang, "comm-mul", "(* ?a ?b)", "(* ?b ?a)"));
  for (const bool by_nodes : {false, true}) {
    CAPTURE(by_nodes);
    const RunnerConfig c = by_nodes ? config(SchedulerKind::Simple, 1000, 200, 60'000)
                                    : config(SchedulerKind::Simple, 3, 1'000'000, 60'000);
    EGraph g(lang);
    add_expr(g, math::sum_chain(8));
    add_expr(g, "(* x y)");
    const Schedule s = Schedule::seq({Schedule::saturate(Schedule::run("grow")), Schedule::run("comm")});
    const RunReport r = Runner(c).run(g, sets, s);
    // The growing step stopped at its own budget and said so ...
    INFO(r.summary());
    CHECK(r.stop != StopReason::Saturated);
    REQUIRE(r.steps.size() == 1);
    CHECK(r.steps[0].schedule == "(saturate (run grow))");
    CHECK(r.steps[0].stop == (by_nodes ? StopReason::NodeLimit : StopReason::IterLimit));
    if (!by_nodes) CHECK(r.steps[0].iterations == 3);
    if (by_nodes) CHECK(r.steps[0].nodes_added >= 200);
    CHECK(r.stop == r.steps[0].stop);
    CHECK(r.summary().find("step (saturate (run grow)) stopped at its") != std::string::npos);
    CHECK(r.to_json()["budget_stops"].size() == 1);
    // ... and the step after it still ran.
    CHECK(r.per_iteration.back().ruleset == "comm");
    CHECK(lookup_expr(g, "(* y x)").has_value());
  }
}

TEST_CASE("guards are checked when a match is applied") {
  auto L = math::make_language();
  const Registry reg = math::make_registry(*L);
  std::vector<Rule> rules;
  rules.push_back(rewrite(L->language, "cancel-div", "(/ ?a ?a)", "1", &reg, {{"is-not-zero", {"?a"}, {}}}));
  auto g = math::make_egraph(*L);
  const ClassId zero = add_expr(*g, "(/ (- 2 2) (- 2 2))");
  const ClassId xx = add_expr(*g, "(/ x x)");
  Runner(config(SchedulerKind::Simple, 5, 10'000, 10'000)).run(*g, rules);
  CHECK(g->find(xx) == g->find(*lookup_expr(*g, "1")));
  CHECK(g->find(zero) != g->find(*lookup_expr(*g, "1")));
}

TEST_CASE("multi-pattern rules match all their patterns with shared variables") {
  Language lang;
  lang.ops.add("f", 1);
  lang.ops.add("g", 1);
  lang.ops.add("h", 2);
  lang.ops.symbol_op = lang.ops.add("sym", 0);
  Registry reg;
  RuleSpec spec;
  spec.name = "fg-to-h";
  // ?r = (f ?x) and ?s = (g ?x): then (h ?r ?s) = ?r.
  spec.lhs.push_back({"?r", "(f ?x)", {}});
  spec.lhs.push_back({"?s", "(g ?x)", {}});
  ActionSpec act;
  act.target = "?r";
  act.pattern = "(h ?r ?s)";
  spec.actions.push_back(act);
  std::vector<Rule> rules;
  rules.push_back(compile_rule(lang, reg, spec).take());
  EGraph g(lang);
  const ClassId fa = add_expr(g, "(f a)");
  add_expr(g, "(g a)");
  add_expr(g, "(f b)");
  add_expr(g, "(g c)");
  const RunReport r = Runner(config(SchedulerKind::Simple, 5, 10'000, 10'000)).run(g, rules);
  CHECK(r.per_iteration[0].rules[0].matches == 1);
  CHECK(lookup_expr(g, "(h (f a) (g a))") == g.find(fa));
  CHECK_FALSE(lookup_expr(g, "(h (f b) (g c))").has_value());
}

TEST_CASE("custom appliers compute attributes; attribute variables bind and compare") {
  Language lang;
  const OpId fused = lang.ops.add("fused", 1);
  lang.ops.add("relu", 1);
  lang.ops.add("exp", 1);
  lang.ops.symbol_op = lang.ops.add("sym", 0);
  Registry reg;
  // (relu (fused[list] ?x)) => (fused[list,relu] ?x): appends to an op list.
  reg.add_applier("append-relu", [fused](EGraph& g, const MatchView& m) -> std::optional<ClassId> {
    const std::string list = g.attrs().str(m.attr_args[0]) + ",relu";
    const ClassId x = m.args[0];
    return g.add(fused, g.attrs().intern_symbol(list), std::span<const ClassId>(&x, 1));
  });
  RuleSpec spec;
  spec.name = "fuse-relu";
  spec.lhs.push_back({"", "(relu (fused[?ops] ?x))", {}});
  ActionSpec act;
  act.kind = ActionSpec::Kind::Apply;
  act.applier = "append-relu";
  act.args = {"?ops", "?x"};
  spec.actions.push_back(act);
  std::vector<Rule> rules;
  rules.push_back(compile_rule(lang, reg, spec).take());
  // Same attribute twice: only matches when both fused ops carry the same list.
  rules.push_back(rewrite(lang, "same-list", "(exp (fused[?k] (fused[?k] ?y)))", "(fused[?k] ?y)"));
  EGraph g(lang);
  const ClassId r = add_expr(g, "(relu (fused[exp] a))");
  const ClassId same = add_expr(g, "(exp (fused[p] (fused[p] b)))");
  const ClassId diff = add_expr(g, "(exp (fused[p] (fused[q] b)))");
  Runner(config(SchedulerKind::Simple, 5, 10'000, 10'000)).run(g, rules);
  CHECK(lookup_expr(g, "(fused[exp,relu] a)") == g.find(r));
  CHECK(lookup_expr(g, "(fused[p] b)") == g.find(same));
  CHECK(g.find(diff) != g.find(same));
}

TEST_CASE("rule compilation errors are diagnostics") {
  auto L = math::make_language();
  Registry reg;
  RuleSpec spec;
  spec.name = "bad";
  spec.loc = {"x.rules", 4, 1};
  spec.lhs.push_back({"", "(+ ?a ?b)", {"x.rules", 4, 10}});
  ActionSpec act;
  act.pattern = "(+ ?a ?c)";
  spec.actions.push_back(act);
  auto r = compile_rule(L->language, reg, spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().render() == "x.rules:4:1: error: rule 'bad': variable '?c' is not bound by the left-hand side");

  spec.actions[0].pattern = "(+ ?a ?b)";
  spec.guards.push_back({"no-such-guard", {"?a"}, {"x.rules", 5, 3}});
  auto r2 = compile_rule(L->language, reg, spec);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().render() == "x.rules:5:3: error: rule 'bad': unknown guard 'no-such-guard'");

  spec.guards.clear();
  spec.lhs[0].text = "(+ ?a";
  auto r3 = compile_rule(L->language, reg, spec);
  REQUIRE_FALSE(r3.ok());
  CHECK(r3.error().render() == "x.rules:4:10: error: unclosed '('");
}

TEST_CASE("the run report: per iteration, per rule, and as JSON") {
  auto L = math::make_language();
  EGraph g(L->language);
  add_expr(g, math::sum_chain(6));
  const RunReport r = Runner(config(SchedulerKind::Simple, 100, 1'000'000, 60'000)).run(g, math::assoc_comm_rules(*L));
  REQUIRE(r.iterations == r.per_iteration.size());
  size_t applications = 0;
  for (const auto& it : r.per_iteration) {
    REQUIRE(it.rules.size() == 2);
    CHECK(it.rules[0].name == "comm-add");
    CHECK(it.rules[1].name == "assoc-add");
    CHECK(it.rules[0].applications <= it.rules[0].matches);
    applications += it.rules[0].applications + it.rules[1].applications;
  }
  CHECK(applications > 0);
  CHECK(r.per_iteration[0].rules[0].matches == 5);  // one (+ a b) per link of the chain
  CHECK(r.per_iteration[0].rules[1].matches == 4);
  const nlohmann::json j = r.to_json();
  CHECK(j["stop_reason"] == "saturated");
  CHECK(j["classes"] == 63);
  CHECK(j["per_iteration"].size() == r.iterations);
  CHECK(j["per_iteration"][0]["rules"][1]["name"] == "assoc-add");
  CHECK(r.summary().find("saturated after") == 0);
}

TEST_CASE("incremental matching: a class gaining a node re-reports only matches binding it") {
  auto L = math::make_language();
  const std::vector<Rule> comm{rewrite(L->language, "comm-add", "(+ ?a ?b)", "(+ ?b ?a)")};
  size_t second[2] = {0, 0};
  for (int incremental = 0; incremental < 2; ++incremental) {
    EGraph g(L->language);
    add_expr(g, "(+ a b)");
    RunnerConfig c = config(SchedulerKind::Simple, 10, 1'000, 60'000);
    c.incremental = incremental == 1;
    const RunReport r = Runner(c).run(g, comm);
    CHECK(r.stop == StopReason::Saturated);
    REQUIRE(r.per_iteration.size() >= 2);
    CHECK(r.per_iteration[0].rules[0].matches == 1);
    second[incremental] = r.per_iteration[1].rules[0].matches;
  }
  // Iteration 2 sees (+ a b) and the (+ b a) added to its class: only the
  // latter is new.
  CHECK(second[0] == 2);
  CHECK(second[1] == 1);
}

TEST_CASE("incremental matching: old nodes that meet through a union are a new match") {
  // (+ x w) and (+ y z) are there from the start; only once `w` and
  // (+ y z) are one class does assoc-add match them, with no node added.
  auto L = math::make_language();
  std::vector<Rule> rules;
  rules.push_back(rewrite(L->language, "w-is-sum", "w", "(+ y z)"));
  rules.push_back(rewrite(L->language, "assoc-add", "(+ ?a (+ ?b ?c))", "(+ (+ ?a ?b) ?c)"));
  for (int incremental = 0; incremental < 2; ++incremental) {
    CAPTURE(incremental);
    EGraph g(L->language);
    const ClassId top = add_expr(g, "(+ x w)");
    add_expr(g, "(+ y z)");
    RunnerConfig c = config(SchedulerKind::Simple, 10, 1'000, 60'000);
    c.incremental = incremental == 1;
    const RunReport r = Runner(c).run(g, rules);
    CHECK(r.stop == StopReason::Saturated);
    const auto assoc = lookup_expr(g, "(+ (+ x y) z)");
    REQUIRE(assoc.has_value());
    CHECK(g.find(*assoc) == g.find(top));
  }
}

TEST_CASE("incremental matching builds the same e-graph and skips old matches") {
  auto L = math::make_language();
  std::string dumps[2];
  size_t last_matches[2] = {0, 0};
  for (int incremental = 0; incremental < 2; ++incremental) {
    EGraph g(L->language);
    add_expr(g, math::sum_chain(7));
    RunnerConfig c = config(SchedulerKind::Simple, 100, 1'000'000, 60'000);
    c.incremental = incremental == 1;
    const RunReport r = Runner(c).run(g, math::assoc_comm_rules(*L));
    CHECK(r.stop == StopReason::Saturated);
    CHECK(g.num_classes() == 127);
    dumps[incremental] = dump_text(g);
    last_matches[incremental] = r.per_iteration.back().rules[0].matches + r.per_iteration.back().rules[1].matches;
  }
  CHECK(dumps[0] == dumps[1]);
  CHECK(last_matches[1] < last_matches[0]);
  // The simplification suite (guards, analysis) gives the same graph too.
  std::string math_dumps[2];
  for (int incremental = 0; incremental < 2; ++incremental) {
    auto g = math::make_egraph(*L);
    add_expr(*g, "(d x (* x (ln x)))");
    // Skipped matches are exactly the no-ops, so even the node budget stops
    // both runs at the same point.
    RunnerConfig c = config(SchedulerKind::Simple, 8, 5'000, 60'000);
    c.incremental = incremental == 1;
    const RunReport r = Runner(c).run(*g, math::simplify_rules(*L));
    CHECK(r.stop == StopReason::NodeLimit);
    math_dumps[incremental] = dump_text(*g);
  }
  CHECK(math_dumps[0] == math_dumps[1]);
}
