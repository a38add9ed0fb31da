// The appliers of the shipped HLIR rules: kernels built from matched HLIR.
//
// Exactness is by construction: a fused program runs the elementwise ops it
// replaces one by one (rounding where they round), a gemm's product is
// nn::matmul's multiply-then-sum, and a producer is inlined into a consumer
// only where the consumer reads it element for element (directly, or through
// a view without padding, which the producer's inputs are then read through).
// Everything an applier reads comes from one e-class, so any of its nodes
// computes the same value; choices between them are made in node order.
//
// Here: what every applier uses to read e-classes, the one applier that
// builds no kernel (loop-input-static), and the registry of them all by
// name; applier_detail.hpp says where the others are.

#include "applier_detail.hpp"

#include <spool/support/error.hpp>

#include <algorithm>

namespace spool::hlir {
namespace detail {

const ClassData& data(const EGraph& g, ClassId c) {
  const auto* analysis = dynamic_cast<const HlirAnalysis*>(g.analysis());
  SPOOL_ASSERT(analysis, "HLIR appliers need an e-graph with the HLIR analysis");
  return analysis->data(g.find_const(c));
}

bool is_elementwise(Op op) {
  switch (op_info(op).cls) {
    case OpClass::Unary:
    case OpClass::Cast:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Select:
      return true;
    case OpClass::Source:
    case OpClass::Reduce:
    case OpClass::Gather:
    case OpClass::Scatter:
    case OpClass::TopK:
    case OpClass::Grouped:
    case OpClass::Kernel:
    case OpClass::LoopMarker:
      return false;
  }
  return false;
}

NodeCopy copy_node(EGraph& g, NodeId n) {
  const egraph::ENodeRef ref = g.node(n);
  NodeCopy out{ref.op, ref.attr, {}};
  for (ClassId k : ref.children) out.kids.push_back(k);
  for (ClassId& k : out.kids) k = g.find(k);
  return out;
}

std::vector<NodeCopy> nodes_with(EGraph& g, ClassId c, OpId op) {
  std::vector<NodeCopy> out;
  for (NodeId n : g.class_nodes(g.find(c), op)) out.push_back(copy_node(g, n));
  return out;
}

bool has_node_with(EGraph& g, ClassId c, OpId op) {
  const auto nodes = g.class_nodes(g.find(c), op);
  return nodes.begin() != nodes.end();
}

bool same_kids(EGraph& g, const NodeCopy& node, std::span<const ClassId> kids) {
  if (node.kids.size() != kids.size()) return false;
  for (size_t i = 0; i < kids.size(); ++i)
    if (node.kids[i] != g.find(kids[i])) return false;
  return true;
}

const Attr& attr_of(const HlirLanguage& lang, AttrId id) {
  static const Attr kNone{NoAttr{}};
  return id == AttrId{} ? kNone : lang.payload(id).attr;
}

ClassId add_view(EGraph& g, HlirLanguage& lang, ClassId c, const View& v) {
  c = g.find(c);
  if (v.is_identity()) return c;
  for (const NodeCopy& n : nodes_with(g, c, lang.view_op())) {
    const ClassId source = n.kids[0];
    if (source == c) continue;
    const View composed = compose_views(*lang.payload(n.attr).view, v, data(g, source).type.shape);
    if (composed.is_identity()) return source;
    return g.add(lang.view_op(), lang.view_attr(composed), std::span<const ClassId>(&source, 1));
  }
  return g.add(lang.view_op(), lang.view_attr(v), std::span<const ClassId>(&c, 1));
}

bool has_pad(const View& v) {
  return std::any_of(v.steps().begin(), v.steps().end(), [](const ViewStep& s) { return s.kind == ViewKind::Pad; });
}

ClassId add_kernel(EGraph& g, HlirLanguage& lang, Op op, const Attr& attr, const std::vector<ClassId>& kids) {
  return g.add(lang.op(op), lang.attr(attr), std::span<const ClassId>(kids.data(), kids.size()));
}

// loop_input[l](x, x, ..., x): the same value in every iteration, which is
// what loop_input_static[l](x) says (roll::unroll routes iteration k of
// either to its k-th source, here always x). auto_roll writes the static
// form when the sources are one node; this one catches sources that
// saturation proved equal. nullopt when the class holds no loop_input with
// attribute `l` whose sources are all one class.
std::optional<ClassId> loop_input_static(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  for (const NodeCopy& n : nodes_with(g, m.root, lang.op(Op::LoopInput))) {
    if (n.attr != m.attr_args[0] || n.kids.empty()) continue;
    if (std::all_of(n.kids.begin(), n.kids.end(), [&](ClassId k) { return k == n.kids.front(); }))
      return g.add(lang.op(Op::LoopInputStatic), n.attr, std::span<const ClassId>(n.kids.data(), 1));
  }
  return std::nullopt;
}

}  // namespace detail

namespace {

using namespace detail;

egraph::Registry make_registry() {
  egraph::Registry r;
  // Every applier takes the matched root class first; `classes` is the least
  // number of class arguments (root included), `attrs` the exact number of
  // attribute arguments. A rule that calls one otherwise is a user error.
  using Fn = std::optional<ClassId> (*)(EGraph&, HlirLanguage&, const MatchView&);
  auto add = [&](const char* name, size_t classes, size_t attrs, const char* usage, Fn fn) {
    r.add_applier(name, [fn, name, classes, attrs, usage](EGraph& g, const MatchView& m) {
      if (m.args.size() < classes || m.attr_args.size() != attrs || g.find(m.args[0]) != g.find(m.root))
        fail("applier '{}' expects ({}) with the matched root first, got {} class and {} attribute arguments", name,
             usage, m.args.size(), m.attr_args.size());
      const auto* analysis = dynamic_cast<const HlirAnalysis*>(g.analysis());
      SPOOL_ASSERT(analysis, "HLIR appliers need an e-graph with the HLIR analysis");
      return fn(g, analysis->language(), m);
    });
  };
  // Guards. `integer ?x...`: every argument has an integer dtype (i32, i64),
  // for identities that hold in wrapping integers but not in IEEE floats.
  r.add_guard("integer", [](const EGraph& g, const MatchView& m) {
    for (const ClassId c : m.args) {
      const ClassData& d = data(g, c);
      if (!d.ok || !spool::is_integer(d.type.dtype)) return false;
    }
    return !m.args.empty();
  });
  add("fused-op", 2, 0, "apply fused-op ?root ?operand...", fused_op);
  add("fuse-producers", 2, 1, "apply fuse-producers ?root ?program ?input...", fuse_producers);
  add("gemm-from-product", 3, 1, "apply gemm-from-product ?root ?x ?y ?axis", gemm_from_product);
  add("gemm-prologue", 3, 1, "apply gemm-prologue ?root ?gemm ?input...", gemm_prologue);
  add("gemm-prologue-a", 3, 1, "apply gemm-prologue-a ?root ?gemm ?input...", gemm_prologue_a);
  add("gemm-prologue-b", 3, 1, "apply gemm-prologue-b ?root ?gemm ?input...", gemm_prologue_b);
  add("gemm-epilogue", 2, 1, "apply gemm-epilogue ?root ?program ?input...", gemm_epilogue);
  add("reduce-op", 2, 1, "apply reduce-op ?root ?x ?axis", reduce_op);
  add("reduce-prologue", 2, 1, "apply reduce-prologue ?root ?reduce ?input...", reduce_prologue);
  add("reduce-epilogue", 2, 1, "apply reduce-epilogue ?root ?program ?x", reduce_epilogue);
  add("softmax-kernel", 3, 5, "apply softmax-kernel ?root ?x ?log2e ?axis ?v1 ?v2 ?v3 ?v4", softmax_kernel);
  add("rms-norm-kernel", 5, 4, "apply rms-norm-kernel ?root ?x ?w ?inv ?eps ?axis ?vb ?vk ?vw", rms_norm_kernel);
  add("loop-input-static", 1, 1, "apply loop-input-static ?root ?loop of (loop_input[?loop] ...)", loop_input_static);
  add("half-softmax", 2, 3, "apply half-softmax ?root ?x ?t ?a ?f", half_kernel);
  add("half-rms-norm", 3, 4, "apply half-rms-norm ?root ?x ?w ?t ?n ?f ?g", half_kernel);
  add("half-rms-norm-offset", 4, 5, "apply half-rms-norm-offset ?root ?x ?w ?one ?t ?n ?f ?g ?v", half_rms_norm_offset);
  add("half-layer-norm", 4, 5, "apply half-layer-norm ?root ?x ?w ?b ?t ?n ?f ?g ?h", half_kernel);
  add("layer-norm-kernel", 6, 7, "apply layer-norm-kernel ?root ?x ?w ?b ?inv ?eps ?axis ?v1 ?v2 ?v3 ?v4 ?vw ?vb",
      layer_norm_kernel);
  return r;
}

}  // namespace

const egraph::Registry& registry() {
  static const egraph::Registry registry = make_registry();
  return registry;
}

}  // namespace spool::hlir
