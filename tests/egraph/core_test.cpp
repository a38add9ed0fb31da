// E-graph core: hashcons, congruence through deferred rebuild, invariants
// under random adds and merges, the pattern reader, dumps.

#include <spool/egraph/dump.hpp>
#include <spool/egraph/egraph.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/egraph/rule.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

using namespace spool::egraph;

namespace {

struct Lang {
  Language lang;
  OpId f, g, h, a, b, c, leaf;
  Lang() {
    f = lang.ops.add("f", 1);
    g = lang.ops.add("g", 2);
    h = lang.ops.add("h", kVariadic);
    a = lang.ops.add("a", 0);
    b = lang.ops.add("b", 0);
    c = lang.ops.add("c", 0);
    leaf = lang.ops.add("leaf", 0);
    lang.ops.number_op = leaf;
  }
};

ClassId f_of(EGraph& e, OpId f, ClassId x) { return e.add(f, AttrId{}, std::span<const ClassId>(&x, 1)); }

}  // namespace

TEST_CASE("hashcons: adding the same node twice gives the same class") {
  Lang L;
  EGraph e(L.lang);
  const ClassId a = e.add_leaf(L.a);
  const ClassId b = e.add_leaf(L.b);
  CHECK(a != b);
  CHECK(e.add_leaf(L.a) == a);
  const ClassId fa = f_of(e, L.f, a);
  CHECK(f_of(e, L.f, a) == fa);
  CHECK(e.num_nodes() == 3);
  CHECK(e.num_classes() == 3);
  // Attributes are part of the node.
  const ClassId l1 = e.add_leaf(L.leaf, L.lang.attrs.intern_int(1));
  const ClassId l2 = e.add_leaf(L.leaf, L.lang.attrs.intern_int(2));
  CHECK(l1 != l2);
  CHECK(e.add_leaf(L.leaf, L.lang.attrs.intern_int(1)) == l1);
  CHECK(L.lang.attrs.intern_float(-0.0) != L.lang.attrs.intern_float(0.0));
  CHECK_THROWS_AS(e.add(L.g, AttrId{}, std::span<const ClassId>(&a, 1)), spool::Error);
}

TEST_CASE("congruence: f(a) = f(b) after a = b") {
  Lang L;
  EGraph e(L.lang);
  const ClassId a = e.add_leaf(L.a), b = e.add_leaf(L.b);
  const ClassId fa = f_of(e, L.f, a), fb = f_of(e, L.f, b);
  CHECK(e.find(fa) != e.find(fb));
  CHECK(e.merge(a, b));
  CHECK_FALSE(e.merge(a, b));
  CHECK_FALSE(e.clean());
  e.rebuild();
  CHECK(e.clean());
  CHECK(e.find(fa) == e.find(fb));
  CHECK(e.num_classes() == 2);
  CHECK(e.num_nodes() == 3);  // f(a) and f(b) are one node now
  e.check_invariants();
}

TEST_CASE("congruence: chains that need several rebuild rounds") {
  Lang L;
  EGraph e(L.lang);
  // f^k(a) and f^k(b) for k = 1..20: merging a = b collapses both towers,
  // one level per round of the worklist.
  const int depth = 20;
  ClassId x = e.add_leaf(L.a), y = e.add_leaf(L.b);
  std::vector<ClassId> xs{x}, ys{y};
  for (int i = 0; i < depth; ++i) {
    xs.push_back(f_of(e, L.f, xs.back()));
    ys.push_back(f_of(e, L.f, ys.back()));
  }
  // g(f^k(a), f^k(b)) nodes also collapse to g(t, t).
  std::vector<ClassId> gs;
  for (int i = 0; i <= depth; ++i) {
    const ClassId kids[2] = {xs[i], ys[i]};
    gs.push_back(e.add(L.g, AttrId{}, kids));
  }
  e.merge(xs[0], ys[0]);
  e.rebuild();
  for (int i = 0; i <= depth; ++i) {
    CHECK(e.find(xs[i]) == e.find(ys[i]));
    const ClassId kids[2] = {xs[i], xs[i]};
    CHECK(e.lookup(L.g, AttrId{}, kids) == e.find(gs[i]));
  }
  CHECK(e.num_classes() == static_cast<size_t>(2 * (depth + 1)));
  e.check_invariants();

  // A cycle: merging f(a) with a makes every f^k(a) one class.
  e.merge(xs[1], xs[0]);
  e.rebuild();
  for (int i = 0; i <= depth; ++i) CHECK(e.find(xs[i]) == e.find(xs[0]));
  e.check_invariants();
  CHECK(e.num_classes() == 2);  // {a, b, f..} and {g..}
}

TEST_CASE("invariants hold after random sequences of adds and merges") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    Lang L;
    EGraph e(L.lang);
    std::mt19937 rng(seed);
    std::vector<ClassId> ids;
    for (int i = 0; i < 5; ++i) ids.push_back(e.add_leaf(L.leaf, L.lang.attrs.intern_int(i)));
    auto pick = [&] { return ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)]; };
    for (int step = 0; step < 400; ++step) {
      const int what = std::uniform_int_distribution<int>(0, 9)(rng);
      if (what < 3) {
        ids.push_back(f_of(e, L.f, pick()));
      } else if (what < 6) {
        const ClassId kids[2] = {pick(), pick()};
        ids.push_back(e.add(L.g, AttrId{}, kids));
      } else if (what < 7) {
        const ClassId kids[3] = {pick(), pick(), pick()};
        ids.push_back(e.add(L.h, AttrId{}, kids));
      } else if (what < 9) {
        e.merge(pick(), pick());
      } else {
        e.rebuild();
        e.check_invariants();
      }
    }
    e.rebuild();
    e.check_invariants();
    // Congruence closure: every pair of g nodes with equal children classes
    // is in one class.
    for (ClassId c : e.classes())
      for (NodeId n : e.class_nodes(c)) {
        const ENodeRef node = e.node(n);
        ClassVec kids(node.children.begin(), node.children.end());
        CHECK(e.lookup(node.op, node.attr, span_of(kids)) == c);
      }
  }
}

TEST_CASE("the op index lists the classes holding each op") {
  Lang L;
  EGraph e(L.lang);
  const ClassId a = e.add_leaf(L.a), b = e.add_leaf(L.b);
  const ClassId fa = f_of(e, L.f, a);
  e.merge(fa, b);
  e.rebuild();
  const auto with_f = e.classes_with_op(L.f);
  REQUIRE(with_f.size() == 1);
  CHECK(with_f[0] == e.find(fa));
  CHECK(e.classes_with_op(L.b).size() == 1);
  CHECK(e.classes_with_op(L.g).empty());
  CHECK(e.class_nodes(e.find(b), L.f).size() == 1);
  CHECK(e.class_nodes(e.find(b), L.b).size() == 1);
}

TEST_CASE("pattern reader: forms, attributes and located errors") {
  Lang L;
  Vars vars;
  auto p = parse_pattern(L.lang, "(g (f ?x) (h[?k] ?x _ a))", vars);
  REQUIRE(p.ok());
  CHECK(p.value().str(L.lang, vars) == "(g (f ?x) (h[?k] ?x _ a))");
  CHECK(vars.classes.size() == 1);
  CHECK(vars.attrs.size() == 1);
  CHECK_FALSE(p.value().ground());

  Vars v2;
  auto bad = parse_pattern(L.lang, "(g (f ?x)\n   (q ?y))", v2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().render() == "<pattern>:2:5: error: unknown op 'q'");

  auto arity = parse_pattern(L.lang, "(f a b)", v2);
  REQUIRE_FALSE(arity.ok());
  CHECK(arity.error().render() == "<pattern>:1:2: error: op 'f' takes 1 children, got 2");

  auto unclosed = parse_pattern(L.lang, "(g a", v2);
  REQUIRE_FALSE(unclosed.ok());
  CHECK(unclosed.error().message == "unclosed '('");

  auto trailing = parse_pattern(L.lang, "a b", v2);
  REQUIRE_FALSE(trailing.ok());
  CHECK(trailing.error().render() == "<pattern>:1:3: error: unexpected 'b' after the pattern");

  spool::egraph::ParseOptions opts;
  opts.loc = spool::SourceLoc{"rules/x.rules", 7, 10};
  auto located = parse_pattern(L.lang, "(zz)", v2, opts);
  REQUIRE_FALSE(located.ok());
  CHECK(located.error().render() == "rules/x.rules:7:11: error: unknown op 'zz'");

  // No symbol op: a bare unknown word is an error, numbers become leaves.
  auto sym = parse_pattern(L.lang, "zz", v2);
  REQUIRE_FALSE(sym.ok());
  auto num = parse_pattern(L.lang, "(f 12)", v2);
  REQUIRE(num.ok());
  CHECK(num.value().str(L.lang, v2) == "(f 12)");
}

TEST_CASE("(op ...) matches a variadic op with any number of children, binds none, and is never built") {
  Lang L;
  EGraph e(L.lang);
  const ClassId one = add_expr(e, "(h a)");
  const ClassId three = add_expr(e, "(h a b c)");
  const ClassId none = add_expr(e, "h");
  add_expr(e, "(g a b)");
  e.rebuild();
  Vars vars;
  auto p = parse_pattern(L.lang, "(h ...)", vars);
  REQUIRE(p.ok());
  CHECK(p.value().str(L.lang, vars) == "(h ...)");
  CHECK_FALSE(p.value().ground());
  auto q = compile_query({p.value()}, {}, vars);
  REQUIRE(q.ok());
  MatchSet out;
  REQUIRE(search(e, q.value(), query_candidates(e, q.value()), out));
  std::vector<ClassId> roots;
  for (size_t i = 0; i < out.size(); ++i) roots.push_back(out.root(i));
  std::sort(roots.begin(), roots.end());
  std::vector<ClassId> want{one, three, none};
  std::sort(want.begin(), want.end());
  CHECK(roots == want);

  // Only for variadic ops, and only as all the children.
  Vars v2;
  auto fixed = parse_pattern(L.lang, "(g ...)", v2);
  REQUIRE_FALSE(fixed.ok());
  CHECK(fixed.error().render() == "<pattern>:1:4: error: '...' stands for the children of a variadic op; 'g' takes 2");
  auto mixed = parse_pattern(L.lang, "(h ?x ...)", v2);
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.error().message == "'...' stands for all the children: write (op ...)");
  auto after = parse_pattern(L.lang, "(h ... ?x)", v2);
  REQUIRE_FALSE(after.ok());
  CHECK(after.error().message == "'...' stands for all the children: write (op ...)");

  // Never built: not a ground term, not a right-hand side.
  CHECK_THROWS_AS(add_expr(e, "(h ...)"), spool::Error);
  RuleSpec spec;
  spec.name = "open-rhs";
  spec.lhs.push_back({"", "(f ?x)", {}});
  spec.actions.push_back({ActionSpec::Kind::Union, "", "(h ...)", "", {}, {}});
  auto rule = compile_rule(L.lang, Registry{}, spec);
  REQUIRE_FALSE(rule.ok());
  CHECK(rule.error().message.find("'...' cannot appear on the right-hand side") != std::string::npos);
}

TEST_CASE("add_expr and lookup_expr") {
  Lang L;
  EGraph e(L.lang);
  const ClassId x = add_expr(e, "(g (f a) (f b))");
  CHECK(e.num_nodes() == 5);
  CHECK(lookup_expr(e, "(g (f a) (f b))") == x);
  CHECK_FALSE(lookup_expr(e, "(g (f b) (f a))").has_value());
  CHECK(e.num_nodes() == 5);
  CHECK_THROWS_AS(add_expr(e, "(f ?x)"), spool::Error);
}

TEST_CASE("dumps list classes and nodes in id order") {
  Lang L;
  EGraph e(L.lang);
  const ClassId a = e.add_leaf(L.a), b = e.add_leaf(L.b);
  f_of(e, L.f, a);
  e.merge(a, b);
  e.rebuild();
  CHECK(dump_text(e) == "e-graph: 2 classes, 3 nodes\nc0 : a() | b()\nc2 : f(c0)\n");
  const std::string dot = dump_dot(e);
  CHECK(dot.find("subgraph cluster_0") != std::string::npos);
  CHECK(dot.find("n2 -> n0 [lhead=cluster_0") != std::string::npos);
}

TEST_CASE("a class's nodes by op are exact mid-apply, before rebuild") {
  Lang L;
  EGraph e(L.lang);
  // The older class stays the root of a tie: its `leaf` node (a higher op
  // than `g`) comes first in the merged list, which is unsorted until
  // rebuild(). A binary search by op would miss the `g` node.
  const ClassId x = e.add_leaf(L.leaf, e.attrs().intern_int(1));
  const ClassId y = e.add(L.g, AttrId{}, std::vector<ClassId>{e.add_leaf(L.a), e.add_leaf(L.b)});
  REQUIRE(e.rebuild() == 0);
  e.merge(x, y);
  REQUIRE_FALSE(e.clean());
  CHECK(e.class_nodes(x, L.g).size() == 1);
  CHECK(e.class_nodes(y, L.g).size() == 1);  // any id of the class
  CHECK(e.class_nodes(x, L.leaf).size() == 1);
  CHECK(e.class_nodes(x, L.f).empty());
  CHECK(e.class_nodes(y).size() == 2);
  // A node added straight into a class (a rewrite's root) is found too.
  const ClassId z = e.add_leaf(L.c);
  e.add_to_class(L.f, AttrId{}, std::vector<ClassId>{z}, x);
  CHECK(e.class_nodes(x, L.f).size() == 1);
  e.rebuild();
  CHECK(e.class_nodes(x, L.g).size() == 1);
  CHECK(e.class_nodes(x, L.f).size() == 1);
  CHECK(e.sorted_class_nodes(e.find(x), L.g).size() == 1);
  e.check_invariants();
}

TEST_CASE("pruning: a pruned node stays in the hashcons, out of its class, and canonical") {
  Lang L;
  EGraph e(L.lang);
  const ClassId a = e.add_leaf(L.a);
  const ClassId b = e.add_leaf(L.b);
  const ClassId fa = f_of(e, L.f, a);
  const ClassId one = e.add_leaf(L.leaf, e.attrs().intern_int(1));
  e.merge(fa, one);
  e.rebuild();
  CHECK(e.prune_to_leaves(fa) == 1);
  CHECK(e.num_nodes() == 4);
  CHECK(e.num_class_nodes() == 3);
  CHECK(e.class_nodes(fa).size() == 1);
  CHECK(e.class_nodes(fa, L.f).empty());
  // Adding it again finds its class; merging a into b re-canonicalises it.
  CHECK(e.find(f_of(e, L.f, a)) == e.find(one));
  e.merge(a, b);
  e.rebuild();
  e.check_invariants();
  CHECK(e.find(f_of(e, L.f, b)) == e.find(one));
  CHECK(e.num_pruned() == 1);
  e.compact();
  e.check_invariants();
  CHECK(e.num_pruned() == 1);
  CHECK(e.find(f_of(e, L.f, b)) == e.find(one));
}
