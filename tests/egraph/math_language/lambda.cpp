// egg's lambda-calculus suite: the language, the free-variable and constant
// analysis, the rules (capture-avoiding substitution as a custom applier)
// and the goals of egg 0.9.5's tests/lambda.rs.

#include "lambda.hpp"
#include <spool/egraph/pattern.hpp>
#include <spool/support/error.hpp>
#include <spool/support/hash.hpp>

#include <algorithm>
#include <iterator>
#include <limits>

namespace spool::egraph::lambda {

std::unique_ptr<LambdaLanguage> make_language() {
  auto m = std::make_unique<LambdaLanguage>();
  OpTable& ops = m->language.ops;
  m->var = ops.add("var", 1);
  m->add = ops.add("+", 2);
  m->eq = ops.add("=", 2);
  m->app = ops.add("app", 2);
  m->lam = ops.add("lam", 2);
  m->let = ops.add("let", 3);
  m->fix = ops.add("fix", 2);
  m->if_ = ops.add("if", 3);
  m->num = ops.add("num", 0);
  m->sym = ops.add("sym", 0);
  m->true_ = ops.add("true", 0);
  m->false_ = ops.add("false", 0);
  ops.number_op = m->num;
  ops.symbol_op = m->sym;
  ops.float_numbers = false;
  return m;
}

// ---- analysis -----------------------------------------------------------------------

namespace {

void insert_sorted(std::vector<ClassId>& set, ClassId c) {
  auto it = std::lower_bound(set.begin(), set.end(), c);
  if (it == set.end() || *it != c) set.insert(it, c);
}
void erase(std::vector<ClassId>& set, ClassId c) {
  auto it = std::lower_bound(set.begin(), set.end(), c);
  if (it != set.end() && *it == c) set.erase(it);
}
void unite(std::vector<ClassId>& set, const std::vector<ClassId>& other) {
  for (ClassId c : other) insert_sorted(set, c);
}
}  // namespace

size_t LambdaAnalysis::SetHash::operator()(const std::vector<ClassId>& set) const {
  WordHash h;
  h.add(set.size());
  for (const ClassId c : set) h.add(c.value);
  return static_cast<size_t>(h.h);
}

uint32_t LambdaAnalysis::intern(const std::vector<ClassId>& set) {
  if (set.empty()) return 0;
  const auto [it, added] = set_ids_.try_emplace(set, static_cast<uint32_t>(sets_.size()));
  if (added) sets_.push_back(set);
  return it->second;
}

bool LambdaAnalysis::intersect(Data& into, uint32_t other) {
  if (into.free == other || into.free == 0) return false;
  const std::vector<ClassId>& a = sets_[into.free];
  const std::vector<ClassId>& b = sets_[other];
  scratch_.clear();
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(scratch_));
  if (scratch_.size() == a.size()) return false;
  into.free = intern(scratch_);
  return true;
}

LambdaAnalysis::Data LambdaAnalysis::eval(const EGraph& graph, NodeId n) {
  const ENodeRef node = graph.node(n);
  auto kid = [&](size_t i) { return graph.find_const(node.children[i]); };
  auto free_of = [&](size_t i) -> const std::vector<ClassId>& { return sets_[data_[kid(i).value].free]; };
  auto constant_at = [&](size_t i) { return constant_of(data_[kid(i).value]); };
  std::vector<ClassId> free;
  std::optional<Constant> constant;
  const OpId op = node.op;
  if (op == lang_.var) {
    free.push_back(kid(0));
  } else if (op == lang_.let) {
    free = free_of(2);
    erase(free, kid(0));
    unite(free, free_of(1));
  } else if (op == lang_.lam || op == lang_.fix) {
    free = free_of(1);
    erase(free, kid(0));
  } else {
    for (size_t i = 0; i < node.children.size(); ++i) unite(free, free_of(i));
  }
  if (op == lang_.num) {
    constant = Constant{false, graph.attrs()[node.attr].i};
  } else if (op == lang_.true_ || op == lang_.false_) {
    constant = Constant{true, op == lang_.true_ ? 1 : 0};
  } else if (op == lang_.add) {
    const auto a = constant_at(0);
    const auto b = constant_at(1);
    // egg's Num is an i32 and + is checked_add.
    if (a && b && !a->is_bool && !b->is_bool) {
      const int64_t sum = a->value + b->value;
      if (sum >= std::numeric_limits<int32_t>::min() && sum <= std::numeric_limits<int32_t>::max())
        constant = Constant{false, sum};
    }
  } else if (op == lang_.eq) {
    const auto a = constant_at(0);
    const auto b = constant_at(1);
    if (a && b) constant = Constant{true, *a == *b ? 1 : 0};
  }
  Data d;
  d.free = intern(free);
  set_constant(d, constant);
  return d;
}

void LambdaAnalysis::make(const EGraph& graph, ClassId c, NodeId n) {
  if (data_.size() <= c.value) data_.resize(c.value + 1);
  const Data d = eval(graph, n);  // before the reference: eval reads data_
  data_[c.value] = d;
}

std::string LambdaAnalysis::check_merge(const EGraph&, ClassId a, ClassId b) const {
  const auto x = constant(a);
  const auto y = constant(b);
  if (x && y && !(*x == *y)) return "the classes hold different constants";
  return {};
}

MergeChange LambdaAnalysis::merge(ClassId into, ClassId from) {
  // egg's: the intersection of the free variables, the constant either has.
  Data& to = data_[into.value];
  Data& other = data_[from.value];
  MergeChange changed;
  changed.into = intersect(to, other.free);
  changed.from = sets_[to.free].size() != sets_[other.free].size();
  if ((to.kind == Kind::None) != (other.kind == Kind::None)) {
    if (to.kind == Kind::None) {
      to.kind = other.kind;
      to.value = other.value;
      changed.into = true;
    } else {
      changed.from = true;
    }
  }
  other = Data{};
  return changed;
}

bool LambdaAnalysis::remake(const EGraph& graph, ClassId c, NodeId n) {
  const Data d = eval(graph, n);
  Data& to = data_[c.value];
  bool changed = intersect(to, d.free);
  if (to.kind == Kind::None && d.kind != Kind::None) {
    to.kind = d.kind;
    to.value = d.value;
    changed = true;
  }
  return changed;
}

void LambdaAnalysis::modify(EGraph& graph, ClassId c) {
  const auto k = constant(c);
  if (!k) return;
  const ClassId leaf = k->is_bool ? graph.add_leaf(k->value ? lang_.true_ : lang_.false_)
                                  : graph.add_leaf(lang_.num, graph.attrs().intern_int(k->value));
  graph.merge(c, leaf, "constant folding");
}

size_t LambdaAnalysis::memory_bytes() const {
  size_t bytes = data_.capacity() * sizeof(Data);
  for (const std::vector<ClassId>& set : sets_) bytes += 2 * set.capacity() * sizeof(ClassId);  // and its key
  return bytes;
}

std::unique_ptr<EGraph> make_egraph(LambdaLanguage& lang) {
  auto g = std::make_unique<EGraph>(lang.language);
  g->set_analysis(std::make_unique<LambdaAnalysis>(lang));
  return g;
}

// ---- rules -------------------------------------------------------------------------

namespace {

const LambdaAnalysis& analysis(const EGraph& g) {
  const auto* a = dynamic_cast<const LambdaAnalysis*>(g.analysis());
  SPOOL_ASSERT(a, "the lambda rules need the LambdaAnalysis");
  return *a;
}

Registry make_registry(const LambdaLanguage& lang) {
  Registry r;
  r.add_guard("is-const", [](const EGraph& g, const MatchView& m) {
    return analysis(g).constant(g.find_const(m.args[0])).has_value();
  });
  r.add_guard("is-not-same-var", [](const EGraph& g, const MatchView& m) {
    return g.find_const(m.args[0]) != g.find_const(m.args[1]);
  });
  // egg's ConditionEqual("(let ?x ?e ?then)", "(let ?x ?e ?else)"): both
  // terms are added, and ?else is the result when they are one class.
  const OpId let = lang.let;
  r.add_applier("if-elim", [let](EGraph& g, const MatchView& m) -> std::optional<ClassId> {
    const ClassId x = m.args[0], e = m.args[1], then = m.args[2], els = m.args[3];
    const ClassId a = g.add(let, AttrId{}, std::vector<ClassId>{x, e, then});
    const ClassId b = g.add(let, AttrId{}, std::vector<ClassId>{x, e, els});
    if (g.find(a) != g.find(b)) return std::nullopt;
    return els;
  });
  // egg's CaptureAvoid: (let v1 e (lam v2 body)) with v2 free in e renames
  // v2 to a fresh symbol named after the matched class.
  r.add_applier("capture-avoid", [&lang](EGraph& g, const MatchView& m) -> std::optional<ClassId> {
    const ClassId v1 = m.args[0], e = m.args[1], v2 = m.args[2], body = m.args[3];
    const std::vector<ClassId>& free = analysis(g).free(g.find(e));
    const bool v2_free_in_e = std::binary_search(free.begin(), free.end(), g.find(v2));
    if (v2_free_in_e) {
      const ClassId fresh =
          g.add_leaf(lang.sym, g.attrs().intern_symbol("_" + std::to_string(m.root.value)));
      const ClassId var_fresh = g.add(lang.var, AttrId{}, std::vector<ClassId>{fresh});
      const ClassId inner = g.add(lang.let, AttrId{}, std::vector<ClassId>{v2, var_fresh, body});
      const ClassId outer = g.add(lang.let, AttrId{}, std::vector<ClassId>{v1, e, inner});
      return g.add(lang.lam, AttrId{}, std::vector<ClassId>{fresh, outer});
    }
    const ClassId inner = g.add(lang.let, AttrId{}, std::vector<ClassId>{v1, e, body});
    return g.add(lang.lam, AttrId{}, std::vector<ClassId>{v2, inner});
  });
  return r;
}

}  // namespace

std::vector<Rule> rules(LambdaLanguage& lang) {
  const Registry reg = make_registry(lang);
  Language& L = lang.language;
  std::vector<Rule> r;
  auto rw = [&](std::string name, std::string_view lhs, std::string_view rhs, std::vector<GuardSpec> guards = {}) {
    r.push_back(rewrite(L, std::move(name), lhs, rhs, &reg, std::move(guards)));
  };
  auto apply = [&](std::string name, std::string lhs, std::string applier, std::vector<std::string> args,
                   std::vector<GuardSpec> guards = {}) {
    RuleSpec spec;
    spec.name = std::move(name);
    spec.lhs.push_back(PatternSpec{"", std::move(lhs), {}});
    spec.guards = std::move(guards);
    ActionSpec a;
    a.kind = ActionSpec::Kind::Apply;
    a.applier = std::move(applier);
    a.args = std::move(args);
    spec.actions.push_back(std::move(a));
    r.push_back(compile_rule(L, reg, spec).take());
  };
  const GuardSpec not_same{"is-not-same-var", {"?v1", "?v2"}, {}};
  // Open terms.
  rw("if-true", "(if true ?then ?else)", "?then");
  rw("if-false", "(if false ?then ?else)", "?else");
  apply("if-elim", "(if (= (var ?x) ?e) ?then ?else)", "if-elim", {"?x", "?e", "?then", "?else"});
  rw("add-comm", "(+ ?a ?b)", "(+ ?b ?a)");
  rw("add-assoc", "(+ (+ ?a ?b) ?c)", "(+ ?a (+ ?b ?c))");
  rw("eq-comm", "(= ?a ?b)", "(= ?b ?a)");
  // Substitution.
  rw("fix", "(fix ?v ?e)", "(let ?v (fix ?v ?e) ?e)");
  rw("beta", "(app (lam ?v ?body) ?e)", "(let ?v ?e ?body)");
  rw("let-app", "(let ?v ?e (app ?a ?b))", "(app (let ?v ?e ?a) (let ?v ?e ?b))");
  rw("let-add", "(let ?v ?e (+ ?a ?b))", "(+ (let ?v ?e ?a) (let ?v ?e ?b))");
  rw("let-eq", "(let ?v ?e (= ?a ?b))", "(= (let ?v ?e ?a) (let ?v ?e ?b))");
  rw("let-const", "(let ?v ?e ?c)", "?c", {GuardSpec{"is-const", {"?c"}, {}}});
  rw("let-if", "(let ?v ?e (if ?cond ?then ?else))", "(if (let ?v ?e ?cond) (let ?v ?e ?then) (let ?v ?e ?else))");
  rw("let-var-same", "(let ?v1 ?e (var ?v1))", "?e");
  rw("let-var-diff", "(let ?v1 ?e (var ?v2))", "(var ?v2)", {not_same});
  rw("let-lam-same", "(let ?v1 ?e (lam ?v1 ?body))", "(lam ?v1 ?body)");
  apply("let-lam-diff", "(let ?v1 ?e (lam ?v2 ?body))", "capture-avoid", {"?v1", "?e", "?v2", "?body"}, {not_same});
  return r;
}

const std::vector<Goal>& goals() {
  static const std::vector<Goal> g = [] {
    std::vector<Goal> v;
    auto add = [&](std::string name, std::string start, std::vector<std::string> goals) {
      v.push_back(Goal{std::move(name), std::move(start), std::move(goals)});
      return &v.back();
    };
    const std::string compose = "(let compose (lam f (lam g (lam x (app (var f) (app (var g) (var x))))))";
    // egg writes this goal "(lam x 8))": its reader stops after the term.
    add("lambda_under", "(lam x (+ 4 (app (lam y (var y)) 4)))", {"(lam x 8)"});
    add("lambda_if_elim", "(if (= (var a) (var b)) (+ (var a) (var a)) (+ (var a) (var b)))", {"(+ (var a) (var b))"});
    add("lambda_let_simple", "(let x 0 (let y 1 (+ (var x) (var y))))", {"1"});
    add("lambda_capture", "(let x 1 (lam x (var x)))", {"(lam x 1)"})->provable = false;
    add("lambda_capture_free", "(let y (+ (var x) (var x)) (lam x (var y)))", {"(lam x (+ (var x) (var x)))"})
        ->provable = false;
    add("lambda_closure_not_seven",
        "(let five 5 (let add-five (lam x (+ (var x) (var five))) (let five 6 (app (var add-five) 1))))", {"7"})
        ->provable = false;
    add("lambda_compose",
        compose + " (let add1 (lam y (+ (var y) 1)) (app (app (var compose) (var add1)) (var add1))))",
        {"(lam ?x (+ 1 (app (lam ?y (+ 1 (var ?y))) (var ?x))))", "(lam ?x (+ (var ?x) 2))"});
    add("lambda_if_simple", "(if (= 1 1) 7 9)", {"7"});
    std::string many = "(var add1)";
    for (int i = 0; i < 6; ++i) many = "(app (app (var compose) (var add1)) " + many + ")";
    add("lambda_compose_many", compose + " (let add1 (lam y (+ (var y) 1)) " + many + "))",
        {"(lam ?x (+ (var ?x) 7))"});
    Goal* e = add("lambda_function_repeat",
                  compose +
                      " (let repeat (fix repeat (lam fun (lam n (if (= (var n) 0) (lam i (var i)) (app (app (var "
                      "compose) (var fun)) (app (app (var repeat) (var fun)) (+ (var n) -1)))))))"
                      " (let add1 (lam y (+ (var y) 1)) (app (app (var repeat) (var add1)) 2))))",
                  {"(lam ?x (+ (var ?x) 2))"});
    e->time_limit_ms = 20'000;
    e->node_limit = 150'000;
    e->iter_limit = 60;
    e->slow = true;
    add("lambda_if",
        "(let zeroone (lam x (if (= (var x) 0) 0 1)) (+ (app (var zeroone) 0) (app (var zeroone) 10)))", {"1"});
    e = add("lambda_fib",
            "(let fib (fix fib (lam n (if (= (var n) 0) 0 (if (= (var n) 1) 1 (+ (app (var fib) (+ (var n) -1)) "
            "(app (var fib) (+ (var n) -2))))))) (app (var fib) 4))",
            {"3"});
    e->iter_limit = 60;
    e->node_limit = 500'000;
    e->slow = true;
    return v;
  }();
  return g;
}

Result run_goal(LambdaLanguage& lang, const Goal& goal, std::span<const Rule> rules, int threads, bool check) {
  auto g = make_egraph(lang);
  const ClassId start = add_expr(*g, goal.start);
  g->rebuild();
  std::vector<Query> queries;
  for (const std::string& text : goal.goals) {
    Vars vars;
    std::vector<Pattern> p;
    p.push_back(parse_pattern(lang.language, text, vars).take());
    queries.push_back(compile_query(p, {std::nullopt}, vars).take());
  }
  auto proven = [&](EGraph& e) {
    const ClassId root = e.find(start);
    for (const Query& q : queries) {
      MatchSet ms;
      search(e, q, std::span<const ClassId>(&root, 1), ms);
      if (ms.size() == 0) return false;
    }
    return true;
  };
  RunnerConfig c;
  c.iter_limit = goal.iter_limit;
  c.node_limit = goal.node_limit;
  c.time_limit_ms = goal.time_limit_ms;
  c.threads = threads;
  c.check_invariants = check;
  c.incremental = false;
  c.stop_when = proven;
  Result r;
  r.report = Runner(c).run(*g, rules);
  r.proven = proven(*g);
  r.classes = g->num_classes();
  r.nodes = g->num_nodes();
  return r;
}

}  // namespace spool::egraph::lambda
