#pragma once
// The HLIR graph: an arena of nodes whose ids are never reused.
//
// A node is an op with typed inputs; each input is an Edge (a producer and the
// View through which the consumer reads it). Deleting a node leaves a
// tombstone: ids stay dense and stable, so passes may keep ids across edits
// (luminal lost a LoopOutput when a freed slot was handed out again).
// Topological order and cycle checks go through Boost.Graph (graph_algo.cpp).

#include <spool/ir/attr.hpp>
#include <spool/ir/dtype.hpp>
#include <spool/ir/op.hpp>
#include <spool/ir/view.hpp>

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spool {

struct NodeId {
  uint32_t value = UINT32_MAX;
  constexpr bool valid() const { return value != UINT32_MAX; }
  constexpr auto operator<=>(const NodeId&) const = default;
};

struct Edge {
  NodeId src;
  View view;
  bool operator==(const Edge&) const = default;
};

// A node's inputs: up to three without a heap allocation.
using EdgeList = boost::container::small_vector<Edge, 3>;

struct Node {
  Op op = Op::Input;
  DType dtype = DType::F32;
  Shape shape;
  Attr attr;
  EdgeList inputs;
  bool alive = true;

  Node() = default;
  Node(Op o, DType d, Shape s, Attr a, bool live = true)
      : op(o), dtype(d), shape(std::move(s)), attr(std::move(a)), alive(live) {}
  Node(const Node&) = default;
  Node& operator=(const Node&) = default;
  // A move never throws (the inputs' heap buffer is taken, or at most three
  // Edges move, and an Edge's move does not throw), though small_vector does
  // not say so: declared here, std::vector<Node> moves nodes when it grows
  // instead of copying every one.
  Node(Node&&) noexcept = default;
  Node& operator=(Node&&) noexcept = default;

  bool operator==(const Node&) const = default;
};
static_assert(std::is_nothrow_move_constructible_v<Node>);

// Constants and iotas are values, not places: two with the same attribute
// and type are the same input wherever they stand.
inline bool is_value_source(const Node& n) { return n.op == Op::Constant || n.op == Op::Iota; }
// Two value sources (constants or iotas) of the same value.
inline bool same_value(const Node& x, const Node& y) {
  return is_value_source(x) && x.op == y.op && x.attr == y.attr && x.dtype == y.dtype && x.shape == y.shape;
}

struct Output {
  std::string name;
  Edge edge;
  bool operator==(const Output&) const = default;
};

// The dtype and shape an edge delivers to its consumer.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Adds a node; its dtype and shape are inferred from the inputs and the
  // attribute. Throws spool::Error naming the op on an ill-formed node.
  NodeId add(Op op, std::vector<Edge> inputs, Attr attr = NoAttr{});
  // Adds a node whose type the caller already knows (a clone of a node,
  // reading inputs of the types the original reads), without inferring it
  // again; verify() checks it. The inputs come as the node keeps them: the
  // passes that clone thousands of nodes build them without a heap vector.
  NodeId add_known(Op op, EdgeList inputs, Attr attr, TensorType type);
  // Adds a source node (Input, Weight, Constant, Iota) of the given type.
  NodeId add_source(Op op, Attr attr, DType dtype, Shape shape);

  // Replaces input `index` of `node`, re-inferring its type (which must not
  // change). May create a cycle; verify() finds it.
  void set_input(NodeId node, size_t index, Edge edge);

  // Deletes a node that no live node and no output uses. Its id is never
  // handed out again.
  void remove(NodeId id);

  // Room for `nodes` ids in all without reallocating: a pass that knows how
  // many nodes it adds avoids regrowing the node array, which copies every
  // node (their small_vector inputs have no noexcept move).
  void reserve(size_t nodes);

  void add_output(std::string name, Edge edge);
  const std::vector<Output>& outputs() const { return outputs_; }
  // Points output `index` at another edge of the same type.
  void set_output(size_t index, Edge edge);
  // Makes every reader of `old` (nodes and outputs) read `replacement`
  // instead, keeping each reader's own view on top of the replacement's.
  // The types must agree.
  void replace_uses(NodeId old, const Edge& replacement);

  // Inline: the graph passes read nodes in their innermost loops.
  const Node& node(NodeId id) const {
    if (!contains(id)) [[unlikely]]
      not_live(id);
    return nodes_[id.value];
  }
  bool contains(NodeId id) const { return id.value < nodes_.size() && nodes_[id.value].alive; }
  // Number of ids handed out so far (live and deleted).
  size_t id_bound() const { return nodes_.size(); }
  size_t num_live() const { return num_live_; }
  std::vector<NodeId> live_ids() const;
  // Live nodes that read `id`, in id order. Linear in the graph's size.
  std::vector<NodeId> users(NodeId id) const;
  // How many input edges and outputs read `id`. Constant time.
  uint32_t use_count(NodeId id) const { return use_count_[id.value]; }

  // The type an edge delivers (the producer's type seen through the view).
  TensorType edge_type(const Edge& edge) const;

  // Live nodes in a topological order (producers first; stable for a given
  // graph). Throws spool::Error if the graph has a cycle.
  std::vector<NodeId> topo_order() const;
  // The live ids in id order if every input has a smaller id than its reader
  // (a graph built producers first): then that is topo_order()'s order, found
  // in one pass. nullopt otherwise.
  std::optional<std::vector<NodeId>> id_order_if_topological() const;
  // Checks that the graph is acyclic and every node's type matches what its
  // inputs infer. Throws spool::Error describing the first problem.
  void verify() const;

  // Structural equality: same ids, nodes, outputs and name.
  bool operator==(const Graph& other) const;

  // For the text parser: adds a node with an explicit id (ids not yet handed
  // out below it become deleted slots). The id must be unused.
  NodeId add_with_id(NodeId id, Op op, std::vector<Edge> inputs, Attr attr, DType dtype, Shape shape);

 private:
  // Appends a live node built in place (its inputs already checked).
  NodeId push(Op op, DType dtype, Shape&& shape, Attr&& attr, std::vector<Edge>&& inputs);
  NodeId push(Op op, DType dtype, Shape&& shape, Attr&& attr, EdgeList&& inputs);
  [[noreturn]] void not_live(NodeId id) const;  // node() of a dead or unknown id: a compiler bug
  TensorType infer(Op op, const std::vector<Edge>& inputs, const Attr& attr) const;

  std::string name_ = "graph";
  std::vector<Node> nodes_;
  std::vector<Output> outputs_;
  std::vector<size_t> output_name_hashes_;  // of outputs_[i].name: add_output's check for a name taken
  std::vector<bool> holes_;  // ids skipped by add_with_id, still fillable by it
  std::vector<uint32_t> use_count_;  // readers (input edges and outputs) of each id
  size_t num_live_ = 0;
};

// A copy with dense ids and no deleted slots, numbered by a depth-first walk
// from the outputs (in output order, inputs in input order, producers
// first), then any node no output reaches: two graphs that differ only in
// their ids compact to equal graphs.
Graph compacted(const Graph& graph);

// Common-subexpression elimination: nodes with the same op, attribute and
// inputs become one (constants and iotas by value, inputs and weights by
// name). Ids of kept nodes are kept. Takes the graph by value: a caller
// done with its graph moves it in (no copy of every node and attribute).
Graph cse(Graph graph);

// Type inference for one op from its input types; shared by Graph and by later
// stages that build nodes outside a Graph. Throws spool::Error naming the op.
TensorType infer_type(Op op, const std::vector<TensorType>& inputs, const Attr& attr);

// Checks that a source node's attribute and type fit the op.
void check_source(Op op, const Attr& attr, DType dtype, const Shape& shape);

}  // namespace spool
