#pragma once
// Extraction: the cheapest term of an e-class under a cost function.
//
// Greedy bottom-up: every class gets the cost of its cheapest node, found by
// sweeping the classes until no cost improves. `Extractor` weighs a node by
// its tree cost (a shared sub-term counted once per use); `DagExtractor` by
// its DAG cost (each distinct node of the sub-term counted once), which is
// what a program pays. A class that can only be reached through a cycle
// never gets a finite cost and is never chosen; a class with no finite cost
// cannot be extracted. Ties keep the first node in (op, node id) order, so
// the result is deterministic. The extracted term is a DAG (one node per
// class); its tree cost and DAG cost are both reported.

#include <spool/egraph/egraph.hpp>

#include <limits>
#include <span>
#include <string>
#include <vector>

namespace spool::egraph {

// A monotone cost: a node costs strictly more than each of its children.
class CostFunction {
 public:
  virtual ~CostFunction() = default;
  virtual double cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const = 0;
};

// 1 + the children's costs: the number of nodes of the tree.
class AstSize : public CostFunction {
 public:
  double cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const override;
};
// 1 + the deepest child.
class AstDepth : public CostFunction {
 public:
  double cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const override;
};

// A term as a DAG: nodes in post-order (children first), shared sub-terms
// stored once.
struct Term {
  struct Node {
    OpId op;
    AttrId attr;
    boost::container::small_vector<uint32_t, 3> children;  // indices into nodes
    bool operator==(const Node&) const = default;
  };
  std::vector<Node> nodes;
  std::vector<uint32_t> roots;

  uint32_t root() const { return roots.at(0); }
  // S-expression of root `i` as a tree: `(+ x (* 2 y))`.
  std::string str(const Language& language, size_t i = 0) const;
  bool operator==(const Term&) const = default;
};

// Adds a term to a graph; returns the class of each root.
std::vector<ClassId> add_term(EGraph& graph, const Term& term);

struct Extraction {
  Term term;
  double tree_cost = 0;
  double dag_cost = 0;
};

class Extractor {
 public:
  // Computes the best node of every class; the graph must be clean and must
  // not change while the extractor is used.
  Extractor(const EGraph& graph, const CostFunction& cost);

  // Infinity for a class reachable only through cycles.
  double cost(ClassId c) const { return best_cost_[graph_.find_const(c).value]; }
  bool extractable(ClassId c) const { return cost(c) < std::numeric_limits<double>::infinity(); }
  NodeId best_node(ClassId c) const { return best_node_[graph_.find_const(c).value]; }

  // Throws spool::Error if a root cannot be extracted.
  Extraction extract(ClassId root) const;
  Extraction extract(std::span<const ClassId> roots) const;

 private:
  const EGraph& graph_;
  const CostFunction& cost_fn_;
  std::vector<double> best_cost_;
  std::vector<NodeId> best_node_;
};

// Greedy extraction by DAG cost (the "greedy-dag" extractor of the e-graph
// extraction literature). A node's own cost is the cost function at zero
// child costs, so the cost must be additive: own cost plus the children's
// (AstSize and hlir::HlirCost are), with positive own costs. Each class
// keeps, for its best node, the set of e-nodes of that node's term and its
// cost, the sum of their own costs, each once; a node's set is the union of
// its children's sets plus itself. Classes are made final cheapest first, so
// every class ends at its cheapest node over its children's final terms and
// no choice closes a cycle. Sets are bitsets over the live nodes, each kept
// only while a node reading its class is still to be priced; so each node is
// priced in time linear in the graph's size, and the sets alive at once are
// the frontier of the sweep, not every class.
class DagExtractor {
 public:
  // The graph must be clean and must not change while the extractor is used.
  DagExtractor(const EGraph& graph, const CostFunction& cost);
  // The extractor of like's graph under `cost`, which must price every node
  // (its own cost, with free children) as the cost `like` was built with
  // does, except the nodes `repriced` lists: only their own costs are asked
  // of `cost`. The same extractor as DagExtractor(graph, cost) builds.
  DagExtractor(const DagExtractor& like, const CostFunction& cost, std::span<const NodeId> repriced);

  // The DAG cost of the term `extract(c)` gives (infinity: not extractable).
  double cost(ClassId c) const;
  bool extractable(ClassId c) const { return cost(c) < std::numeric_limits<double>::infinity(); }
  NodeId best_node(ClassId c) const;
  // The DAG cost of the term of node `n` with every child class taken as the
  // extractor chose it (infinity if a child is not extractable or the term
  // would use `n`'s own class below `n`).
  double node_cost(NodeId n) const;

  // Throws spool::Error if a root cannot be extracted.
  Extraction extract(ClassId root) const;
  Extraction extract(std::span<const ClassId> roots) const;

 private:
  // The cost of node `n` over the children's current sets, its set left in
  // `set`; infinity if a child has no term or the set holds a node of `n`'s
  // own class.
  double candidate(NodeId n, std::vector<uint64_t>& set) const;
  // The classes' terms and costs, from the nodes' own costs.
  void solve();

  const EGraph& graph_;
  const CostFunction& cost_fn_;
  std::vector<uint32_t> class_index_;        // class id -> dense class index; UINT32_MAX: not canonical
  std::vector<uint32_t> node_index_;         // node id -> dense node index (bit); UINT32_MAX: dead
  std::vector<NodeId> nodes_;                // dense node index -> node
  std::vector<double> own_;                  // dense node -> own cost
  size_t words_ = 0;                         // 64-bit words per set
  std::vector<std::vector<uint64_t>> sets_;  // dense class -> the nodes of its term, while still read
  std::vector<double> best_cost_;            // dense class -> DAG cost of its term
  std::vector<NodeId> best_node_;            // dense class -> chosen node
};

}  // namespace spool::egraph
