// The graphs auto_roll's first roll builds: equal constants and iotas merged
// into one node each, and the survivors of the first roll (every node but
// occurrences 1..N-1 of the repeat it rolls), built without copying the
// nodes that go.

#include "roll_detail.hpp"

#include <spool/support/error.hpp>

#include <boost/container_hash/hash.hpp>

#include <algorithm>

namespace spool::roll::detail {

size_t source_key(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (!is_value_source(n)) return std::hash<uint32_t>{}(id.value) ^ 0x9e3779b97f4a7c15ULL;
  size_t seed = static_cast<size_t>(n.op);
  boost::hash_combine(seed, hash_attr(n.attr));
  boost::hash_combine(seed, static_cast<int>(n.dtype));
  boost::hash_range(seed, n.shape.begin(), n.shape.end());
  return seed;
}

// Equal constants and iotas become one node, so that every occurrence reads
// the same node and the loop reads it as one static input. Computed nodes are
// left alone: merging a per-layer mask into one shared node would leave the
// first layer with nodes the others lack, and the layers would no longer
// line up as occurrences.
//
// canonical[id]: the node that stands for `id` (the first equal one in id
// order; itself for every other node). `duplicates`: the others, in id order.
std::vector<NodeId> value_canonical(const Graph& g, std::vector<NodeId>& duplicates) {
  const uint32_t bound = static_cast<uint32_t>(g.id_bound());
  std::vector<NodeId> canonical(bound);
  // Open addressing by source_key; a slot holds the first node of its value
  // (equal keys of unequal values probe on).
  size_t slots = 16;
  while (slots < 2 * bound) slots *= 2;
  std::vector<std::pair<size_t, NodeId>> table(slots);  // (key, node); node invalid: empty
  for (uint32_t i = 0; i < bound; ++i) {
    const NodeId id{i};
    canonical[i] = id;
    if (!g.contains(id) || !is_value_source(g.node(id))) continue;
    const size_t key = source_key(g, id);
    size_t h = (key ^ (key >> 29)) & (slots - 1);
    while (table[h].second.valid() && !(table[h].first == key && same_source(g, table[h].second, id)))
      h = (h + 1) & (slots - 1);
    if (table[h].second.valid()) {
      canonical[i] = table[h].second;
      duplicates.push_back(id);
    } else {
      table[h] = {key, id};
    }
  }
  return canonical;
}

// The graph with its duplicate constants and iotas merged into their
// canonical nodes (a copy: the roll passes edit it).
Graph merge_value_sources(const Graph& graph, const std::vector<NodeId>& canonical,
                          const std::vector<NodeId>& duplicates) {
  Graph g = graph;
  // One pass over every edge (replace_uses per duplicate would be quadratic).
  for (uint32_t id = 0; id < g.id_bound(); ++id) {
    if (!g.contains(NodeId{id})) continue;
    for (size_t i = 0; i < g.node(NodeId{id}).inputs.size(); ++i) {
      const Edge& e = g.node(NodeId{id}).inputs[i];
      if (canonical[e.src.value] != e.src) g.set_input(NodeId{id}, i, Edge{canonical[e.src.value], e.view});
    }
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Edge& e = g.outputs()[o].edge;
    if (canonical[e.src.value] != e.src) g.set_output(o, Edge{canonical[e.src.value], e.view});
  }
  for (const NodeId id : duplicates) g.remove(id);
  return g;
}

// merge_value_sources(graph) without occurrences 1..N-1 of the candidate
// `found`, which rewrite() then rolls: the first roll of a graph keeps a few
// hundred of its thousands of nodes, and copying only those is most of what
// makes rolling cheap. The copy numbers its nodes densely (id_in_copy maps
// the graph's ids to the copy's), so the passes after the roll index a few
// hundred ids, not the model's thousands. In a graph whose inputs all have
// smaller ids than their readers (every graph built by add(); then its
// topological order is the id order) the nodes keep their relative order;
// otherwise sources go first. An outside reader of occurrence k reads
// occurrence 0's node of the same position (the same type), which rewrite()
// replaces by the loop's exit marker.
Graph build_survivors(const Graph& graph, const std::vector<NodeId>& canonical, const std::vector<NodeId>& topo,
                      const Found& found, size_t markers, std::vector<NodeId>& id_in_copy) {
  const Candidate& c = found.candidate;
  // Occurrence k >= 1 of a node: the id of occurrence 0's node at its position.
  std::vector<NodeId> stand_in(graph.id_bound());
  for (size_t k = 1; k < c.count; ++k)
    for (size_t j = 0; j < c.period; ++j)
      stand_in[found.order[c.start + k * c.period + j].value] = found.order[c.start + j];
  id_in_copy.assign(graph.id_bound(), NodeId{});
  auto source = [&](NodeId src) {
    const NodeId id = canonical[src.value];
    return id_in_copy[(stand_in[id.value].valid() ? stand_in[id.value] : id).value];
  };
  Graph g(graph.name());
  g.reserve(graph.num_live() - (c.count - 1) * c.period + markers);
  // Ids not in topological order: sources first, as a duplicate constant
  // may come before its canonical node (the first in id order) in the
  // topological order.
  const bool by_id = std::is_sorted(topo.begin(), topo.end());
  if (!by_id)
    for (const NodeId id : topo) {
      const Node& n = graph.node(id);
      if (is_source(n.op) && canonical[id.value] == id)
        id_in_copy[id.value] = g.add_source(n.op, n.attr, n.dtype, n.shape);
    }
  // Every node as the clone it is, without inferring its type again.
  for (const NodeId id : topo) {
    if (canonical[id.value] != id || stand_in[id.value].valid()) continue;
    const Node& n = graph.node(id);
    if (is_source(n.op)) {
      if (by_id) id_in_copy[id.value] = g.add_source(n.op, n.attr, n.dtype, n.shape);
      continue;
    }
    EdgeList inputs;
    for (const Edge& e : n.inputs) inputs.push_back(Edge{source(e.src), e.view});
    id_in_copy[id.value] = g.add_known(n.op, std::move(inputs), n.attr, TensorType{n.dtype, n.shape});
  }
  for (const Output& o : graph.outputs()) g.add_output(o.name, Edge{source(o.edge.src), o.edge.view});
  return g;
}

}  // namespace spool::roll::detail
