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
#include <optional>

namespace spool::roll {
namespace {

// The value an edge reads in an iteration: a body node's value in that
// iteration (with the edge's view on top), or the edge itself when it reads
// a node outside the body. `values` is indexed by body position (`position`
// maps node ids to it, -1 outside the body); unset values have no source.
Edge resolve(const Graph& g, const Edge& edge, const std::vector<int>& position, const std::vector<Edge>& values) {
  const int p = edge.src.value < position.size() ? position[edge.src.value] : -1;
  if (p < 0) return edge;
  const Edge& value = values[static_cast<size_t>(p)];
  SPOOL_ASSERT(value.src.valid(), "unroll: %{} is read before its value in the iteration is known", edge.src.value);
  if (edge.view.is_identity()) return value;
  return Edge{value.src, compose_views(value.view, edge.view, g.node(value.src).shape)};
}

void unroll_loop(Graph& g, const Loop& loop) {
  std::vector<int> position(g.id_bound(), -1);
  for (size_t i = 0; i < loop.body.size(); ++i) position[loop.body[i].value] = static_cast<int>(i);
  std::vector<NodeId> end_of(loop.body.size());  // loop_start position -> its loop_end
  for (const NodeId exit : loop.exits)
    if (g.node(exit).op == Op::LoopEnd) end_of[static_cast<size_t>(position[g.node(exit).inputs[1].src.value])] = exit;

  // plain[p][i]: input i of body node p seen through its own view alone,
  // composed onto the identity as resolve() would. A clone's value carries no
  // view, so this is what the input reads in every iteration where its
  // producer is a clone; composing it once instead of once per iteration is
  // the bulk of unrolling a long loop.
  std::vector<std::vector<std::optional<View>>> plain(loop.body.size());
  // iterations[k][p]: the value of body node p in iteration k.
  std::vector<std::vector<Edge>> iterations;
  iterations.reserve(static_cast<size_t>(loop.trips));
  // Every body node but the entry markers is cloned once per iteration.
  size_t cloned = 0;
  for (const NodeId id : loop.body) {
    const Op op = g.node(id).op;
    cloned += op != Op::LoopStart && op != Op::LoopInput && op != Op::LoopInputStatic;
  }
  g.reserve(g.id_bound() + cloned * static_cast<size_t>(loop.trips));
  for (int64_t k = 0; k < loop.trips; ++k) {
    std::vector<Edge> values(loop.body.size());
    for (size_t p = 0; p < loop.body.size(); ++p) {
      const NodeId id = loop.body[p];
      const Node& node = g.node(id);  // valid until the next add
      switch (node.op) {
        case Op::LoopStart: {
          if (k == 0) {
            values[p] = node.inputs[0];
            break;
          }
          const Edge& next_state = g.node(end_of[p]).inputs[0];
          // The iteration-invariant slot: the next state is a value defined
          // outside the body (after saturation, e.g. a constant or the
          // loop's own static input), so every iteration after the first
          // starts from that same value. resolve() returns it unchanged.
          values[p] = resolve(g, next_state, position, iterations.back());
          break;
        }
        case Op::LoopInput: values[p] = node.inputs[static_cast<size_t>(k)]; break;
        case Op::LoopInputStatic: values[p] = node.inputs[0]; break;
        default: {
          std::vector<Edge> inputs;
          inputs.reserve(node.inputs.size());
          std::vector<std::optional<View>>& own_views = plain[p];
          own_views.resize(node.inputs.size());
          for (size_t i = 0; i < node.inputs.size(); ++i) {
            const Edge& edge = node.inputs[i];
            const int q = edge.src.value < position.size() ? position[edge.src.value] : -1;
            if (q < 0) {
              inputs.push_back(edge);  // read from outside the body: as resolve() returns it
              continue;
            }
            const Edge& value = values[static_cast<size_t>(q)];
            if (!value.src.valid() || !value.view.is_identity()) {
              inputs.push_back(resolve(g, edge, position, values));
              continue;
            }
            if (edge.view.is_identity()) {
              inputs.push_back(Edge{value.src, {}});
              continue;
            }
            // The producer's value has the type of the original producer, so
            // the original's shape is the one the view reads.
            if (!own_views[i]) own_views[i] = compose_views(View{}, edge.view, g.node(edge.src).shape);
            inputs.push_back(Edge{value.src, *own_views[i]});
          }
          // A clone reads values of the types the original reads: its type is the original's.
          const Op op = node.op;
          Attr attr = node.attr;
          TensorType type{node.dtype, node.shape};
          values[p] = Edge{g.add_known(op, std::move(inputs), std::move(attr), std::move(type)), {}};
        }
      }
    }
    iterations.push_back(std::move(values));
  }

  // Exits read the last iteration (loop_end) or their own (loop_output);
  // their readers are rewired in one pass over the graph.
  std::vector<Edge> replacement(g.id_bound());
  for (const NodeId exit : loop.exits) {
    const Node& node = g.node(exit);
    const int64_t k = node.op == Op::LoopEnd ? loop.trips - 1 : std::get<LoopAttr>(node.attr).index;
    replacement[exit.value] = resolve(g, node.inputs[0], position, iterations[static_cast<size_t>(k)]);
  }
  auto rewired = [&](const Edge& edge) {
    const Edge& r = replacement[edge.src.value];
    if (edge.view.is_identity()) return r;  // compose_views(r.view, identity) is r.view
    return Edge{r.src, compose_views(r.view, edge.view, g.node(r.src).shape)};
  };
  for (uint32_t id = 0; id < g.id_bound(); ++id) {
    if (!g.contains(NodeId{id})) continue;
    for (size_t i = 0; i < g.node(NodeId{id}).inputs.size(); ++i) {
      const Edge& e = g.node(NodeId{id}).inputs[i];
      const bool in_body = id < position.size() && position[id] >= 0;
      if (!in_body && e.src.value < replacement.size() && replacement[e.src.value].src.valid())
        g.set_input(NodeId{id}, i, rewired(e));
    }
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const Edge& e = g.outputs()[o].edge;
    if (e.src.value < replacement.size() && replacement[e.src.value].src.valid()) g.set_output(o, rewired(e));
  }
  for (const NodeId exit : loop.exits) g.remove(exit);
  for (auto it = loop.body.rbegin(); it != loop.body.rend(); ++it) g.remove(*it);
}

bool has_markers(const Graph& g) {
  for (uint32_t id = 0; id < g.id_bound(); ++id)
    if (g.contains(NodeId{id}) && is_loop_marker(g.node(NodeId{id}).op)) return true;
  return false;
}

}  // namespace

Graph unroll(Graph g) {
  while (has_markers(g)) {
    const std::vector<Loop> loops = find_loops(g);
    if (loops.empty()) break;
    // The innermost loop: the last one in outermost-first order.
    unroll_loop(g, loops.back());
  }
  return g;
}

Graph unroll(Graph g, const std::vector<int64_t>& ids) {
  for (;;) {
    if (!has_markers(g)) return g;
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
