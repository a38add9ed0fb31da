// Greedy bottom-up extraction with a pluggable monotone cost, and terms.
//
// Costs are found by sweeping all classes until none improves, visiting
// classes in id order and nodes in the class's (op, node id) order; a node
// replaces the current choice only if it is strictly cheaper. A node with a
// child of infinite cost is never chosen, which is what keeps classes that
// are reachable only through a cycle out of every extracted term. The DAG
// extractor re-examines only classes whose children's choices changed.

#include <spool/egraph/extract.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <bit>
#include <optional>

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

Extractor::Extractor(const EGraph& graph, const CostFunction& cost)
    : graph_(graph), cost_fn_(cost) {
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
          SPOOL_ASSERT(child_node.has_value(), "extraction: a chosen node has a child c{} without a term",
                       child.value);
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
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<ClassId>& classes = graph.classes();
  const size_t nc = classes.size();
  class_index_.assign(graph.class_id_bound(), UINT32_MAX);
  node_index_.assign(graph.node_id_bound(), UINT32_MAX);
  boost::container::small_vector<double, 8> zeros;
  for (size_t i = 0; i < nc; ++i) {
    class_index_[classes[i].value] = static_cast<uint32_t>(i);
    for (NodeId n : graph.class_nodes(classes[i])) {
      node_index_[n.value] = static_cast<uint32_t>(own_.size());
      zeros.assign(graph.node(n).children.size(), 0.0);
      own_.push_back(cost_fn_.cost(graph, n, span_of(zeros)));
    }
  }
  words_ = (own_.size() + 63) / 64;
  sets_.assign(nc * words_, 0);
  best_cost_.assign(nc, inf);
  best_node_.assign(nc, NodeId{});

  // Dense class -> the classes with a node reading it, each once, ascending.
  std::vector<std::vector<uint32_t>> parents(nc);
  for (size_t i = 0; i < nc; ++i)
    for (NodeId n : graph.class_nodes(classes[i]))
      for (ClassId child : graph.node(n).children) parents[class_index_[graph.find_const(child).value]].push_back(i);
  for (std::vector<uint32_t>& p : parents) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }

  // Sweeps in class order over the classes whose children changed. A class
  // changes only to a strictly cheaper set, so this ends; and a class's
  // cost exceeds that of every class its choice reads when chosen (costs
  // are positive), so the choices never form a cycle.
  std::vector<uint8_t> dirty(nc, 1);
  std::vector<uint64_t> set(words_);
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < nc; ++i) {
      if (!dirty[i]) continue;
      dirty[i] = 0;
      bool improved = false;
      for (NodeId n : graph.class_nodes(classes[i])) {
        const double c = candidate(n, set);
        if (c < best_cost_[i]) {
          best_cost_[i] = c;
          best_node_[i] = n;
          std::copy(set.begin(), set.end(), sets_.begin() + static_cast<ptrdiff_t>(i * words_));
          improved = true;
        }
      }
      if (!improved) continue;
      for (uint32_t p : parents[i]) {
        dirty[p] = 1;
        if (p <= i) again = true;  // not visited again in this sweep
      }
    }
  }

  // A set is exact when taken, but the classes under it may have improved
  // since. Recompute every set from the final choices, children first, so
  // that cost(c) is the DAG cost of the term extract(c) gives.
  std::vector<uint8_t> state(nc, 0);  // 0: to do, 1: on the stack, 2: exact
  std::vector<std::pair<uint32_t, size_t>> stack;  // dense class, next child
  for (size_t start = 0; start < nc; ++start) {
    if (state[start] || best_cost_[start] == inf) continue;
    stack.push_back({static_cast<uint32_t>(start), 0});
    state[start] = 1;
    while (!stack.empty()) {
      auto& [i, next] = stack.back();
      const ENodeRef node = graph.node(best_node_[i]);
      if (next < node.children.size()) {
        const uint32_t child = class_index_[graph.find_const(node.children[next++]).value];
        SPOOL_ASSERT(state[child] != 1, "DAG extraction: the chosen nodes form a cycle through c{}",
                     classes[child].value);
        if (state[child] == 0) {
          state[child] = 1;
          stack.push_back({child, 0});
        }
        continue;
      }
      const double c = candidate(best_node_[i], set);
      SPOOL_ASSERT(c < inf, "DAG extraction: the term of c{} uses its own class", classes[i].value);
      best_cost_[i] = c;
      std::copy(set.begin(), set.end(), sets_.begin() + static_cast<ptrdiff_t>(i * words_));
      state[i] = 2;
      stack.pop_back();
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
    const uint64_t* b = sets_.data() + base * words_;
    std::copy(b, b + words_, set.begin());
    total = best_cost_[base];
  }
  for (ClassId child : node.children) {
    const uint32_t k = class_index_[graph_.find_const(child).value];
    if (k == base) continue;
    const uint64_t* s = sets_.data() + k * words_;
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
  std::vector<uint64_t> set(words_);
  return candidate(n, set);
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
