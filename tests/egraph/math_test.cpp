// The arithmetic language: associativity/commutativity workloads with exact
// e-graph sizes, the simplification suite's goals, and extraction.

#include <spool/egraph/extract.hpp>
#include <math_language/math.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

using namespace spool::egraph;

namespace {

RunnerConfig simple(size_t iters, size_t nodes = 1'000'000) {
  RunnerConfig c;
  c.scheduler = SchedulerKind::Simple;
  c.iter_limit = iters;
  c.node_limit = nodes;
  c.time_limit_ms = 60'000;
  return c;
}

// One class with two forms: s = (+ (+ x y) (+ z w)) has 7 nodes, so
// (* s s) has tree cost 15 and DAG cost 8; (- (+ (+ a b) (+ c u)) e) costs
// 9 either way. The class, in the rebuilt graph.
ClassId shared_or_flat(EGraph& g) {
  const ClassId shared = add_expr(g, "(* (+ (+ x y) (+ z w)) (+ (+ x y) (+ z w)))");
  const ClassId flat = add_expr(g, "(- (+ (+ a b) (+ c u)) e)");
  g.merge(shared, flat);
  g.rebuild();
  return g.find(shared);
}

}  // namespace

TEST_CASE("assoc-add-7: 7 iterations give 127 classes and prove the reversed sum") {
  auto L = math::make_language();
  // No analysis: constant folding would merge subsets with equal sums.
  auto g = std::make_unique<EGraph>(L->language);
  const ClassId root = add_expr(*g, math::sum_chain(7));
  CHECK(math::sum_chain(3) == "(+ 1 (+ 2 3))");
  Runner runner(simple(7));
  const auto rules = math::assoc_comm_rules(*L);
  const RunReport report = runner.run(*g, rules);
  CHECK(report.iterations == 7);
  CHECK(g->num_classes() == 127);
  CHECK(report.classes == 127);
  g->check_invariants();
  const auto reversed = lookup_expr(*g, math::reversed_sum_chain(7));
  REQUIRE(reversed.has_value());
  CHECK(g->find(*reversed) == g->find(root));
}

TEST_CASE("assoc-add-10 saturates to 1,023 classes and 57,012 nodes") {
  auto L = math::make_language();
  auto g = std::make_unique<EGraph>(L->language);
  const ClassId root = add_expr(*g, math::sum_chain(10));
  Runner runner(simple(100));
  const RunReport report = runner.run(*g, math::assoc_comm_rules(*L));
  CHECK(report.stop == StopReason::Saturated);
  // One class per non-empty subset of the ten terms; one node per ordered
  // split of each subset of two or more terms, plus the ten leaves.
  CHECK(g->num_classes() == 1023);
  CHECK(g->num_nodes() == 57012);
  g->check_invariants();
  CHECK(g->find(*lookup_expr(*g, math::reversed_sum_chain(10))) == g->find(root));
  // Compact storage: the saturated graph stays under 64 bytes per e-node.
  CHECK(static_cast<double>(g->memory_bytes()) / static_cast<double>(g->num_nodes()) < 64.0);
}

TEST_CASE("the simplification suite proves every goal") {
  auto L = math::make_language();
  const auto rules = math::simplify_rules(*L);
  size_t proven = 0;
  for (const math::Goal& goal : math::goals()) {
    CAPTURE(goal.name);
    auto g = math::make_egraph(*L);
    const ClassId lhs = add_expr(*g, goal.lhs);
    RunnerConfig cfg;
    cfg.iter_limit = 30;
    cfg.node_limit = 100'000;
    cfg.time_limit_ms = 20'000;
    cfg.stop_when = [&](EGraph& e) {
      auto rhs = lookup_expr(e, goal.rhs);
      return rhs && e.find(*rhs) == e.find(lhs);
    };
    Runner runner(cfg);
    const RunReport report = runner.run(*g, rules);
    CHECK(report.stop == StopReason::Goal);
    auto rhs = lookup_expr(*g, goal.rhs);
    const bool ok = rhs && g->find(*rhs) == g->find(lhs);
    CHECK(ok);
    proven += ok;
    g->check_invariants();
  }
  CHECK(proven >= 12);
}

TEST_CASE("a goal that is false is not proven") {
  auto L = math::make_language();
  const auto rules = math::simplify_rules(*L);
  auto g = math::make_egraph(*L);
  const ClassId lhs = add_expr(*g, "(+ x (+ x x))");
  RunnerConfig cfg;
  cfg.iter_limit = 8;
  cfg.node_limit = 20'000;
  Runner runner(cfg);
  runner.run(*g, rules);
  const auto wrong = lookup_expr(*g, "(* 4 x)");
  CHECK((!wrong || g->find(*wrong) != g->find(lhs)));
  const auto right = lookup_expr(*g, "(* 3 x)");
  REQUIRE(right.has_value());
  CHECK(g->find(*right) == g->find(lhs));
}

TEST_CASE("constant folding merges known values and refuses contradictions") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  const ClassId e = add_expr(*g, "(* (- 5 2) (+ 1 1))");
  g->rebuild();
  CHECK(lookup_expr(*g, "6") == g->find(e));
  const auto* fold = dynamic_cast<const math::ConstantFold*>(g->analysis());
  REQUIRE(fold != nullptr);
  CHECK(fold->constant(e) == 6.0);
  // Data reaches parents through merges: x = 3 makes (+ x 1) = 4.
  const ClassId x = add_expr(*g, "x");
  const ClassId x1 = add_expr(*g, "(+ x 1)");
  g->merge(x, add_expr(*g, "3"), "test");
  g->rebuild();
  CHECK(fold->constant(x1) == 4.0);
  CHECK(lookup_expr(*g, "4") == g->find(x1));
  g->check_invariants();
  // Two different constants: the merge is refused and the rule is named.
  try {
    g->merge(add_expr(*g, "7"), add_expr(*g, "8"), "rule 'bad' (bad.rules:3)");
    FAIL("the merge was not refused");
  } catch (const spool::Error& err) {
    CHECK(std::string(err.what()).find("rule 'bad' (bad.rules:3): refused to merge") == 0);
    CHECK(std::string(err.what()).find("different constants 7 and 8") != std::string::npos);
  }
  g->rebuild();
  g->check_invariants();
}

TEST_CASE("pruning in a rebuild drops the duplicates congruence found, without pruning them") {
  // (+ x 1) and (+ y 1) share a class; merging x with y makes (+ y 1) a
  // duplicate, still listed in the class when, in the same rebuild, the
  // class's new constant prunes it to its leaves.
  auto L = math::make_language();
  auto g = math::make_egraph(*L, /*prune=*/true);
  const ClassId x1 = add_expr(*g, "(+ x 1)");
  g->merge(x1, add_expr(*g, "(+ y 1)"), "test");
  g->rebuild();
  g->merge(add_expr(*g, "x"), add_expr(*g, "y"), "test");
  g->merge(x1, add_expr(*g, "4"), "test");
  g->rebuild();
  g->check_invariants();
  CHECK(g->num_pruned() == 1);  // (+ x 1); (+ y 1) is gone as a duplicate
  CHECK(g->find(*lookup_expr(*g, "(+ y 1)")) == g->find(x1));
  g->compact();
  g->check_invariants();
  CHECK(g->num_pruned() == 1);
}

TEST_CASE("a rule that merges different constants is reported by name") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  add_expr(*g, "(+ 2 2)");
  std::vector<Rule> rules;
  rules.push_back(rewrite(L->language, "two-plus-two-is-five", "(+ 2 2)", "5"));
  Runner runner(simple(5));
  CHECK_THROWS_WITH_AS(runner.run(*g, rules),
                       doctest::Contains("rule 'two-plus-two-is-five': refused to merge"), spool::Error);
}

TEST_CASE("extraction returns the cheapest term") {
  auto L = math::make_language();
  const auto rules = math::simplify_rules(*L);
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"(+ 1 (- a (* (- 2 1) a)))", "1"},
      {"(* (+ x 0) 1)", "x"},
      {"(d x (+ 1 (* 2 x)))", "2"},
      {"(- (* 3 y) (* 3 y))", "0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    auto g = math::make_egraph(*L);
    const ClassId root = add_expr(*g, c.in);
    RunnerConfig cfg;
    cfg.iter_limit = 8;
    cfg.node_limit = 10'000;
    Runner(cfg).run(*g, rules);
    AstSize size;
    Extractor ex(*g, size);
    const Extraction best = ex.extract(root);
    CHECK(best.term.str(L->language) == c.out);
    CHECK(best.tree_cost == 1);
    CHECK(best.dag_cost == 1);
  }
}

TEST_CASE("extraction: tree and DAG costs, shared sub-terms") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  const ClassId root = add_expr(*g, "(* (+ x y) (+ x y))");
  g->rebuild();
  AstSize size;
  const Extraction e = Extractor(*g, size).extract(root);
  CHECK(e.term.str(L->language) == "(* (+ x y) (+ x y))");
  CHECK(e.tree_cost == 7);
  CHECK(e.dag_cost == 4);  // *, +, x, y
  CHECK(e.term.nodes.size() == 4);
  // A term round-trips through add_term.
  auto g2 = math::make_egraph(*L);
  const auto roots = add_term(*g2, e.term);
  g2->rebuild();
  CHECK(Extractor(*g2, size).extract(roots[0]).term == e.term);
}

TEST_CASE("extraction: a class reachable only through a cycle is never chosen") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  // c = (sin c) only: no finite term. r = (cos c) | x: must pick x.
  const ClassId x = add_expr(*g, "x");
  const ClassId y = add_expr(*g, "y");
  const ClassId s = g->add(L->sin, AttrId{}, std::span<const ClassId>(&y, 1));
  g->merge(s, y);  // y = sin(y): the class still has the leaf y
  const ClassId c = g->add(L->ln, AttrId{}, std::span<const ClassId>(&x, 1));
  const ClassId cc = g->add(L->sqrt, AttrId{}, std::span<const ClassId>(&c, 1));
  g->merge(c, cc);  // sqrt(c) = c = ln(x)
  g->rebuild();
  AstSize size;
  Extractor ex(*g, size);
  CHECK(ex.extract(y).term.str(L->language) == "y");
  CHECK(ex.extract(c).term.str(L->language) == "(ln x)");

  // A class whose only node points back at itself cannot be extracted.
  auto g2 = math::make_egraph(*L);
  const ClassId a = add_expr(*g2, "a");
  const ClassId sa = g2->add(L->sin, AttrId{}, std::span<const ClassId>(&a, 1));
  const ClassId ca = g2->add(L->cos, AttrId{}, std::span<const ClassId>(&sa, 1));
  g2->merge(sa, ca);  // sin(a) = cos(sin(a))
  g2->rebuild();
  const ClassId top = g2->add(L->ln, AttrId{}, std::span<const ClassId>(&sa, 1));
  g2->rebuild();
  Extractor ex2(*g2, size);
  CHECK(ex2.extract(top).term.str(L->language) == "(ln (sin a))");
  CHECK(ex2.cost(top) == 3);

  auto g3 = math::make_egraph(*L);
  const ClassId p = add_expr(*g3, "p");
  const ClassId sp = g3->add(L->sin, AttrId{}, std::span<const ClassId>(&p, 1));
  const ClassId q = g3->add(L->cos, AttrId{}, std::span<const ClassId>(&sp, 1));
  g3->rebuild();
  (void)q;
  CHECK(Extractor(*g3, size).extractable(sp));
}

TEST_CASE("DAG extraction picks the shared form where tree extraction does not") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  const ClassId root = shared_or_flat(*g);
  AstSize size;
  const Extractor tree(*g, size);
  CHECK(tree.extract(root).term.str(L->language) == "(- (+ (+ a b) (+ c u)) e)");
  CHECK(tree.cost(root) == 9);
  const DagExtractor dag(*g, size);
  const Extraction e = dag.extract(root);
  CHECK(e.term.str(L->language) == "(* (+ (+ x y) (+ z w)) (+ (+ x y) (+ z w)))");
  CHECK(e.dag_cost == 8);
  CHECK(e.tree_cost == 15);
  CHECK(e.term.nodes.size() == 8);
  CHECK(dag.cost(root) == 8);
  // The cost of a node over the chosen children: the flat form's 9.
  for (const NodeId n : g->class_nodes(root))
    if (g->node(n).op == L->sub) CHECK(dag.node_cost(n) == 9);
}

TEST_CASE("DAG extraction repriced at a few leaves is the extraction a fresh build gives") {
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  const ClassId root = shared_or_flat(*g);  // the shared form holds x once
  // AstSize, with the leaf x priced 5 more: the flat form wins.
  const AttrId x = L->language.attrs.intern_symbol("x");
  struct PricedX : CostFunction {
    AttrId x;
    double cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const override {
      const double own = AstSize{}.cost(graph, node, child_costs);
      return graph.node(node).children.empty() && graph.node(node).attr == x ? own + 5 : own;
    }
  } priced;
  priced.x = x;
  std::vector<NodeId> leaves_x;
  for (const ClassId c : g->classes())
    for (const NodeId n : g->class_nodes(c))
      if (g->node(n).children.empty() && g->node(n).attr == x) leaves_x.push_back(n);
  REQUIRE(leaves_x.size() == 1);
  AstSize size;
  const DagExtractor like(*g, size);
  CHECK(like.cost(root) == 8);
  const DagExtractor repriced(like, priced, leaves_x);
  const DagExtractor fresh(*g, priced);
  CHECK(repriced.cost(root) == 9);
  CHECK(repriced.extract(root).term.str(L->language) == "(- (+ (+ a b) (+ c u)) e)");
  for (const ClassId c : g->classes()) {
    CHECK(repriced.cost(c) == fresh.cost(c));
    CHECK(repriced.best_node(c) == fresh.best_node(c));
  }
}

TEST_CASE("DAG extraction: a deep chain of shared values stays linear") {
  // v(i+1) = (* v(i) v(i)) | (+ v(i) t(i)), t(i) a fresh 3-node term. The
  // tree cost of the product doubles per level and the sum wins on tree
  // cost from level 3 on; by DAG cost the product (1 new node) always wins.
  auto L = math::make_language();
  auto g = math::make_egraph(*L);
  ClassId v = add_expr(*g, "x");
  for (int i = 0; i < 40; ++i) {
    const ClassId sq = g->add(L->mul, AttrId{}, std::vector<ClassId>{v, v});
    const ClassId t = add_expr(*g, "(+ p" + std::to_string(i) + " q" + std::to_string(i) + ")");
    const ClassId sum = g->add(L->add, AttrId{}, std::vector<ClassId>{v, t});
    g->merge(sq, sum);
    g->rebuild();
    v = g->find(sq);
  }
  AstSize size;
  const DagExtractor dag(*g, size);
  const Extraction e = dag.extract(v);
  CHECK(e.dag_cost == 41);
  CHECK(dag.cost(v) == 41);
  CHECK(e.term.nodes.size() == 41);
  CHECK(g->node(dag.best_node(v)).op == L->mul);
  CHECK(dag.node_cost(dag.best_node(v)) == 41);
  // The sum at the top: the product chain below (40 nodes) plus t(39) (3).
  for (const NodeId n : g->class_nodes(v))
    if (g->node(n).op == L->add) CHECK(dag.node_cost(n) == 44);
  const Extractor tree(*g, size);
  CHECK(g->node(tree.best_node(v)).op == L->add);
  CHECK(tree.extract(v).dag_cost > 41);
}

TEST_CASE("DAG extraction: ties by (op, node id), and the same graph gives the same term") {
  auto L = math::make_language();
  auto build = [&] {
    auto g = math::make_egraph(*L);
    const ClassId a = add_expr(*g, "(cos x)");
    const ClassId b = add_expr(*g, "(sin x)");
    const ClassId c = add_expr(*g, "(+ (ln y) z)");
    const ClassId d = add_expr(*g, "(+ z (ln y))");
    g->merge(a, b);
    g->merge(c, d);
    const ClassId top = g->add(L->mul, AttrId{}, std::vector<ClassId>{a, c});
    g->rebuild();
    const ClassId canonical = g->find(top);
    return std::make_pair(std::move(g), canonical);
  };
  auto [g1, top1] = build();
  auto [g2, top2] = build();
  AstSize size;
  const DagExtractor d1(*g1, size), d2(*g2, size);
  const Extractor t1(*g1, size);
  CHECK(d1.extract(top1).term == d2.extract(top2).term);
  CHECK(d1.cost(top1) == 7);
  // Equal costs everywhere: the DAG extractor keeps the tree extractor's
  // (op, node id) choice in every class.
  for (const ClassId c : g1->classes()) CHECK(d1.best_node(c) == t1.best_node(c));
}

TEST_CASE("DAG extraction: a class reachable only through a cycle is never chosen") {
  auto L = math::make_language();
  AstSize size;
  auto g = math::make_egraph(*L);
  const ClassId x = add_expr(*g, "x");
  const ClassId c = g->add(L->ln, AttrId{}, std::span<const ClassId>(&x, 1));
  const ClassId cc = g->add(L->sqrt, AttrId{}, std::span<const ClassId>(&c, 1));
  g->merge(c, cc);  // sqrt(c) = c = ln(x)
  g->rebuild();
  const DagExtractor ex(*g, size);
  CHECK(ex.extract(c).term.str(L->language) == "(ln x)");
  for (const NodeId n : g->class_nodes(g->find(c)))
    if (g->node(n).op == L->sqrt) CHECK(ex.node_cost(n) == std::numeric_limits<double>::infinity());

  auto g2 = math::make_egraph(*L);
  const ClassId a = add_expr(*g2, "a");
  const ClassId sa = g2->add(L->sin, AttrId{}, std::span<const ClassId>(&a, 1));
  const ClassId ca = g2->add(L->cos, AttrId{}, std::span<const ClassId>(&sa, 1));
  g2->merge(sa, ca);  // sin(a) = cos(sin(a))
  g2->rebuild();
  const ClassId top = g2->add(L->ln, AttrId{}, std::span<const ClassId>(&sa, 1));
  g2->rebuild();
  const DagExtractor ex2(*g2, size);
  CHECK(ex2.extract(top).term.str(L->language) == "(ln (sin a))");
  CHECK(ex2.cost(top) == 3);

  // A node reading its own class is never chosen.
  auto g3 = math::make_egraph(*L);
  const ClassId p = add_expr(*g3, "p");
  const ClassId sp = g3->add(L->sin, AttrId{}, std::span<const ClassId>(&p, 1));
  const ClassId q = add_expr(*g3, "q");
  const ClassId cq = g3->add(L->cos, AttrId{}, std::span<const ClassId>(&q, 1));
  const ClassId loop = g3->add(L->ln, AttrId{}, std::span<const ClassId>(&cq, 1));
  g3->merge(cq, loop);  // cos(q) = ln(cos(q)): still has cos(q)
  g3->rebuild();
  const DagExtractor ex3(*g3, size);
  CHECK(ex3.extractable(sp));
  CHECK(ex3.extract(cq).term.str(L->language) == "(cos q)");
}
