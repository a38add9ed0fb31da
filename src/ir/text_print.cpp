// The HLIR printer. See text.hpp for the grammar.

#include <spool/ir/text.hpp>

namespace spool {
namespace {

std::string operand_str(const Edge& edge) {
  std::string out = fmt::format("%{}", edge.src.value);
  if (!edge.view.is_identity()) out += " <" + edge.view.str() + ">";
  return out;
}

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string print_graph(const Graph& graph) {
  const bool plain_name = !graph.name().empty() &&
                          graph.name().find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789_.-") == std::string::npos;
  std::string out = fmt::format("graph {} {{\n", plain_name ? graph.name() : quote(graph.name()));
  for (const NodeId id : graph.topo_order()) {
    const Node& node = graph.node(id);
    out += fmt::format("  %{} = {}", id.value, op_name(node.op));
    if (op_info(node.op).cls != OpClass::Source) {
      out += '(';
      for (size_t i = 0; i < node.inputs.size(); ++i) out += (i ? ", " : "") + operand_str(node.inputs[i]);
      out += ')';
    }
    const std::string attr = attr_str(node.attr);
    if (!attr.empty()) out += ' ' + attr;
    out += fmt::format(" : {}{}\n", dtype_name(node.dtype), shape_str(node.shape));
  }
  for (const Output& output : graph.outputs())
    out += fmt::format("  output {} = {}\n", quote(output.name), operand_str(output.edge));
  return out + "}\n";
}

}  // namespace spool
