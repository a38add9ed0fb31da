// spool::Tensor: graph building with views, broadcasting and scalar operands.

#include <spool/ir/tensor.hpp>
#include <spool/support/error.hpp>

namespace spool {

Tensor::Tensor(Graph* graph, NodeId node, View view) : graph_(graph), node_(node), view_(std::move(view)) {
  SPOOL_ASSERT(graph_ != nullptr, "tensor without a graph");
  type_ = graph_->edge_type(Edge{node_, view_});
}

int64_t Tensor::normalize_axis(int64_t axis, std::string_view op) const {
  const int64_t r = rank();
  if (axis < -r || axis >= r) fail("{}: axis {} is out of range for {}", op, axis, shape_str(shape()));
  return axis < 0 ? axis + r : axis;
}

int64_t Tensor::dim(int64_t axis) const { return shape()[static_cast<size_t>(normalize_axis(axis, "dim"))]; }

Tensor Tensor::with_step(const ViewStep& step, std::string_view op) const {
  View view = view_;
  view.append(step, graph_->node(node_).shape, op);
  return Tensor(graph_, node_, std::move(view));
}

Tensor Tensor::permute(const Shape& perm) const {
  Shape normalized = perm;
  if (static_cast<int64_t>(perm.size()) == rank())
    for (int64_t& axis : normalized)
      if (axis < 0 && axis >= -rank()) axis += rank();
  return with_step(permute_step(normalized), "permute");
}

Tensor Tensor::transpose(int64_t axis0, int64_t axis1) const {
  const int64_t a = normalize_axis(axis0, "transpose");
  const int64_t b = normalize_axis(axis1, "transpose");
  Shape perm(static_cast<size_t>(rank()));
  for (int64_t i = 0; i < rank(); ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  return with_step(permute_step(perm), "transpose");
}

Tensor Tensor::reshape(const Shape& target) const {
  Shape resolved = target;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred >= 0) fail("reshape: more than one -1 in {}", shape_str(target));
      inferred = static_cast<int64_t>(i);
    } else {
      known *= target[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel() % known != 0)
      fail("reshape: cannot view {} ({} elements) as {}", shape_str(shape()), numel(), shape_str(target));
    resolved[static_cast<size_t>(inferred)] = numel() / known;
  }
  return with_step(reshape_step(resolved), "reshape");
}

Tensor Tensor::flatten(int64_t start_axis, int64_t end_axis) const {
  if (rank() == 0) return reshape({1});
  const int64_t start = normalize_axis(start_axis, "flatten");
  const int64_t end = normalize_axis(end_axis, "flatten");
  if (start > end) fail("flatten: start axis {} is after end axis {}", start_axis, end_axis);
  Shape target;
  for (int64_t i = 0; i < start; ++i) target.push_back(dim(i));
  int64_t merged = 1;
  for (int64_t i = start; i <= end; ++i) merged *= dim(i);
  target.push_back(merged);
  for (int64_t i = end + 1; i < rank(); ++i) target.push_back(dim(i));
  return reshape(target);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const int64_t r = rank() + 1;
  if (axis < -r || axis >= r) fail("unsqueeze: axis {} is out of range for {}", axis, shape_str(shape()));
  if (axis < 0) axis += r;
  Shape target = shape();
  target.insert(target.begin() + axis, 1);
  return with_step(reshape_step(target), "unsqueeze");
}

Tensor Tensor::squeeze(int64_t axis) const {
  const int64_t a = normalize_axis(axis, "squeeze");
  if (dim(a) != 1) fail("squeeze: axis {} of {} has size {}, not 1", axis, shape_str(shape()), dim(a));
  Shape target = shape();
  target.erase(target.begin() + a);
  return with_step(reshape_step(target), "squeeze");
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  const int64_t a = normalize_axis(axis, "slice");
  const size_t r = static_cast<size_t>(rank());
  Shape starts(r, 0), stops = shape(), steps(r, 1);
  starts[static_cast<size_t>(a)] = start;
  stops[static_cast<size_t>(a)] = stop;
  steps[static_cast<size_t>(a)] = step;
  return with_step(slice_step(starts, stops, steps), "slice");
}

Tensor Tensor::pad(int64_t axis, int64_t before, int64_t after, double value) const {
  const int64_t a = normalize_axis(axis, "pad");
  const size_t r = static_cast<size_t>(rank());
  Shape befores(r, 0), afters(r, 0);
  befores[static_cast<size_t>(a)] = before;
  afters[static_cast<size_t>(a)] = after;
  return with_step(pad_step(befores, afters, value), "pad");
}

Tensor Tensor::expand(const Shape& target) const { return with_step(expand_step(target), "expand"); }

Tensor Tensor::broadcast_to(const Shape& target) const {
  if (target.size() < shape().size())
    fail("broadcast: cannot broadcast {} to {}: target has fewer axes", shape_str(shape()), shape_str(target));
  Tensor t = *this;
  if (target.size() > shape().size()) {
    Shape padded(target.size() - shape().size(), 1);
    padded.insert(padded.end(), shape().begin(), shape().end());
    t = t.reshape(padded);
  }
  for (size_t i = 0; i < target.size(); ++i)
    if (t.shape()[i] != target[i] && t.shape()[i] != 1)
      fail("broadcast: cannot broadcast {} to {}", shape_str(shape()), shape_str(target));
  return t.expand(target);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t axis) const {
  const int64_t a = normalize_axis(axis, "chunk");
  if (chunks < 1 || dim(a) % chunks != 0)
    fail("chunk: axis {} of {} (size {}) does not split into {} equal chunks", axis, shape_str(shape()), dim(a),
         chunks);
  return split(std::vector<int64_t>(static_cast<size_t>(chunks), dim(a) / chunks), a);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t axis) const {
  const int64_t a = normalize_axis(axis, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split: negative size {}", s);
    total += s;
  }
  if (total != dim(a))
    fail("split: sizes add up to {} but axis {} of {} has size {}", total, axis, shape_str(shape()), dim(a));
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(a, start, start + s));
    start += s;
  }
  return parts;
}

namespace {

Tensor add_node(Op op, std::vector<Tensor> operands, Attr attr = NoAttr{}) {
  Graph& g = operands.front().graph();
  std::vector<Edge> edges;
  for (const Tensor& t : operands) {
    if (&t.graph() != &g) fail("{}: operands belong to different graphs", op_name(op));
    edges.push_back(t.edge());
  }
  return Tensor(&g, g.add(op, std::move(edges), std::move(attr)));
}

// A binary op with numpy broadcasting; `name` is the user-facing name.
Tensor binary(Op op, const Tensor& a, const Tensor& b, std::string_view name) {
  if (a.dtype() != b.dtype())
    fail("{}: dtypes differ: lhs {} vs rhs {}", name, dtype_name(a.dtype()), dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  return add_node(op, {a.broadcast_to(shape), b.broadcast_to(shape)});
}

Tensor scalar_like(const Tensor& like, double value) {
  return constant(like.graph(), value, like.dtype(), like.shape());
}

Tensor unary(Op op, const Tensor& x) { return add_node(op, {x}); }

void expect_float(const Tensor& t, std::string_view op) {
  if (!is_float(t.dtype())) fail("{}: expects a floating dtype, got {}", op, dtype_name(t.dtype()));
}

void expect_bool(const Tensor& t, std::string_view op) {
  if (t.dtype() != DType::Bool) fail("{}: expects bool, got {}", op, dtype_name(t.dtype()));
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) fail("{}: cannot broadcast {} with {}", op, shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor Tensor::cast(DType to) const {
  if (to == dtype()) return *this;
  return add_node(Op::Cast, {*this}, DTypeAttr{to});
}

Tensor Tensor::sum(int64_t axis, bool keepdim) const {
  const int64_t a = normalize_axis(axis, "sum");
  Tensor out = add_node(Op::SumReduce, {*this}, AxisAttr{a});
  return keepdim ? out.unsqueeze(a) : out;
}

Tensor Tensor::max(int64_t axis, bool keepdim) const {
  const int64_t a = normalize_axis(axis, "max");
  Tensor out = add_node(Op::MaxReduce, {*this}, AxisAttr{a});
  return keepdim ? out.unsqueeze(a) : out;
}

Tensor Tensor::mean(int64_t axis, bool keepdim) const {
  expect_float(*this, "mean");
  const int64_t a = normalize_axis(axis, "mean");
  return sum(a, keepdim) * (1.0 / static_cast<double>(dim(a)));
}

Tensor input(Graph& graph, const std::string& name, DType dtype, const Shape& shape) {
  return Tensor(&graph, graph.add_source(Op::Input, NameAttr{name}, dtype, shape));
}

Tensor weight(Graph& graph, const std::string& name, DType dtype, const Shape& shape) {
  return Tensor(&graph, graph.add_source(Op::Weight, NameAttr{name}, dtype, shape));
}

Tensor constant(Graph& graph, double value, DType dtype, const Shape& shape) {
  Tensor scalar(&graph, graph.add_source(Op::Constant, ScalarAttr{Scalar::of(dtype, value)}, dtype, {}));
  return shape.empty() ? scalar : scalar.broadcast_to(shape);
}

Tensor iota(Graph& graph, const Shape& shape, int64_t axis, DType dtype) {
  const int64_t r = static_cast<int64_t>(shape.size());
  if (axis < -r || axis >= r) fail("iota: axis {} is out of range for {}", axis, shape_str(shape));
  return Tensor(&graph, graph.add_source(Op::Iota, AxisAttr{axis < 0 ? axis + r : axis}, dtype, shape));
}

void output(const std::string& name, const Tensor& tensor) { tensor.graph().add_output(name, tensor.edge()); }

Tensor exp2(const Tensor& x) { return unary(Op::Exp2, x); }
Tensor log2(const Tensor& x) { return unary(Op::Log2, x); }
Tensor sin(const Tensor& x) { return unary(Op::Sin, x); }
Tensor sqrt(const Tensor& x) { return unary(Op::Sqrt, x); }
Tensor recip(const Tensor& x) { return unary(Op::Recip, x); }
Tensor logical_not(const Tensor& x) { return unary(Op::Not, x); }
Tensor operator-(const Tensor& x) { return unary(Op::Neg, x); }

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(Op::Add, a, b, "add"); }
Tensor operator-(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail("sub: dtypes differ: lhs {} vs rhs {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  broadcast_shapes(a.shape(), b.shape(), "sub");
  return binary(Op::Add, a, -b, "sub");
}
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(Op::Mul, a, b, "mul"); }
Tensor operator/(const Tensor& a, const Tensor& b) {
  expect_float(a, "div");
  if (a.dtype() != b.dtype())
    fail("div: dtypes differ: lhs {} vs rhs {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  broadcast_shapes(a.shape(), b.shape(), "div");
  return binary(Op::Mul, a, recip(b), "div");
}
Tensor operator%(const Tensor& a, const Tensor& b) { return binary(Op::Mod, a, b, "mod"); }
Tensor operator+(const Tensor& a, double b) { return a + scalar_like(a, b); }
Tensor operator-(const Tensor& a, double b) { return a + scalar_like(a, -b); }
Tensor operator*(const Tensor& a, double b) { return a * scalar_like(a, b); }
Tensor operator/(const Tensor& a, double b) {
  expect_float(a, "div");
  return a * scalar_like(a, 1.0 / b);
}
Tensor operator%(const Tensor& a, double b) { return a % scalar_like(a, b); }
Tensor operator+(double a, const Tensor& b) { return scalar_like(b, a) + b; }
Tensor operator-(double a, const Tensor& b) { return scalar_like(b, a) - b; }
Tensor operator*(double a, const Tensor& b) { return scalar_like(b, a) * b; }
Tensor operator/(double a, const Tensor& b) {
  expect_float(b, "div");
  return a == 1.0 ? recip(b) : scalar_like(b, a) * recip(b);
}
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::Max, a, b, "max"); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(a, b)); }
Tensor less_than(const Tensor& a, const Tensor& b) { return binary(Op::LessThan, a, b, "less_than"); }
Tensor less_than(const Tensor& a, double b) { return less_than(a, scalar_like(a, b)); }
Tensor equal(const Tensor& a, const Tensor& b) { return binary(Op::Equal, a, b, "equal"); }
Tensor equal(const Tensor& a, double b) { return equal(a, scalar_like(a, b)); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  expect_bool(a, "logical_and");
  return binary(Op::Mul, a, b, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  expect_bool(a, "logical_or");
  return binary(Op::Max, a, b, "logical_or");
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  expect_bool(cond, "where");
  if (a.dtype() != b.dtype())
    fail("where: dtypes differ: lhs {} vs rhs {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  return add_node(Op::Where, {cond.broadcast_to(shape), a.broadcast_to(shape), b.broadcast_to(shape)});
}
Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, scalar_like(b, a), b); }
Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, scalar_like(a, b)); }

Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis) {
  return add_node(Op::Gather, {data, indices}, AxisAttr{data.normalize_axis(axis, "gather")});
}

Tensor scatter_add(const Tensor& data, const Tensor& indices, const Tensor& src, int64_t axis) {
  return add_node(Op::ScatterAdd, {data, indices, src}, AxisAttr{data.normalize_axis(axis, "scatter_add")});
}

Tensor topk_indices(const Tensor& x, int64_t k) { return add_node(Op::TopK, {x}, TopKAttr{k}); }
Tensor grouped_matmul(const Tensor& rows, const Tensor& w, const Tensor& counts) {
  return add_node(Op::GroupedMatmul, {rows, w, counts}, NoAttr{});
}

}  // namespace spool
