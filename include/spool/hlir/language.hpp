#pragma once
// The HLIR in the e-graph: its op table, attributes and analysis.
//
// Every HLIR op (ops.def) becomes an e-graph op of the same name and arity,
// plus `view`, one child: a consumer reading its input through a View (the
// e-graph has no edges to hang views on). Sources carry their type in their
// attribute. The analysis derives each class's dtype and shape inside the
// e-graph (infer_type), folds constants with the interpreter's exact
// semantics, and refuses a merge of classes whose shape or dtype differ, or
// whose node is ill-typed, naming the rule that asked for it.

#include <spool/egraph/egraph.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/egraph/pattern.hpp>
#include <spool/ir/graph.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace spool::hlir {

// The engine's vocabulary, used throughout the client.
using egraph::Analysis;
using egraph::AttrId;
using egraph::ClassId;
using egraph::EGraph;
using egraph::ENodeRef;
using egraph::Language;
using egraph::MergeChange;
using egraph::NodeId;
using egraph::OpId;
using egraph::ParseOptions;
using egraph::Term;

// The payload of an HLIR attribute: the op's attribute, the type of a
// source, or the View of a `view` node.
struct HlirAttr {
  spool::Attr attr;
  std::optional<spool::TensorType> type;  // sources only
  std::optional<spool::View> view;        // view nodes only
};

class HlirLanguage {
 public:
  HlirLanguage();
  // Every op and attribute of `other` under the same ids, so that rules
  // compiled in `other` run unchanged on e-graphs of the copy.
  explicit HlirLanguage(const HlirLanguage& other);
  HlirLanguage& operator=(const HlirLanguage&) = delete;

  Language& language() { return language_; }
  const Language& language() const { return language_; }
  OpId op(spool::Op op) const { return ops_[static_cast<size_t>(op)]; }
  OpId view_op() const { return view_; }
  // The HLIR op of an e-graph op; nullopt for `view`.
  std::optional<spool::Op> hlir_op(OpId op) const;

  // Interned attributes. The printed form is the HLIR text form without
  // braces: `axis=1`, `name="x" : f32[2,3]`, `value=2 : f32[]`, `permute(1,0)`;
  // two values are the same attribute exactly when those forms are equal.
  // Values are found by a hash of that form and compared as it prints them
  // (spool::same_text, View::same_text), never printed to be interned.
  AttrId attr(const spool::Attr& attr);
  AttrId source_attr(const spool::Attr& attr, const spool::TensorType& type);
  AttrId view_attr(const spool::View& view);
  const HlirAttr& payload(AttrId id) const { return language_.attrs.payload<HlirAttr>(id); }

  // Reads the attribute text of a pattern (`axis=1`, `to=bf16`, `k=2`,
  // `loop=0, trips=4, index=1`, `name="x" : f32[2,3]`, `value=2 : f32`);
  // views are not written in patterns yet (bind them with `[?v]`).
  std::optional<AttrId> parse_attr(OpId op, std::string_view text);
  ParseOptions parse_options();

 private:
  // Which entry point interned a value (part of the hash: the three key
  // spaces are compared differently).
  enum class Entry : uint8_t { Attr, Source, View };
  struct Slot {
    uint64_t hash = 0;
    AttrId id;  // AttrId{} marks an empty slot
  };
  // The id of the value whose printed form hashes to `hash`: the entry
  // `same` accepts, or a new one holding make()'s payload.
  template <typename Same, typename Make>
  AttrId intern(uint64_t hash, const Same& same, const Make& make);
  void remember(uint64_t hash, AttrId id);

  Language language_;
  std::array<OpId, spool::kNumOps> ops_{};
  OpId view_;
  // Every interned value's (hash, id): open addressing with linear
  // probing, at most half full.
  std::vector<Slot> cache_;
  size_t cached_ = 0;
  mutable std::mutex cache_mutex_;
};

// The per-class facts: type, a known constant value (every element equal),
// or why the class's first node is ill-typed.
struct ClassData {
  bool ok = true;
  spool::TensorType type;
  std::optional<spool::Scalar> constant;
  std::string error;

  ClassData() = default;
  ClassData(const ClassData&) = default;
  ClassData& operator=(const ClassData&) = default;
  // A move never throws (the shape's small_vector does not say so):
  // declared here, the analysis's vector moves its entries when it grows
  // instead of copying every one.
  ClassData(ClassData&&) noexcept = default;
  ClassData& operator=(ClassData&&) noexcept = default;
};

class HlirAnalysis : public Analysis {
 public:
  explicit HlirAnalysis(HlirLanguage& lang) : lang_(lang) {}
  HlirLanguage& language() const { return lang_; }
  const ClassData& data(ClassId c) const { return data_[c.value]; }

  void make(const EGraph& graph, ClassId c, NodeId n) override;
  std::string check_merge(const EGraph& graph, ClassId a, ClassId b) const override;
  MergeChange merge(ClassId into, ClassId from) override;
  bool remake(const EGraph& graph, ClassId c, NodeId n) override;
  void modify(EGraph& graph, ClassId c) override;
  std::string check(const EGraph& graph, ClassId c) const override;
  size_t memory_bytes() const override { return data_.capacity() * sizeof(ClassData); }
  std::string describe(ClassId c) const override;

 private:
  ClassData compute(const EGraph& graph, NodeId n) const;
  HlirLanguage& lang_;
  std::vector<ClassData> data_;
};

// An e-graph over `lang` with the HLIR analysis.
std::unique_ptr<EGraph> make_egraph(HlirLanguage& lang);

// Adds every live node of `graph` (views become `view` nodes); returns the
// class of each graph output, in order.
std::vector<ClassId> add_graph(EGraph& egraph, HlirLanguage& lang, const spool::Graph& graph);

// Converts an extracted term back into a Graph: `view` nodes become views
// on edges (successive views compose); the roots become outputs named
// `output_names` (or "out0", "out1", ...).
spool::Graph to_graph(const HlirLanguage& lang, const Term& term, const std::vector<std::string>& output_names = {});

}  // namespace spool::hlir
