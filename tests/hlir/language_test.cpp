// The HLIR in the e-graph: types derived inside the e-graph, constant
// folding, merges refused with the rule's name, and the round trip
// Graph -> e-graph -> extracted term -> Graph.

#include <spool/egraph/dump.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/hlir/language.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>

#include <cmath>

using namespace spool::egraph;
namespace hlir = spool::hlir;
using spool::DType;
using spool::Shape;
using spool::TensorType;

namespace {

RunnerConfig quick() {
  RunnerConfig c;
  c.scheduler = SchedulerKind::Simple;
  c.iter_limit = 5;
  c.node_limit = 10'000;
  return c;
}

// y = sum(x^T * w, axis 1) + 1 with x: f32[3,2], w: f32[2,3]
spool::Graph small_graph() {
  spool::Graph g("small");
  const spool::Tensor x = spool::input(g, "x", DType::F32, {3, 2});
  const spool::Tensor w = spool::weight(g, "w", DType::F32, {2, 3});
  const spool::Tensor y = (x.transpose(0, 1) * w).sum(1) + 1.0;
  spool::output("y", y);
  return g;
}

}  // namespace

TEST_CASE("HLIR types are derived inside the e-graph") {
  hlir::HlirLanguage lang;
  auto eg = hlir::make_egraph(lang);
  const spool::Graph g = small_graph();
  const auto outs = hlir::add_graph(*eg, lang, g);
  eg->rebuild();
  eg->check_invariants();
  const auto* an = dynamic_cast<const hlir::HlirAnalysis*>(eg->analysis());
  REQUIRE(an != nullptr);
  REQUIRE(outs.size() == 1);
  CHECK(an->data(eg->find(outs[0])).type == TensorType{DType::F32, {2}});
  // Every class's type is what the graph inferred for the same value.
  const auto x = lookup_expr(*eg, "(input[name=\"x\" : f32[3,2]])", lang.parse_options());
  REQUIRE(x.has_value());
  CHECK(an->data(*x).type == TensorType{DType::F32, {3, 2}});
  CHECK(dump_text(*eg).find("f32[2,3]") != std::string::npos);
}

TEST_CASE("HLIR constant folding: exact, typed, materialised as a broadcast constant") {
  hlir::HlirLanguage lang;
  auto eg = hlir::make_egraph(lang);
  spool::Graph g;
  const spool::Tensor a = spool::constant(g, 2.0, DType::F32, {2, 2});
  const spool::Tensor b = spool::constant(g, 3.0, DType::F32, {2, 2});
  spool::output("s", a + b);
  spool::output("m", (a * b).cast(DType::I32));
  const auto outs = hlir::add_graph(*eg, lang, g);
  eg->rebuild();
  eg->check_invariants();
  const auto* an = dynamic_cast<const hlir::HlirAnalysis*>(eg->analysis());
  const auto& s = an->data(eg->find(outs[0]));
  REQUIRE(s.constant.has_value());
  CHECK(s.constant->f == 5.0);
  CHECK(s.type == TensorType{DType::F32, {2, 2}});
  const auto& m = an->data(eg->find(outs[1]));
  REQUIRE(m.constant.has_value());
  CHECK(m.constant->dtype == DType::I32);
  CHECK(m.constant->i == 6);
  // The class now holds the canonical constant: a scalar broadcast by a view.
  const auto five = lookup_expr(*eg, "(constant[value=5 : f32])", lang.parse_options());
  REQUIRE(five.has_value());
  bool broadcast = false;
  for (NodeId n : eg->class_nodes(eg->find(outs[0])))
    broadcast |= eg->node(n).op == lang.view_op() && eg->find(eg->node(n).children[0]) == *five;
  CHECK(broadcast);
  // Extraction picks the folded form.
  AstSize size;
  const Extraction e = Extractor(*eg, size).extract(outs[0]);
  const std::string text = e.term.str(lang.language());
  CHECK(text == "(view[reshape(1,1) expand(2,2)] (constant[value=5.0 : f32[]]))");
  // Terms print in the pattern syntax; sources and constants read back.
  CHECK(lookup_expr(*eg, "(constant[value=5.0 : f32[]])", lang.parse_options()) == five);
}

TEST_CASE("a rule merging classes of different shapes is refused and named") {
  hlir::HlirLanguage lang;
  auto eg = hlir::make_egraph(lang);
  hlir::add_graph(*eg, lang, small_graph());
  Registry reg;
  RuleSpec spec;
  spec.name = "drop-views";
  spec.loc = {"rules/bad.rules", 12, 1};
  spec.lhs.push_back({"", "(view[?v] ?x)", {}});
  ActionSpec act;
  act.pattern = "?x";
  spec.actions.push_back(act);
  std::vector<Rule> rules;
  rules.push_back(compile_rule(lang.language(), reg, spec, lang.parse_options()).take());
  CHECK_THROWS_WITH_AS(Runner(quick()).run(*eg, rules),
                       doctest::Contains("rule 'drop-views' (rules/bad.rules:12): refused to merge"), spool::Error);
  try {
    Runner(quick()).run(*eg, rules);
  } catch (const spool::Error& e) {
    CHECK(std::string(e.what()).find("shape or dtype differ") != std::string::npos);
  }
}

TEST_CASE("a rule building an ill-typed node is refused and named") {
  hlir::HlirLanguage lang;
  auto eg = hlir::make_egraph(lang);
  hlir::add_graph(*eg, lang, small_graph());
  std::vector<Rule> rules;
  rules.push_back(rewrite(lang.language(), "bad-axis", "(sum_reduce[axis=1] ?x)", "(sum_reduce[axis=7] ?x)", nullptr,
                          {}, lang.parse_options()));
  CHECK_THROWS_WITH_AS(Runner(quick()).run(*eg, rules),
                       doctest::Contains("rule 'bad-axis': refused to merge"), spool::Error);
}

TEST_CASE("sound HLIR rules saturate and the extracted term converts back to a Graph") {
  hlir::HlirLanguage lang;
  auto eg = hlir::make_egraph(lang);
  const spool::Graph g = small_graph();
  const auto outs = hlir::add_graph(*eg, lang, g);
  const ParseOptions opts = lang.parse_options();
  std::vector<Rule> rules;
  // Sound: + and * are commutative elementwise (same shape and dtype).
  rules.push_back(rewrite(lang.language(), "add-comm", "(add ?a ?b)", "(add ?b ?a)", nullptr, {}, opts));
  rules.push_back(rewrite(lang.language(), "mul-comm", "(mul ?a ?b)", "(mul ?b ?a)", nullptr, {}, opts));
  const RunReport r = Runner(quick()).run(*eg, rules);
  CHECK(r.stop == StopReason::Saturated);
  eg->check_invariants();
  AstSize size;
  const Extraction e = Extractor(*eg, size).extract(outs[0]);
  const spool::Graph back = hlir::to_graph(lang, e.term, {"y"});
  back.verify();
  CHECK(back.num_live() == g.num_live());
  REQUIRE(back.outputs().size() == 1);
  CHECK(back.edge_type(back.outputs()[0].edge) == g.edge_type(g.outputs()[0].edge));
  // Adding the converted graph again lands in the same class.
  const auto again = hlir::add_graph(*eg, lang, back);
  eg->rebuild();
  CHECK(eg->find(again[0]) == eg->find(outs[0]));
}

TEST_CASE("a copy of an HLIR language keeps every id, and rules compiled in the original run on its e-graphs") {
  hlir::HlirLanguage original;
  // A rule whose pattern interns an attribute (axis=1) in the original.
  std::vector<Rule> rules;
  rules.push_back(rewrite(original.language(), "mul-comm-under-sum", "(sum_reduce[axis=1] (mul ?a ?b))",
                          "(sum_reduce[axis=1] (mul ?b ?a))", nullptr, {}, original.parse_options()));
  const AttrId axis = original.attr(spool::AxisAttr{1});
  const size_t attrs = original.language().attrs.size();

  hlir::HlirLanguage copy(original);
  CHECK(copy.language().attrs.size() == attrs);
  CHECK(copy.attr(spool::AxisAttr{1}) == axis);
  CHECK(copy.op(spool::Op::SumReduce) == original.op(spool::Op::SumReduce));
  auto eg = hlir::make_egraph(copy);
  hlir::add_graph(*eg, copy, small_graph());
  // The graph's attributes are interned in the copy only.
  CHECK(copy.language().attrs.size() > attrs);
  CHECK(original.language().attrs.size() == attrs);
  eg->rebuild();
  const size_t before = eg->num_nodes();
  Runner(quick()).run(*eg, rules);
  CHECK(eg->num_nodes() == before + 2);  // (mul ?b ?a) and the sum_reduce over it
  eg->check_invariants();
}

TEST_CASE("HLIR attributes in patterns") {
  hlir::HlirLanguage lang;
  Vars vars;
  const ParseOptions opts = lang.parse_options();
  auto p = parse_pattern(lang.language(), "(sum_reduce[axis=1] (cast[to=bf16] ?x))", vars, opts);
  REQUIRE(p.ok());
  CHECK(p.value().str(lang.language(), vars) == "(sum_reduce[axis=1] (cast[to=bf16] ?x))");
  auto bad = parse_pattern(lang.language(), "(sum_reduce[to=f32] ?x)", vars, opts);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "bad attribute 'to=f32' for op 'sum_reduce'");
  auto src = parse_pattern(lang.language(), "(weight[name=\"w\" : bf16[4,8]])", vars, opts);
  REQUIRE(src.ok());
  CHECK(lang.payload(src.value().root_node().attr.id).type == TensorType{DType::BF16, {4, 8}});
}

namespace {

std::string unbraced(const spool::Attr& a) {
  std::string s = spool::attr_str(a);
  return s.substr(1, s.size() - 2);
}

spool::ProgramAttr program_of(std::vector<spool::ProgramInstr> instrs) { return spool::ProgramAttr{std::move(instrs)}; }

}  // namespace

TEST_CASE("HLIR attributes are interned by their printed form; a value seen again gets its first id") {
  using spool::Op;
  spool::ProgramInstr neg{Op::Neg, {0, 0, 0}, {}, DType::F32, 0};
  spool::ProgramInstr neg_unused = neg;
  neg_unused.args[2] = 7;  // an argument neg does not read: printed the same
  spool::ProgramInstr half{Op::Constant, {}, spool::Scalar::of(DType::F32, 0.5), DType::F32, 0};
  spool::ProgramInstr mul{Op::Mul, {1, 2, 0}, {}, DType::F32, 0};
  spool::ProgramInstr nan{Op::Constant, {}, spool::Scalar::of(DType::BF16, std::nan("")), DType::BF16, 0};
  spool::ProgramInstr inf{Op::Constant, {}, spool::Scalar::of(DType::F32, -INFINITY), DType::F32, 0};
  spool::ProgramInstr big{Op::Constant, {}, spool::Scalar::of(DType::F32, 1e30), DType::F32, 0};
  spool::ProgramInstr flag{Op::Constant, {}, spool::Scalar::of(DType::Bool, 1), DType::Bool, 0};
  spool::ProgramInstr iota{Op::Iota, {}, {}, DType::I32, 2};
  spool::ProgramInstr cast{Op::Cast, {3, 0, 0}, {}, DType::BF16, 0};
  spool::ProgramInstr where{Op::Where, {4, 1, 11}, {}, DType::F32, 0};
  spool::GemmAttr gemm;
  gemm.a = program_of({cast});
  gemm.epilogue = program_of({half, mul, nan, inf, big, flag, iota, where});
  gemm.a_inputs = 2;
  const std::vector<spool::Attr> attrs = {
      spool::NameAttr{"x"},
      spool::NameAttr{"a \"quoted\" \\ name"},
      spool::AxisAttr{-1},
      spool::AxisAttr{12345678901},
      spool::DTypeAttr{DType::BF16},
      spool::TopKAttr{3},
      spool::ScalarAttr{spool::Scalar::of(DType::F32, -0.0)},
      spool::ScalarAttr{spool::Scalar::of(DType::I64, 7)},
      spool::LoopAttr{1, 32, 2},
      program_of({neg}),
      gemm,
      spool::ReduceAttr{Op::MaxReduce, 1, program_of({neg}), {}},
      spool::ReduceAttr{Op::SumReduce, -2, {}, program_of({iota, cast, big})},
      program_of({}),
      program_of({half, mul, nan, inf, big, flag, iota, cast, where}),
      spool::NormAttr{1e-5, true},
  };
  const std::vector<TensorType> types = {{DType::F32, {}}, {DType::BF16, {4096, 128256}}, {DType::I64, {0, 1}}};
  spool::View view;
  view.append(spool::permute_step({1, 0}), {2, 3}, "test");
  view.append(spool::slice_step({0, 1}, {3, 2}, {2, 1}), {2, 3}, "test");
  view.append(spool::pad_step({1, 0}, {0, 12}, -0.0), {2, 3}, "test");
  view.append(spool::reshape_step({3, 13, 1}), {2, 3}, "test");
  view.append(spool::expand_step({3, 13, 4096}), {2, 3}, "test");
  spool::View pad;
  pad.append(spool::pad_step({0}, {1}, 0.1), {3}, "test");

  hlir::HlirLanguage lang;
  const AttrTable& table = lang.language().attrs;
  std::vector<AttrId> ids, source_ids;
  for (const spool::Attr& a : attrs) {
    ids.push_back(lang.attr(a));
    CHECK(table.str(ids.back()) == unbraced(a));
    for (const TensorType& t : types) {
      source_ids.push_back(lang.source_attr(a, t));
      CHECK(table.str(source_ids.back()) ==
            unbraced(a) + " : " + std::string(spool::dtype_name(t.dtype)) + spool::shape_str(t.shape));
      CHECK(*lang.payload(source_ids.back()).type == t);
    }
  }
  const AttrId view_id = lang.view_attr(view);
  CHECK(table.str(view_id) == view.str());
  CHECK(view.steps().size() == 5);
  CHECK(table.str(lang.view_attr(pad)) == pad.str());
  CHECK(lang.attr(spool::NoAttr{}) == AttrId{});
  const size_t size = table.size();
  // Seen again (in another order): the same ids, no new entries.
  CHECK(lang.view_attr(view) == view_id);
  for (size_t i = attrs.size(); i-- > 0;) {
    CHECK(lang.attr(attrs[i]) == ids[i]);
    for (size_t t = 0; t < types.size(); ++t)
      CHECK(lang.source_attr(attrs[i], types[t]) == source_ids[i * types.size() + t]);
  }
  CHECK(table.size() == size);
  // A different value that prints the same is the same attribute, every time.
  const AttrId printed_alike = lang.attr(program_of({neg_unused}));
  CHECK(printed_alike == ids[9]);
  CHECK(lang.attr(program_of({neg_unused})) == ids[9]);
  CHECK(lang.attr(program_of({neg})) == ids[9]);
  CHECK(lang.payload(ids[9]).attr == spool::Attr{program_of({neg})});
  // An attribute and a source of the same name are different attributes.
  CHECK(lang.attr(spool::NameAttr{"x"}) != lang.source_attr(spool::NameAttr{"x"}, types[0]));
  // A second language interning the same values in the same order gives the same ids.
  hlir::HlirLanguage other;
  for (size_t i = 0; i < attrs.size(); ++i) {
    CHECK(other.attr(attrs[i]) == ids[i]);
    for (size_t t = 0; t < types.size(); ++t)
      CHECK(other.source_attr(attrs[i], types[t]) == source_ids[i * types.size() + t]);
  }
  CHECK(other.view_attr(view) == view_id);
}
