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
#include <spool/support/fault.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <span>

namespace spool::roll {
namespace {

// The value an edge reads in an iteration: a body node's value in that
// iteration (with the edge's view on top), or the edge itself when it reads
// a node outside the body. `values` is indexed by body position (`position`
// maps node ids to it, -1 outside the body); unset values have no source.
Edge resolve(const Graph& g, const Edge& edge, const std::vector<int>& position, std::span<const Edge> values) {
  const int p = edge.src.value < position.size() ? position[edge.src.value] : -1;
  if (p < 0) return edge;
  const Edge& value = values[static_cast<size_t>(p)];
  SPOOL_ASSERT(value.src.valid(), "unroll: %{} is read before its value in the iteration is known", edge.src.value);
  if (edge.view.is_identity()) return value;
  return Edge{value.src, compose_views(value.view, edge.view, g.node(value.src).shape)};
}

// How input `i` of a cloned body node is found in every iteration: the
// original edge, read from outside the body (`from` < 0) or from the value of
// body position `from`.
struct InputPlan {
  int from = -1;
  Edge edge;
  // The edge's view alone, composed onto the identity as resolve() would. A
  // clone's value carries no view, so this is what the input reads in every
  // iteration where its producer is a clone; composing it once instead of
  // once per iteration is the bulk of unrolling a long loop. Computed at its
  // first use.
  std::optional<View> own;
};

// compose_views(View{}, view, shape), remembering a few: a loop's outputs
// read the values of its iterations through equal views (each its own copy),
// as do several inputs of its body.
class OntoIdentity {
 public:
  View operator()(const View& view, const Shape& shape) {
    for (const Entry& e : entries_)
      if (e.shape == shape && e.view == view) return e.composed;
    View composed = compose_views(View{}, view, shape);
    if (entries_.size() < kEntries) entries_.push_back({view, shape, composed});
    return composed;
  }

 private:
  static constexpr size_t kEntries = 8;
  struct Entry {
    View view;
    Shape shape;
    View composed;
  };
  std::vector<Entry> entries_;
};

void unroll_loop(Graph& g, const Loop& loop) {
  std::vector<int> position(g.id_bound(), -1);
  for (size_t i = 0; i < loop.body.size(); ++i) position[loop.body[i].value] = static_cast<int>(i);
  std::vector<NodeId> end_of(loop.body.size());  // loop_start position -> its loop_end
  for (const NodeId exit : loop.exits)
    if (g.node(exit).op == Op::LoopEnd) end_of[static_cast<size_t>(position[g.node(exit).inputs[1].src.value])] = exit;

  // Every body node but the entry markers is cloned once per iteration, its
  // inputs found as planned here.
  std::vector<std::vector<InputPlan>> plans(loop.body.size());
  size_t cloned = 0;
  for (size_t p = 0; p < loop.body.size(); ++p) {
    const Node& node = g.node(loop.body[p]);
    if (node.op == Op::LoopStart || node.op == Op::LoopInput || node.op == Op::LoopInputStatic) continue;
    ++cloned;
    plans[p].reserve(node.inputs.size());
    for (const Edge& edge : node.inputs)
      plans[p].push_back({edge.src.value < position.size() ? position[edge.src.value] : -1, edge, std::nullopt});
  }
  g.reserve(g.id_bound() + cloned * static_cast<size_t>(loop.trips));
  OntoIdentity onto_identity;
  // The value of body node p in iteration k is values_in(k)[p].
  const size_t n = loop.body.size();
  std::vector<Edge> all_values(n * static_cast<size_t>(loop.trips));
  auto values_in = [&](int64_t k) { return std::span<Edge>(all_values.data() + static_cast<size_t>(k) * n, n); };
  for (int64_t k = 0; k < loop.trips; ++k) {
    const std::span<Edge> values = values_in(k);
    for (size_t p = 0; p < n; ++p) {
      const Node& node = g.node(loop.body[p]);  // valid until the next add
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
          values[p] = resolve(g, next_state, position, values_in(k - 1));
          break;
        }
        case Op::LoopInput: {
          const bool previous = fault::planted(fault::Fault::UnrollPreviousSource) && k > 0;
          values[p] = node.inputs[static_cast<size_t>(previous ? k - 1 : k)];
          break;
        }
        case Op::LoopInputStatic: values[p] = node.inputs[0]; break;
        default: {
          EdgeList inputs;
          for (InputPlan& plan : plans[p]) {
            if (plan.from < 0) {
              inputs.push_back(plan.edge);  // read from outside the body: as resolve() returns it
              continue;
            }
            const Edge& value = values[static_cast<size_t>(plan.from)];
            if (!value.src.valid() || !value.view.is_identity()) {
              inputs.push_back(resolve(g, plan.edge, position, values));
              continue;
            }
            if (plan.edge.view.is_identity()) {
              inputs.push_back(Edge{value.src, {}});
              continue;
            }
            // The producer's value has the type of the original producer, so
            // the original's shape is the one the view reads.
            if (!plan.own) plan.own = onto_identity(plan.edge.view, g.node(plan.edge.src).shape);
            inputs.push_back(Edge{value.src, *plan.own});
          }
          // A clone reads values of the types the original reads: its type is the original's.
          values[p] = Edge{g.add_known(node.op, std::move(inputs), node.attr, TensorType{node.dtype, node.shape}), {}};
        }
      }
    }
  }

  // Exits read the last iteration (loop_end) or their own (loop_output);
  // their readers are rewired in one pass over the graph.
  const size_t bound = g.id_bound();
  std::vector<int> exit_slot(bound, -1);  // node id -> index in loop.exits, -1 for other nodes
  std::vector<Edge> replacement(loop.exits.size());
  for (size_t x = 0; x < loop.exits.size(); ++x) {
    const Node& node = g.node(loop.exits[x]);
    const int64_t k = node.op == Op::LoopEnd ? loop.trips - 1 : std::get<LoopAttr>(node.attr).index;
    exit_slot[loop.exits[x].value] = static_cast<int>(x);
    replacement[x] = resolve(g, node.inputs[0], position, values_in(k));
  }
  auto rewired = [&](const Edge& edge) {
    const Edge& r = replacement[static_cast<size_t>(exit_slot[edge.src.value])];
    if (edge.view.is_identity()) return r;  // compose_views(r.view, identity) is r.view
    const Shape& source = g.node(r.src).shape;
    if (r.view.is_identity()) return Edge{r.src, onto_identity(edge.view, source)};
    return Edge{r.src, compose_views(r.view, edge.view, source)};
  };
  auto reads_exit = [&](const Edge& edge) { return edge.src.value < bound && exit_slot[edge.src.value] >= 0; };
  // The scan stops once every node edge that reads an exit is rewired (the
  // exits' use counts less the outputs that read them): the readers are
  // usually a few nodes right after the loop, before the clones.
  size_t pending = 0;
  for (const NodeId exit : loop.exits) pending += g.use_count(exit);
  for (const Output& output : g.outputs()) pending -= reads_exit(output.edge);
  for (uint32_t id = 0; id < bound && pending > 0; ++id) {
    const bool in_body = id < position.size() && position[id] >= 0;
    if (in_body || !g.contains(NodeId{id})) continue;
    const Node& node = g.node(NodeId{id});
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!reads_exit(node.inputs[i])) continue;
      g.set_input(NodeId{id}, i, rewired(node.inputs[i]));  // changes the node in place
      --pending;
    }
  }
  for (size_t o = 0; o < g.outputs().size(); ++o)
    if (reads_exit(g.outputs()[o].edge)) g.set_output(o, rewired(g.outputs()[o].edge));
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
    // Every marker belongs to a loop and goes with it: after the only
    // loop, none is left to look for.
    if (loops.size() == 1) break;
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
