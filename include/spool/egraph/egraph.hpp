#pragma once
// The e-graph: hashcons, union-find, e-classes and deferred rebuilding.
//
// Storage is flat and dense (egg's design, in C++): an e-node is a 20-byte
// record {op, arity, attr, class, two children} (more children spill to a
// shared pool); a canonical e-class owns a recycled slot holding its nodes
// and parents as NodeId lists in one pooled array; the hashcons is an
// open-addressing table of (node, hash) keyed by node content; the
// union-find is a vector with path halving whose roots point at their slot.
// About 60 bytes per e-node on a saturated graph.
//
// `add` and `merge` only record work; `rebuild()` restores the invariants in
// one place (congruence, canonical children, analysis data, sorted class node
// lists, the op index). Debug builds check the invariants after every
// rebuild. Matching requires a clean (rebuilt) graph and only reads it.

#include <spool/egraph/ids.hpp>
#include <spool/egraph/language.hpp>

#include <boost/container/small_vector.hpp>

#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spool::egraph {

using ClassVec = boost::container::small_vector<ClassId, 3>;

// A contiguous container (boost small_vector, std::vector) as a span.
template <typename V>
std::span<const typename V::value_type> span_of(const V& v) {
  return std::span<const typename V::value_type>(v.data(), v.size());
}

// Children gathered on the stack (up to 8; more spill to the heap): what the
// hot paths use instead of a vector, so adding a node does not allocate.
class ChildBuf {
 public:
  ChildBuf() = default;
  // `n` slots to fill through data() or [].
  explicit ChildBuf(size_t n) : size_(n) {
    if (n > kInline) spill_.resize(n);
  }
  ClassId& operator[](size_t i) { return data()[i]; }
  void push_back(ClassId c) {
    if (size_ < kInline) {
      inline_[size_++] = c;
      return;
    }
    if (spill_.empty()) spill_.assign(inline_, inline_ + kInline);
    spill_.push_back(c);
    ++size_;
  }
  ClassId* data() { return size_ <= kInline ? inline_ : spill_.data(); }
  const ClassId* data() const { return size_ <= kInline ? inline_ : spill_.data(); }
  size_t size() const { return size_; }
  std::span<const ClassId> span() const { return std::span<const ClassId>(data(), size_); }

 private:
  static constexpr size_t kInline = 8;
  ClassId inline_[kInline];
  size_t size_ = 0;
  std::vector<ClassId> spill_;
};

// An e-node by value: what `add` takes. No heap allocation up to 3 children.
struct ENode {
  OpId op;
  AttrId attr;
  ClassVec children;
};

// A stored e-node seen through the graph (valid until the next add/rebuild).
struct ENodeRef {
  OpId op;
  AttrId attr;
  std::span<const ClassId> children;
};

class EGraph;

// What merging two classes' analysis data changed (egg's DidMerge): whether
// the merged data differs from what `into` had, and from what `from` had.
// The parents of a class whose data changed are re-examined.
struct MergeChange {
  bool into = false;
  bool from = false;
  bool any() const { return into || from; }
};

// Per-class data (shape, dtype, constant, ...) kept by a client. The engine
// calls `make` for every new class, `merge` when two classes are unioned,
// `remake` when a node's children changed data, and `modify` from rebuild()
// so the analysis may add nodes and merges (constant folding). `check_merge`
// runs before a union and may refuse it: the engine then throws spool::Error
// naming the rule that asked for the merge.
class Analysis {
 public:
  virtual ~Analysis() = default;
  // A new class `c` was created holding node `n`.
  virtual void make(const EGraph& graph, ClassId c, NodeId n) = 0;
  // Returns an empty string if `a` and `b` may be merged, otherwise why not.
  virtual std::string check_merge(const EGraph& graph, ClassId a, ClassId b) const = 0;
  // `from` is merged into `into` (which keeps the merged data); returns
  // which of the two classes' data the merged data differs from.
  virtual MergeChange merge(ClassId into, ClassId from) = 0;
  // Node `n` (in class `c`) has a child whose data changed: recompute what
  // it implies for `c`; returns whether `c`'s data changed.
  virtual bool remake(const EGraph& graph, ClassId c, NodeId n) = 0;
  // Called from rebuild() for classes whose data is new or changed.
  virtual void modify(EGraph& graph, ClassId c) = 0;
  // Extra invariant checks; returns an empty string when fine.
  virtual std::string check(const EGraph& /*graph*/, ClassId /*c*/) const { return {}; }
  virtual size_t memory_bytes() const { return 0; }
  // A short text for dumps ("f32[2,3] = 1").
  virtual std::string describe(ClassId /*c*/) const { return {}; }
};

class EGraph {
 public:
  explicit EGraph(Language& language);
  EGraph(const EGraph&) = delete;
  EGraph& operator=(const EGraph&) = delete;

  Language& language() const { return *language_; }
  const OpTable& ops() const { return language_->ops; }
  AttrTable& attrs() const { return language_->attrs; }

  // The analysis is owned by the graph; set it before adding nodes.
  void set_analysis(std::unique_ptr<Analysis> analysis);
  Analysis* analysis() const { return analysis_.get(); }

  // Adds a node (children are canonicalised) or finds the congruent one.
  // Throws spool::Error on an arity mismatch.
  ClassId add(const ENode& node);
  ClassId add(OpId op, AttrId attr, std::span<const ClassId> children);
  ClassId add_leaf(OpId op, AttrId attr = AttrId{}) { return add(op, attr, {}); }
  // The class of a node congruent to `node`, if any; never adds.
  std::optional<ClassId> lookup(OpId op, AttrId attr, std::span<const ClassId> children);

  // Prefetch hints for a coming lookup of a node with canonical children:
  // the hashcons slot first, then (once that slot is likely cached) the node
  // it holds. They never change the graph.
  uint32_t lookup_hash(OpId op, AttrId attr, std::span<const ClassId> children) const {
    return hash_node(op.value, attr.value, children.data(), children.size());
  }
  void prefetch_slot(uint32_t hash) const { __builtin_prefetch(&memo_[hash & (memo_.size() - 1)]); }
  void prefetch_node(uint32_t hash) const {
    const uint32_t n = memo_[hash & (memo_.size() - 1)].node;
    if (n != UINT32_MAX) __builtin_prefetch(&nodes_[n]);
  }

  // Unions two classes; returns false if they were already equal. `reason`
  // (a rule's name and location) is reported if the analysis refuses.
  bool merge(ClassId a, ClassId b, std::string_view reason = "merge");
  // add() followed by merge() with `target`, without creating a class for a
  // new node when there is no analysis to consult. Returns whether the graph
  // changed.
  bool add_to_class(OpId op, AttrId attr, std::span<const ClassId> children, ClassId target,
                    std::string_view reason = "merge");

  // Restores congruence, analysis data, class node order and the op index.
  // Returns the number of unions rebuild itself performed. When duplicates
  // found by congruence outnumber the live nodes, the node storage is
  // compacted: NodeIds are stable only from one rebuild to the next
  // (ClassIds are stable forever).
  size_t rebuild();
  bool clean() const { return pending_.empty() && analysis_pending_.empty() && modify_pending_.empty() && dirty_.empty(); }
  // Removes every node with children from the class of `c` (egg's
  // constant-folding pruning: a class with a known value keeps only its
  // leaves). Pruned nodes stay in the hashcons, so adding one again finds
  // this class, and in their children's parent lists, so rebuild() keeps
  // them canonical; they are never matched or extracted. Returns how many
  // nodes were pruned.
  size_t prune_to_leaves(ClassId c);
  // Drops duplicate nodes and renumbers the live ones (requires a clean graph).
  void compact();
  size_t dead_nodes() const { return nodes_.size() - memo_size_; }

  // The canonical id of a class (path halving: mutates the union-find).
  ClassId find(ClassId c);
  // The canonical id without path compression (safe in concurrent readers).
  ClassId find_const(ClassId c) const;
  bool is_canonical(ClassId c) const { return (parent_[c.value] & kRoot) != 0; }

  // Counts of live (hash-consed) nodes and canonical classes. num_nodes()
  // counts pruned nodes too (they stay in the hashcons, as in egg's memo);
  // num_class_nodes() only the nodes listed in classes (egg's
  // total_number_of_nodes).
  size_t num_nodes() const { return memo_size_; }
  size_t num_class_nodes() const { return memo_size_ - pruned_; }
  size_t num_pruned() const { return pruned_; }
  size_t num_classes() const { return num_classes_; }
  // Ids handed out so far (some no longer canonical or alive).
  size_t class_id_bound() const { return parent_.size(); }
  size_t node_id_bound() const { return nodes_.size(); }

  // The nodes of one op in one class (see class_nodes(c, op)): a run of the
  // class's sorted node list, or, in a class changed since the last
  // rebuild, its whole unsorted list filtered by op. Either way exactly the
  // nodes with that op.
  class OpNodes {
   public:
    class iterator {
     public:
      using value_type = NodeId;
      using difference_type = std::ptrdiff_t;
      iterator() = default;
      iterator(const NodeId* p, const NodeId* end, const EGraph* g, uint16_t op) : p_(p), end_(end), g_(g), op_(op) {
        skip();
      }
      NodeId operator*() const { return *p_; }
      iterator& operator++() {
        ++p_;
        skip();
        return *this;
      }
      iterator operator++(int) {
        iterator old = *this;
        ++*this;
        return old;
      }
      bool operator==(const iterator& o) const { return p_ == o.p_; }

     private:
      void skip() {
        while (p_ != end_ && g_->nodes_[p_->value].op != op_) ++p_;
      }
      const NodeId* p_ = nullptr;
      const NodeId* end_ = nullptr;
      const EGraph* g_ = nullptr;
      uint16_t op_ = 0;
    };
    OpNodes(std::span<const NodeId> nodes, const EGraph* g, OpId op) : nodes_(nodes), g_(g), op_(op.value) {}
    iterator begin() const { return iterator(nodes_.data(), nodes_.data() + nodes_.size(), g_, op_); }
    iterator end() const {
      const NodeId* e = nodes_.data() + nodes_.size();
      return iterator(e, e, g_, op_);
    }
    bool empty() const { return begin() == end(); }
    size_t size() const { return static_cast<size_t>(std::distance(begin(), end())); }

   private:
    std::span<const NodeId> nodes_;
    const EGraph* g_;
    uint16_t op_;
  };

  ENodeRef node(NodeId n) const {
    const NodeRec& r = nodes_[n.value];
    return ENodeRef{OpId{r.op}, AttrId{r.attr}, std::span<const ClassId>(kids_of(r), r.arity)};
  }
  // The class a node belongs to (canonical).
  ClassId class_of(NodeId n) const { return find_const(nodes_[n.value].cls); }
  // Nodes of the class of `c` (any id of the class: it is canonicalised);
  // after rebuild() sorted by (op, node id), between an add/merge and the
  // next rebuild() in the order they arrived (what a guard or an applier
  // sees mid-apply: every node of the class, none missing). Spans into the
  // graph are valid until the next add/merge/rebuild.
  std::span<const NodeId> class_nodes(ClassId c) const { return lists_.view(rec(find_const(c)).nodes); }
  // Nodes having the class of `c` as a child (may repeat until rebuild()).
  std::span<const NodeId> class_parents(ClassId c) const { return lists_.view(rec(find_const(c)).parents); }
  // The nodes of the class of `c` with op `op`: exact on a clean graph and
  // mid-apply alike (a class changed since the last rebuild is scanned
  // whole instead of binary-searched).
  OpNodes class_nodes(ClassId c, OpId op) const;
  // The same as a span, for the matcher: only on a class that is sorted
  // (an assertion fails on a class changed since the last rebuild).
  std::span<const NodeId> sorted_class_nodes(ClassId c, OpId op) const;
  // Canonical classes in increasing id order (requires a clean graph).
  const std::vector<ClassId>& classes() const;
  // Canonical classes holding at least one node with `op`, increasing ids
  // (requires a clean graph).
  std::span<const ClassId> classes_with_op(OpId op) const;

  // Throws spool::Error describing the first broken invariant.
  void check_invariants() const;

  // Bytes held by the graph's containers (capacity, not size).
  size_t memory_bytes() const;

  // Change tracking for incremental matching: every change to a class (new,
  // merged into, a node added or re-canonicalised, its analysis data) stamps
  // it with the current generation. A match that only visits classes with
  // stamps <= G was already there when the graph was at generation G.
  uint32_t generation() const { return generation_; }
  void next_generation() {
    gen_nodes_.push_back(static_cast<uint32_t>(nodes_.size()));
    ++generation_;
  }
  uint32_t class_stamp(ClassId c) const { return rec(c).stamp; }
  // Finer: the generation of the class's last union with another class (or
  // of its creation), and the node ids that already existed at generation
  // `gen` (those below; kept through compaction). A match whose nodes all
  // existed at G, and whose classes that must meet (a child and the node
  // bound in it, two uses of one variable) were not unioned since, was
  // already there at G.
  uint32_t class_merge_stamp(ClassId c) const { return rec(c).merged; }
  uint32_t nodes_at(uint32_t gen) const {
    return gen < gen_nodes_.size() ? gen_nodes_[gen] : static_cast<uint32_t>(nodes_.size());
  }

  // Counts unions done through merge() (including those done by rebuild).
  uint64_t union_count() const { return union_count_; }

  // Renders a node as `op[attr](c1 c2)`.
  std::string node_str(NodeId n) const;

  // Provenance: every node records the origin that was set when it was
  // created (the runner sets the rule's name and location around each
  // rule's actions). Origin 0 is "input": the original graph, or nodes the
  // analysis adds. Two bytes per node (at most 65,536 origins, far more
  // than any rule set names); kept through compaction.
  uint32_t intern_origin(std::string_view name);
  void set_origin(uint32_t origin) { origin_ = origin; }
  uint32_t origin() const { return origin_; }
  std::string_view node_origin(NodeId n) const { return origin_names_[node_origin_[n.value]]; }

 private:
  // 20 bytes: the class the node was added to (find() it), and up to two
  // children inline (most nodes), more in pool_. A hashcons hit reads the
  // content and the class from one record.
  struct NodeRec {
    uint16_t op;
    uint8_t arity;
    uint8_t dead;  // kLive, kDuplicate or kPruned
    uint32_t attr;
    ClassId cls;
    ClassId kids[2];  // arity > 2: kids[0].value is the offset of the children in pool_
  };
  // NodeRec::dead: a duplicate found by rebuild() is in no class and not in
  // the hashcons; a pruned node is in the hashcons and its children's
  // parent lists but not in its class's node list.
  static constexpr uint8_t kLive = 0, kDuplicate = 1, kPruned = 2;
  const ClassId* kids_of(const NodeRec& r) const { return r.arity <= 2 ? r.kids : pool_.data() + r.kids[0].value; }
  ClassId* kids_of(NodeRec& r) { return r.arity <= 2 ? r.kids : pool_.data() + r.kids[0].value; }
  NodeRec make_rec(uint16_t op, uint32_t attr, const ClassId* children, size_t arity, std::vector<ClassId>& pool) const {
    NodeRec r{op, static_cast<uint8_t>(arity), 0, attr, ClassId{}, {}};
    if (arity <= 2) {
      for (size_t i = 0; i < arity; ++i) r.kids[i] = children[i];
    } else {
      r.kids[0] = ClassId{static_cast<uint32_t>(pool.size())};
      pool.insert(pool.end(), children, children + arity);
    }
    return r;
  }

  // A list in the ListPool: segments of power-of-two capacity in one
  // vector, recycled through free lists, so a new class costs no heap
  // allocation of its own.
  struct ListRef {
    uint32_t begin = 0, size = 0, cap = 0;
  };
  class ListPool {
   public:
    std::span<NodeId> view(ListRef r) { return std::span<NodeId>(data_.data() + r.begin, r.size); }
    std::span<const NodeId> view(ListRef r) const { return std::span<const NodeId>(data_.data() + r.begin, r.size); }
    void push(ListRef& r, NodeId n) {
      if (r.size == r.cap) grow(r, r.size + 1);
      data_[r.begin + r.size++] = n;
    }
    void append(ListRef& r, ListRef src);
    void release(ListRef& r);
    size_t memory_bytes() const;
    void clear() {
      data_.clear();
      for (auto& f : free_) f.clear();
    }
    void shrink_to_fit() { data_.shrink_to_fit(); }
    // Appends a list with exactly `size` slots (for compaction).
    ListRef fresh(std::span<const NodeId> items);

   private:
    void grow(ListRef& r, size_t need);
    std::vector<NodeId> data_;
    std::vector<uint32_t> free_[32];  // free segment offsets by log2(capacity)
  };
  // The record of a canonical class, in a slot recycled when the class is
  // merged away (a merged class costs only its union-find entry).
  struct ClassRec {
    ListRef nodes;
    ListRef parents;  // nodes having this class as a child (may repeat until rebuild)
    uint32_t id = 0;  // the class owning the slot
    uint32_t stamp = 0;  // the generation of its last change
    uint32_t merged = 0;  // the generation of its last union (or creation)
    // Every node's op is in [op_min, op_max] (exact after rebuild()): the
    // matcher answers "no node of this op" or "all of them" without
    // reading the node records.
    uint16_t op_min = 0, op_max = 0;
    uint8_t dirty = 0;
  };
  // parent_[c] is c's parent class, or kRoot | slot for a canonical class.
  static constexpr uint32_t kRoot = 0x8000'0000u;
  ClassRec& rec(ClassId c) { return slots_[parent_[c.value] & ~kRoot]; }
  const ClassRec& rec(ClassId c) const { return slots_[parent_[c.value] & ~kRoot]; }
  ClassId new_class();
  // Throws spool::Error if `op` does not take `n` children.
  void check_arity(OpId op, size_t n) const;
  uint32_t push_node(uint16_t op, uint32_t attr, const ClassId* children, size_t arity, ClassId c);
  void mark_dirty(ClassId c);
  void queue_analysis(std::span<const NodeId> nodes);

  uint32_t hash_node(uint16_t op, uint32_t attr, const ClassId* children, size_t arity) const;
  bool same_content(uint32_t node, uint16_t op, uint32_t attr, const ClassId* children, size_t arity) const;
  // Hashcons: returns the node with this content, or UINT32_MAX.
  uint32_t memo_find(uint32_t hash, uint16_t op, uint32_t attr, const ClassId* children, size_t arity) const;
  void memo_insert(uint32_t node, uint32_t hash);
  // Removes `node` if it is the hashcons entry for its current content.
  bool memo_erase(uint32_t node);
  void memo_grow();

  void union_classes(ClassId root, ClassId other);
  void repair_node(uint32_t node);
  void finish_class(ClassId c);
  void build_index() const;

  Language* language_;
  std::unique_ptr<Analysis> analysis_;

  std::vector<NodeRec> nodes_;
  std::vector<ClassId> pool_;

  std::vector<uint32_t> parent_;  // union-find (see kRoot)
  std::vector<ClassRec> slots_;
  std::vector<uint32_t> free_slots_;
  ListPool lists_;
  size_t num_classes_ = 0;

  // Hashcons: open addressing with linear probing and backward-shift
  // deletion; a slot holds a node id and the hash of its content.
  struct MemoSlot {
    uint32_t node = UINT32_MAX;  // UINT32_MAX = empty
    uint32_t hash = 0;
  };
  std::vector<MemoSlot> memo_;
  size_t memo_size_ = 0;
  size_t pruned_ = 0;  // nodes in the hashcons but in no class's node list

  std::vector<NodeId> pending_;           // nodes whose children may be stale
  std::vector<NodeId> analysis_pending_;  // nodes whose children's data changed
  std::vector<uint8_t> analysis_queued_;  // per node: waiting in analysis_pending_
  std::vector<ClassId> modify_pending_;   // classes whose analysis data is new/changed
  std::vector<ClassId> dirty_;            // classes whose node list must be re-sorted
  std::vector<NodeId> todo_nodes_;  // scratch of rebuild()
  std::vector<ClassId> todo_classes_;
  uint64_t union_count_ = 0;
  uint32_t generation_ = 0;
  std::vector<uint32_t> gen_nodes_;    // per generation: nodes_.size() when it ended
  std::vector<uint16_t> node_origin_;  // per node, an index into origin_names_
  std::vector<std::string> origin_names_{"input"};
  uint32_t origin_ = 0;

  // Derived after rebuild(): canonical classes and the op index (CSR).
  mutable bool index_valid_ = false;
  mutable std::vector<ClassId> canonical_;
  mutable std::vector<uint32_t> op_begin_;
  mutable std::vector<ClassId> op_classes_;
};

}  // namespace spool::egraph
