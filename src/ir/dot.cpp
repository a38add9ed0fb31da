// Graphviz output for HLIR graphs.

#include <spool/ir/text.hpp>

namespace spool {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string graph_to_dot(const Graph& graph) {
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
                                escape(graph.name()));
  for (const NodeId id : graph.topo_order()) {
    const Node& node = graph.node(id);
    const bool source = op_info(node.op).cls == OpClass::Source;
    out += fmt::format("  n{} [label=\"%{} {} {}\\n{}{}\"{}];\n", id.value, id.value, op_name(node.op),
                       escape(attr_str(node.attr)), dtype_name(node.dtype), shape_str(node.shape),
                       source ? ", style=filled, fillcolor=\"#e8f0fe\"" : "");
    for (const Edge& edge : node.inputs)
      out += fmt::format("  n{} -> n{} [label=\"{}\"];\n", edge.src.value, id.value, escape(edge.view.str()));
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Output& output = graph.outputs()[i];
    out += fmt::format("  out{} [label=\"output {}\", shape=oval];\n  n{} -> out{} [label=\"{}\"];\n", i,
                       escape(output.name), output.edge.src.value, i, escape(output.edge.view.str()));
  }
  return out + "}\n";
}

}  // namespace spool
