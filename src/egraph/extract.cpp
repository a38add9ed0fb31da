// Greedy bottom-up extraction with a pluggable monotone cost, and terms.
//
// Costs are found by sweeping all classes until none improves, visiting
// classes in id order and nodes in the class's (op, node id) order; a node
// replaces the current choice only if it is strictly cheaper. A node with a
// child of infinite cost is never chosen, which is what keeps classes that
// are reachable only through a cycle out of every extracted term. The DAG
// extractor instead makes classes final cheapest first (Knuth's algorithm),
// so each node is priced once, when its children are final.

#include <spool/egraph/extract.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <bit>
#include <functional>
#include <optional>
#include <queue>

namespace spool::egraph {

double AstSize::cost(const EGraph&, NodeId, std::span<const double> child_costs) const {
  double c = 1;
  for (double x : child_costs) c += x;
  return c;
}

double AstDepth::cost(const EGraph&, NodeId, std::span<const double> child_costs) const {
  double c = 0;
  for (double x : child_costs) c = std::max(c, x);
  return c + 1;
}

namespace {

void print_term(const Term& t, uint32_t i, const Language& lang, std::string& out) {
  const Term::Node& n = t.nodes[i];
  if (n.children.empty() && (n.op == lang.ops.number_op || n.op == lang.ops.symbol_op)) {
    out += lang.attrs.str(n.attr);
    return;
  }
  const bool bare = n.children.empty() && n.attr.value == 0;
  if (!bare) out += "(";
  out += lang.ops.name(n.op);
  if (n.attr.value != 0) out += "[" + lang.attrs.str(n.attr) + "]";
  for (uint32_t k : n.children) {
    out += " ";
    print_term(t, k, lang, out);
  }
  if (!bare) out += ")";
}

}  // namespace

std::string Term::str(const Language& language, size_t i) const {
  std::string out;
  print_term(*this, roots.at(i), language, out);
  return out;
}

std::vector<ClassId> add_term(EGraph& graph, const Term& term) {
  std::vector<ClassId> classes(term.nodes.size());
  for (size_t i = 0; i < term.nodes.size(); ++i) {
    const Term::Node& n = term.nodes[i];
    ClassVec kids;
    for (uint32_t k : n.children) kids.push_back(classes[k]);
    classes[i] = graph.add(n.op, n.attr, span_of(kids));
  }
  std::vector<ClassId> roots;
  for (uint32_t r : term.roots) roots.push_back(classes[r]);
  return roots;
}

Extractor::Extractor(const EGraph& graph, const CostFunction& cost) : graph_(graph), cost_fn_(cost) {
  SPOOL_ASSERT(graph.clean(), "extraction needs a rebuilt e-graph");
  const double inf = std::numeric_limits<double>::infinity();
  best_cost_.assign(graph.class_id_bound(), inf);
  best_node_.assign(graph.class_id_bound(), NodeId{});
  const std::vector<ClassId>& classes = graph.classes();
  boost::container::small_vector<double, 8> child_costs;
  for (bool changed = true; changed;) {
    changed = false;
    for (ClassId c : classes) {
      double& best = best_cost_[c.value];
      for (NodeId n : graph.class_nodes(c)) {
        const ENodeRef node = graph.node(n);
        child_costs.clear();
        bool finite = true;
        for (ClassId child : node.children) {
          const double cc = best_cost_[child.value];
          if (cc == inf) {
            finite = false;
            break;
          }
          child_costs.push_back(cc);
        }
        if (!finite) continue;
        const double cost = cost_fn_.cost(graph, n, span_of(child_costs));
        if (cost < best) {
          best = cost;
          best_node_[c.value] = n;
          changed = true;
        }
      }
    }
  }
}

namespace {

// The term of the chosen nodes under `roots`, with its tree and DAG costs.
// `choice(c)` is the node chosen for canonical class c, or nothing if c has
// no finite-cost term.
template <typename Choice>
Extraction extract_chosen(const EGraph& graph, const CostFunction& cost_fn, std::span<const ClassId> roots,
                          Choice choice) {
  Extraction out;
  std::vector<uint32_t> index(graph.class_id_bound(), UINT32_MAX);  // class -> term node
  std::vector<uint8_t> on_stack(graph.class_id_bound(), 0);
  std::vector<double> tree;  // term node -> tree cost
  boost::container::small_vector<double, 8> child_costs;
  // Iterative post-order over chosen nodes.
  struct Frame {
    ClassId c;
    NodeId n;
    size_t next;
  };
  std::vector<Frame> stack;
  for (ClassId r : roots) {
    const ClassId root = graph.find_const(r);
    const std::optional<NodeId> root_node = choice(root);
    if (!root_node) fail("extraction: e-class c{} has no finite-cost term", root.value);
    if (index[root.value] == UINT32_MAX) {
      stack.push_back({root, *root_node, 0});
      on_stack[root.value] = 1;
      while (!stack.empty()) {
        Frame& f = stack.back();
        const ENodeRef node = graph.node(f.n);
        if (f.next < node.children.size()) {
          const ClassId child = graph.find_const(node.children[f.next++]);
          if (index[child.value] != UINT32_MAX) continue;
          SPOOL_ASSERT(!on_stack[child.value], "extraction: the chosen nodes form a cycle through c{}", child.value);
          const std::optional<NodeId> child_node = choice(child);
          SPOOL_ASSERT(child_node.has_value(), "extraction: a chosen node has a child c{} without a term", child.value);
          on_stack[child.value] = 1;
          stack.push_back({child, *child_node, 0});
          continue;
        }
        Term::Node tn{node.op, node.attr, {}};
        child_costs.clear();
        for (ClassId child : node.children) {
          tn.children.push_back(index[graph.find_const(child).value]);
          child_costs.push_back(tree[tn.children.back()]);
        }
        tree.push_back(cost_fn.cost(graph, f.n, span_of(child_costs)));
        // DAG cost: each chosen node once, at its own cost (children free).
        std::fill(child_costs.begin(), child_costs.end(), 0.0);
        out.dag_cost += cost_fn.cost(graph, f.n, span_of(child_costs));
        index[f.c.value] = static_cast<uint32_t>(out.term.nodes.size());
        out.term.nodes.push_back(std::move(tn));
        on_stack[f.c.value] = 0;
        stack.pop_back();
      }
    }
    out.term.roots.push_back(index[root.value]);
    out.tree_cost += tree[index[root.value]];
  }
  return out;
}

}  // namespace

Extraction Extractor::extract(ClassId root) const { return extract(std::span<const ClassId>(&root, 1)); }

Extraction Extractor::extract(std::span<const ClassId> roots) const {
  const double inf = std::numeric_limits<double>::infinity();
  return extract_chosen(graph_, cost_fn_, roots, [&](ClassId c) -> std::optional<NodeId> {
    if (best_cost_[c.value] == inf) return std::nullopt;
    return best_node_[c.value];
  });
}

DagExtractor::DagExtractor(const EGraph& graph, const CostFunction& cost) : graph_(graph), cost_fn_(cost) {
  SPOOL_ASSERT(graph.clean(), "extraction needs a rebuilt e-graph");
  const std::vector<ClassId>& classes = graph.classes();
  class_index_.assign(graph.class_id_bound(), UINT32_MAX);
  node_index_.assign(graph.node_id_bound(), UINT32_MAX);
  boost::container::small_vector<double, 8> zeros;
  for (size_t i = 0; i < classes.size(); ++i) {
    class_index_[classes[i].value] = static_cast<uint32_t>(i);
    for (NodeId n : graph.class_nodes(classes[i])) {
      node_index_[n.value] = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back(n);
      zeros.assign(graph.node(n).children.size(), 0.0);
      own_.push_back(cost_fn_.cost(graph, n, span_of(zeros)));
    }
  }
  solve();
}

DagExtractor::DagExtractor(const DagExtractor& like, const CostFunction& cost, std::span<const NodeId> repriced)
    : graph_(like.graph_),
      cost_fn_(cost),
      class_index_(like.class_index_),
      node_index_(like.node_index_),
      nodes_(like.nodes_),
      own_(like.own_) {
  boost::container::small_vector<double, 8> zeros;
  for (const NodeId n : repriced) {
    const uint32_t k = n.value < node_index_.size() ? node_index_[n.value] : UINT32_MAX;
    SPOOL_ASSERT(k != UINT32_MAX, "DAG extraction: repriced node n{} is not a live node of the graph", n.value);
    zeros.assign(graph_.node(n).children.size(), 0.0);
    own_[k] = cost_fn_.cost(graph_, n, span_of(zeros));
  }
  solve();
}

void DagExtractor::solve() {
  const EGraph& graph = graph_;
  const double inf = std::numeric_limits<double>::infinity();
  const size_t nc = graph.classes().size();
  const std::vector<NodeId>& nodes = nodes_;
  words_ = (own_.size() + 63) / 64;
  sets_.resize(nc);
  best_cost_.assign(nc, inf);
  best_node_.assign(nc, NodeId{});

  // Dense class -> the dense nodes reading it, once per child slot; and per
  // node, its child slots whose class is not final yet.
  std::vector<std::vector<uint32_t>> readers(nc);
  std::vector<uint32_t> waiting(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ENodeRef node = graph.node(nodes[k]);
    waiting[k] = static_cast<uint32_t>(node.children.size());
    for (ClassId child : node.children)
      readers[class_index_[graph.find_const(child).value]].push_back(static_cast<uint32_t>(k));
  }
  // A class's set is kept while a node reading it is still to be priced.
  std::vector<uint32_t> unread(nc);
  for (size_t c = 0; c < nc; ++c) unread[c] = static_cast<uint32_t>(readers[c].size());

  // Knuth's generalisation of Dijkstra: take the class of least tentative
  // cost and make it final; a node is priced once all its children are
  // final. A node's set holds each child's, so it costs more than any child
  // (own costs are positive): no node cheaper than a final class can still
  // be waiting for a child, each class is final at its cheapest node over
  // its children's final terms, and a node under its own class is never
  // priced before that class is final, so no choice closes a cycle. Equal
  // costs keep the first node in (op, node id) order.
  std::vector<uint8_t> done(nc, 0);
  std::vector<uint64_t> set(words_);
  using Entry = std::pair<double, uint32_t>;  // tentative cost, dense class
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto price = [&](uint32_t k) {
    const NodeId n = nodes[k];
    const uint32_t c = class_index_[graph.class_of(n).value];
    if (done[c]) return;
    const double cost = candidate(n, set);
    if (cost == inf) return;
    const bool better =
        cost < best_cost_[c] || (cost == best_cost_[c] && node_index_[n.value] < node_index_[best_node_[c].value]);
    if (!better) return;
    best_cost_[c] = cost;
    best_node_[c] = n;
    sets_[c] = set;
    queue.push({cost, c});
  };
  for (size_t k = 0; k < nodes.size(); ++k)
    if (waiting[k] == 0) price(static_cast<uint32_t>(k));
  while (!queue.empty()) {
    const auto [cost, c] = queue.top();
    queue.pop();
    if (done[c] || cost != best_cost_[c]) continue;  // a stale entry
    done[c] = 1;
    if (readers[c].empty()) std::vector<uint64_t>().swap(sets_[c]);
    for (uint32_t k : readers[c]) {
      if (--waiting[k] != 0) continue;
      price(k);
      // Node k is priced: its children's sets have one reader less.
      for (ClassId child : graph.node(nodes[k]).children) {
        const uint32_t d = class_index_[graph.find_const(child).value];
        if (--unread[d] == 0) std::vector<uint64_t>().swap(sets_[d]);
      }
    }
  }
}

double DagExtractor::candidate(NodeId n, std::vector<uint64_t>& set) const {
  const double inf = std::numeric_limits<double>::infinity();
  const ENodeRef node = graph_.node(n);
  // Start from the costliest child's set (its cost is known), then add the
  // nodes of the other children's sets that are not in it yet.
  uint32_t base = UINT32_MAX;
  for (ClassId child : node.children) {
    const uint32_t k = class_index_[graph_.find_const(child).value];
    if (best_cost_[k] == inf) return inf;
    if (base == UINT32_MAX || best_cost_[k] > best_cost_[base]) base = k;
  }
  double total = 0;
  if (base == UINT32_MAX) {
    std::fill(set.begin(), set.end(), 0);
  } else {
    SPOOL_ASSERT(sets_[base].size() == words_, "DAG extraction: the set of a class still read was dropped");
    const uint64_t* b = sets_[base].data();
    std::copy(b, b + words_, set.begin());
    total = best_cost_[base];
  }
  for (ClassId child : node.children) {
    const uint32_t k = class_index_[graph_.find_const(child).value];
    if (k == base) continue;
    SPOOL_ASSERT(sets_[k].size() == words_, "DAG extraction: the set of a class still read was dropped");
    const uint64_t* s = sets_[k].data();
    for (size_t w = 0; w < words_; ++w) {
      uint64_t extra = s[w] & ~set[w];
      if (!extra) continue;
      set[w] |= extra;
      for (; extra; extra &= extra - 1) total += own_[w * 64 + static_cast<size_t>(std::countr_zero(extra))];
    }
  }
  // A node of this class under the node would make the term cyclic.
  for (NodeId m : graph_.class_nodes(graph_.class_of(n))) {
    const uint32_t b = node_index_[m.value];
    if (set[b / 64] >> (b % 64) & 1) return inf;
  }
  const uint32_t self = node_index_[n.value];
  set[self / 64] |= uint64_t{1} << (self % 64);
  return total + own_[self];
}

double DagExtractor::cost(ClassId c) const {
  const uint32_t i = class_index_.at(graph_.find_const(c).value);
  SPOOL_ASSERT(i != UINT32_MAX, "DAG extraction: c{} is not a class of the graph", c.value);
  return best_cost_[i];
}

NodeId DagExtractor::best_node(ClassId c) const {
  const uint32_t i = class_index_.at(graph_.find_const(c).value);
  SPOOL_ASSERT(i != UINT32_MAX, "DAG extraction: c{} is not a class of the graph", c.value);
  return best_node_[i];
}

double DagExtractor::node_cost(NodeId n) const {
  // The sets are gone: walk the chosen terms under the children instead.
  const double inf = std::numeric_limits<double>::infinity();
  const ClassId own_class = graph_.class_of(n);
  std::vector<uint8_t> seen(best_node_.size(), 0);
  std::vector<uint32_t> stack;
  auto visit = [&](ClassId child) {
    const uint32_t k = class_index_[graph_.find_const(child).value];
    if (seen[k]) return true;
    if (best_cost_[k] == inf) return false;
    seen[k] = 1;
    stack.push_back(k);
    return true;
  };
  for (ClassId child : graph_.node(n).children)
    if (!visit(child)) return inf;
  double total = own_[node_index_[n.value]];
  while (!stack.empty()) {
    const NodeId m = best_node_[stack.back()];
    stack.pop_back();
    if (graph_.class_of(m) == own_class) return inf;
    total += own_[node_index_[m.value]];
    for (ClassId child : graph_.node(m).children) visit(child);
  }
  return total;
}

Extraction DagExtractor::extract(ClassId root) const { return extract(std::span<const ClassId>(&root, 1)); }

Extraction DagExtractor::extract(std::span<const ClassId> roots) const {
  const double inf = std::numeric_limits<double>::infinity();
  return extract_chosen(graph_, cost_fn_, roots, [&](ClassId c) -> std::optional<NodeId> {
    const uint32_t i = class_index_[c.value];
    if (best_cost_[i] == inf) return std::nullopt;
    return best_node_[i];
  });
}

}  // namespace spool::egraph
