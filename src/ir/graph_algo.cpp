// Graph algorithms over the HLIR arena through Boost.Graph.
//
// The adapter is a Boost adjacency list with one vertex per id and an edge
// from each consumer to each of its producers. A depth-first search visits
// roots in id order and emits a node when it finishes, i.e. after all its
// producers: that post-order is a topological order (producers first), equal
// to id order whenever id order is already topological, and a back edge is a
// cycle.

#include <spool/ir/graph.hpp>
#include <spool/support/error.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

namespace spool {
namespace {

using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using Vertex = boost::graph_traits<BoostGraph>::vertex_descriptor;

struct CycleFound {
  Vertex at;
};

class PostOrder : public boost::default_dfs_visitor {
 public:
  explicit PostOrder(std::vector<Vertex>& order) : order_(order) {}
  void finish_vertex(Vertex v, const BoostGraph&) { order_.push_back(v); }
  void back_edge(boost::graph_traits<BoostGraph>::edge_descriptor e, const BoostGraph& g) {
    throw CycleFound{boost::source(e, g)};
  }

 private:
  std::vector<Vertex>& order_;
};

}  // namespace

std::optional<std::vector<NodeId>> Graph::id_order_if_topological() const {
  std::vector<NodeId> order;
  order.reserve(num_live_);
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive) continue;
    for (const Edge& edge : nodes_[i].inputs)
      if (edge.src.value >= i) return std::nullopt;
    order.push_back(NodeId{i});
  }
  return order;
}

std::vector<NodeId> Graph::topo_order() const {
  // There the depth-first search below would emit every node as its own
  // root, in id order: taken in one pass, without building the adapter.
  if (std::optional<std::vector<NodeId>> order = id_order_if_topological()) return std::move(*order);
  BoostGraph adapter(nodes_.size());
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive) continue;
    for (const Edge& edge : nodes_[i].inputs) boost::add_edge(i, edge.src.value, adapter);
  }
  std::vector<Vertex> order;
  order.reserve(nodes_.size());
  try {
    boost::depth_first_search(adapter, boost::visitor(PostOrder(order)));
  } catch (const CycleFound& cycle) {
    fail("graph has a cycle through {} %{}", op_name(nodes_[cycle.at].op), cycle.at);
  }
  std::vector<NodeId> result;
  result.reserve(num_live_);
  for (Vertex v : order)
    if (nodes_[v].alive) result.push_back(NodeId{static_cast<uint32_t>(v)});
  return result;
}

}  // namespace spool
