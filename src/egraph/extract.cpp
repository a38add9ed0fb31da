// Greedy bottom-up extraction with a pluggable monotone cost, and terms.
//
// Costs are found by sweeping all classes until none improves, visiting
// classes in id order and nodes in the class's (op, node id) order; a node
// replaces the current choice only if it is strictly cheaper. A node with a
// child of infinite cost is never chosen, which is what keeps classes that
// are reachable only through a cycle out of every extracted term.

#include <spool/egraph/extract.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <unordered_map>

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

Extraction Extractor::extract(ClassId root) const { return extract(std::span<const ClassId>(&root, 1)); }

Extraction Extractor::extract(std::span<const ClassId> roots) const {
  Extraction out;
  std::unordered_map<uint32_t, uint32_t> index;  // class -> term node
  std::vector<uint8_t> on_stack(graph_.class_id_bound(), 0);
  const double inf = std::numeric_limits<double>::infinity();
  // Iterative post-order over chosen nodes.
  struct Frame {
    ClassId c;
    size_t next;
  };
  std::vector<Frame> stack;
  for (ClassId r : roots) {
    const ClassId root = graph_.find_const(r);
    if (best_cost_[root.value] == inf) fail("extraction: e-class c{} has no finite-cost term", root.value);
    out.tree_cost += best_cost_[root.value];
    if (!index.count(root.value)) {
      stack.push_back({root, 0});
      on_stack[root.value] = 1;
      while (!stack.empty()) {
        Frame& f = stack.back();
        const ENodeRef node = graph_.node(best_node_[f.c.value]);
        if (f.next < node.children.size()) {
          const ClassId child = node.children[f.next++];
          if (index.count(child.value)) continue;
          SPOOL_ASSERT(!on_stack[child.value], "extraction: the cost function is not monotone (cycle through c{})",
                       child.value);
          on_stack[child.value] = 1;
          stack.push_back({child, 0});
          continue;
        }
        Term::Node tn{node.op, node.attr, {}};
        for (ClassId child : node.children) tn.children.push_back(index.at(child.value));
        index.emplace(f.c.value, static_cast<uint32_t>(out.term.nodes.size()));
        out.term.nodes.push_back(std::move(tn));
        // DAG cost: each chosen node once, at its own cost (children free).
        boost::container::small_vector<double, 8> zeros(node.children.size(), 0.0);
        out.dag_cost += cost_fn_.cost(graph_, best_node_[f.c.value], span_of(zeros));
        on_stack[f.c.value] = 0;
        stack.pop_back();
      }
    }
    out.term.roots.push_back(index.at(root.value));
  }
  return out;
}

}  // namespace spool::egraph
