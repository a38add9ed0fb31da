// Stitching: the regions' extracted terms joined into one rolled program
// (each instance's term with its placeholders replaced by the values they
// stand for), and that program unrolled.

#include <spool/compile/compile.hpp>
#include <spool/egraph/hlir.hpp>
#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace spool {
namespace {

bool is_source(const Node& n) { return op_info(n.op).cls == OpClass::Source; }

}  // namespace

Graph Saturated::rolled_program(std::span<const egraph::Term> terms) const {
  if (terms.size() != regions.size()) fail("program: {} terms for {} regions", terms.size(), regions.size());
  std::vector<Graph> programs;
  for (size_t d = 0; d < regions.size(); ++d) {
    if (terms[d].roots.size() != regions[d].roots.size())
      fail("program: the term of region {} has {} roots, the region {}", d, terms[d].roots.size(),
           regions[d].roots.size());
    programs.push_back(egraph::hlir::to_graph(*regions[d].lang, terms[d]));
  }
  const std::vector<region::Instance>& instances = split.instances;
  const auto home = region::home_of(rolled, split);

  Graph out(rolled.name());
  size_t bound = rolled.id_bound();  // copied sources, and each instance's program at most once
  for (const region::Instance& inst : instances) bound += programs[inst.region].id_bound();
  out.reserve(bound);
  std::vector<NodeId> source_copy(rolled.id_bound());
  auto copy_source = [&](NodeId id) {
    if (!source_copy[id.value].valid()) {
      const Node& n = rolled.node(id);
      source_copy[id.value] = out.add_source(n.op, n.attr, n.dtype, n.shape);
    }
    return Edge{source_copy[id.value], {}};
  };
  auto compose = [&](const Edge& base, const View& view) {
    return Edge{base.src, compose_views(base.view, view, out.node(base.src).shape)};
  };
  // value[i][n]: node n of instance i's program, in `out`.
  std::vector<std::vector<Edge>> value(instances.size());
  std::vector<std::vector<bool>> on_path(instances.size());
  for (size_t i = 0; i < instances.size(); ++i) {
    value[i].resize(programs[instances[i].region].id_bound());
    on_path[i].resize(programs[instances[i].region].id_bound());
  }
  auto output_edge = [&](uint32_t i, uint32_t r) -> const Edge& {
    return programs[instances[i].region].outputs()[r].edge;
  };
  // The value of rolled node `id` in `out`: a copied source, or the output
  // of the instance computing it, built on demand (with everything it reads,
  // across instances) by an explicit depth-first walk.
  auto value_of = [&](NodeId id) -> Edge {
    if (is_source(rolled.node(id))) return copy_source(id);
    const auto [i0, r0] = home[id.value];
    SPOOL_ASSERT(i0 != UINT32_MAX, "rolled node %{} is computed by no region", id.value);
    struct Frame {
      uint32_t inst;
      NodeId node;
      size_t next = 0;
    };
    std::vector<Frame> stack{{i0, output_edge(i0, r0).src}};
    auto push = [&](uint32_t i, NodeId n) {
      if (value[i][n.value].src.valid()) return false;
      if (on_path[i][n.value]) fail("program: the region terms form a cycle");
      stack.push_back({i, n});
      return true;
    };
    while (!stack.empty()) {
      Frame& f = stack.back();
      const uint32_t i = f.inst;
      const NodeId n = f.node;
      if (value[i][n.value].src.valid()) {
        stack.pop_back();
        continue;
      }
      on_path[i][n.value] = true;
      const region::Instance& inst = instances[i];
      const Node& node = programs[inst.region].node(n);
      if (node.op == Op::Input || node.op == Op::Weight) {
        // A placeholder: the rolled node it stands for.
        const std::string& name = std::get<NameAttr>(node.attr).name;
        const size_t k = std::stoul(name.substr(std::string_view(region::kInputPrefix).size()));
        const NodeId m = inst.inputs.at(k);
        if (is_source(rolled.node(m))) {
          value[i][n.value] = copy_source(m);
        } else {
          const auto [j, r] = home[m.value];
          SPOOL_ASSERT(j != UINT32_MAX, "rolled node %{} is computed by no region", m.value);
          const Edge& e = output_edge(j, r);
          if (push(j, e.src)) continue;
          value[i][n.value] = compose(value[j][e.src.value], e.view);
        }
      } else if (is_source(node)) {
        value[i][n.value] = Edge{out.add_source(node.op, node.attr, node.dtype, node.shape), {}};
      } else {
        if (f.next < node.inputs.size()) {
          const NodeId child = node.inputs[f.next++].src;
          push(i, child);
          continue;
        }
        std::vector<Edge> inputs;
        for (const Edge& e : node.inputs) inputs.push_back(compose(value[i][e.src.value], e.view));
        Attr attr = node.attr;
        if (is_loop_marker(node.op)) {
          LoopAttr loop = std::get<LoopAttr>(node.attr);
          loop.loop = inst.loops.at(static_cast<size_t>(loop.loop - 1));
          attr = loop;
        }
        value[i][n.value] = Edge{out.add(node.op, std::move(inputs), attr), {}};
      }
      on_path[i][n.value] = false;
      stack.pop_back();
    }
    const Edge& e = output_edge(i0, r0);
    return compose(value[i0][e.src.value], e.view);
  };
  for (const Output& o : rolled.outputs()) out.add_output(o.name, compose(value_of(o.edge.src), o.edge.view));
  return out;
}

Graph Saturated::program(std::span<const egraph::Term> terms) const { return roll::unroll(rolled_program(terms)); }

}  // namespace spool
