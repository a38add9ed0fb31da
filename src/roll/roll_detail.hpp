#pragma once
// Internal to auto_roll (src/roll/auto_roll.cpp and the files roller.hpp
// names, src/roll/first_roll.cpp): a candidate repeat as the search finds
// it, and the graphs the first roll builds (equal constants and iotas
// merged; occurrences 1..N-1 left out).

#include <spool/ir/graph.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spool::roll::detail {

// A hash of a source: by value for constants and iotas, by node otherwise.
size_t source_key(const Graph& g, NodeId id);

// One node, or two value sources of the same value.
inline bool same_source(const Graph& g, NodeId a, NodeId b) { return a == b || same_value(g.node(a), g.node(b)); }

// How occurrence inputs at one (position, input) are wired.
struct InputPlan {
  enum Kind { Internal, Carried, Static, PerIteration } kind = Internal;
  size_t position = 0;          // Internal, Carried: the producer's position in the body
  std::vector<NodeId> sources;  // Static (one), PerIteration (one per occurrence); Carried: the init
};

// An edge from outside a candidate's occurrences into one of them: `user`'s
// input `input` reads the node at occurrence-major `position` (k * period + j).
struct OutsideUse {
  uint32_t position;
  NodeId user;
  uint32_t input;
};

struct Candidate {
  size_t start = 0, period = 0, count = 0;
  int64_t saving = 0;
  std::vector<std::vector<InputPlan>> plans;  // [position][input]
  std::vector<size_t> slot_positions;         // body positions whose value is carried
  size_t markers = 0;                         // marker nodes the rewrite adds (at most)
  std::vector<uint8_t> read_outside;          // [k * period + j]: occurrence k's node j is read outside them
  std::vector<OutsideUse> outside_uses;       // by position
};

// The best candidate of a search, with the context order it indexes.
struct Found {
  std::vector<NodeId> order;
  Candidate candidate;
};

// canonical[id]: the node that stands for `id` (the first equal constant or
// iota in id order; itself for every other node). `duplicates`: the others.
std::vector<NodeId> value_canonical(const Graph& g, std::vector<NodeId>& duplicates);

// A copy of `graph` with every duplicate read as its canonical node and removed.
Graph merge_value_sources(const Graph& graph, const std::vector<NodeId>& canonical,
                          const std::vector<NodeId>& duplicates);

// merge_value_sources(graph) without occurrences 1..N-1 of `found`, its
// nodes numbered densely; id_in_copy: each id of `graph` in the copy
// (invalid for the nodes left out). See first_roll.cpp.
Graph build_survivors(const Graph& graph, const std::vector<NodeId>& canonical, const std::vector<NodeId>& topo,
                      const Found& found, size_t markers, std::vector<NodeId>& id_in_copy);

}  // namespace spool::roll::detail
