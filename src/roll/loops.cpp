// find_loops: recovers each loop's body from its markers.
//
// A loop's body is what its entry markers (loop_start, loop_input,
// loop_input_static) reach through users before any of its exit markers
// (loop_end, loop_output). A node that reads no per-iteration value is not
// in the body even if it was placed there: it is the same in every
// iteration, so computing it once outside is exact.

#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <map>
#include <optional>

namespace spool::roll {
namespace {

bool is_entry(Op op) { return op == Op::LoopStart || op == Op::LoopInput || op == Op::LoopInputStatic; }
bool is_exit(Op op) { return op == Op::LoopEnd || op == Op::LoopOutput; }

}  // namespace

std::vector<NodeId> topo_order(const Graph& graph) {
  if (std::optional<std::vector<NodeId>> order = graph.id_order_if_topological()) return std::move(*order);
  // Graph::topo_order's walk: roots in id order, inputs in input order (a
  // repeated input is looked at again), each node emitted when it finishes.
  enum : uint8_t { kUnseen, kOnPath, kDone };
  const size_t n = graph.id_bound();
  std::vector<uint8_t> state(n, kUnseen);
  struct Frame {
    const Edge* next;  // the next input to look at
    const Edge* end;
    uint32_t id;
  };
  std::vector<Frame> stack;
  std::vector<NodeId> order;
  order.reserve(graph.num_live());
  auto enter = [&](uint32_t id) {
    state[id] = kOnPath;
    const auto& inputs = graph.node(NodeId{id}).inputs;
    stack.push_back({inputs.data(), inputs.data() + inputs.size(), id});
  };
  for (uint32_t root = 0; root < n; ++root) {
    if (state[root] != kUnseen || !graph.contains(NodeId{root})) continue;  // deleted ids have no edges
    enter(root);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next != top.end) {
        const uint32_t src = (top.next++)->src.value;
        if (state[src] == kUnseen) {
          enter(src);  // may move the stack: `top` is not used after this
        } else if (state[src] == kOnPath) {
          return graph.topo_order();  // a cycle: reported as topo_order reports it
        }
        continue;
      }
      state[top.id] = kDone;
      order.push_back(NodeId{top.id});
      stack.pop_back();
    }
  }
  return order;
}

std::vector<Loop> find_loops(const Graph& graph) { return find_loops(graph, topo_order(graph)); }

std::vector<Loop> find_loops(const Graph& graph, const std::vector<NodeId>& order) {
  std::map<int64_t, Loop> loops;
  for (const NodeId id : order) {
    const Node& node = graph.node(id);
    if (!is_loop_marker(node.op)) continue;
    const LoopAttr& attr = std::get<LoopAttr>(node.attr);
    Loop& loop = loops[attr.loop];
    if (loop.trips == 0) {
      loop.id = attr.loop;
      loop.trips = attr.trips;
    } else if (loop.trips != attr.trips) {
      fail("loop {}: {} %{} says {} trips, another marker says {}", attr.loop, op_name(node.op), id.value, attr.trips,
           loop.trips);
    }
    (is_entry(node.op) ? loop.entries : loop.exits).push_back(id);
  }
  if (loops.empty()) return {};  // no markers: nothing below has work to do

  // The sources of every loop_end edge, sorted: a loop_start must be read
  // by exactly one.
  std::vector<uint32_t> end_reads;
  for (const auto& [id, loop] : loops)
    for (const NodeId exit : loop.exits)
      if (graph.node(exit).op == Op::LoopEnd)
        for (const Edge& edge : graph.node(exit).inputs) end_reads.push_back(edge.src.value);
  std::sort(end_reads.begin(), end_reads.end());

  for (auto& [id, loop] : loops) {
    // What the entries reach through users, in one pass in topological
    // order: a node is in the body when it reads a body node and is no exit
    // of this loop.
    std::vector<bool> in_body(graph.id_bound(), false);
    for (const NodeId entry : loop.entries) in_body[entry.value] = true;
    for (const NodeId n : order) {
      if (!in_body[n.value]) {
        const Node& node = graph.node(n);
        if (is_exit(node.op) && std::get<LoopAttr>(node.attr).loop == id) continue;
        if (std::none_of(node.inputs.begin(), node.inputs.end(),
                         [&](const Edge& edge) { return in_body[edge.src.value]; }))
          continue;
        in_body[n.value] = true;
      }
      loop.body.push_back(n);
    }

    for (const NodeId exit : loop.exits) {
      const Node& e = graph.node(exit);
      if (e.op == Op::LoopEnd) {
        const Node& start = graph.node(e.inputs[1].src);
        if (start.op != Op::LoopStart || std::get<LoopAttr>(start.attr).loop != id ||
            std::get<LoopAttr>(start.attr).index != std::get<LoopAttr>(e.attr).index)
          fail("loop {}: loop_end %{} is not paired with a loop_start of the same loop and slot", id, exit.value);
      }
    }
    for (const NodeId entry : loop.entries) {
      const Node& n = graph.node(entry);
      if (n.op != Op::LoopStart) continue;
      const auto [first, last] = std::equal_range(end_reads.begin(), end_reads.end(), entry.value);
      const auto ends = last - first;
      if (ends != 1) fail("loop {}: loop_start %{} has {} loop_ends, not 1", id, entry.value, ends);
    }
  }

  // Nesting: a loop's parent is the smallest other loop whose body holds its entries.
  for (auto& [id, loop] : loops) {
    size_t best = SIZE_MAX;
    for (const auto& [other_id, other] : loops) {
      if (other_id == id || loop.entries.empty()) continue;
      if (std::find(other.body.begin(), other.body.end(), loop.entries.front()) != other.body.end() &&
          other.body.size() < best) {
        best = other.body.size();
        loop.parent = other_id;
      }
    }
  }

  std::vector<Loop> result;
  for (auto& [id, loop] : loops) result.push_back(std::move(loop));
  // Outermost first, by nesting depth.
  std::map<int64_t, int64_t> parent_of;
  for (const Loop& l : result) parent_of[l.id] = l.parent;
  auto nesting = [&](const Loop& l) {
    int d = 0;
    for (int64_t p = l.parent; p >= 0 && d <= static_cast<int>(result.size()); p = parent_of[p]) ++d;
    return d;
  };
  std::stable_sort(result.begin(), result.end(), [&](const Loop& a, const Loop& b) { return nesting(a) < nesting(b); });
  return result;
}

}  // namespace spool::roll
