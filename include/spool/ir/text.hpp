#pragma once
// The HLIR text form. It round-trips: parse(print(g)) == g, ids included.
//
//   graph tiny {
//     %0 = input {name="x"} : f32[2,64]
//     %1 = weight {name="w"} : f32[32,64]
//     %2 = mul(%0 <reshape(2,1,64) expand(2,32,64)>, %1 <reshape(1,32,64) expand(2,32,64)>) : f32[2,32,64]
//     %3 = sum_reduce(%2) {axis=2} : f32[2,32]
//     output "y" = %3
//   }
//
// A node is `%ID = OP(OPERANDS) {ATTR} : DTYPE[SHAPE]` (sources have no
// operand list); an operand is `%ID` followed by its view in angle brackets:
// `permute(P..)`, `reshape(S..)`, `expand(S..)`, `slice(START:STOP:STEP,..)`,
// `pad(BEFORE:AFTER,..;VALUE)`. Nodes are listed in topological order; the
// declared type is checked against the inferred one. `#` starts a comment.

#include <spool/ir/graph.hpp>
#include <spool/support/diagnostic.hpp>

#include <string>
#include <string_view>

namespace spool {

std::string print_graph(const Graph& graph);
Result<Graph> parse_graph(std::string_view text, const std::string& file = "<input>");

// Graphviz picture of the graph: one box per node (op, attribute, type),
// edges labelled with their views.
std::string graph_to_dot(const Graph& graph);

}  // namespace spool
