#pragma once
// Human-readable pictures of an e-graph: a text dump (one line per class)
// and Graphviz (classes as clusters, an edge from each node to the class of
// each child). Both list classes and nodes in id order, so they are stable.

#include <spool/egraph/egraph.hpp>

#include <string>

namespace spool::egraph {

// `c3 = f32[2] : +(c1 c2) | *(c3 c4)`, one class per line (graph must be clean).
std::string dump_text(const EGraph& graph);
std::string dump_dot(const EGraph& graph);

}  // namespace spool::egraph
