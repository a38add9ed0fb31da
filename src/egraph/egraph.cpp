// The e-graph core: hashcons, union-find, deferred rebuild and the op index.
//
// add() and merge() only record work (stale parents, changed analysis data,
// classes to re-sort); rebuild() drains those worklists in FIFO order until
// the graph is congruence-closed again, so the order of unions, and with it
// every id, depends only on the order of calls.

#include <spool/egraph/egraph.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <bit>

namespace spool::egraph {

EGraph::EGraph(Language& language) : language_(&language) { memo_.resize(64); }

void EGraph::set_analysis(std::unique_ptr<Analysis> analysis) {
  SPOOL_ASSERT(nodes_.empty(), "set the analysis before adding nodes");
  analysis_ = std::move(analysis);
}

// ---- class lists ------------------------------------------------------------------

void EGraph::ListPool::grow(ListRef& r, size_t need) {
  // At least four slots: most lists reach a few entries, and growing one
  // slot at a time would copy them at 1, 2 and 4.
  const uint32_t cap = std::bit_ceil(static_cast<uint32_t>(std::max<size_t>(need, 4)));
  const int k = std::countr_zero(cap);
  // free_[k] holds segments of at least 2^k slots (see release).
  uint32_t begin;
  if (!free_[k].empty()) {
    begin = free_[k].back();
    free_[k].pop_back();
  } else {
    SPOOL_ASSERT(data_.size() + cap < UINT32_MAX, "e-class list pool overflow");
    begin = static_cast<uint32_t>(data_.size());
    data_.resize(data_.size() + cap);
  }
  std::copy(data_.begin() + r.begin, data_.begin() + r.begin + r.size, data_.begin() + begin);
  const uint32_t size = r.size;
  release(r);
  r = ListRef{begin, size, cap};
}

void EGraph::ListPool::append(ListRef& r, ListRef src) {
  if (src.size == 0) return;
  if (r.size + src.size > r.cap) grow(r, r.size + src.size);
  std::copy(data_.begin() + src.begin, data_.begin() + src.begin + src.size, data_.begin() + r.begin + r.size);
  r.size += src.size;
}

void EGraph::ListPool::release(ListRef& r) {
  if (r.cap) free_[std::bit_width(r.cap) - 1].push_back(r.begin);
  r = ListRef{};
}

EGraph::ListRef EGraph::ListPool::fresh(std::span<const NodeId> items) {
  ListRef r{static_cast<uint32_t>(data_.size()), static_cast<uint32_t>(items.size()),
            static_cast<uint32_t>(items.size())};
  data_.insert(data_.end(), items.begin(), items.end());
  return r;
}

size_t EGraph::ListPool::memory_bytes() const {
  size_t bytes = data_.capacity() * sizeof(NodeId);
  for (const auto& f : free_) bytes += f.capacity() * sizeof(uint32_t);
  return bytes;
}

// ---- union-find -------------------------------------------------------------

ClassId EGraph::find(ClassId c) {
  uint32_t x = c.value;
  for (;;) {
    const uint32_t p = parent_[x];
    if (p & kRoot) return ClassId{x};
    const uint32_t gp = parent_[p];
    if (gp & kRoot) return ClassId{p};
    parent_[x] = gp;  // path halving
    x = gp;
  }
}

ClassId EGraph::find_const(ClassId c) const {
  uint32_t x = c.value;
  while (!(parent_[x] & kRoot)) x = parent_[x];
  return ClassId{x};
}

ClassId EGraph::new_class() {
  SPOOL_ASSERT(parent_.size() < kRoot - 1, "e-graph class id overflow");
  const ClassId c{static_cast<uint32_t>(parent_.size())};
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = ClassRec{};
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].id = c.value;
  slots_[slot].stamp = generation_;
  slots_[slot].merged = generation_;
  parent_.push_back(kRoot | slot);
  ++num_classes_;
  return c;
}

void EGraph::mark_dirty(ClassId c) {
  ClassRec& r = rec(c);
  r.stamp = generation_;
  if (!r.dirty) {
    r.dirty = 1;
    dirty_.push_back(c);
  }
}

uint32_t EGraph::push_node(uint16_t op, uint32_t attr, const ClassId* children, size_t arity, ClassId c) {
  SPOOL_ASSERT(nodes_.size() < UINT32_MAX - 1, "e-graph node id overflow");
  const uint32_t n = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(make_rec(op, attr, children, arity, pool_));
  nodes_.back().cls = c;
  node_origin_.push_back(static_cast<uint16_t>(origin_));
  ClassRec& cr = rec(c);
  if (cr.nodes.size == 0) {
    cr.op_min = cr.op_max = op;
  } else {
    cr.op_min = std::min(cr.op_min, op);
    cr.op_max = std::max(cr.op_max, op);
  }
  lists_.push(cr.nodes, NodeId{n});
  // Node ids only grow, so a parent list that was sorted stays sorted.
  for (size_t i = 0; i < arity; ++i) lists_.push(rec(children[i]).parents, NodeId{n});
  index_valid_ = false;
  return n;
}

// ---- hashcons ---------------------------------------------------------------

uint32_t EGraph::hash_node(uint16_t op, uint32_t attr, const ClassId* children, size_t arity) const {
  // Multiply-rotate (FxHash style) per word; the high half of the product is
  // the well-mixed one, and the table indexes with the low bits of the result.
  constexpr uint64_t k = 0x9e3779b97f4a7c15ULL;
  uint64_t h = ((uint64_t{op} << 32) | attr) * k;
  for (size_t i = 0; i < arity; ++i) h = (std::rotl(h, 26) ^ children[i].value) * k;
  return static_cast<uint32_t>(h >> 32);
}

bool EGraph::same_content(uint32_t node, uint16_t op, uint32_t attr, const ClassId* children,
                          size_t arity) const {
  const NodeRec& r = nodes_[node];
  if (r.op != op || r.attr != attr || r.arity != arity) return false;
  const ClassId* mine = kids_of(r);
  for (size_t i = 0; i < arity; ++i)
    if (mine[i] != children[i]) return false;
  return true;
}

// Inlined into its callers (all in this file): a lookup is the inner step
// of applying a match, and the call cost a tenth of it.
[[gnu::always_inline]] inline uint32_t EGraph::memo_find(uint32_t hash, uint16_t op, uint32_t attr,
                                                         const ClassId* children, size_t arity) const {
  const size_t mask = memo_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const MemoSlot& slot = memo_[i];
    if (slot.node == UINT32_MAX) return UINT32_MAX;
    if (slot.hash == hash && same_content(slot.node, op, attr, children, arity)) return slot.node;
  }
}

void EGraph::memo_insert(uint32_t node, uint32_t hash) {
  if ((memo_size_ + 1) * 2 > memo_.size()) memo_grow();  // load at most 1/2: short probe chains
  const size_t mask = memo_.size() - 1;
  size_t i = hash & mask;
  while (memo_[i].node != UINT32_MAX) i = (i + 1) & mask;
  memo_[i] = MemoSlot{node, hash};
  ++memo_size_;
}

void EGraph::memo_grow() {
  std::vector<MemoSlot> old(memo_.size() * 2);
  old.swap(memo_);
  const size_t mask = memo_.size() - 1;
  for (const MemoSlot& slot : old) {
    if (slot.node == UINT32_MAX) continue;
    size_t i = slot.hash & mask;
    while (memo_[i].node != UINT32_MAX) i = (i + 1) & mask;
    memo_[i] = slot;
  }
}

bool EGraph::memo_erase(uint32_t node) {
  // The node's content is still what it was when inserted (children are only
  // rewritten right after this call), so its hash finds its probe chain.
  const NodeRec& r = nodes_[node];
  const uint32_t hash = hash_node(r.op, r.attr, kids_of(r), r.arity);
  const size_t mask = memo_.size() - 1;
  size_t i = hash & mask;
  for (;; i = (i + 1) & mask) {
    if (memo_[i].node == UINT32_MAX) return false;
    if (memo_[i].node == node) break;
  }
  // Backward-shift deletion keeps every probe chain unbroken.
  size_t hole = i;
  for (size_t j = (i + 1) & mask; memo_[j].node != UINT32_MAX; j = (j + 1) & mask) {
    const size_t home = memo_[j].hash & mask;
    // Move j into the hole unless its home lies cyclically in (hole, j].
    const bool home_in_range = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!home_in_range) {
      memo_[hole] = memo_[j];
      hole = j;
    }
  }
  memo_[hole] = MemoSlot{};
  --memo_size_;
  return true;
}

// ---- add / merge --------------------------------------------------------------

ClassId EGraph::add(const ENode& node) { return add(node.op, node.attr, span_of(node.children)); }

namespace {

// Calls f(children) with the children canonicalised, on the stack up to
// four (most nodes), on the heap past that.
template <typename F>
auto with_canonical(EGraph& g, std::span<const ClassId> children, F&& f) {
  if (children.size() <= 4) {
    ClassId k[4];
    for (size_t i = 0; i < children.size(); ++i) k[i] = g.find(children[i]);
    return f(static_cast<const ClassId*>(k));
  }
  std::vector<ClassId> k(children.size());
  for (size_t i = 0; i < children.size(); ++i) k[i] = g.find(children[i]);
  return f(static_cast<const ClassId*>(k.data()));
}

}  // namespace

void EGraph::check_arity(OpId op, size_t n) const {
  const OpDef& def = ops()[op];
  if (def.arity != kVariadic && static_cast<size_t>(def.arity) != n)
    fail("op '{}' takes {} children, got {}", def.name, def.arity, n);
  if (n > 255) fail("op '{}' has too many children ({})", def.name, n);
}

ClassId EGraph::add(OpId op, AttrId attr, std::span<const ClassId> children) {
  check_arity(op, children.size());
  return with_canonical(*this, children, [&](const ClassId* kids) {
    const size_t arity = children.size();
    const uint32_t hash = hash_node(op.value, attr.value, kids, arity);
    const uint32_t found = memo_find(hash, op.value, attr.value, kids, arity);
    if (found != UINT32_MAX) return find(nodes_[found].cls);
    const ClassId c = new_class();
    const uint32_t n = push_node(op.value, attr.value, kids, arity, c);
    memo_insert(n, hash);
    if (analysis_) {
      analysis_->make(*this, c, NodeId{n});
      modify_pending_.push_back(c);
    }
    return c;
  });
}

bool EGraph::add_to_class(OpId op, AttrId attr, std::span<const ClassId> children, ClassId target,
                          std::string_view reason) {
  // With an analysis the new node needs its own class first, so make() and
  // check_merge() see it like any other merge.
  if (analysis_) {
    const ClassId c = find(add(op, attr, children));
    // Most right-hand sides are already in the class: no call to merge().
    return c != find(target) && merge(c, target, reason);
  }
  check_arity(op, children.size());
  return with_canonical(*this, children, [&](const ClassId* kids) {
    const size_t arity = children.size();
    const uint32_t hash = hash_node(op.value, attr.value, kids, arity);
    const uint32_t found = memo_find(hash, op.value, attr.value, kids, arity);
    if (found != UINT32_MAX) {
      const ClassId c = find(nodes_[found].cls);
      return c != find(target) && merge(c, target, reason);
    }
    const ClassId into = find(target);
    const uint32_t n = push_node(op.value, attr.value, kids, arity, into);
    memo_insert(n, hash);
    mark_dirty(into);  // its node list is no longer sorted
    return true;
  });
}

std::optional<ClassId> EGraph::lookup(OpId op, AttrId attr, std::span<const ClassId> children) {
  return with_canonical(*this, children, [&](const ClassId* kids) -> std::optional<ClassId> {
    const uint32_t hash = hash_node(op.value, attr.value, kids, children.size());
    const uint32_t found = memo_find(hash, op.value, attr.value, kids, children.size());
    if (found == UINT32_MAX) return std::nullopt;
    return find(nodes_[found].cls);
  });
}

bool EGraph::merge(ClassId a, ClassId b, std::string_view reason) {
  a = find(a);
  b = find(b);
  if (a == b) return false;
  if (analysis_) {
    std::string why = analysis_->check_merge(*this, a, b);
    if (!why.empty())
      fail("{}: refused to merge e-classes c{} and c{}: {}", reason, a.value, b.value, why);
  }
  // The class with more nodes and parents stays the root (less to move); ties
  // go to the older class so ids are stable.
  const ClassRec& ra = rec(a);
  const ClassRec& rb = rec(b);
  const size_t wa = ra.nodes.size + ra.parents.size;
  const size_t wb = rb.nodes.size + rb.parents.size;
  if (wa > wb || (wa == wb && a < b))
    union_classes(a, b);
  else
    union_classes(b, a);
  return true;
}

void EGraph::union_classes(ClassId root, ClassId other) {
  ClassRec& r = rec(root);
  ClassRec& o = rec(other);
  --num_classes_;
  ++union_count_;
  index_valid_ = false;
  // Every parent of `other` now has a non-canonical child.
  const auto op = lists_.view(o.parents);
  pending_.insert(pending_.end(), op.begin(), op.end());
  // The parents of a class whose data the merge changed are re-examined
  // (only those: a big class absorbing a small one often keeps its data).
  const MergeChange changed = analysis_ ? analysis_->merge(root, other) : MergeChange{};
  if (changed.into) queue_analysis(lists_.view(r.parents));
  if (changed.from) queue_analysis(op);
  r.merged = generation_;
  r.op_min = std::min(r.op_min, o.op_min);
  r.op_max = std::max(r.op_max, o.op_max);
  lists_.append(r.nodes, o.nodes);
  lists_.append(r.parents, o.parents);
  lists_.release(o.nodes);
  lists_.release(o.parents);
  free_slots_.push_back(parent_[other.value] & ~kRoot);
  parent_[other.value] = root.value;
  if (changed.any()) modify_pending_.push_back(root);
  mark_dirty(root);
}

// ---- rebuild --------------------------------------------------------------------

// A node waits at most once in the analysis queue (egg's UniqueQueue): a
// class whose data changes many times in one rebuild re-examines each
// parent once per change it has not yet seen, not once per change.
void EGraph::queue_analysis(std::span<const NodeId> nodes) {
  if (analysis_queued_.size() < nodes_.size()) analysis_queued_.resize(nodes_.size(), 0);
  for (NodeId n : nodes) {
    if (analysis_queued_[n.value]) continue;
    analysis_queued_[n.value] = 1;
    analysis_pending_.push_back(n);
  }
}

void EGraph::repair_node(uint32_t n) {
  NodeRec& r = nodes_[n];
  if (r.dead == kDuplicate) return;
  memo_erase(n);
  ClassId* children = kids_of(r);
  for (size_t i = 0; i < r.arity; ++i) children[i] = find(children[i]);
  const uint32_t hash = hash_node(r.op, r.attr, children, r.arity);
  const uint32_t existing = memo_find(hash, r.op, r.attr, children, r.arity);
  const ClassId mine = find(nodes_[n].cls);
  mark_dirty(mine);
  if (existing == UINT32_MAX) {
    memo_insert(n, hash);
    return;
  }
  // Congruent to a node already in the hashcons: this one is a duplicate.
  if (r.dead == kPruned) --pruned_;
  r.dead = kDuplicate;
  merge(nodes_[existing].cls, mine, "congruence");
}

void EGraph::finish_class(ClassId c) {
  ClassRec& rec = this->rec(c);
  rec.dirty = 0;
  auto dead = [&](NodeId n) { return nodes_[n.value].dead == kDuplicate; };
  std::span<NodeId> nodes = lists_.view(rec.nodes);
  auto end = std::remove_if(nodes.begin(), nodes.end(), dead);
  // Often still sorted (a node added with a new, higher id and an op no
  // lower than the rest): checked in one pass before sorting.
  auto by_op = [&](NodeId x, NodeId y) {
    const uint16_t ox = nodes_[x.value].op, oy = nodes_[y.value].op;
    return ox != oy ? ox < oy : x < y;
  };
  if (!std::is_sorted(nodes.begin(), end, by_op)) std::sort(nodes.begin(), end, by_op);
  rec.nodes.size = static_cast<uint32_t>(end - nodes.begin());
  if (rec.nodes.size > 0) {
    rec.op_min = nodes_[nodes.front().value].op;
    rec.op_max = nodes_[nodes[rec.nodes.size - 1].value].op;
  }
  std::span<NodeId> parents = lists_.view(rec.parents);
  auto pend = std::remove_if(parents.begin(), parents.end(), dead);
  if (!std::is_sorted(parents.begin(), pend)) std::sort(parents.begin(), pend);
  pend = std::unique(parents.begin(), pend);
  rec.parents.size = static_cast<uint32_t>(pend - parents.begin());
}

size_t EGraph::rebuild() {
  const uint64_t unions_before = union_count_;
  for (;;) {
    if (!pending_.empty()) {
      todo_nodes_.swap(pending_);
      for (NodeId n : todo_nodes_) repair_node(n.value);
      todo_nodes_.clear();
      continue;
    }
    if (!analysis_pending_.empty()) {
      todo_nodes_.swap(analysis_pending_);
      for (NodeId n : todo_nodes_) {
        analysis_queued_[n.value] = 0;
        if (nodes_[n.value].dead == kDuplicate) continue;
        const ClassId c = find(nodes_[n.value].cls);
        if (analysis_->remake(*this, c, n)) {
          rec(c).stamp = generation_;
          queue_analysis(lists_.view(rec(c).parents));
          modify_pending_.push_back(c);
        }
      }
      todo_nodes_.clear();
      continue;
    }
    if (!modify_pending_.empty()) {
      todo_classes_.swap(modify_pending_);
      for (ClassId c : todo_classes_) analysis_->modify(*this, find(c));
      todo_classes_.clear();
      continue;
    }
    break;
  }
  // A dirty class merged away afterwards handed its mark to its root.
  for (ClassId c : dirty_)
    if (is_canonical(c)) finish_class(c);
  dirty_.clear();
  index_valid_ = false;
  if (dead_nodes() > memo_size_ + 4096) compact();
#ifndef NDEBUG
  check_invariants();
#endif
  return static_cast<size_t>(union_count_ - unions_before);
}

// Drops the duplicates rebuild() found and renumbers the live nodes in id
// order, so every list that was sorted by node id stays sorted.
void EGraph::compact() {
  SPOOL_ASSERT(clean(), "compact() needs a rebuilt e-graph");
  // Nodes, their spilled children and origins move down in place: a live
  // node's new id, and its children's new offset, are never above the old.
  std::vector<uint32_t> remap(nodes_.size(), UINT32_MAX);
  uint32_t live = 0;
  size_t pool_size = 0;
  // A generation's node mark (non-decreasing) becomes the number of live
  // nodes below it.
  size_t mark = 0;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    while (mark < gen_nodes_.size() && gen_nodes_[mark] <= n) gen_nodes_[mark++] = live;
    NodeRec r = nodes_[n];
    if (r.dead == kDuplicate) continue;
    remap[n] = live;
    if (r.arity > 2) {
      const uint32_t from = r.kids[0].value;
      std::copy(pool_.begin() + from, pool_.begin() + from + r.arity, pool_.begin() + pool_size);
      r.kids[0] = ClassId{static_cast<uint32_t>(pool_size)};
      pool_size += r.arity;
    }
    r.cls = find(r.cls);
    nodes_[live] = r;
    node_origin_[live] = node_origin_[n];
    ++live;
  }
  for (; mark < gen_nodes_.size(); ++mark) gen_nodes_[mark] = live;
  nodes_.resize(live);
  nodes_.shrink_to_fit();
  node_origin_.resize(live);
  node_origin_.shrink_to_fit();
  pool_.resize(pool_size);
  pool_.shrink_to_fit();

  // Class records: one slot per canonical class, in class id order; their
  // lists remapped into a fresh pool of exactly-sized segments.
  ListPool lists;
  std::vector<ClassRec> slots;
  std::vector<NodeId> items;
  slots.reserve(num_classes_);
  for (uint32_t c = 0; c < parent_.size(); ++c) {
    if (!(parent_[c] & kRoot)) continue;
    ClassRec r = slots_[parent_[c] & ~kRoot];
    for (ListRef* list : {&r.nodes, &r.parents}) {
      items.clear();
      for (NodeId n : lists_.view(*list))
        if (remap[n.value] != UINT32_MAX) items.push_back(NodeId{remap[n.value]});
      *list = lists.fresh(items);
    }
    parent_[c] = kRoot | static_cast<uint32_t>(slots.size());
    slots.push_back(r);
  }
  lists.shrink_to_fit();
  lists_ = std::move(lists);
  slots_.swap(slots);
  std::vector<uint32_t>().swap(free_slots_);

  // Hashcons: rebuilt at a load of at most one half (in place when its
  // size stays).
  const size_t memo_slots = std::max<size_t>(64, std::bit_ceil(nodes_.size() * 2));
  if (memo_slots == memo_.size())
    std::fill(memo_.begin(), memo_.end(), MemoSlot{});
  else
    std::vector<MemoSlot>(memo_slots).swap(memo_);
  parent_.shrink_to_fit();
  memo_size_ = 0;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const NodeRec& r = nodes_[n];
    memo_insert(n, hash_node(r.op, r.attr, kids_of(r), r.arity));
  }
  for (auto* v : {&pending_, &analysis_pending_, &todo_nodes_}) std::vector<NodeId>().swap(*v);
  std::vector<uint8_t>().swap(analysis_queued_);
  index_valid_ = false;
}

// ---- queries --------------------------------------------------------------------

void EGraph::build_index() const {
  canonical_.clear();
  for (uint32_t c = 0; c < parent_.size(); ++c)
    if (parent_[c] & kRoot) canonical_.push_back(ClassId{c});
  const size_t num_ops = ops().size();
  op_begin_.assign(num_ops + 1, 0);
  auto for_each_op = [&](ClassId c, auto&& visit) {
    const ClassRec& r = rec(c);
    // A class of one op (most) is answered from its record. (Pruning may
    // leave the range wider than the ops left, never narrower.)
    if (r.op_min == r.op_max) {
      if (r.nodes.size != 0) visit(uint32_t{r.op_min});
      return;
    }
    uint32_t last = UINT32_MAX;
    for (NodeId n : lists_.view(r.nodes)) {
      const uint32_t op = nodes_[n.value].op;
      if (op != last) visit(op);
      last = op;
    }
  };
  for (ClassId c : canonical_) for_each_op(c, [&](uint32_t op) { ++op_begin_[op + 1]; });
  for (size_t i = 0; i < num_ops; ++i) op_begin_[i + 1] += op_begin_[i];
  op_classes_.resize(op_begin_[num_ops]);
  std::vector<uint32_t> cursor(op_begin_.begin(), op_begin_.end() - 1);
  for (ClassId c : canonical_) for_each_op(c, [&](uint32_t op) { op_classes_[cursor[op]++] = c; });
  index_valid_ = true;
}

const std::vector<ClassId>& EGraph::classes() const {
  SPOOL_ASSERT(clean(), "classes() needs a rebuilt e-graph");
  if (!index_valid_) build_index();
  return canonical_;
}

std::span<const ClassId> EGraph::classes_with_op(OpId op) const {
  SPOOL_ASSERT(clean(), "classes_with_op() needs a rebuilt e-graph");
  if (!index_valid_) build_index();
  if (op.value + 1u >= op_begin_.size()) return {};
  return std::span<const ClassId>(op_classes_.data() + op_begin_[op.value],
                                  op_begin_[op.value + 1] - op_begin_[op.value]);
}

EGraph::OpNodes EGraph::class_nodes(ClassId c, OpId op) const {
  const ClassRec& r = rec(find_const(c));
  if (r.dirty) return OpNodes(lists_.view(r.nodes), this, op);
  return OpNodes(sorted_class_nodes(c, op), this, op);
}

size_t EGraph::prune_to_leaves(ClassId c) {
  c = find(c);
  ClassRec& r = rec(c);
  std::span<NodeId> nodes = lists_.view(r.nodes);
  size_t kept = 0;
  for (NodeId n : nodes) {
    NodeRec& r = nodes_[n.value];
    // A class changed in this rebuild still lists the duplicates congruence
    // found (finish_class drops them at its end): they are out of the
    // hashcons and leave the list here without becoming pruned nodes.
    if (r.dead == kDuplicate) continue;
    if (r.arity == 0) {
      nodes[kept++] = n;
    } else {
      r.dead = kPruned;
      ++pruned_;
    }
  }
  const size_t removed = nodes.size() - kept;
  if (removed == 0) return 0;
  // Removing keeps a sorted list sorted; the class's ops and the op index change.
  r.nodes.size = static_cast<uint32_t>(kept);
  r.stamp = generation_;
  index_valid_ = false;
  return removed;
}

std::span<const NodeId> EGraph::sorted_class_nodes(ClassId c, OpId op) const {
  const ClassRec& r = rec(find_const(c));
  SPOOL_ASSERT(!r.dirty, "sorted_class_nodes() on a class changed since the last rebuild");
  const std::span<const NodeId> nodes = lists_.view(r.nodes);
  if (op.value < r.op_min || op.value > r.op_max) return {};
  if (r.op_min == r.op_max) return nodes;  // one op: all of them
  // Most classes hold a few nodes: a scan reads them in order (egg scans
  // classes of fewer than 50); a large class is binary-searched.
  if (nodes.size() <= 16) {
    size_t lo = 0;
    while (lo < nodes.size() && nodes_[nodes[lo].value].op < op.value) ++lo;
    size_t hi = lo;
    while (hi < nodes.size() && nodes_[nodes[hi].value].op == op.value) ++hi;
    return nodes.subspan(lo, hi - lo);
  }
  auto lo = std::partition_point(nodes.begin(), nodes.end(),
                                 [&](NodeId n) { return nodes_[n.value].op < op.value; });
  auto hi = std::partition_point(lo, nodes.end(), [&](NodeId n) { return nodes_[n.value].op == op.value; });
  return std::span<const NodeId>(nodes.data() + (lo - nodes.begin()), static_cast<size_t>(hi - lo));
}

std::string EGraph::node_str(NodeId n) const {
  ENodeRef r = node(n);
  std::string out = ops().name(r.op);
  if (r.attr.value != 0) out += fmt::format("[{}]", attrs().str(r.attr));
  out += "(";
  for (size_t i = 0; i < r.children.size(); ++i)
    out += fmt::format("{}c{}", i ? " " : "", find_const(r.children[i]).value);
  return out + ")";
}

void EGraph::check_invariants() const {
  if (!clean()) fail("e-graph invariant: check_invariants() needs a rebuilt e-graph");
  size_t live_nodes = 0, canonical = 0;
  for (uint32_t ci = 0; ci < parent_.size(); ++ci) {
    const ClassId c{ci};
    if (!(parent_[ci] & kRoot)) continue;
    const ClassRec& rec = this->rec(c);
    const std::span<const NodeId> rec_nodes = lists_.view(rec.nodes);
    if (rec.id != ci) fail("e-graph invariant: the slot of c{} belongs to c{}", ci, rec.id);
    ++canonical;
    if (rec_nodes.empty()) fail("e-graph invariant: class c{} is empty", ci);
    for (size_t k = 0; k < rec_nodes.size(); ++k) {
      const NodeId n = rec_nodes[k];
      const NodeRec& r = nodes_[n.value];
      if (r.dead != kLive) fail("e-graph invariant: dead or pruned node n{} in class c{}", n.value, ci);
      if (r.op < rec.op_min || r.op > rec.op_max)
        fail("e-graph invariant: node {} outside the op range of c{}", node_str(n), ci);
      if (find_const(nodes_[n.value].cls) != c)
        fail("e-graph invariant: node n{} listed in c{} but belongs to c{}", n.value, ci,
             find_const(nodes_[n.value].cls).value);
      if (k > 0) {
        const NodeRec& prev = nodes_[rec_nodes[k - 1].value];
        if (prev.op > r.op || (prev.op == r.op && rec_nodes[k - 1] >= n))
          fail("e-graph invariant: nodes of c{} are not sorted", ci);
      }
      const ClassId* children = kids_of(r);
      for (size_t i = 0; i < r.arity; ++i) {
        const ClassId child = children[i];
        if (!is_canonical(child))
          fail("e-graph invariant: node {} has a non-canonical child c{}", node_str(n), child.value);
        const auto parents = lists_.view(this->rec(child).parents);
        if (!std::binary_search(parents.begin(), parents.end(), n))
          fail("e-graph invariant: node n{} missing from the parents of c{}", n.value, child.value);
      }
      const uint32_t hash = hash_node(r.op, r.attr, children, r.arity);
      if (memo_find(hash, r.op, r.attr, children, r.arity) != n.value)
        fail("e-graph invariant: node {} is not its own hashcons entry (congruence not restored)",
             node_str(n));
    }
    live_nodes += rec_nodes.size();
    if (analysis_) {
      std::string why = analysis_->check(*this, c);
      if (!why.empty()) fail("e-graph invariant: analysis of c{}: {}", ci, why);
    }
  }
  size_t pruned = 0;
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const NodeRec& r = nodes_[n];
    if (r.dead != kPruned) continue;
    ++pruned;
    const ClassId* children = kids_of(r);
    for (size_t i = 0; i < r.arity; ++i)
      if (!is_canonical(children[i]))
        fail("e-graph invariant: pruned node {} has a non-canonical child c{}", node_str(NodeId{n}), children[i].value);
    if (memo_find(hash_node(r.op, r.attr, children, r.arity), r.op, r.attr, children, r.arity) != n)
      fail("e-graph invariant: pruned node {} is not its own hashcons entry", node_str(NodeId{n}));
  }
  if (pruned != pruned_) fail("e-graph invariant: {} pruned nodes but the count says {}", pruned, pruned_);
  if (live_nodes + pruned != memo_size_)
    fail("e-graph invariant: {} nodes in classes and {} pruned but {} in the hashcons", live_nodes, pruned,
         memo_size_);
  if (canonical != num_classes_)
    fail("e-graph invariant: {} canonical classes but the count says {}", canonical, num_classes_);
}

uint32_t EGraph::intern_origin(std::string_view name) {
  for (uint32_t i = 0; i < origin_names_.size(); ++i)
    if (origin_names_[i] == name) return i;
  if (origin_names_.size() > UINT16_MAX) fail("e-graph: more than {} node origins (rules)", UINT16_MAX + 1);
  origin_names_.emplace_back(name);
  return static_cast<uint32_t>(origin_names_.size() - 1);
}

size_t EGraph::memory_bytes() const {
  size_t bytes = sizeof(*this) + node_origin_.capacity() * sizeof(uint16_t);
  bytes += nodes_.capacity() * sizeof(NodeRec) + pool_.capacity() * sizeof(ClassId) +
           parent_.capacity() * sizeof(uint32_t) +
           slots_.capacity() * sizeof(ClassRec) + free_slots_.capacity() * sizeof(uint32_t) +
           memo_.capacity() * sizeof(MemoSlot) + (pending_.capacity() + analysis_pending_.capacity() +
                                     todo_nodes_.capacity()) * sizeof(NodeId) +
           (modify_pending_.capacity() + dirty_.capacity() + todo_classes_.capacity() +
            canonical_.capacity() + op_classes_.capacity()) * sizeof(ClassId) +
           op_begin_.capacity() * sizeof(uint32_t) + analysis_queued_.capacity();
  bytes += lists_.memory_bytes();
  if (analysis_) bytes += analysis_->memory_bytes();
  return bytes;
}

}  // namespace spool::egraph
