// Text and Graphviz dumps of an e-graph.

#include <spool/egraph/dump.hpp>

#include <fmt/format.h>

namespace spool::egraph {

std::string dump_text(const EGraph& graph) {
  std::string out = fmt::format("e-graph: {} classes, {} nodes\n", graph.num_classes(), graph.num_nodes());
  for (ClassId c : graph.classes()) {
    out += fmt::format("c{}", c.value);
    if (graph.analysis()) {
      std::string d = graph.analysis()->describe(c);
      if (!d.empty()) out += " " + d;
    }
    out += " :";
    bool first = true;
    for (NodeId n : graph.class_nodes(c)) {
      out += first ? " " : " | ";
      out += graph.node_str(n);
      first = false;
    }
    out += "\n";
  }
  return out;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string dump_dot(const EGraph& graph) {
  std::string out = "digraph egraph {\n  compound=true;\n  clusterrank=local;\n";
  for (ClassId c : graph.classes()) {
    std::string label = fmt::format("c{}", c.value);
    if (graph.analysis()) {
      std::string d = graph.analysis()->describe(c);
      if (!d.empty()) label += " " + d;
    }
    out += fmt::format("  subgraph cluster_{} {{\n    style=dotted;\n    label=\"{}\";\n", c.value, escape(label));
    for (NodeId n : graph.class_nodes(c)) {
      const ENodeRef node = graph.node(n);
      std::string text = graph.ops().name(node.op);
      if (node.attr.value != 0) text += " " + graph.attrs().str(node.attr);
      out += fmt::format("    n{} [label=\"{}\"];\n", n.value, escape(text));
    }
    out += "  }\n";
  }
  for (ClassId c : graph.classes()) {
    for (NodeId n : graph.class_nodes(c)) {
      const ENodeRef node = graph.node(n);
      for (size_t i = 0; i < node.children.size(); ++i) {
        const ClassId child = graph.find_const(node.children[i]);
        // Point at the first node of the child class, clipped at its cluster.
        const NodeId target = graph.class_nodes(child)[0];
        out += fmt::format("  n{} -> n{} [lhead=cluster_{}, label=\"{}\"];\n", n.value, target.value, child.value, i);
      }
    }
  }
  return out + "}\n";
}

}  // namespace spool::egraph
