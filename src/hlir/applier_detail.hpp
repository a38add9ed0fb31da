#pragma once
// Internal to the HLIR appliers: reading e-classes and adding kernels
// (appliers.cpp, which also registers every applier by name), fused
// programs built over e-classes (fused_programs.cpp), and the appliers
// themselves, by kind: fusion into elementwise, gemm and reduce kernels
// (fusion_appliers.cpp), and softmax and norm kernels recognized from their
// composites (composite_appliers.cpp).

#include <spool/hlir/language.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/hlir/appliers.hpp>

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace spool::hlir::detail {

using egraph::AttrId;
using egraph::ClassId;
using egraph::EGraph;
using egraph::MatchView;
using egraph::NodeId;
using egraph::OpId;

// ---- e-classes (appliers.cpp) --------------------------------------------------

const ClassData& data(const EGraph& g, ClassId c);

bool is_elementwise(Op op);

// A node copied out of the graph (spans into the graph die on the next add).
struct NodeCopy {
  OpId op;
  AttrId attr;
  std::vector<ClassId> kids;
};

NodeCopy copy_node(EGraph& g, NodeId n);

// The nodes of class `c` with op `op`, copied, in node order.
std::vector<NodeCopy> nodes_with(EGraph& g, ClassId c, OpId op);
// Whether class `c` has a node with op `op` (nothing copied).
bool has_node_with(EGraph& g, ClassId c, OpId op);

bool same_kids(EGraph& g, const NodeCopy& node, std::span<const ClassId> kids);

const Attr& attr_of(const HlirLanguage& lang, AttrId id);

// `c` read through `v`, as one view node over a non-view class where `c`
// already holds a view (successive views compose, as on graph edges).
ClassId add_view(EGraph& g, HlirLanguage& lang, ClassId c, const View& v);

bool has_pad(const View& v);

ClassId add_kernel(EGraph& g, HlirLanguage& lang, Op op, const Attr& attr, const std::vector<ClassId>& kids);

// ---- fused programs (fused_programs.cpp) --------------------------------------------

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
  Ref input(ClassId c);
  // A class as a value: its constant when the analysis knows one (every
  // element equal), else an input.
  Ref leaf(ClassId c);
  // Appends `instr` reading `args`; canonical fields (unused ones zero) so
  // that equal programs intern to one attribute.
  Ref emit(ProgramInstr instr, std::initializer_list<Ref> args) { return emit(instr, std::vector<Ref>(args)); }
  Ref emit(ProgramInstr instr, const std::vector<Ref>& args);
  // Inlines `program` with its inputs bound to `in`; returns its result.
  Ref inline_program(const ProgramAttr& program, const std::vector<Ref>& in);

  size_t num_instrs() const { return instrs_.size(); }
  size_t num_inputs() const { return inputs_.size(); }

  // The program whose result is `result` (which must be the last
  // instruction), and its input classes (without the product slot).
  std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> finish(Ref result) const;

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
bool consumed_within(EGraph& g, const HlirLanguage& lang, ClassId c, ClassId root);

// `program` over `inputs`, with the largest fused producer that fits
// inlined into each input; nullopt when no producer was inlined.
std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> absorb_producers(EGraph& g, HlirLanguage& lang,
                                                                             const ProgramAttr& program,
                                                                             const std::vector<ClassId>& inputs,
                                                                             bool product_slot);

// A program reading a kernel's own value as input 0 (`product`), followed by
// a consumer: the epilogue `first` (over the product and `first_inputs`),
// then `consumer` reading the result as `slot` and leaves elsewhere.
std::optional<std::pair<ProgramAttr, std::vector<ClassId>>> chain_epilogue(EGraph& g, const ProgramAttr& first,
                                                                           const std::vector<ClassId>& first_inputs,
                                                                           const ProgramAttr& consumer,
                                                                           const std::vector<ClassId>& consumer_inputs,
                                                                           size_t slot);

// ---- the appliers, registered by name in appliers.cpp --------------------------
//
// Each reads the matched root class first; the comment at its definition
// gives the rule arguments it takes.

// fusion_appliers.cpp
std::optional<ClassId> fused_op(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> fuse_producers(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> gemm_from_product(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> gemm_prologue(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> gemm_prologue_a(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> gemm_prologue_b(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> gemm_epilogue(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> reduce_op(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> reduce_prologue(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> reduce_epilogue(EGraph& g, HlirLanguage& lang, const MatchView& m);

// composite_appliers.cpp
std::optional<ClassId> softmax_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> rms_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> layer_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> half_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m);
std::optional<ClassId> half_rms_norm_offset(EGraph& g, HlirLanguage& lang, const MatchView& m);

// appliers.cpp
std::optional<ClassId> loop_input_static(EGraph& g, HlirLanguage& lang, const MatchView& m);

}  // namespace spool::hlir::detail
