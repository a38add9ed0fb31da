#pragma once
// Loop rolling and unrolling.
//
// Real models repeat one block 24-80 times; saturating one copy instead of N
// is what makes equality saturation affordable. auto_roll finds repeated
// bodies in an HLIR graph and keeps one copy between loop markers (see the
// loop markers in ops.def); unroll clones bodies back out. Both work on any
// Graph, HLIR or kernel-level, and unroll(auto_roll(g)) computes what g does.

#include <spool/ir/graph.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace spool::roll {

// One loop of a rolled graph: its markers and the body they enclose.
struct Loop {
  int64_t id = 0;
  int64_t trips = 0;
  std::vector<NodeId> entries;  // loop_start, loop_input, loop_input_static
  std::vector<NodeId> exits;    // loop_end, loop_output
  std::vector<NodeId> body;     // entries and everything they reach before an exit, in topological order
  int64_t parent = -1;          // the loop whose body holds this loop's entries; -1 at top level
};

// The loops of a graph, outermost first. Throws spool::Error if the markers
// are inconsistent (trip counts that disagree, a loop_end without its
// loop_start, a loop_output that is fed from outside the body, ...).
std::vector<Loop> find_loops(const Graph& graph);
// The same, given the graph's topo_order().
std::vector<Loop> find_loops(const Graph& graph, const std::vector<NodeId>& order);

// Exactly graph.topo_order() (the same order, the same error on a cycle),
// by a plain depth-first walk over the arena instead of a Boost adjacency
// list built per call: the roll passes order the graph once per search.
std::vector<NodeId> topo_order(const Graph& graph);

struct RollReport {
  int64_t loops = 0;
  std::vector<int64_t> trips;     // per loop, in the order rolled
  int64_t body_nodes = 0;         // nodes in the bodies of top-level loops
  size_t hlir_nodes_before = 0;
  size_t hlir_nodes_after = 0;
};

struct RollResult {
  Graph graph;
  RollReport report;
};

// Rolls repeated bodies to a fixpoint (periodic and nested repeats too).
RollResult auto_roll(const Graph& graph);
// The same, calling `beside(g)` on each graph g the rolls build while g is
// searched for another repeat, on another thread (beside must only read
// g). The last call's graph is the result's: a caller can start its own
// work on the rolled graph without waiting for the search that finds
// nothing more. Not called if nothing rolls.
RollResult auto_roll(const Graph& graph, const std::function<void(const Graph&)>& beside);

// Clones every loop body back out, innermost loops first; the result has no
// markers. Throws spool::Error on inconsistent markers.
Graph unroll(Graph graph);
// Clones out only the loops with the given ids (none of which may hold a
// loop that is not listed); other loops keep their markers.
Graph unroll(Graph graph, const std::vector<int64_t>& loops);

}  // namespace spool::roll
