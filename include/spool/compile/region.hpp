#pragma once
// split: cuts a rolled graph into regions that are saturated as
// separate e-graphs.
//
// A loop with more trips than `max_union_trips` (or holding such a loop) gets
// a region for its body; its markers stay in the enclosing region. Everything
// else (the nodes before and after the loops, short loops whole) is in the
// enclosing region. Each region becomes a small Graph in a canonical form:
// every value it reads from elsewhere (another region, a graph input or
// weight) is a placeholder source named "@in.K", its loops are renumbered
// 1, 2, ... in order of appearance, and its outputs are the values other
// regions read. Structurally identical regions have equal graphs and
// are kept once, with one Instance per place they occur.

#include <spool/ir/graph.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spool::compile {

struct RegionGraph {
  Graph graph;                       // outputs "@out.R": the values other regions read
  std::vector<int64_t> short_loops;  // ids (in `graph`) of loops whose body is in the region
};

// One place a region occurs in the rolled graph.
struct Instance {
  size_t region = 0;            // index into Split::regions
  std::vector<NodeId> inputs;   // the rolled node placeholder "@in.K" stands for
  std::vector<NodeId> roots;    // the rolled node output R computes
  std::vector<int64_t> loops;   // the rolled graph's id of the region's loop k + 1
};

struct Split {
  std::vector<RegionGraph> regions;  // distinct regions, in order of first instance
  std::vector<Instance> instances;   // the enclosing (top-level) region first
};

// Placeholders are named kInputPrefix + K.
inline constexpr const char* kInputPrefix = "@in.";

// With `separate_loops` false every node is in the top-level region (one
// e-graph for the whole graph; loops short enough are still unioned).
Split split(const Graph& rolled, int64_t max_union_trips, bool separate_loops = true);

// Where each value read across regions is computed: for a root of a region
// instance, (instance, output R); (UINT32_MAX, 0) for every other node. A
// placeholder stands for a root, a source, or a loop input of sources kept
// out of the regions (a layer's weights, read as a source is read).
std::vector<std::pair<uint32_t, uint32_t>> home_of(const Graph& rolled, const Split& split);

}  // namespace spool::compile
