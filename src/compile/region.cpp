// split: the rolled graph cut into regions, each rebuilt as a small
// graph in a canonical form (see region.hpp).
//
// Every live computed node is assigned to a region: the body region of the
// innermost long loop holding it, else the top-level region 0. A loop's
// markers sit in the region that holds the loop (its parent's), so a long
// loop's region is its bare body, read through placeholders for the markers.
// The canonical form comes from one depth-first walk per region from its
// roots (in order; inputs in input order; producers first).
//
// A static loop input that is a source or is computed by a small marker-free
// cone (a scalar, a RoPE table, a causal mask) is read by the body as a copy
// of that source or cone rather than a
// placeholder: one e-graph for the whole graph would see the cone through
// `loop_input_static x == x` and could fuse it into the body's kernels, and
// the body's region must be able to do the same. A loop_input whose sources
// are all one edge is static too (rules/loops.rules makes it so in the
// e-graph), and is read the same way. A loop input of distinct graph
// sources (a layer's weights) is computed by no region: regions read it
// through a placeholder and the stitch copies it, as it copies a source.

#include <spool/compile/region.hpp>
#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <map>

namespace spool::compile {
namespace {

// Whether two sources are one leaf in a region's e-graph: regions copy
// constants and iotas by value, and read every other source through a
// placeholder of its own (two weight nodes of one name are two leaves).
bool same_leaf(const Graph& rolled, NodeId a, NodeId b) {
  return a == b || same_value(rolled.node(a), rolled.node(b));
}

// Whether a loop marker is a loop input of sources read as they are, not all
// one leaf, so that no rule can prove them all equal (see split).
bool is_passed_through(const Graph& rolled, NodeId id) {
  const Node& n = rolled.node(id);
  if (n.op != Op::LoopInput) return false;
  bool all_same = true;
  for (const Edge& e : n.inputs) {
    if (!is_source(rolled.node(e.src).op) || !e.view.is_identity()) return false;
    all_same &= same_leaf(rolled, e.src, n.inputs[0].src);
  }
  return !all_same;
}

// Builds one region's graph from the rolled graph.
// Static loop inputs whose cone of computed producers has at most this many
// nodes are copied into the regions that read them.
constexpr size_t kMaxCopiedCone = 64;

class Builder {
 public:
  // `copied_cone[e]`: static loop input e is read as a copy of its cone.
  // `size`: the region's own nodes (the graph is reserved for them, their
  // placeholders and copies).
  Builder(const Graph& rolled, const std::vector<int>& region_of, const std::vector<bool>& copied_cone, int region,
          size_t size)
      : rolled_(rolled),
        region_of_(region_of),
        copied_cone_(copied_cone),
        region_(region),
        mapped_(rolled.id_bound()),
        copying_(rolled.id_bound(), false) {
    graph_.reserve(2 * size + 64);
  }

  void add_root(NodeId root) {
    instance_.roots.push_back(root);
    graph_.add_output(fmt::format("@out.{}", instance_.roots.size() - 1), Edge{build(root), {}});
  }

  Graph& graph() { return graph_; }
  Instance& instance() { return instance_; }
  // The region's id of rolled loop `loop`, or 0 if the region never saw it.
  int64_t local_loop(int64_t loop) const {
    const auto it = std::find(instance_.loops.begin(), instance_.loops.end(), loop);
    return it == instance_.loops.end() ? 0 : (it - instance_.loops.begin()) + 1;
  }

 private:
  NodeId build(NodeId root) {
    struct Frame {
      NodeId id;
      size_t next = 0;
    };
    std::vector<Frame> stack{{root}};
    while (!stack.empty()) {
      const NodeId id = stack.back().id;
      if (mapped_[id.value].valid()) {
        stack.pop_back();
        continue;
      }
      const Node& n = rolled_.node(id);
      if (region_of_[id.value] != region_ && !copying_[id.value]) {
        if (copied_cone_[id.value]) {
          // The static input is its source: build the source's cone here.
          const NodeId source = n.inputs[0].src;
          if (mapped_[source.value].valid()) {
            mapped_[id.value] = mapped_[source.value];
            stack.pop_back();
          } else {
            mark_cone(source);
            stack.push_back({source});
          }
          continue;
        }
        mapped_[id.value] = leaf(id);
        stack.pop_back();
        continue;
      }
      if (stack.back().next < n.inputs.size()) {
        const NodeId child = n.inputs[stack.back().next++].src;
        if (!mapped_[child.value].valid()) stack.push_back({child});
        continue;
      }
      EdgeList inputs;
      for (const Edge& e : n.inputs) inputs.push_back(Edge{mapped_[e.src.value], e.view});
      Attr attr = n.attr;
      if (is_loop_marker(n.op)) {
        LoopAttr loop = std::get<LoopAttr>(n.attr);
        loop.loop = canonical_loop(loop.loop);
        attr = loop;
      }
      // The inputs have the types the rolled node reads (built nodes, and
      // placeholders or copies typed as what they stand for): so has the node.
      mapped_[id.value] = graph_.add_known(n.op, std::move(inputs), attr, TensorType{n.dtype, n.shape});
      stack.pop_back();
    }
    return mapped_[root.value];
  }

  void mark_cone(NodeId root) {
    std::vector<NodeId> stack{root};
    while (!stack.empty()) {
      const NodeId id = stack.back();
      stack.pop_back();
      if (copying_[id.value] || is_source(rolled_.node(id).op)) continue;
      copying_[id.value] = true;
      for (const Edge& e : rolled_.node(id).inputs) stack.push_back(e.src);
    }
  }

  // A value read from outside the region: a copy of a constant or iota, or a
  // placeholder of its type (a weight stays a weight, anything else is an input).
  NodeId leaf(NodeId id) {
    const Node& n = rolled_.node(id);
    if (is_value_source(n)) return graph_.add_source(n.op, n.attr, n.dtype, n.shape);
    const std::string name = kInputPrefix + std::to_string(instance_.inputs.size());
    instance_.inputs.push_back(id);
    return graph_.add_source(n.op == Op::Weight ? Op::Weight : Op::Input, NameAttr{name}, n.dtype, n.shape);
  }

  int64_t canonical_loop(int64_t loop) {
    if (const int64_t local = local_loop(loop)) return local;
    instance_.loops.push_back(loop);
    return static_cast<int64_t>(instance_.loops.size());
  }

  const Graph& rolled_;
  const std::vector<int>& region_of_;
  const std::vector<bool>& copied_cone_;
  int region_;
  std::vector<NodeId> mapped_;  // rolled node -> its node in graph_
  std::vector<bool> copying_;   // nodes of a copied cone, built here whatever their region
  Graph graph_{"region"};
  Instance instance_;
};

}  // namespace

Split split(const Graph& rolled, int64_t max_union_trips, bool separate_loops) {
  const std::vector<roll::Loop> loops = roll::find_loops(rolled);  // outermost first
  std::map<int64_t, size_t> index_of;
  for (size_t i = 0; i < loops.size(); ++i) index_of[loops[i].id] = i;

  // A loop gets its own region if it is long or holds a loop that has one
  // (a short loop is unrolled in its parent's e-graph, which needs its whole
  // body there).
  std::vector<bool> own(loops.size(), false);
  for (size_t i = loops.size(); i-- > 0;) {
    own[i] = own[i] || loops[i].trips > max_union_trips;
    if (own[i] && loops[i].parent >= 0) own[index_of.at(loops[i].parent)] = true;
  }
  std::vector<int> body_region(loops.size(), 0), marker_region(loops.size(), 0);
  int num_regions = 1;
  for (size_t i = 0; i < loops.size(); ++i) {
    const int parent = loops[i].parent < 0 ? 0 : body_region[index_of.at(loops[i].parent)];
    marker_region[i] = parent;
    body_region[i] = own[i] && separate_loops ? num_regions++ : parent;
  }

  const std::vector<NodeId> live = rolled.live_ids();
  std::vector<int> region_of(rolled.id_bound(), -1);
  for (const NodeId id : live)
    if (!is_source(rolled.node(id).op)) region_of[id.value] = 0;
  for (size_t i = 0; i < loops.size(); ++i)  // outermost first: the innermost wins
    for (const NodeId n : loops[i].body) region_of[n.value] = body_region[i];
  for (size_t i = 0; i < loops.size(); ++i) {
    for (const NodeId n : loops[i].entries) region_of[n.value] = marker_region[i];
    for (const NodeId n : loops[i].exits) region_of[n.value] = marker_region[i];
  }
  // A loop input of a loop with its own region whose sources are graph
  // sources, read without a view, not all one leaf (a layer's weight, one
  // per iteration), is in no region: every region reads it through a
  // placeholder, as it reads a graph source, and the stitch copies it. No
  // rule can rewrite it: loop-input-same-sources needs its sources proven
  // equal, and different leaves never are. It would be most of the
  // top-level e-graph.
  for (size_t i = 0; i < loops.size(); ++i) {
    if (body_region[i] == marker_region[i]) continue;
    for (const NodeId n : loops[i].entries)
      if (is_passed_through(rolled, n)) region_of[n.value] = -1;
  }

  // Static loop inputs read as copies of their cones: a small cone of
  // computed nodes, no loop marker in it, read without a view.
  std::vector<bool> copied_cone(rolled.id_bound(), false);
  for (const roll::Loop& loop : loops)
    for (const NodeId entry : loop.entries) {
      const Node& e = rolled.node(entry);
      const bool one_source =
          e.op == Op::LoopInputStatic ||
          (e.op == Op::LoopInput &&
           std::all_of(e.inputs.begin(), e.inputs.end(), [&](const Edge& in) { return in == e.inputs[0]; }));
      if (!one_source || !e.inputs[0].view.is_identity()) continue;
      std::vector<bool> seen(rolled.id_bound(), false);
      std::vector<NodeId> stack{e.inputs[0].src};
      size_t size = 0;
      bool ok = true;
      while (!stack.empty() && ok) {
        const NodeId id = stack.back();
        stack.pop_back();
        const Node& n = rolled.node(id);
        if (seen[id.value] || is_source(n.op)) continue;
        seen[id.value] = true;
        ok = !is_loop_marker(n.op) && ++size <= kMaxCopiedCone;
        for (const Edge& in : n.inputs) stack.push_back(in.src);
      }
      copied_cone[entry.value] = ok;
    }

  // Roots: values read from another region or by a graph output. A static
  // input read as a copy of its cone is not read from its region: every
  // region reading it builds the cone itself.
  std::vector<bool> is_root(rolled.id_bound(), false);
  for (const NodeId id : live)
    for (const Edge& e : rolled.node(id).inputs)
      if (region_of[e.src.value] >= 0 && region_of[id.value] != region_of[e.src.value] && !copied_cone[e.src.value])
        is_root[e.src.value] = true;
  for (const Output& o : rolled.outputs())
    if (region_of[o.edge.src.value] >= 0) is_root[o.edge.src.value] = true;
  std::vector<std::vector<NodeId>> roots(static_cast<size_t>(num_regions));
  std::vector<size_t> size(static_cast<size_t>(num_regions), 0);
  for (const NodeId id : live) {
    if (is_root[id.value]) roots[static_cast<size_t>(region_of[id.value])].push_back(id);
    if (region_of[id.value] >= 0) ++size[static_cast<size_t>(region_of[id.value])];
  }

  Split result;
  // Distinct regions by size; equal graphs (same canonical nodes and
  // outputs) with the same short loops are the same region.
  std::map<std::pair<size_t, size_t>, std::vector<size_t>> by_size;
  for (int r = 0; r < num_regions; ++r) {
    if (roots[static_cast<size_t>(r)].empty()) continue;  // nothing in it is read
    Builder builder(rolled, region_of, copied_cone, r, size[static_cast<size_t>(r)]);
    for (const NodeId root : roots[static_cast<size_t>(r)]) builder.add_root(root);
    RegionGraph region{std::move(builder.graph()), {}};
    for (size_t i = 0; i < loops.size(); ++i)
      if (!own[i] && body_region[i] == r)
        if (const int64_t local = builder.local_loop(loops[i].id)) region.short_loops.push_back(local);
    std::sort(region.short_loops.begin(), region.short_loops.end());
    Instance instance = std::move(builder.instance());
    std::vector<size_t>& same_size = by_size[{region.graph.id_bound(), region.graph.outputs().size()}];
    const auto same = std::find_if(same_size.begin(), same_size.end(), [&](size_t d) {
      return result.regions[d].short_loops == region.short_loops && result.regions[d].graph == region.graph;
    });
    if (same != same_size.end()) {
      instance.region = *same;
    } else {
      instance.region = result.regions.size();
      same_size.push_back(instance.region);
      result.regions.push_back(std::move(region));
    }
    result.instances.push_back(std::move(instance));
  }
  return result;
}

std::vector<std::pair<uint32_t, uint32_t>> home_of(const Graph& rolled, const Split& split) {
  std::vector<std::pair<uint32_t, uint32_t>> home(rolled.id_bound(), {UINT32_MAX, 0});
  for (size_t i = 0; i < split.instances.size(); ++i)
    for (size_t r = 0; r < split.instances[i].roots.size(); ++r)
      home[split.instances[i].roots[r].value] = {static_cast<uint32_t>(i), static_cast<uint32_t>(r)};
  return home;
}

}  // namespace spool::compile
