// The appliers that build and grow fused, gemm and reduce kernels:
// elementwise ops as one-instruction fused kernels, nn::matmul's product and
// sum as a gemm, reductions as reduce kernels, and fused producers and
// consumers inlined into their prologues and epilogues.

#include "applier_detail.hpp"

#include <spool/support/fault.hpp>

#include <algorithm>

namespace spool::hlir::detail {
namespace {

std::vector<ClassId> slice(const std::vector<ClassId>& v, size_t first, size_t last) {
  return std::vector<ClassId>(v.begin() + static_cast<ptrdiff_t>(first), v.begin() + static_cast<ptrdiff_t>(last));
}

std::vector<ClassId> concat(std::vector<ClassId> a, const std::vector<ClassId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The node of class `root` with op `op`, attribute `attr` (or any, when
// unset) and children `kids`.
std::optional<NodeCopy> matched_node(EGraph& g, ClassId root, OpId op, std::optional<AttrId> attr,
                                     std::span<const ClassId> kids) {
  for (NodeCopy& n : nodes_with(g, root, op))
    if ((!attr || n.attr == *attr) && same_kids(g, n, kids)) return std::move(n);
  return std::nullopt;
}

}  // namespace

// ---- elementwise --------------------------------------------------------------------

// fused-op ?r ?x...: the elementwise node of ?r over ?x... as a one-instruction
// fused kernel (constant operands become constant instructions).
std::optional<ClassId> fused_op(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const std::span<const ClassId> kids = m.args.subspan(1);
  std::optional<NodeCopy> node;
  const ClassId root = g.find(m.root);
  std::vector<NodeId> ids(g.class_nodes(root).begin(), g.class_nodes(root).end());
  for (NodeId id : ids) {
    const std::optional<Op> op = lang.hlir_op(g.node(id).op);
    if (!op || !is_elementwise(*op)) continue;
    NodeCopy c = copy_node(g, id);
    if (same_kids(g, c, kids)) {
      node = std::move(c);
      break;
    }
  }
  if (!node) return std::nullopt;
  const Op op = *lang.hlir_op(node->op);
  ProgramBuilder b(g, false);
  std::vector<ProgramBuilder::Ref> args;
  for (ClassId k : node->kids) args.push_back(b.leaf(k));
  ProgramInstr instr;
  instr.op = op;
  if (op == Op::Cast) instr.dtype = std::get<DTypeAttr>(attr_of(lang, node->attr)).to;
  const ProgramBuilder::Ref result = b.emit(instr, args);
  auto built = b.finish(result);
  if (!built || built->second.empty()) return std::nullopt;  // all constant: folded already
  return add_kernel(g, lang, Op::Fused, built->first, built->second);
}

// fuse-producers ?r ?p ?x...: the fused node fused[?p](?x...) of ?r with the
// fused producers of its inputs inlined.
std::optional<ClassId> fuse_producers(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  auto node = matched_node(g, m.root, lang.op(Op::Fused), m.attr_args[0], m.args.subspan(1));
  if (!node) return std::nullopt;
  const ProgramAttr& program = std::get<ProgramAttr>(attr_of(lang, node->attr));
  auto built = absorb_producers(g, lang, program, node->kids, false);
  if (!built || built->second.empty()) return std::nullopt;
  return add_kernel(g, lang, Op::Fused, built->first, built->second);
}

// ---- gemm ---------------------------------------------------------------------------

namespace {

// The class `c` (of shape F) read without its axis `j`, which must not
// change what is read: F[j] == 1, or `c` holds a view whose last step
// expands axis j from size 1 (the broadcast nn::matmul adds).
std::optional<ClassId> drop_broadcast_axis(EGraph& g, HlirLanguage& lang, ClassId c, size_t j) {
  const Shape full = data(g, c).type.shape;
  Shape dropped = full;
  dropped.erase(dropped.begin() + static_cast<ptrdiff_t>(j));
  if (full[j] == 1) {
    View v;
    v.append(reshape_step(dropped), full, "gemm operand");
    return add_view(g, lang, c, v);
  }
  for (const NodeCopy& n : nodes_with(g, c, lang.view_op())) {
    const View& view = *lang.payload(n.attr).view;
    const ClassId source = n.kids[0];
    if (view.steps().empty() || view.steps().back().kind != ViewKind::Expand || source == g.find(c)) continue;
    const Shape& src_shape = data(g, source).type.shape;
    View inner;
    for (size_t s = 0; s + 1 < view.steps().size(); ++s) inner.append(view.steps()[s], src_shape, "gemm operand");
    const Shape before = inner.apply(src_shape);
    if (before.size() != full.size() || before[j] != 1) continue;
    Shape partial = full;
    partial[j] = 1;
    inner.append(expand_step(partial), src_shape, "gemm operand");
    inner.append(reshape_step(dropped), src_shape, "gemm operand");
    if (inner.is_identity()) return g.find(source);
    return add_view(g, lang, source, inner);
  }
  return std::nullopt;
}

size_t gemm_size(const GemmAttr& a) { return a.a.instrs.size() + a.b.instrs.size() + a.epilogue.instrs.size(); }

}  // namespace

// gemm-from-product ?r ?x ?y ?axis: sum_reduce[axis](mul(?x, ?y)) over
// [batch.., M, K, N] with axis K, ?x broadcast along N and ?y along M, is
// gemm(A, B): nn::matmul's products rounded, summed over K in order.
std::optional<ClassId> gemm_from_product(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassData& prod = data(g, m.args[1]);
  const size_t rank = prod.type.shape.size();
  if (rank < 3 || !is_numeric(prod.type.dtype) || data(g, m.args[2]).type != prod.type) return std::nullopt;
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  if (!axis_attr) return std::nullopt;
  const int64_t axis = axis_attr->axis;
  if (axis != static_cast<int64_t>(rank) - 2 && axis != -2) return std::nullopt;
  for (int swap = 0; swap < 2; ++swap) {
    const ClassId x = m.args[1 + swap], y = m.args[2 - swap];
    const std::optional<ClassId> a = drop_broadcast_axis(g, lang, x, rank - 1);
    if (!a) continue;
    const std::optional<ClassId> b = drop_broadcast_axis(g, lang, y, rank - 3);
    if (!b) continue;
    return add_kernel(g, lang, Op::Gemm, GemmAttr{}, {*a, *b});
  }
  return std::nullopt;
}

namespace {

// gemm-prologue ?r ?g ?x...: the gemm gemm[?g](?x...) of ?r with the fused
// producers of its A and B inputs inlined into its prologues;
// gemm-prologue-a and gemm-prologue-b inline those of one operand only, so
// that an operand another kernel computes anyway (a key with RoPE applied,
// which the layer also returns) can be read while the other is fused.
std::optional<ClassId> gemm_prologue_of(EGraph& g, HlirLanguage& lang, const MatchView& m, bool into_a, bool into_b) {
  auto node = matched_node(g, m.root, lang.op(Op::Gemm), m.attr_args[0], m.args.subspan(1));
  if (!node) return std::nullopt;
  GemmAttr attr = std::get<GemmAttr>(attr_of(lang, node->attr));
  const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
  std::vector<ClassId> a = slice(node->kids, 0, na), b = slice(node->kids, na, na + nb);
  const std::vector<ClassId> rest = slice(node->kids, na + nb, node->kids.size());
  auto absorb = [&](ProgramAttr& program, std::vector<ClassId>& inputs) {
    auto built = absorb_producers(g, lang, program, inputs, false);
    if (!built || built->second.empty()) return false;
    program = built->first;
    inputs = built->second;
    return true;
  };
  const bool changed_a = into_a && absorb(attr.a, a);
  const bool changed_b = into_b && absorb(attr.b, b);
  if (!(changed_a || changed_b) || gemm_size(attr) > kMaxProgramInstrs) return std::nullopt;
  attr.a_inputs = static_cast<int64_t>(a.size());
  attr.b_inputs = static_cast<int64_t>(b.size());
  return add_kernel(g, lang, Op::Gemm, attr, concat(concat(a, b), rest));
}

}  // namespace

std::optional<ClassId> gemm_prologue(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, true, true);
}
std::optional<ClassId> gemm_prologue_a(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, true, false);
}
std::optional<ClassId> gemm_prologue_b(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, false, true);
}

// gemm-epilogue ?r ?p ?x...: the fused node fused[?p](?x...) of ?r where an
// input is a gemm's value, read directly and only within ?r: the gemm
// with the fused program appended to its epilogue (the epilogue sees
// exactly the gemm's value).
std::optional<ClassId> gemm_epilogue(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  auto node = matched_node(g, m.root, lang.op(Op::Fused), m.attr_args[0], m.args.subspan(1));
  if (!node) return std::nullopt;
  const ProgramAttr& program = std::get<ProgramAttr>(attr_of(lang, node->attr));
  for (size_t slot = 0; slot < node->kids.size(); ++slot) {
    if (!consumed_within(g, lang, node->kids[slot], m.root)) continue;
    std::optional<NodeCopy> best;
    for (NodeCopy& gemm : nodes_with(g, node->kids[slot], lang.op(Op::Gemm))) {
      const GemmAttr& ga = std::get<GemmAttr>(attr_of(lang, gemm.attr));
      if (gemm_size(ga) + program.instrs.size() > kMaxProgramInstrs) continue;
      if (!best || gemm_size(std::get<GemmAttr>(attr_of(lang, best->attr))) < gemm_size(ga)) best = std::move(gemm);
    }
    if (!best) continue;
    GemmAttr attr = std::get<GemmAttr>(attr_of(lang, best->attr));
    const size_t operands = static_cast<size_t>(attr.a_inputs + attr.b_inputs);
    auto built =
        chain_epilogue(g, attr.epilogue, slice(best->kids, operands, best->kids.size()), program, node->kids, slot);
    if (!built) continue;
    attr.epilogue = built->first;
    if (fault::planted(fault::Fault::FusionDropsEpilogue) && attr.epilogue.instrs.size() >= 2)
      attr.epilogue.instrs.pop_back();
    return add_kernel(g, lang, Op::Gemm, attr, concat(slice(best->kids, 0, operands), built->second));
  }
  return std::nullopt;
}

// ---- reductions ---------------------------------------------------------------------

// reduce-op ?r ?x ?axis: sum_reduce/max_reduce[axis](?x) of ?r as a reduce
// kernel with empty prologue and epilogue (not for a matmul's sum: run
// matmul-to-gemm first).
std::optional<ClassId> reduce_op(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  // A gemm already computes it (the sum of a broadcast product, nn::matmul):
  // a reduce would read the product, K times larger than the result.
  if (has_node_with(g, m.root, lang.op(Op::Gemm))) return std::nullopt;
  for (Op kind : {Op::SumReduce, Op::MaxReduce}) {
    if (!matched_node(g, m.root, lang.op(kind), m.attr_args[0], m.args.subspan(1))) continue;
    ReduceAttr attr;
    attr.kind = kind;
    attr.axis = std::get<AxisAttr>(attr_of(lang, m.attr_args[0])).axis;  // the matched reduce's own attribute
    return add_kernel(g, lang, Op::Reduce, attr, {g.find(m.args[1])});
  }
  return std::nullopt;
}

// reduce-prologue ?r ?k ?x...: the reduce kernel reduce[?k](?x...) of ?r with
// the fused producers of its inputs inlined into its prologue.
std::optional<ClassId> reduce_prologue(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  auto node = matched_node(g, m.root, lang.op(Op::Reduce), m.attr_args[0], m.args.subspan(1));
  if (!node) return std::nullopt;
  ReduceAttr attr = std::get<ReduceAttr>(attr_of(lang, node->attr));
  auto built = absorb_producers(g, lang, attr.prologue, node->kids, false);
  if (!built || built->second.empty()) return std::nullopt;
  if (built->first.instrs.size() + attr.epilogue.instrs.size() > kMaxProgramInstrs) return std::nullopt;
  attr.prologue = built->first;
  return add_kernel(g, lang, Op::Reduce, attr, built->second);
}

// reduce-epilogue ?r ?p ?x: the one-input fused node fused[?p](?x) of ?r
// where ?x is a reduce kernel's value read only within ?r: the
// reduce with the program appended
// to its epilogue (which sees only the reduced value, as here).
std::optional<ClassId> reduce_epilogue(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  auto node = matched_node(g, m.root, lang.op(Op::Fused), m.attr_args[0], m.args.subspan(1));
  if (!node || node->kids.size() != 1) return std::nullopt;
  if (!consumed_within(g, lang, node->kids[0], m.root)) return std::nullopt;
  const ProgramAttr& program = std::get<ProgramAttr>(attr_of(lang, node->attr));
  for (const NodeCopy& r : nodes_with(g, node->kids[0], lang.op(Op::Reduce))) {
    ReduceAttr attr = std::get<ReduceAttr>(attr_of(lang, r.attr));
    if (attr.prologue.instrs.size() + attr.epilogue.instrs.size() + program.instrs.size() > kMaxProgramInstrs) continue;
    auto built = chain_epilogue(g, attr.epilogue, {}, program, node->kids, 0);
    if (!built || !built->second.empty()) continue;  // the epilogue reads the reduced value only
    attr.epilogue = built->first;
    return add_kernel(g, lang, Op::Reduce, attr, r.kids);
  }
  return std::nullopt;
}

}  // namespace spool::hlir::detail
