// unroll: clones each loop body once per iteration, innermost loops first.
//
// In iteration k a loop_start stands for its init (k = 0) or for the value
// its loop_end received in iteration k-1; a loop_input for its k-th source; a
// loop_input_static for its one source. Every other body node is cloned with
// its inputs resolved that way. Afterwards each loop_end is replaced by the
// value of the last iteration and each loop_output by the value of its
// iteration, and the markers and the original body are deleted.

#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <map>

namespace spool::roll {
namespace {

using ValueMap = std::map<uint32_t, Edge>;  // body node -> its value in one iteration

// The value an edge reads in an iteration: a body node's value in that
// iteration (with the edge's view on top), or the edge itself when it reads
// a node outside the body.
Edge resolve(const Graph& g, const Edge& edge, const ValueMap& values) {
  const auto it = values.find(edge.src.value);
  if (it == values.end()) return edge;
  return Edge{it->second.src, compose_views(it->second.view, edge.view, g.node(it->second.src).shape)};
}

void unroll_loop(Graph& g, const Loop& loop) {
  std::map<uint32_t, NodeId> end_of_start;  // loop_start -> its loop_end
  for (const NodeId exit : loop.exits)
    if (g.node(exit).op == Op::LoopEnd) end_of_start[g.node(exit).inputs[1].src.value] = exit;

  std::vector<ValueMap> iterations;
  for (int64_t k = 0; k < loop.trips; ++k) {
    ValueMap values;
    for (const NodeId id : loop.body) {
      const Node node = g.node(id);  // a copy: adding nodes may reallocate the arena
      switch (node.op) {
        case Op::LoopStart: {
          if (k == 0) {
            values[id.value] = node.inputs[0];
            break;
          }
          const Edge& next_state = g.node(end_of_start.at(id.value)).inputs[0];
          // The iteration-invariant slot: the next state is a value defined
          // outside the body (after saturation, e.g. a constant or the
          // loop's own static input), so every iteration after the first
          // starts from that same value. resolve() returns it unchanged.
          values[id.value] = resolve(g, next_state, iterations.back());
          break;
        }
        case Op::LoopInput: values[id.value] = node.inputs[static_cast<size_t>(k)]; break;
        case Op::LoopInputStatic: values[id.value] = node.inputs[0]; break;
        default: {
          std::vector<Edge> inputs;
          for (const Edge& edge : node.inputs) inputs.push_back(resolve(g, edge, values));
          values[id.value] = Edge{g.add(node.op, std::move(inputs), node.attr), {}};
        }
      }
    }
    iterations.push_back(std::move(values));
  }

  // Exits read the last iteration (loop_end) or their own (loop_output).
  for (const NodeId exit : loop.exits) {
    const Node& node = g.node(exit);
    const int64_t k = node.op == Op::LoopEnd ? loop.trips - 1 : std::get<LoopAttr>(node.attr).index;
    const Edge value = resolve(g, node.inputs[0], iterations[static_cast<size_t>(k)]);
    g.replace_uses(exit, value);
  }
  for (const NodeId exit : loop.exits) g.remove(exit);
  for (auto it = loop.body.rbegin(); it != loop.body.rend(); ++it) g.remove(*it);
}

}  // namespace

Graph unroll(const Graph& graph) {
  Graph g = graph;
  for (;;) {
    const std::vector<Loop> loops = find_loops(g);
    if (loops.empty()) return g;
    // The innermost loop: the last one in outermost-first order.
    unroll_loop(g, loops.back());
  }
}

Graph unroll(const Graph& graph, const std::vector<int64_t>& ids) {
  Graph g = graph;
  for (;;) {
    const std::vector<Loop> loops = find_loops(g);
    // The innermost listed loop: the last listed one in outermost-first order.
    auto it = std::find_if(loops.rbegin(), loops.rend(), [&](const Loop& l) {
      return std::find(ids.begin(), ids.end(), l.id) != ids.end();
    });
    if (it == loops.rend()) return g;
    for (const Loop& inner : loops)
      if (inner.parent == it->id && std::find(ids.begin(), ids.end(), inner.id) == ids.end())
        fail("unroll: loop {} holds loop {}, which is not to be unrolled", it->id, inner.id);
    unroll_loop(g, *it);
  }
}

}  // namespace spool::roll
