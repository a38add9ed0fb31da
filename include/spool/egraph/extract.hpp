#pragma once
// Extraction: the cheapest term of an e-class under a cost function.
//
// Greedy bottom-up: every class gets the cost of its cheapest node, found by
// sweeping the classes until no cost improves. A class that can only be
// reached through a cycle never gets a finite cost and is never chosen; a
// class with no finite cost cannot be extracted. Ties keep the first node in
// (op, node id) order, so the result is deterministic. The extracted term is
// a DAG (one node per class); its tree cost (shared sub-terms counted once
// per use) and DAG cost (counted once) are both reported.

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

}  // namespace spool::egraph
