// Fused programs over e-classes: the elementwise programs of fused kernels
// and the prologues and epilogues of gemm and reduce kernels, built from the
// classes they read, with the fused producers of those classes inlined where
// that is exact.

#include "applier_detail.hpp"

#include <algorithm>

namespace spool::hlir::detail {

ProgramBuilder::Ref ProgramBuilder::input(ClassId c) {
  c = g_.find(c);
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].valid() && inputs_[i] == c) return -static_cast<Ref>(i) - 1;
  inputs_.push_back(c);
  return -static_cast<Ref>(inputs_.size());
}

ProgramBuilder::Ref ProgramBuilder::leaf(ClassId c) {
  const ClassData& d = data(g_, c);
  if (d.constant) {
    ProgramInstr k;
    k.op = Op::Constant;
    k.value = *d.constant;
    return emit(k, {});
  }
  return input(c);
}

ProgramBuilder::Ref ProgramBuilder::emit(ProgramInstr instr, const std::vector<Ref>& args) {
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

ProgramBuilder::Ref ProgramBuilder::inline_program(const ProgramAttr& program, const std::vector<Ref>& in) {
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

std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> ProgramBuilder::finish(Ref result) const {
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

namespace {

bool has_iota(const ProgramAttr& p) {
  return std::any_of(p.instrs.begin(), p.instrs.end(), [](const ProgramInstr& i) { return i.op == Op::Iota; });
}

// Whether a gemm can compute class `k` in its epilogue: a fused node of `k`
// reads a class that a gemm computes, or can (searched `depth` < 8 links
// down an elementwise chain), and that nothing outside `k` reads. The
// chain need not be one kernel yet: a bf16 GEMM's scale runs as casts
// and a multiply before the causal mask's `where`, and the epilogue rules
// reach the `where` only after those (the `where` is not to be inlined
// into its readers meanwhile). A class met first at the depth limit is
// remembered as not reachable for the rest of the query (conservative:
// the value may then be inlined, as before).
bool epilogue_reachable(EGraph& g, HlirLanguage& lang, ClassId k, int depth,
                        std::vector<std::pair<ClassId, bool>>& memo) {
  k = g.find(k);
  for (const auto& [c, reachable] : memo)
    if (c == k) return reachable;
  bool reachable = false;
  if (depth < 8)
    for (const NodeCopy& n : nodes_with(g, k, lang.op(Op::Fused))) {
      for (ClassId kid : n.kids)
        if ((has_node_with(g, kid, lang.op(Op::Gemm)) || epilogue_reachable(g, lang, kid, depth + 1, memo)) &&
            consumed_within(g, lang, kid, k)) {
          reachable = true;
          break;
        }
      if (reachable) break;
    }
  memo.emplace_back(k, reachable);
  return reachable;
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
  // epilogue (or can: it reads, directly or through an elementwise chain, a
  // gemm's value that nothing else reads; epilogue_reachable) is written
  // once there and read, not recomputed from the gemm's inputs by every
  // reader (a residual stream; a causal mask's `where` read by a bf16
  // softmax kernel and by the f32 composite it replaced).
  auto gemm_made = [&](ClassId k) {
    if (!several_readers(g, k)) return false;
    if (has_node_with(g, k, lang.op(Op::Gemm))) return true;
    std::vector<std::pair<ClassId, bool>> memo;
    return epilogue_reachable(g, lang, k, 0, memo);
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

}  // namespace

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

}  // namespace spool::hlir::detail
