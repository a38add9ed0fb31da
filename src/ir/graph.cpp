// The HLIR graph arena and type inference for every op class.

#include <spool/ir/graph.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <boost/container_hash/hash.hpp>
#include <cstdlib>
#include <unordered_set>

namespace spool {
namespace {

std::string_view name_of(Op op) { return op_name(op); }

void expect_arity(Op op, size_t got) {
  if (op_info(op).arity == kVariadic) {
    if (got == 0) fail("{}: expects at least one input", name_of(op));
    return;
  }
  if (static_cast<int>(got) != op_info(op).arity)
    fail("{}: expects {} input{}, got {}", name_of(op), op_info(op).arity, op_info(op).arity == 1 ? "" : "s", got);
}

void expect_attr(Op op, const Attr& attr) {
  if (attr_kind(attr) != op_info(op).attr) fail("{}: wrong attribute kind", name_of(op));
}

void expect_axis(Op op, int64_t axis, const Shape& shape) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    fail("{}: axis {} is out of range for {}", name_of(op), axis, shape_str(shape));
}

void expect_same_shape(Op op, const TensorType& lhs, const TensorType& rhs, const char* lname, const char* rname) {
  if (lhs.shape != rhs.shape)
    fail("{}: shapes differ: {} {} vs {} {}", name_of(op), lname, shape_str(lhs.shape), rname, shape_str(rhs.shape));
}

void expect_same_dtype(Op op, const TensorType& lhs, const TensorType& rhs, const char* lname, const char* rname) {
  if (lhs.dtype != rhs.dtype)
    fail("{}: dtypes differ: {} {} vs {} {}", name_of(op), lname, dtype_name(lhs.dtype), rname, dtype_name(rhs.dtype));
}

void expect_index_dtype(Op op, DType dtype) {
  if (!is_integer(dtype)) fail("{}: indices must be i32 or i64, got {}", name_of(op), dtype_name(dtype));
}

// Elementwise ops that are only defined for some dtypes.
void expect_operand_dtype(Op op, DType dtype) {
  switch (op) {
    case Op::Exp2:
    case Op::Log2:
    case Op::Sin:
    case Op::Sqrt:
    case Op::Recip:
      if (!is_float(dtype)) fail("{}: expects a floating dtype, got {}", name_of(op), dtype_name(dtype));
      return;
    case Op::Neg:
    case Op::Add:
    case Op::Mod:
    case Op::LessThan:
    case Op::TopK:
    case Op::SumReduce:
      if (!is_numeric(dtype)) fail("{}: not defined on bool", name_of(op));
      return;
    case Op::Not:
      if (dtype != DType::Bool) fail("{}: expects bool, got {}", name_of(op), dtype_name(dtype));
      return;
    case Op::Mul:
    case Op::Max:
    case Op::MaxReduce:
    case Op::Equal:
    case Op::Where:
    case Op::Cast:
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::GroupedMatmul:
    case Op::Input:
    case Op::Weight:
    case Op::Constant:
    case Op::Iota:
    case Op::LoopStart:
    case Op::LoopEnd:
    case Op::LoopInput:
    case Op::LoopInputStatic:
    case Op::LoopOutput:
    case Op::Fused:
    case Op::Gemm:
    case Op::Reduce:
    case Op::Softmax:
    case Op::RmsNorm:
    case Op::LayerNorm:
    case Op::Copy: return;
  }
  SPOOL_ASSERT(false, "bad op");
}

}  // namespace

void check_source(Op op, const Attr& attr, DType dtype, const Shape& shape) {
  if (op_info(op).cls != OpClass::Source) fail("{}: is not a source op", name_of(op));
  expect_attr(op, attr);
  for (int64_t d : shape)
    if (d < 0) fail("{}: negative dimension in {}", name_of(op), shape_str(shape));
  switch (op) {
    case Op::Input:
    case Op::Weight:
      if (std::get<NameAttr>(attr).name.empty()) fail("{}: name must not be empty", name_of(op));
      return;
    case Op::Constant:
      if (!shape.empty()) fail("constant: must be a scalar (shape []), got {}; broadcast it with expand", shape_str(shape));
      if (std::get<ScalarAttr>(attr).value.dtype != dtype)
        fail("constant: value of dtype {} in a node of dtype {}", dtype_name(std::get<ScalarAttr>(attr).value.dtype),
             dtype_name(dtype));
      return;
    case Op::Iota:
      expect_axis(op, std::get<AxisAttr>(attr).axis, shape);
      if (!is_numeric(dtype)) fail("iota: not defined on bool");
      return;
    default: SPOOL_ASSERT(false, "not a source op");
  }
}

TensorType infer_type(Op op, const std::vector<TensorType>& in, const Attr& attr) {
  expect_arity(op, in.size());
  expect_attr(op, attr);
  switch (op_info(op).cls) {
    case OpClass::Source: fail("{}: source ops have no inputs to infer from", name_of(op));
    case OpClass::Unary:
      expect_operand_dtype(op, in[0].dtype);
      return in[0];
    case OpClass::Cast: return {std::get<DTypeAttr>(attr).to, in[0].shape};
    case OpClass::Binary:
    case OpClass::Compare:
      expect_same_shape(op, in[0], in[1], "lhs", "rhs");
      expect_same_dtype(op, in[0], in[1], "lhs", "rhs");
      expect_operand_dtype(op, in[0].dtype);
      return {op_info(op).cls == OpClass::Compare ? DType::Bool : in[0].dtype, in[0].shape};
    case OpClass::Select:
      if (in[0].dtype != DType::Bool) fail("where: condition must be bool, got {}", dtype_name(in[0].dtype));
      expect_same_shape(op, in[0], in[1], "condition", "lhs");
      expect_same_shape(op, in[1], in[2], "lhs", "rhs");
      expect_same_dtype(op, in[1], in[2], "lhs", "rhs");
      return in[1];
    case OpClass::Reduce: {
      expect_operand_dtype(op, in[0].dtype);
      const int64_t axis = std::get<AxisAttr>(attr).axis;
      expect_axis(op, axis, in[0].shape);
      if (op == Op::MaxReduce && in[0].shape[static_cast<size_t>(axis)] == 0)
        fail("max_reduce: axis {} of {} is empty", axis, shape_str(in[0].shape));
      Shape shape = in[0].shape;
      shape.erase(shape.begin() + axis);
      return {in[0].dtype, shape};
    }
    case OpClass::Gather: {
      const int64_t axis = std::get<AxisAttr>(attr).axis;
      expect_index_dtype(op, in[1].dtype);
      expect_axis(op, axis, in[0].shape);
      if (in[0].shape.size() != in[1].shape.size())
        fail("gather: data {} and indices {} must have the same rank", shape_str(in[0].shape), shape_str(in[1].shape));
      for (size_t i = 0; i < in[0].shape.size(); ++i)
        if (static_cast<int64_t>(i) != axis && in[0].shape[i] != in[1].shape[i])
          fail("gather: data {} and indices {} differ on axis {} (only axis {} may differ)", shape_str(in[0].shape),
               shape_str(in[1].shape), i, axis);
      return {in[0].dtype, in[1].shape};
    }
    case OpClass::Scatter: {
      const int64_t axis = std::get<AxisAttr>(attr).axis;
      expect_operand_dtype(op, in[0].dtype);
      expect_index_dtype(op, in[1].dtype);
      expect_axis(op, axis, in[0].shape);
      expect_same_shape(op, in[1], in[2], "indices", "src");
      expect_same_dtype(op, in[0], in[2], "data", "src");
      if (in[0].shape.size() != in[1].shape.size())
        fail("scatter_add: data {} and indices {} must have the same rank", shape_str(in[0].shape),
             shape_str(in[1].shape));
      for (size_t i = 0; i < in[0].shape.size(); ++i)
        if (static_cast<int64_t>(i) != axis && in[0].shape[i] != in[1].shape[i])
          fail("scatter_add: data {} and indices {} differ on axis {} (only axis {} may differ)",
               shape_str(in[0].shape), shape_str(in[1].shape), i, axis);
      return in[0];
    }
    case OpClass::TopK: {
      expect_operand_dtype(op, in[0].dtype);
      const int64_t k = std::get<TopKAttr>(attr).k;
      if (in[0].shape.empty()) fail("topk: input must have at least one axis");
      if (k < 1 || k > in[0].shape.back())
        fail("topk: k = {} is out of range for {} (1..{})", k, shape_str(in[0].shape), in[0].shape.back());
      Shape shape = in[0].shape;
      shape.back() = k;
      return {DType::I64, shape};
    }
    case OpClass::Grouped: {
      const TensorType &rows = in[0], &w = in[1], &counts = in[2];
      if (!is_float(rows.dtype)) fail("grouped_matmul: rows must be floating, got {}", dtype_name(rows.dtype));
      expect_same_dtype(op, rows, w, "rows", "w");
      expect_index_dtype(op, counts.dtype);
      if (rows.shape.size() != 2 || w.shape.size() != 3 || counts.shape.size() != 1)
        fail("grouped_matmul: expects rows [R, K], w [G, N, K] and counts [G], got {}, {} and {}",
             shape_str(rows.shape), shape_str(w.shape), shape_str(counts.shape));
      if (w.shape[2] != rows.shape[1] || w.shape[0] != counts.shape[0])
        fail("grouped_matmul: rows {}, w {} and counts {} disagree (w must be [G, N, K] for rows [R, K], counts [G])",
             shape_str(rows.shape), shape_str(w.shape), shape_str(counts.shape));
      return {rows.dtype, {rows.shape[0], w.shape[1]}};
    }
    case OpClass::Kernel: return infer_kernel_type(op, in, attr);
    case OpClass::LoopMarker: {
      const LoopAttr& loop = std::get<LoopAttr>(attr);
      if (loop.trips < 1) fail("{}: loop {} has {} trips", name_of(op), loop.loop, loop.trips);
      if (op == Op::LoopInput) {
        if (static_cast<int64_t>(in.size()) != loop.trips)
          fail("loop_input: loop {} has {} trips but {} sources", loop.loop, loop.trips, in.size());
        for (size_t i = 1; i < in.size(); ++i)
          if (in[i] != in[0])
            fail("loop_input: source {} is {}{} but source 0 is {}{}", i, dtype_name(in[i].dtype),
                 shape_str(in[i].shape), dtype_name(in[0].dtype), shape_str(in[0].shape));
      }
      if (op == Op::LoopEnd && in[0] != in[1])
        fail("loop_end: the body value {}{} does not match its loop_start {}{}", dtype_name(in[0].dtype),
             shape_str(in[0].shape), dtype_name(in[1].dtype), shape_str(in[1].shape));
      if (op == Op::LoopOutput && (loop.index < 0 || loop.index >= loop.trips))
        fail("loop_output: iteration {} is out of range for {} trips", loop.index, loop.trips);
      return in[0];
    }
  }
  SPOOL_ASSERT(false, "bad op class");
}

TensorType Graph::edge_type(const Edge& edge) const {
  const Node& producer = node(edge.src);
  return {producer.dtype, edge.view.apply(producer.shape)};
}

TensorType Graph::infer(Op op, const std::vector<Edge>& inputs, const Attr& attr) const {
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (const Edge& edge : inputs) {
    if (!contains(edge.src)) fail("{}: input %{} is not a live node", name_of(op), edge.src.value);
    types.push_back(edge_type(edge));
  }
  return infer_type(op, types, attr);
}

void Graph::reserve(size_t nodes) {
  nodes_.reserve(nodes);
  use_count_.reserve(nodes);
}

NodeId Graph::push(Op op, DType dtype, Shape&& shape, Attr&& attr, std::vector<Edge>&& inputs) {
  return push(op, dtype, std::move(shape), std::move(attr),
              EdgeList(std::make_move_iterator(inputs.begin()), std::make_move_iterator(inputs.end())));
}

NodeId Graph::push(Op op, DType dtype, Shape&& shape, Attr&& attr, EdgeList&& inputs) {
  SPOOL_ASSERT(nodes_.size() < UINT32_MAX - 1, "graph exceeds 2^32 node ids");
  for (const Edge& e : inputs) ++use_count_[e.src.value];
  Node& node = nodes_.emplace_back(op, dtype, std::move(shape), std::move(attr), true);
  node.inputs = std::move(inputs);
  use_count_.push_back(0);
  holes_.clear();  // once add() hands out an id, no earlier hole may be filled
  ++num_live_;
  return NodeId{static_cast<uint32_t>(nodes_.size() - 1)};
}

NodeId Graph::add_known(Op op, EdgeList inputs, Attr attr, TensorType type) {
  for (const Edge& edge : inputs)
    if (!contains(edge.src)) fail("{}: input %{} is not a live node", name_of(op), edge.src.value);
  return push(op, type.dtype, std::move(type.shape), std::move(attr), std::move(inputs));
}

NodeId Graph::add(Op op, std::vector<Edge> inputs, Attr attr) {
  TensorType type = infer(op, inputs, attr);
  return push(op, type.dtype, std::move(type.shape), std::move(attr), std::move(inputs));
}

NodeId Graph::add_source(Op op, Attr attr, DType dtype, Shape shape) {
  check_source(op, attr, dtype, shape);
  return push(op, dtype, std::move(shape), std::move(attr), EdgeList{});
}

NodeId Graph::add_with_id(NodeId id, Op op, std::vector<Edge> inputs, Attr attr, DType dtype, Shape shape) {
  const bool is_hole = id.value < holes_.size() && holes_[id.value];
  if (id.value < nodes_.size() && !is_hole) fail("node %{} is defined twice", id.value);
  if (op_info(op).cls == OpClass::Source) {
    check_source(op, attr, dtype, shape);
  } else {
    TensorType type = infer(op, inputs, attr);
    if (type.dtype != dtype || type.shape != shape)
      fail("{}: declared type {}{} but the inputs give {}{}", name_of(op), dtype_name(dtype), shape_str(shape),
           dtype_name(type.dtype), shape_str(type.shape));
  }
  // Ids skipped on the way to `id` become holes: dead slots that a later
  // add_with_id may still fill (the text form lists nodes in topological
  // order, not id order). Ids handed out by add() are never holes.
  for (const Edge& e : inputs) ++use_count_[e.src.value];
  if (nodes_.size() <= id.value) {  // every id up to `id` becomes a hole at once
    const size_t from = nodes_.size();
    nodes_.resize(id.value + 1);
    for (size_t i = from; i < nodes_.size(); ++i) nodes_[i].alive = false;
    use_count_.resize(nodes_.size(), 0);
    holes_.resize(from, false);
    holes_.resize(nodes_.size(), true);
  }
  holes_[id.value] = false;
  Node& node = nodes_[id.value];
  node = Node{op, dtype, std::move(shape), std::move(attr), true};
  node.inputs.assign(std::make_move_iterator(inputs.begin()), std::make_move_iterator(inputs.end()));
  ++num_live_;
  return id;
}

void Graph::set_input(NodeId id, size_t index, Edge edge) {
  if (!contains(id)) fail("set_input: %{} is not a live node", id.value);
  Node& target = nodes_[id.value];
  if (index >= target.inputs.size())
    fail("set_input: {} %{} has {} inputs, not {}", name_of(target.op), id.value, target.inputs.size(), index + 1);
  const Edge& old = target.inputs[index];
  if (contains(edge.src) && edge.view == old.view && node(edge.src).dtype == node(old.src).dtype &&
      node(edge.src).shape == node(old.src).shape) {
    // The same view of a producer of the same type: the edge delivers the
    // type it did, and so the node keeps its own (the passes that rewire
    // readers to an equal value or to a loop marker take this path).
    --use_count_[old.src.value];
    ++use_count_[edge.src.value];
    target.inputs[index] = std::move(edge);
    return;
  }
  std::vector<Edge> inputs(target.inputs.begin(), target.inputs.end());
  inputs[index] = std::move(edge);
  const TensorType type = infer(target.op, inputs, target.attr);
  if (type.dtype != target.dtype || type.shape != target.shape)
    fail("set_input: {} %{} would change type from {}{} to {}{}", name_of(target.op), id.value,
         dtype_name(target.dtype), shape_str(target.shape), dtype_name(type.dtype), shape_str(type.shape));
  --use_count_[target.inputs[index].src.value];
  ++use_count_[inputs[index].src.value];
  target.inputs[index] = std::move(inputs[index]);
}

void Graph::remove(NodeId id) {
  if (!contains(id)) fail("remove: %{} is not a live node", id.value);
  if (use_count_[id.value] > 0) {  // the slow path only to name the reader
    for (const NodeId user : users(id)) fail("remove: %{} is still used by %{}", id.value, user.value);
    for (const Output& output : outputs_)
      if (output.edge.src == id) fail("remove: %{} is the output '{}'", id.value, output.name);
  }
  Node& dead = nodes_[id.value];
  for (const Edge& e : dead.inputs) --use_count_[e.src.value];
  dead.alive = false;
  dead.inputs.clear();
  --num_live_;
}

void Graph::add_output(std::string name, Edge edge) {
  if (!contains(edge.src)) fail("output '{}': %{} is not a live node", name, edge.src.value);
  if (name.empty()) fail("output: name must not be empty");
  // A model's graph has an output per layer and cache: compare hashes, and
  // names only where they agree.
  const size_t hash = std::hash<std::string>{}(name);
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (output_name_hashes_[i] == hash && outputs_[i].name == name) fail("output '{}' is defined twice", name);
  edge.view.apply(node(edge.src).shape);  // validates the view
  ++use_count_[edge.src.value];
  outputs_.push_back(Output{std::move(name), std::move(edge)});
  output_name_hashes_.push_back(hash);
}

void Graph::set_output(size_t index, Edge edge) {
  if (index >= outputs_.size()) fail("set_output: there are {} outputs, not {}", outputs_.size(), index + 1);
  const TensorType before = edge_type(outputs_[index].edge);
  if (!contains(edge.src)) fail("set_output: %{} is not a live node", edge.src.value);
  const TensorType after = edge_type(edge);
  if (before != after)
    fail("set_output: output '{}' would change type from {}{} to {}{}", outputs_[index].name, dtype_name(before.dtype),
         shape_str(before.shape), dtype_name(after.dtype), shape_str(after.shape));
  --use_count_[outputs_[index].edge.src.value];
  ++use_count_[edge.src.value];
  outputs_[index].edge = std::move(edge);
}

void Graph::replace_uses(NodeId old, const Edge& replacement) {
  if (use_count_[old.value] == 0) return;
  const Shape source = node(replacement.src).shape;
  auto rewired = [&](const Edge& edge) {
    return Edge{replacement.src, compose_views(replacement.view, edge.view, source)};
  };
  for (const NodeId user : users(old)) {
    const size_t count = nodes_[user.value].inputs.size();
    for (size_t i = 0; i < count; ++i)
      if (nodes_[user.value].inputs[i].src == old) set_input(user, i, rewired(nodes_[user.value].inputs[i]));
  }
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i].edge.src == old) set_output(i, rewired(outputs_[i].edge));
}

Graph compacted(const Graph& graph) {
  // Output-driven post-order, then whatever no output reaches.
  std::vector<NodeId> order;
  std::vector<bool> seen(graph.id_bound(), false);
  std::vector<std::pair<NodeId, size_t>> stack;  // node, next input to visit
  auto visit = [&](NodeId root) {
    if (seen[root.value]) return;
    seen[root.value] = true;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const Node& n = graph.node(id);
      if (next < n.inputs.size()) {
        const NodeId src = n.inputs[next++].src;
        if (!seen[src.value]) {
          seen[src.value] = true;
          stack.push_back({src, 0});
        }
        continue;
      }
      order.push_back(id);
      stack.pop_back();
    }
  };
  graph.topo_order();  // fails on a cycle before the walk could loop
  for (const Output& o : graph.outputs()) visit(o.edge.src);
  for (const NodeId id : graph.topo_order()) visit(id);

  Graph out(graph.name());
  std::vector<NodeId> remap(graph.id_bound());
  for (const NodeId id : order) {
    const Node& n = graph.node(id);
    std::vector<Edge> inputs;
    for (const Edge& e : n.inputs) inputs.push_back(Edge{remap[e.src.value], e.view});
    remap[id.value] = op_info(n.op).cls == OpClass::Source ? out.add_source(n.op, n.attr, n.dtype, n.shape)
                                                           : out.add(n.op, std::move(inputs), n.attr);
  }
  for (const Output& o : graph.outputs()) out.add_output(o.name, Edge{remap[o.edge.src.value], o.edge.view});
  return out;
}

namespace {
// Inputs and weights are the same value exactly when their names are.
bool named_value(Op op) { return op == Op::Input || op == Op::Weight; }
}  // namespace

Graph cse(Graph graph) {
  Graph out = std::move(graph);
  // Nodes in topological order, each with its inputs already rewired to
  // the first node of their value: a node equals an earlier one when op,
  // attribute, type and input edges agree (inputs and weights: when their
  // names do). Hashed and compared in place, nothing copied per node.
  struct Hash {
    const Graph* g;
    size_t operator()(NodeId id) const {
      const Node& n = g->node(id);
      size_t seed = static_cast<size_t>(n.op);
      boost::hash_combine(seed, hash_attr(n.attr));
      if (!named_value(n.op)) {
        boost::hash_combine(seed, static_cast<int>(n.dtype));
        boost::hash_range(seed, n.shape.begin(), n.shape.end());
      }
      for (const Edge& e : n.inputs) {
        boost::hash_combine(seed, e.src.value);
        boost::hash_combine(seed, e.view.hash());
      }
      return seed;
    }
  };
  struct Same {
    const Graph* g;
    bool operator()(NodeId a, NodeId b) const {
      const Node& x = g->node(a);
      const Node& y = g->node(b);
      if (x.op != y.op || x.attr != y.attr) return false;
      if (!named_value(x.op) && (x.dtype != y.dtype || x.shape != y.shape)) return false;
      return std::equal(x.inputs.begin(), x.inputs.end(), y.inputs.begin(), y.inputs.end());
    }
  };
  std::unordered_set<NodeId, Hash, Same> canonical(out.num_live(), Hash{&out}, Same{&out});
  std::vector<NodeId> first(out.id_bound());  // per node: the node of its value
  std::vector<NodeId> duplicates;
  for (const NodeId id : out.topo_order()) {
    first[id.value] = id;
    const size_t count = out.node(id).inputs.size();
    for (size_t i = 0; i < count; ++i) {
      const Edge& e = out.node(id).inputs[i];
      if (first[e.src.value] != e.src) out.set_input(id, i, Edge{first[e.src.value], e.view});
    }
    const auto [it, fresh] = canonical.insert(id);
    if (fresh) continue;
    const Node& n = out.node(id);
    if (named_value(n.op)) {
      const Node& earlier = out.node(*it);
      if (earlier.dtype != n.dtype || earlier.shape != n.shape)
        fail("cse: {} '{}' is declared as both {}{} and {}{}", op_name(n.op), std::get<NameAttr>(n.attr).name,
             dtype_name(earlier.dtype), shape_str(earlier.shape), dtype_name(n.dtype), shape_str(n.shape));
    }
    first[id.value] = *it;
    duplicates.push_back(id);
  }
  for (size_t i = 0; i < out.outputs().size(); ++i) {
    const Edge& e = out.outputs()[i].edge;
    if (first[e.src.value] != e.src) out.set_output(i, Edge{first[e.src.value], e.view});
  }
  // Every reader now reads the first node of the value (a duplicate reads
  // only first nodes itself).
  for (const NodeId id : duplicates) out.remove(id);
  return out;
}

void Graph::not_live(NodeId id) const {
  SPOOL_ASSERT(false, "node %{} is not live", id.value);
  std::abort();
}

std::vector<NodeId> Graph::live_ids() const {
  std::vector<NodeId> ids;
  ids.reserve(num_live_);
  for (uint32_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].alive) ids.push_back(NodeId{i});
  return ids;
}

std::vector<NodeId> Graph::users(NodeId id) const {
  std::vector<NodeId> result;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].alive) continue;
    for (const Edge& edge : nodes_[i].inputs)
      if (edge.src == id) {
        result.push_back(NodeId{i});
        break;
      }
  }
  return result;
}

void Graph::verify() const {
  topo_order();  // throws on a cycle
  for (const NodeId id : live_ids()) {
    const Node& n = node(id);
    if (op_info(n.op).cls == OpClass::Source) {
      check_source(n.op, n.attr, n.dtype, n.shape);
      continue;
    }
    std::vector<Edge> inputs(n.inputs.begin(), n.inputs.end());
    const TensorType type = infer(n.op, inputs, n.attr);
    if (type.dtype != n.dtype || type.shape != n.shape)
      fail("{} %{}: has type {}{} but its inputs give {}{}", name_of(n.op), id.value, dtype_name(n.dtype),
           shape_str(n.shape), dtype_name(type.dtype), shape_str(type.shape));
  }
}

bool Graph::operator==(const Graph& other) const {
  if (name_ != other.name_ || outputs_ != other.outputs_ || num_live_ != other.num_live_) return false;
  const size_t bound = std::max(nodes_.size(), other.nodes_.size());
  for (uint32_t i = 0; i < bound; ++i) {
    const bool mine = contains(NodeId{i});
    if (mine != other.contains(NodeId{i})) return false;
    if (mine && !(nodes_[i] == other.nodes_[i])) return false;
  }
  return true;
}

}  // namespace spool
