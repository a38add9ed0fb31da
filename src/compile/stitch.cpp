// Stitching: the regions' extracted terms joined into one rolled program
// (each instance's term with its placeholders replaced by the values they
// stand for), and that program unrolled.

#include <spool/compile/compile.hpp>
#include <spool/hlir/language.hpp>
#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>
#include <spool/support/fault.hpp>

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

namespace spool::compile {
namespace {

// A region's term read as a program, once per region: what to_graph would
// build, without building it. Term node t is read through `edges[t]`: a
// non-view term node and the views on the way to it, composed as to_graph
// composes them. Non-view nodes carry their op, attribute and type (inferred
// from the inputs as Graph::add would); a placeholder "@in.K" also carries K,
// the region input it stands for.
struct TermProgram {
  struct Entry {
    Op op = Op::Input;
    const Attr* attr = nullptr;
    TensorType type;
    size_t placeholder = SIZE_MAX;  // K of "@in.K" (inputs and weights)
  };
  struct TermEdge {
    uint32_t base = 0;  // a non-view term node
    View view;
  };
  std::vector<Entry> entries;  // by term node; view nodes leave theirs empty
  std::vector<TermEdge> edges;
  size_t num_nodes = 0;  // non-view term nodes
};

TermProgram read_term(const hlir::HlirLanguage& lang, const egraph::Term& term) {
  static const Attr kNoAttr = NoAttr{};
  TermProgram p;
  p.entries.resize(term.nodes.size());
  p.edges.resize(term.nodes.size());
  std::vector<TensorType> types;
  for (size_t i = 0; i < term.nodes.size(); ++i) {
    const egraph::Term::Node& n = term.nodes[i];
    for (const uint32_t c : n.children)
      if (c >= i) fail("program: term node {} reads node {}, which does not come before it", i, c);
    if (n.op == lang.view_op()) {
      TermProgram::TermEdge e = p.edges[n.children.at(0)];
      const Shape& source = p.entries[e.base].type.shape;
      for (const ViewStep& step : lang.payload(n.attr).view->steps()) e.view.append(step, source, "view");
      p.edges[i] = std::move(e);
      continue;
    }
    TermProgram::Entry& entry = p.entries[i];
    entry.op = *lang.hlir_op(n.op);
    entry.attr = n.attr.value == 0 ? &kNoAttr : &lang.payload(n.attr).attr;
    p.edges[i].base = static_cast<uint32_t>(i);
    ++p.num_nodes;
    if (is_source(entry.op)) {
      entry.type = *lang.payload(n.attr).type;
      check_source(entry.op, *entry.attr, entry.type.dtype, entry.type.shape);
      if (entry.op == Op::Input || entry.op == Op::Weight) {
        const std::string_view name = std::get<NameAttr>(*entry.attr).name;
        const std::string_view prefix = kInputPrefix;
        size_t k = 0;
        const char* end = name.data() + name.size();
        const auto [ptr, ec] = name.starts_with(prefix)
                                   ? std::from_chars(name.data() + prefix.size(), end, k)
                                   : std::from_chars_result{name.data(), std::errc::invalid_argument};
        if (ec != std::errc() || ptr != end) fail("program: a region reads '{}', which is no placeholder", name);
        entry.placeholder = k;
      }
      continue;
    }
    types.clear();
    for (const uint32_t c : n.children) {
      const TermProgram::TermEdge& e = p.edges[c];
      const TensorType& t = p.entries[e.base].type;
      types.push_back(e.view.is_identity() ? t : TensorType{t.dtype, e.view.apply(t.shape)});
    }
    entry.type = infer_type(entry.op, types, *entry.attr);
  }
  return p;
}

}  // namespace

// Long because it is one explicit depth-first walk over every instance's
// term, whose steps share the walk's state (the values built so far, the
// path, the copied sources); its lambdas are those steps.
Graph Saturated::rolled_program(std::span<const egraph::Term> terms) const {
  if (terms.size() != regions.size()) fail("program: {} terms for {} regions", terms.size(), regions.size());
  std::vector<TermProgram> programs;
  programs.reserve(regions.size());
  for (size_t d = 0; d < regions.size(); ++d) {
    if (terms[d].roots.size() != regions[d].roots.size())
      fail("program: the term of region {} has {} roots, the region {}", d, terms[d].roots.size(),
           regions[d].roots.size());
    for (const uint32_t r : terms[d].roots)
      if (r >= terms[d].nodes.size()) fail("program: a root of region {} is term node {} of {}", d, r, terms[d].nodes.size());
    programs.push_back(read_term(*regions[d].lang, terms[d]));
  }
  const std::vector<Instance>& instances = split.instances;
  const auto home = home_of(rolled, split);

  Graph out(rolled.name());
  size_t bound = rolled.id_bound();  // copied sources, and each instance's program at most once
  for (const Instance& inst : instances) bound += programs[inst.region].num_nodes;
  out.reserve(bound);
  std::vector<NodeId> source_copy(rolled.id_bound());
  auto copy_source = [&](NodeId id) {
    if (!source_copy[id.value].valid()) {
      const Node& n = rolled.node(id);
      source_copy[id.value] = out.add_source(n.op, n.attr, n.dtype, n.shape);
    }
    return Edge{source_copy[id.value], {}};
  };
  // A value no region computes: a graph source, or a loop input of graph
  // sources that split keeps out of the regions, copied once.
  auto copy_outside = [&](NodeId id) {
    const Node& n = rolled.node(id);
    if (is_source(n.op)) return copy_source(id);
    SPOOL_ASSERT(n.op == Op::LoopInput,
                 "rolled node %{} is read from outside the regions but is neither a source nor a loop input of "
                 "sources (a region reads only its placeholders' nodes and the roots of other regions)",
                 id.value);
    if (!source_copy[id.value].valid()) {
      EdgeList sources;
      sources.reserve(n.inputs.size());
      for (const Edge& e : n.inputs) sources.push_back(Edge{copy_source(e.src).src, e.view});
      source_copy[id.value] = out.add_known(n.op, std::move(sources), n.attr, TensorType{n.dtype, n.shape});
    }
    return Edge{source_copy[id.value], {}};
  };
  auto compose = [&](const Edge& base, const View& view) {
    if (view.is_identity()) return base;  // what compose_views gives: the base's own view
    return Edge{base.src, compose_views(base.view, view, out.node(base.src).shape)};
  };
  // A term edge's view was built by View::append on the type of its base
  // node, which a value without a view of its own has (see value_of). A
  // view so built is canonical (no identity step, no two steps append would
  // merge): appending its steps again to the identity on that shape, which
  // is all compose_views would do, gives it back unchanged.
  auto compose_term = [&](const Edge& base, const TermProgram::TermEdge& e) {
    if (!e.view.is_identity() && base.view.is_identity()) return Edge{base.src, e.view};
    return compose(base, e.view);
  };
  // value[i][t]: non-view term node t of instance i's region, in `out`.
  std::vector<std::vector<Edge>> value(instances.size());
  std::vector<std::vector<bool>> on_path(instances.size());
  for (size_t i = 0; i < instances.size(); ++i) {
    value[i].resize(programs[instances[i].region].entries.size());
    on_path[i].resize(programs[instances[i].region].entries.size());
  }
  auto output_edge = [&](uint32_t i, uint32_t r) -> const TermProgram::TermEdge& {
    const size_t d = instances[i].region;
    return programs[d].edges[terms[d].roots[r]];
  };
  struct Frame {
    uint32_t inst;
    uint32_t node;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  // The value of rolled node `id` in `out`: a copied source, or the output
  // of the instance computing it, built on demand (with everything it reads,
  // across instances) by an explicit depth-first walk. Every node is built
  // with the type its term gives it: a placeholder is checked to receive a
  // value of its own type, so every node reads inputs of the types its term
  // node reads, and inferring its type again would give the same.
  auto value_of = [&](NodeId id) -> Edge {
    const auto [i0, r0] = home[id.value];
    if (i0 == UINT32_MAX) return copy_outside(id);
    stack.assign(1, Frame{i0, output_edge(i0, r0).base});
    auto push = [&](uint32_t i, uint32_t t) {
      if (value[i][t].src.valid()) return false;
      if (on_path[i][t]) fail("program: the region terms form a cycle");
      stack.push_back({i, t});
      return true;
    };
    while (!stack.empty()) {
      Frame& f = stack.back();
      const uint32_t i = f.inst;
      const uint32_t t = f.node;
      if (value[i][t].src.valid()) {
        stack.pop_back();
        continue;
      }
      on_path[i][t] = true;
      const Instance& inst = instances[i];
      const TermProgram& program = programs[inst.region];
      const TermProgram::Entry& node = program.entries[t];
      if (node.placeholder != SIZE_MAX) {
        // A placeholder: the rolled node it stands for.
        NodeId m = inst.inputs.at(node.placeholder);
        if (fault::planted(fault::Fault::StitchSwapsInputs) && node.placeholder < 2 && inst.inputs.size() >= 2) {
          // Swapped only between values of one type, so the type check below holds.
          const NodeId other = inst.inputs[1 - node.placeholder];
          const Node &a = rolled.node(m), &b = rolled.node(other);
          if (a.dtype == b.dtype && a.shape == b.shape) m = other;
        }
        Edge v;
        if (home[m.value].first == UINT32_MAX) {
          v = copy_outside(m);
        } else {
          const auto [j, r] = home[m.value];
          const TermProgram::TermEdge& e = output_edge(j, r);
          if (push(j, e.base)) continue;
          v = compose_term(value[j][e.base], e);
        }
        const Node& src = out.node(v.src);
        if (src.dtype != node.type.dtype ||
            (v.view.is_identity() ? src.shape != node.type.shape : v.view.apply(src.shape) != node.type.shape))
          fail("program: placeholder {}{} of region {} receives a value of another type", kInputPrefix,
               node.placeholder, inst.region);
        value[i][t] = std::move(v);
      } else if (is_source(node.op)) {
        value[i][t] = Edge{out.add_source(node.op, *node.attr, node.type.dtype, node.type.shape), {}};
      } else {
        const auto& children = terms[inst.region].nodes[t].children;
        if (f.next < children.size()) {
          const uint32_t child = program.edges[children[f.next++]].base;
          push(i, child);
          continue;
        }
        EdgeList inputs;
        for (const uint32_t c : children) {
          const TermProgram::TermEdge& e = program.edges[c];
          inputs.push_back(compose_term(value[i][e.base], e));
        }
        Attr attr = *node.attr;
        if (is_loop_marker(node.op)) {
          LoopAttr& loop = std::get<LoopAttr>(attr);
          loop.loop = inst.loops.at(static_cast<size_t>(loop.loop - 1));
        }
        value[i][t] = Edge{out.add_known(node.op, std::move(inputs), std::move(attr), node.type), {}};
      }
      on_path[i][t] = false;
      stack.pop_back();
    }
    return compose_term(value[i0][output_edge(i0, r0).base], output_edge(i0, r0));
  };
  for (const Output& o : rolled.outputs()) out.add_output(o.name, compose(value_of(o.edge.src), o.edge.view));
  return out;
}

// A value a loop exports (loop_output) may be built twice by unrolling (once
// from the loop, once from a chain the extraction took it from): cse() keeps one.
Graph Saturated::program(std::span<const egraph::Term> terms) const { return cse(roll::unroll(rolled_program(terms))); }

}  // namespace spool::compile
