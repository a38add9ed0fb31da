// The appliers of the shipped HLIR rules: kernels built from matched HLIR.
//
// Exactness is by construction: a fused program runs the elementwise ops it
// replaces one by one (rounding where they round), a gemm's product is
// nn::matmul's multiply-then-sum, and a producer is inlined into a consumer
// only where the consumer reads it element for element (directly, or through
// a view without padding, which the producer's inputs are then read through).
// Everything an applier reads comes from one e-class, so any of its nodes
// computes the same value; choices between them are made in node order.

#include <spool/rules/hlir_appliers.hpp>

#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <numbers>

namespace spool::rules {
namespace {

using egraph::AttrId;
using egraph::ClassId;
using egraph::EGraph;
using egraph::MatchView;
using egraph::NodeId;
using egraph::OpId;
using hlir::ClassData;
using hlir::HlirAnalysis;
using hlir::HlirLanguage;

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
    case OpClass::Kernel:
    case OpClass::LoopMarker:
      return false;
  }
  return false;
}

// A node copied out of the graph (spans into the graph die on the next add).
struct NodeCopy {
  OpId op;
  AttrId attr;
  std::vector<ClassId> kids;
};

NodeCopy copy_node(EGraph& g, NodeId n) {
  const egraph::ENodeRef ref = g.node(n);
  NodeCopy out{ref.op, ref.attr, {}};
  for (ClassId k : ref.children) out.kids.push_back(k);
  for (ClassId& k : out.kids) k = g.find(k);
  return out;
}

// The nodes of class `c` with op `op`, copied, in node order.
std::vector<NodeCopy> nodes_with(EGraph& g, ClassId c, OpId op) {
  c = g.find(c);
  std::vector<NodeId> ids;
  for (NodeId n : g.class_nodes(c))
    if (g.node(n).op == op) ids.push_back(n);
  std::vector<NodeCopy> out;
  for (NodeId n : ids) out.push_back(copy_node(g, n));
  return out;
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

// `c` read through `v`, as one view node over a non-view class where `c`
// already holds a view (successive views compose, as on graph edges).
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

bool has_iota(const ProgramAttr& p) {
  return std::any_of(p.instrs.begin(), p.instrs.end(), [](const ProgramInstr& i) { return i.op == Op::Iota; });
}

// ---- programs ---------------------------------------------------------------------

// Builds an elementwise program over e-classes. Values are referred to as
// `Ref`s (an instruction index, or an input as -(i+1)) and numbered only at
// the end, when the number of inputs is known. With a product slot, input 0
// is the kernel's own value (a gemm product, a reduced value), not a class.
class ProgramBuilder {
 public:
  using Ref = int;
  ProgramBuilder(EGraph& g, bool product_slot) : g_(g) {
    if (product_slot) inputs_.push_back(ClassId{});
  }
  static Ref product() { return -1; }

  // A class read as an input (one input per distinct class).
  Ref input(ClassId c) {
    c = g_.find(c);
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].valid() && inputs_[i] == c) return -static_cast<Ref>(i) - 1;
    inputs_.push_back(c);
    return -static_cast<Ref>(inputs_.size());
  }
  // A class as a value: its constant when the analysis knows one (every
  // element equal), else an input.
  Ref leaf(ClassId c) {
    const ClassData& d = data(g_, c);
    if (d.constant) {
      ProgramInstr k;
      k.op = Op::Constant;
      k.value = *d.constant;
      return emit(k, {});
    }
    return input(c);
  }
  // Appends `instr` reading `args`; canonical fields (unused ones zero) so
  // that equal programs intern to one attribute.
  Ref emit(ProgramInstr instr, std::initializer_list<Ref> args) { return emit(instr, std::vector<Ref>(args)); }
  Ref emit(ProgramInstr instr, const std::vector<Ref>& args) {
    ProgramInstr canon;
    canon.op = instr.op;
    if (instr.op == Op::Constant) canon.value = instr.value;
    if (instr.op == Op::Cast || instr.op == Op::Iota) canon.dtype = instr.dtype;
    if (instr.op == Op::Iota) canon.axis = instr.axis;
    instrs_.push_back(canon);
    std::array<Ref, 3> a{};
    for (size_t i = 0; i < args.size(); ++i) a[i] = args[i];
    args_.push_back(a);
    return static_cast<Ref>(instrs_.size()) - 1;
  }
  // Inlines `program` with its inputs bound to `in`; returns its result.
  Ref inline_program(const ProgramAttr& program, const std::vector<Ref>& in) {
    if (program.instrs.empty()) return in.at(0);
    std::vector<Ref> values = in;
    for (const ProgramInstr& instr : program.instrs) {
      std::vector<Ref> args;
      const int arity = instr.op == Op::Constant || instr.op == Op::Iota ? 0 : op_info(instr.op).arity;
      for (int a = 0; a < arity; ++a) args.push_back(values.at(instr.args[static_cast<size_t>(a)]));
      values.push_back(emit(instr, args));
    }
    return values.back();
  }

  size_t num_instrs() const { return instrs_.size(); }
  size_t num_inputs() const { return inputs_.size(); }

  // The program whose result is `result` (which must be the last
  // instruction), and its input classes (without the product slot).
  std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> finish(Ref result) const {
    if (result < 0 || static_cast<size_t>(result) + 1 != instrs_.size()) return std::nullopt;
    if (instrs_.size() > kMaxProgramInstrs) return std::nullopt;
    const size_t k = inputs_.size();
    auto number = [&](Ref r) { return static_cast<uint16_t>(r < 0 ? -(r + 1) : static_cast<Ref>(k) + r); };
    ProgramAttr program;
    for (size_t i = 0; i < instrs_.size(); ++i) {
      ProgramInstr instr = instrs_[i];
      const int arity = instr.op == Op::Constant || instr.op == Op::Iota ? 0 : op_info(instr.op).arity;
      for (int a = 0; a < arity; ++a) instr.args[static_cast<size_t>(a)] = number(args_[i][static_cast<size_t>(a)]);
      program.instrs.push_back(instr);
    }
    std::vector<ClassId> classes;
    for (ClassId c : inputs_)
      if (c.valid()) classes.push_back(c);
    return std::make_pair(std::move(program), std::move(classes));
  }

 private:
  EGraph& g_;
  std::vector<ClassId> inputs_;
  std::vector<ProgramInstr> instrs_;
  std::vector<std::array<Ref, 3>> args_;
};

// Whether every use of `c` lies inside the elementwise computation of
// `root`: each node reading `c` is a node of `root`, or is elementwise (an
// HLIR elementwise op or a fused kernel) and sits in a class used that way
// (searched over at most a few dozen classes). A kernel that recomputes `c`
// with `root`'s program as its epilogue then replaces `c` rather than
// duplicating its work (a reduction or a view reading `c` would need it
// written out).
bool consumed_within(EGraph& g, const HlirLanguage& lang, ClassId c, ClassId root) {
  root = g.find(root);
  std::vector<ClassId> stack{g.find(c)}, seen;
  while (!stack.empty()) {
    const ClassId k = stack.back();
    stack.pop_back();
    if (k == root || std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(k);
    if (seen.size() > 48) return false;
    const auto parents = g.class_parents(k);
    if (parents.empty()) return false;  // a graph output
    for (NodeId n : parents) {
      const ClassId p = g.class_of(n);
      if (p == root) continue;  // any node of `root` itself
      const std::optional<Op> op = lang.hlir_op(g.node(n).op);
      if (!op || !(is_elementwise(*op) || *op == Op::Fused)) return false;
      stack.push_back(p);
    }
  }
  return true;
}

// Whether the nodes reading `c` sit in more than one class.
bool several_readers(EGraph& g, ClassId c) {
  std::optional<ClassId> reader;
  for (NodeId n : g.class_parents(g.find(c))) {
    const ClassId p = g.class_of(n);
    if (reader && *reader != p) return true;
    reader = p;
  }
  return false;
}

// A fused producer of a class: its program and inputs, read through `view`
// (identity when the consumer reads the producer directly).
struct Producer {
  ProgramAttr program;
  std::vector<ClassId> inputs;
  View view;
};

// The largest fused producer of `c` with at most `budget` instructions:
// a fused node of `c`, or one behind a view node of `c` whose view has no
// padding (the padded elements would read the producer's inputs'
// padding, not the producer's value there) and whose program has no iota
// (its index would be the view's output index, not the producer's). A
// class with several readers that a gemm computes has no producer to
// inline (see below), and a producer that reads a value only through
// padded views (a concat's parts) is not inlined: the lowering copies a
// padded view for each kernel that reads it, so the consumer reads the
// concat's value instead.
std::optional<Producer> fused_producer(EGraph& g, HlirLanguage& lang, ClassId c, size_t budget) {
  std::optional<Producer> best;
  // Whether a class is only ever read through padded views.
  auto padded_only = [&](ClassId k) {
    bool any = false;
    for (const NodeId id : g.class_nodes(g.find(k))) {
      const egraph::ENodeRef e = g.node(id);
      if (e.op != lang.view_op() || !has_pad(*lang.payload(e.attr).view)) return false;
      any = true;
    }
    return any;
  };
  auto consider = [&](const NodeCopy& n, const View& view) {
    const ProgramAttr& p = std::get<ProgramAttr>(attr_of(lang, n.attr));
    if (p.instrs.size() > budget || (!view.is_identity() && has_iota(p))) return;
    if (std::any_of(n.kids.begin(), n.kids.end(), padded_only)) return;
    if (best && best->program.instrs.size() >= p.instrs.size()) return;
    best = Producer{p, n.kids, view};
  };
  const OpId fused = lang.op(Op::Fused);
  // A value that several kernels read and that a gemm computes in its
  // epilogue (or can: it reads a gemm's value that nothing else reads) is
  // written once there and read, not recomputed from the gemm's inputs by
  // every reader (a residual stream).
  auto gemm_made = [&](ClassId k) {
    if (!several_readers(g, k)) return false;
    if (!nodes_with(g, k, lang.op(Op::Gemm)).empty()) return true;
    for (const NodeCopy& n : nodes_with(g, k, fused))
      for (ClassId kid : n.kids)
        if (!nodes_with(g, kid, lang.op(Op::Gemm)).empty() && consumed_within(g, lang, kid, k)) return true;
    return false;
  };
  if (gemm_made(c)) return std::nullopt;
  for (const NodeCopy& n : nodes_with(g, c, fused)) consider(n, View{});
  for (const NodeCopy& v : nodes_with(g, c, lang.view_op())) {
    const View& view = *lang.payload(v.attr).view;
    if (has_pad(view) || v.kids[0] == g.find(c) || gemm_made(v.kids[0])) continue;
    for (const NodeCopy& n : nodes_with(g, v.kids[0], fused)) consider(n, view);
  }
  return best;
}

// `program` over `inputs`, with the largest fused producer that fits
// inlined into each input; nullopt when no producer was inlined.
std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> absorb_producers(EGraph& g, HlirLanguage& lang,
                                                                             const ProgramAttr& program,
                                                                             const std::vector<ClassId>& inputs,
                                                                             bool product_slot) {
  ProgramBuilder b(g, product_slot);
  std::vector<ProgramBuilder::Ref> values;
  if (product_slot) values.push_back(ProgramBuilder::product());
  bool absorbed = false;
  size_t budget = kMaxProgramInstrs - std::min(kMaxProgramInstrs, program.instrs.size());
  for (ClassId c : inputs) {
    std::optional<Producer> p = fused_producer(g, lang, c, budget);
    if (!p) {
      values.push_back(b.leaf(c));
      continue;
    }
    std::vector<ProgramBuilder::Ref> in;
    for (ClassId x : p->inputs) in.push_back(b.leaf(add_view(g, lang, x, p->view)));
    values.push_back(b.inline_program(p->program, in));
    budget -= std::min(budget, p->program.instrs.size());
    absorbed = true;
  }
  if (!absorbed) return std::nullopt;
  const ProgramBuilder::Ref result = b.inline_program(program, values);
  if (b.num_inputs() > kMaxKernelInputs) return std::nullopt;
  return b.finish(result);
}

std::vector<ClassId> slice(const std::vector<ClassId>& v, size_t first, size_t last) {
  return std::vector<ClassId>(v.begin() + static_cast<ptrdiff_t>(first), v.begin() + static_cast<ptrdiff_t>(last));
}

std::vector<ClassId> concat(std::vector<ClassId> a, const std::vector<ClassId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ClassId add_kernel(EGraph& g, HlirLanguage& lang, Op op, const Attr& attr, const std::vector<ClassId>& kids) {
  return g.add(lang.op(op), lang.attr(attr), std::span<const ClassId>(kids.data(), kids.size()));
}

// The node of class `root` with op `op`, attribute `attr` (or any, when
// unset) and children `kids`.
std::optional<NodeCopy> matched_node(EGraph& g, ClassId root, OpId op, std::optional<AttrId> attr,
                                     std::span<const ClassId> kids) {
  for (NodeCopy& n : nodes_with(g, root, op))
    if ((!attr || n.attr == *attr) && same_kids(g, n, kids)) return std::move(n);
  return std::nullopt;
}

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

size_t gemm_size(const GemmAttr& a) { return a.a.instrs.size() + a.b.instrs.size() + a.epilogue.instrs.size(); }

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
std::optional<ClassId> gemm_prologue(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, true, true);
}
std::optional<ClassId> gemm_prologue_a(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, true, false);
}
std::optional<ClassId> gemm_prologue_b(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  return gemm_prologue_of(g, lang, m, false, true);
}

// A program reading a kernel's own value as input 0 (`product`), followed by
// a consumer: the epilogue `first` (over the product and `first_inputs`),
// then `consumer` reading the result as `slot` and leaves elsewhere.
std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> chain_epilogue(EGraph& g, const ProgramAttr& first,
                                                                           const std::vector<ClassId>& first_inputs,
                                                                           const ProgramAttr& consumer,
                                                                           const std::vector<ClassId>& consumer_inputs,
                                                                           size_t slot) {
  ProgramBuilder b(g, true);
  std::vector<ProgramBuilder::Ref> in{ProgramBuilder::product()};
  for (ClassId c : first_inputs) in.push_back(b.leaf(c));
  const ProgramBuilder::Ref value = b.inline_program(first, in);
  std::vector<ProgramBuilder::Ref> cin;
  for (size_t i = 0; i < consumer_inputs.size(); ++i) cin.push_back(i == slot ? value : b.leaf(consumer_inputs[i]));
  const ProgramBuilder::Ref result = b.inline_program(consumer, cin);
  if (b.num_inputs() > kMaxKernelInputs) return std::nullopt;
  return b.finish(result);
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
  if (!nodes_with(g, m.root, lang.op(Op::Gemm)).empty()) return std::nullopt;
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

// ---- softmax and norms ---------------------------------------------------------------

// The view nn's keepdim reductions put between a reduced value of shape
// `reduced` (the input `full` without `axis`) and an elementwise op on
// `full`: unsqueeze(axis), then broadcast to `full`.
View keepdim_broadcast(const Shape& reduced, size_t axis, const Shape& full) {
  Shape keep = reduced;
  keep.insert(keep.begin() + static_cast<ptrdiff_t>(axis), 1);
  View v;
  v.append(reshape_step(keep), reduced, "keepdim");
  v.append(expand_step(full), reduced, "keepdim");
  return v;
}

// Tensor::broadcast_to of a [n] parameter to `full` (rank >= 2).
View parameter_broadcast(int64_t n, const Shape& full) {
  Shape padded(full.size() - 1, 1);
  padded.push_back(n);
  View v;
  v.append(reshape_step(padded), Shape{n}, "broadcast");
  v.append(expand_step(full), Shape{n}, "broadcast");
  return v;
}

// The view of a view attribute; the identity for any other attribute (a
// rule that binds a non-view there then simply does not match the checks).
const View& view_of(const HlirLanguage& lang, AttrId id) {
  static const View kIdentity;
  if (id == AttrId{}) return kIdentity;
  const std::optional<View>& v = lang.payload(id).view;
  return v ? *v : kIdentity;
}

// Whether `c` is known to hold `value` rounded to its dtype everywhere.
bool is_constant(EGraph& g, ClassId c, double value) {
  const ClassData& d = data(g, c);
  return d.constant && *d.constant == Scalar::of(d.type.dtype, value);
}

// Whether views `inner` then `outer` read a reduced value of `reduced`
// shape exactly as keepdim_broadcast does.
bool is_keepdim_broadcast(const View& inner, const View& outer, const Shape& reduced, size_t axis, const Shape& full) {
  return compose_views(inner, outer, reduced) == keepdim_broadcast(reduced, axis, full);
}

// softmax-kernel ?r ?x ?axis ?log2e ?v1 ?v2 ?v3 ?v4 (see rules/norms.rules):
// nn::softmax(x, axis) as built by spool::nn, checked here for the constant
// and the keepdim views; the softmax kernel's semantics is that composite.
std::optional<ClassId> softmax_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], log2e = m.args[2];
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  const ClassData& xd = data(g, x);
  if (!axis_attr || !is_float(xd.type.dtype)) return std::nullopt;
  const int64_t axis = axis_attr->axis;
  const Shape& full = xd.type.shape;
  if (axis < 0 || axis >= static_cast<int64_t>(full.size())) return std::nullopt;
  Shape reduced = full;
  reduced.erase(reduced.begin() + axis);
  const size_t a = static_cast<size_t>(axis);
  if (!is_constant(g, log2e, std::numbers::log2e)) return std::nullopt;
  // m.attr_args: axis, v1 (recip broadcast), v2 (sum keepdim), v3 (neg broadcast), v4 (max keepdim)
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), reduced, a, full) ||
      !is_keepdim_broadcast(view_of(lang, m.attr_args[4]), view_of(lang, m.attr_args[3]), reduced, a, full))
    return std::nullopt;
  return add_kernel(g, lang, Op::Softmax, AxisAttr{axis}, {g.find(x)});
}

// rms-norm-kernel ?r ?x ?w ?inv ?eps ?axis ?vb ?vk ?vw: nn::rms_norm(x, w, eps)
// with w read as is (gemma's `1 + w` is then the class computing it).
std::optional<ClassId> rms_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2], inv = m.args[3], eps = m.args[4];
  const ClassData& xd = data(g, x);
  const ClassData& wd = data(g, w);
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  const Shape& full = xd.type.shape;
  if (!axis_attr || !is_float(xd.type.dtype) || full.size() < 2 ||
      axis_attr->axis != static_cast<int64_t>(full.size()) - 1)
    return std::nullopt;
  const int64_t n = full.back();
  if (wd.type != TensorType{xd.type.dtype, {n}}) return std::nullopt;
  if (!is_constant(g, inv, 1.0 / static_cast<double>(n))) return std::nullopt;
  const ClassData& ed = data(g, eps);
  if (!ed.constant || !is_float(ed.constant->dtype)) return std::nullopt;
  Shape reduced(full.begin(), full.end() - 1);
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), reduced, full.size() - 1,
                            full) ||
      view_of(lang, m.attr_args[3]) != parameter_broadcast(n, full))
    return std::nullopt;
  NormAttr attr;
  attr.eps = ed.constant->f;  // already rounded to the dtype: rounding it again is exact
  return add_kernel(g, lang, Op::RmsNorm, attr, {g.find(x), g.find(w)});
}

// layer-norm-kernel ?r ?x ?w ?b ?inv ?eps ?axis ?v1 ?v2 ?v3 ?v4 ?vw ?vb:
// nn::layer_norm(x, w, b, eps).
std::optional<ClassId> layer_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2], b = m.args[3], inv = m.args[4], eps = m.args[5];
  const ClassData& xd = data(g, x);
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  const Shape& full = xd.type.shape;
  if (!axis_attr || !is_float(xd.type.dtype) || full.size() < 2 ||
      axis_attr->axis != static_cast<int64_t>(full.size()) - 1)
    return std::nullopt;
  const int64_t n = full.back();
  const TensorType param{xd.type.dtype, {n}};
  if (data(g, w).type != param || data(g, b).type != param) return std::nullopt;
  if (!is_constant(g, inv, 1.0 / static_cast<double>(n))) return std::nullopt;
  const ClassData& ed = data(g, eps);
  if (!ed.constant || !is_float(ed.constant->dtype)) return std::nullopt;
  Shape reduced(full.begin(), full.end() - 1);
  const size_t a = full.size() - 1;
  // attr_args: axis, v1 (recip broadcast), v2 (variance keepdim), v3 (neg mean broadcast), v4 (mean keepdim), vw, vb
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), reduced, a, full) ||
      !is_keepdim_broadcast(view_of(lang, m.attr_args[4]), view_of(lang, m.attr_args[3]), reduced, a, full) ||
      view_of(lang, m.attr_args[5]) != parameter_broadcast(n, full) ||
      view_of(lang, m.attr_args[6]) != parameter_broadcast(n, full))
    return std::nullopt;
  NormAttr attr;
  attr.eps = ed.constant->f;
  return add_kernel(g, lang, Op::LayerNorm, attr, {g.find(x), g.find(w), g.find(b)});
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

// half-softmax ?r ?x, half-rms-norm ?r ?x ?w, half-layer-norm ?r ?x ?w ?b for (cast[?t] (K[?k] (cast[?f] ?x) ...)), K a
// softmax, rms_norm (two inputs) or layer_norm (three): a half-precision
// (bf16, f16) kernel K over the uncast sources. Exact: spool::nn computes a
// half-precision softmax or norm by casting its inputs to f32, computing
// there and rounding the result once to the input's dtype, and a kernel's
// semantics is its composite in its inputs' dtype.
std::optional<ClassId> half_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const size_t sources = m.args.size() - 1;
  if (m.attr_args.size() != sources + 2) return std::nullopt;
  const auto* to = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[0]));
  if (!to || (to->to != DType::BF16 && to->to != DType::F16)) return std::nullopt;
  for (size_t i = 0; i < sources; ++i) {
    const auto* inner = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[2 + i]));
    if (!inner || inner->to != DType::F32 || data(g, m.args[1 + i]).type.dtype != to->to) return std::nullopt;
  }
  const Attr& kernel_attr = attr_of(lang, m.attr_args[1]);
  Op op;
  if (sources == 1 && std::holds_alternative<AxisAttr>(kernel_attr))
    op = Op::Softmax;
  else if (sources == 2 && std::holds_alternative<NormAttr>(kernel_attr))
    op = Op::RmsNorm;
  else if (sources == 3 && std::holds_alternative<NormAttr>(kernel_attr))
    op = Op::LayerNorm;
  else
    return std::nullopt;
  std::vector<ClassId> kids;
  for (size_t i = 0; i < sources; ++i) kids.push_back(g.find(m.args[1 + i]));
  return add_kernel(g, lang, op, kernel_attr, kids);
}

// half-rms-norm-offset ?r ?x ?w ?one ?t ?n ?f ?g ?v for
// (cast[?t] (rms_norm[?n] (cast[?f] ?x) (add (cast[?g] ?w) (view[?v] ?one)))):
// gemma's half-precision rms_norm(x, w, eps, unit_offset), whose f32 kernel
// the norms rules found with `1 + w` as its weight.
std::optional<ClassId> half_rms_norm_offset(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2], one = m.args[3];
  const auto* to = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[0]));
  const auto* norm = std::get_if<NormAttr>(&attr_of(lang, m.attr_args[1]));
  const auto* fx = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[2]));
  const auto* fw = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[3]));
  if (!to || !norm || !fx || !fw || norm->unit_offset) return std::nullopt;
  if ((to->to != DType::BF16 && to->to != DType::F16) || fx->to != DType::F32 || fw->to != DType::F32) return std::nullopt;
  if (data(g, x).type.dtype != to->to || data(g, w).type.dtype != to->to) return std::nullopt;
  if (!is_constant(g, one, 1.0) || data(g, one).type.dtype != DType::F32 || has_pad(view_of(lang, m.attr_args[4])))
    return std::nullopt;
  NormAttr attr = *norm;
  attr.unit_offset = true;
  return add_kernel(g, lang, Op::RmsNorm, attr, {g.find(x), g.find(w)});
}

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
  add("half-rms-norm", 3, 4, "apply half-rms-norm ?root ?x ?w ?t ?n ?f ?g",
      half_kernel);
  add("half-rms-norm-offset", 4, 5, "apply half-rms-norm-offset ?root ?x ?w ?one ?t ?n ?f ?g ?v",
      half_rms_norm_offset);
  add("half-layer-norm", 4, 5, "apply half-layer-norm ?root ?x ?w ?b ?t ?n ?f ?g ?h",
      half_kernel);
  add("layer-norm-kernel", 6, 7, "apply layer-norm-kernel ?root ?x ?w ?b ?inv ?eps ?axis ?v1 ?v2 ?v3 ?v4 ?vw ?vb",
      layer_norm_kernel);
  return r;
}

}  // namespace

const egraph::Registry& hlir_registry() {
  static const egraph::Registry registry = make_registry();
  return registry;
}

}  // namespace spool::rules
