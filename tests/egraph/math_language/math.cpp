// The arithmetic language of the engine's tests and benchmark: ops, the
// constant-folding analysis, guards, rules and goals (egg's math suite).

#include "math.hpp"
#include <spool/egraph/pattern.hpp>
#include <spool/support/error.hpp>

#include <bit>

namespace spool::egraph::math {

std::unique_ptr<MathLanguage> make_language() {
  auto m = std::make_unique<MathLanguage>();
  OpTable& ops = m->language.ops;
  m->add = ops.add("+", 2);
  m->sub = ops.add("-", 2);
  m->mul = ops.add("*", 2);
  m->div = ops.add("/", 2);
  m->pow = ops.add("pow", 2);
  m->d = ops.add("d", 2);
  m->integral = ops.add("i", 2);
  m->ln = ops.add("ln", 1);
  m->sqrt = ops.add("sqrt", 1);
  m->sin = ops.add("sin", 1);
  m->cos = ops.add("cos", 1);
  m->num = ops.add("num", 0);
  m->sym = ops.add("sym", 0);
  ops.number_op = m->num;
  ops.symbol_op = m->sym;
  ops.float_numbers = true;
  return m;
}

// ---- constant folding -------------------------------------------------------------

std::optional<double> ConstantFold::fold(const EGraph& graph, NodeId n) const {
  const ENodeRef node = graph.node(n);
  if (node.op == lang_.num) return graph.attrs()[node.attr].f + 0.0;  // -0 folds to 0
  if (node.children.size() != 2) return std::nullopt;
  const OpId op = node.op;
  if (op != lang_.add && op != lang_.sub && op != lang_.mul && op != lang_.div) return std::nullopt;
  const auto a = data_[graph.find_const(node.children[0]).value];
  const auto b = data_[graph.find_const(node.children[1]).value];
  if (!a || !b) return std::nullopt;
  if (op == lang_.add) return *a + *b + 0.0;
  if (op == lang_.sub) return *a - *b + 0.0;
  if (op == lang_.mul) return *a * *b + 0.0;
  if (*b == 0.0) return std::nullopt;
  return *a / *b + 0.0;
}

void ConstantFold::make(const EGraph& graph, ClassId c, NodeId n) {
  if (data_.size() <= c.value) data_.resize(c.value + 1);
  data_[c.value] = fold(graph, n);
}

std::string ConstantFold::check_merge(const EGraph&, ClassId a, ClassId b) const {
  const auto& x = data_[a.value];
  const auto& y = data_[b.value];
  if (x && y && *x != *y) return fmt::format("the classes hold different constants {} and {}", *x, *y);
  return {};
}

MergeChange ConstantFold::merge(ClassId into, ClassId from) {
  auto& x = data_[into.value];
  const auto& y = data_[from.value];
  if (x.has_value() == y.has_value()) return {};
  if (!x) {
    x = y;
    return {true, false};
  }
  return {false, true};
}

bool ConstantFold::remake(const EGraph& graph, ClassId c, NodeId n) {
  if (data_[c.value]) return false;
  data_[c.value] = fold(graph, n);
  return data_[c.value].has_value();
}

void ConstantFold::modify(EGraph& graph, ClassId c) {
  const auto v = data_[c.value];
  if (!v) return;
  auto [it, added] = number_attr_.try_emplace(std::bit_cast<uint64_t>(*v));
  if (added) it->second = graph.attrs().intern_float(*v);
  const ClassId k = graph.add_leaf(lang_.num, it->second);
  graph.merge(c, k, "constant folding");
  if (prune_) graph.prune_to_leaves(c);
}

std::string ConstantFold::check(const EGraph& graph, ClassId c) const {
  const auto v = data_[c.value];
  if (!v) return {};
  for (NodeId n : graph.class_nodes(c, lang_.num))
    if (graph.attrs()[graph.node(n).attr].f == *v) return {};
  return fmt::format("constant {} has no number node", *v);
}

std::string ConstantFold::describe(ClassId c) const {
  const auto v = data_[c.value];
  return v ? fmt::format("= {}", *v) : std::string();
}

std::unique_ptr<EGraph> make_egraph(MathLanguage& lang, bool prune) {
  auto g = std::make_unique<EGraph>(lang.language);
  g->set_analysis(std::make_unique<ConstantFold>(lang, prune));
  return g;
}

// ---- guards ---------------------------------------------------------------------

namespace {

const ConstantFold& folding(const EGraph& g) {
  const auto* a = dynamic_cast<const ConstantFold*>(g.analysis());
  SPOOL_ASSERT(a, "the math guards need the ConstantFold analysis");
  return *a;
}

}  // namespace

Registry make_registry(const MathLanguage& lang) {
  Registry r;
  const OpId sym = lang.sym;
  r.add_guard("is-not-zero", [](const EGraph& g, const MatchView& m) {
    const auto v = folding(g).constant(m.args[0]);
    return !v || *v != 0.0;
  });
  r.add_guard("is-const", [](const EGraph& g, const MatchView& m) {
    return folding(g).constant(m.args[0]).has_value();
  });
  r.add_guard("is-sym", [sym](const EGraph& g, const MatchView& m) {
    return !g.class_nodes(m.args[0], sym).empty();
  });
  // egg: `find(c) != find(x) && (c has a value || c holds a symbol)`.
  r.add_guard("is-const-or-distinct-var", [sym](const EGraph& g, const MatchView& m) {
    const ClassId c = m.args[0], x = m.args[1];
    return g.find_const(c) != g.find_const(x) &&
           (folding(g).constant(c).has_value() || !g.class_nodes(c, sym).empty());
  });
  return r;
}

// ---- rules -----------------------------------------------------------------------

std::vector<Rule> assoc_comm_rules(MathLanguage& lang) {
  std::vector<Rule> rules;
  rules.push_back(rewrite(lang.language, "comm-add", "(+ ?a ?b)", "(+ ?b ?a)"));
  rules.push_back(rewrite(lang.language, "assoc-add", "(+ ?a (+ ?b ?c))", "(+ (+ ?a ?b) ?c)"));
  return rules;
}

std::vector<Rule> simplify_rules(MathLanguage& lang) {
  const Registry reg = make_registry(lang);
  Language& L = lang.language;
  std::vector<Rule> r;
  auto rw = [&](std::string name, std::string_view lhs, std::string_view rhs, std::vector<GuardSpec> guards = {}) {
    r.push_back(rewrite(L, std::move(name), lhs, rhs, &reg, std::move(guards)));
  };
  auto nz = [](std::string v) { return GuardSpec{"is-not-zero", {std::move(v)}, {}}; };
  // Sound for reals: the field axioms, with division by a possibly-zero
  // value guarded (the guard treats non-constants as non-zero, as egg does).
  rw("comm-add", "(+ ?a ?b)", "(+ ?b ?a)");
  rw("comm-mul", "(* ?a ?b)", "(* ?b ?a)");
  rw("assoc-add", "(+ ?a (+ ?b ?c))", "(+ (+ ?a ?b) ?c)");
  rw("assoc-mul", "(* ?a (* ?b ?c))", "(* (* ?a ?b) ?c)");
  rw("sub-canon", "(- ?a ?b)", "(+ ?a (* -1 ?b))");
  rw("div-canon", "(/ ?a ?b)", "(* ?a (pow ?b -1))", {nz("?b")});
  rw("zero-add", "(+ ?a 0)", "?a");
  rw("zero-mul", "(* ?a 0)", "0");
  rw("one-mul", "(* ?a 1)", "?a");
  rw("add-zero", "?a", "(+ ?a 0)");
  rw("mul-one", "?a", "(* ?a 1)");
  rw("cancel-sub", "(- ?a ?a)", "0");
  rw("cancel-div", "(/ ?a ?a)", "1", {nz("?a")});
  rw("distribute", "(* ?a (+ ?b ?c))", "(+ (* ?a ?b) (* ?a ?c))");
  rw("factor", "(+ (* ?a ?b) (* ?a ?c))", "(* ?a (+ ?b ?c))");
  rw("pow-mul", "(* (pow ?a ?b) (pow ?a ?c))", "(pow ?a (+ ?b ?c))");
  rw("pow0", "(pow ?x 0)", "1", {nz("?x")});
  rw("pow1", "(pow ?x 1)", "?x");
  rw("pow2", "(pow ?x 2)", "(* ?x ?x)");
  rw("pow-recip", "(pow ?x -1)", "(/ 1 ?x)", {nz("?x")});
  rw("recip-mul-div", "(* ?x (/ 1 ?x))", "1", {nz("?x")});
  // Derivatives (d x e) = de/dx.
  rw("d-variable", "(d ?x ?x)", "1", {GuardSpec{"is-sym", {"?x"}, {}}});
  rw("d-constant", "(d ?x ?c)", "0",
     {GuardSpec{"is-sym", {"?x"}, {}}, GuardSpec{"is-const-or-distinct-var", {"?c", "?x"}, {}}});
  rw("d-add", "(d ?x (+ ?a ?b))", "(+ (d ?x ?a) (d ?x ?b))");
  rw("d-mul", "(d ?x (* ?a ?b))", "(+ (* ?a (d ?x ?b)) (* ?b (d ?x ?a)))");
  rw("d-sin", "(d ?x (sin ?x))", "(cos ?x)");
  rw("d-cos", "(d ?x (cos ?x))", "(* -1 (sin ?x))");
  rw("d-ln", "(d ?x (ln ?x))", "(/ 1 ?x)", {nz("?x")});
  rw("d-power", "(d ?x (pow ?f ?g))",
     "(* (pow ?f ?g) (+ (* (d ?x ?f) (/ ?g ?f)) (* (d ?x ?g) (ln ?f))))", {nz("?f"), nz("?g")});
  return r;
}

std::vector<Rule> egg_rules(MathLanguage& lang) {
  std::vector<Rule> r = simplify_rules(lang);
  const Registry reg = make_registry(lang);
  Language& L = lang.language;
  auto rw = [&](std::string name, std::string_view lhs, std::string_view rhs, std::vector<GuardSpec> guards = {}) {
    r.push_back(rewrite(L, std::move(name), lhs, rhs, &reg, std::move(guards)));
  };
  // Integrals (i f x) = the integral of f over x.
  rw("i-one", "(i 1 ?x)", "?x");
  rw("i-power-const", "(i (pow ?x ?c) ?x)", "(/ (pow ?x (+ ?c 1)) (+ ?c 1))", {GuardSpec{"is-const", {"?c"}, {}}});
  rw("i-cos", "(i (cos ?x) ?x)", "(sin ?x)");
  rw("i-sin", "(i (sin ?x) ?x)", "(* -1 (cos ?x))");
  rw("i-sum", "(i (+ ?f ?g) ?x)", "(+ (i ?f ?x) (i ?g ?x))");
  rw("i-dif", "(i (- ?f ?g) ?x)", "(- (i ?f ?x) (i ?g ?x))");
  rw("i-parts", "(i (* ?a ?b) ?x)", "(- (* ?a (i ?b ?x)) (i (* (d ?x ?a) (i ?b ?x)) ?x))");
  return r;
}

const std::vector<EggGoal>& egg_goals() {
  static const std::vector<EggGoal> g = [] {
    std::vector<EggGoal> v;
    auto add = [&](std::string name, std::string start, std::string goal) {
      EggGoal e;
      e.name = std::move(name);
      e.start = std::move(start);
      e.goals.push_back(std::move(goal));
      v.push_back(std::move(e));
      return &v.back();
    };
    EggGoal* e = add("math_associate_adds", sum_chain(7), reversed_sum_chain(7));
    e->iter_limit = 7;
    e->backoff = false;
    e->assoc_only = true;
    add("math_fail", "(+ x y)", "(/ x y)")->provable = false;
    add("math_simplify_add", "(+ x (+ x (+ x x)))", "(* 4 x)");
    add("math_powers", "(* (pow 2 x) (pow 2 y))", "(pow 2 (+ x y))");
    add("math_simplify_const", "(+ 1 (- a (* (- 2 1) a)))", "1");
    add("math_simplify_root", "(/ 1 (- (/ (+ 1 (sqrt five)) 2) (/ (- 1 (sqrt five)) 2)))", "(/ 1 (sqrt five))")
        ->node_limit = 75'000;
    add("math_simplify_factor", "(* (+ x 3) (+ x 1))", "(+ (+ (* x x) (* 4 x)) 3)");
    add("math_diff_same", "(d x x)", "1");
    add("math_diff_different", "(d x y)", "0");
    add("math_diff_simple1", "(d x (+ 1 (* 2 x)))", "2");
    add("math_diff_simple2", "(d x (+ 1 (* y x)))", "y");
    add("math_diff_ln", "(d x (ln x))", "(/ 1 x)");
    add("diff_power_simple", "(d x (pow x 3))", "(* 3 (pow x 2))");
    e = add("diff_power_harder", "(d x (- (pow x 3) (* 7 (pow x 2))))", "(* x (- (* 3 x) 14))");
    e->time_limit_ms = 10'000;
    e->iter_limit = 60;
    e->node_limit = 100'000;
    e->extra.push_back("(* x (- (* 3 x) 14))");  // egg's test: "HACK this needs to \"see\" the end expression"
    add("integ_one", "(i 1 x)", "x");
    add("integ_sin", "(i (cos x) x)", "(sin x)");
    add("integ_x", "(i (pow x 1) x)", "(/ (pow x 2) 2)");
    add("integ_part1", "(i (* x (cos x)) x)", "(+ (* x (sin x)) (cos x))");
    add("integ_part2", "(i (* (cos x) x) x)", "(+ (* x (sin x)) (cos x))");
    add("integ_part3", "(i (ln x) x)", "(- (* x (ln x)) x)");
    return v;
  }();
  return g;
}

EggResult run_egg_goal(MathLanguage& lang, const EggGoal& goal, std::span<const Rule> rules, int threads, bool check) {
  std::unique_ptr<EGraph> g = goal.assoc_only ? std::make_unique<EGraph>(lang.language) : make_egraph(lang, true);
  for (const std::string& e : goal.extra) add_expr(*g, e);
  const ClassId start = add_expr(*g, goal.start);
  g->rebuild();
  std::vector<Pattern> targets;
  for (const std::string& text : goal.goals) {
    Vars vars;
    targets.push_back(parse_pattern(lang.language, text, vars).take());
  }
  auto proven = [&](EGraph& e) {
    for (const Pattern& p : targets) {
      const auto c = lookup_ground(e, p);
      if (!c || e.find(*c) != e.find(start)) return false;
    }
    return true;
  };
  RunnerConfig c;
  c.iter_limit = goal.iter_limit;
  c.node_limit = goal.node_limit;
  c.time_limit_ms = goal.time_limit_ms;
  c.scheduler = goal.backoff ? SchedulerKind::Backoff : SchedulerKind::Simple;
  c.threads = threads;
  c.check_invariants = check;
  // Every match every iteration, as egg, where the backoff scheduler
  // counts them; the simple scheduler builds the same e-graph from new
  // matches alone.
  c.incremental = !goal.backoff;
  // math_associate_adds checks its goal after the run (egg's @check), not
  // after every iteration.
  if (!goal.assoc_only) c.stop_when = proven;
  EggResult r;
  r.report = Runner(c).run(*g, rules);
  r.proven = proven(*g);
  r.classes = g->num_classes();
  r.nodes = g->num_nodes();
  r.class_nodes = g->num_class_nodes();
  return r;
}

std::string sum_chain(int n) {
  std::string s;
  for (int i = 1; i < n; ++i) s += fmt::format("(+ {} ", i);
  s += fmt::format("{}", n);
  s += std::string(static_cast<size_t>(n - 1), ')');
  return s;
}

std::string reversed_sum_chain(int n) {
  std::string s;
  for (int i = n; i > 1; --i) s += fmt::format("(+ {} ", i);
  s += "1";
  s += std::string(static_cast<size_t>(n - 1), ')');
  return s;
}

const std::vector<Goal>& goals() {
  static const std::vector<Goal> g = {
      {"simplify-add", "(+ x (+ x (+ x x)))", "(* 4 x)"},
      {"powers", "(* (pow 2 x) (pow 2 y))", "(pow 2 (+ x y))"},
      {"simplify-const", "(+ 1 (- a (* (- 2 1) a)))", "1"},
      {"cancel-sub", "(- (* 3 y) (* 3 y))", "0"},
      {"cancel-div", "(/ (+ x 1) (+ x 1))", "1"},
      {"simplify-factor", "(* (+ x 3) (+ x 1))", "(+ (+ (* x x) (* 4 x)) 3)"},
      {"diff-same", "(d x x)", "1"},
      {"diff-different", "(d x y)", "0"},
      {"diff-simple1", "(d x (+ 1 (* 2 x)))", "2"},
      {"diff-simple2", "(d x (+ 1 (* y x)))", "y"},
      {"diff-ln", "(d x (ln x))", "(/ 1 x)"},
      {"diff-x-ln-x", "(d x (* x (ln x)))", "(+ (ln x) 1)"},
      {"diff-sin", "(d x (sin x))", "(cos x)"},
      {"diff-cos", "(d x (cos x))", "(* -1 (sin x))"},
      {"diff-power-simple", "(d x (pow x 3))", "(* 3 (pow x 2))"},
  };
  return g;
}

}  // namespace spool::egraph::math
