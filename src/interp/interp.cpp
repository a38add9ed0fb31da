// The reference interpreter. One function per op family, each a plain loop
// over row-major indices; views are materialised one step at a time. Floats
// are computed in double and rounded to the node's dtype on every store, so
// the result of each op is the correctly rounded value of its definition
// (reductions round once, at the end).

#include <spool/interp/interp.hpp>

#include "elementwise.hpp"
#include "kernels.hpp"
#include <spool/support/error.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>

namespace spool::interp {

namespace detail {
HostTensor eval_reduce(Op op, const HostTensor& x, int64_t axis, const Shape& out_shape) {
  HostTensor out(x.dtype(), out_shape);
  // View x as [outer, n, inner].
  const Shape& shape = x.shape();
  const int64_t n = shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < static_cast<size_t>(axis); ++i) outer *= shape[i];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  const bool floats = is_float(x.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t base = o * n * inner + j;
      if (floats) {
        double acc = op == Op::SumReduce ? 0.0 : -INFINITY;
        for (int64_t r = 0; r < n; ++r) {
          const double v = x.get(base + r * inner);
          acc = op == Op::SumReduce ? acc + v : (std::isnan(acc) || std::isnan(v) ? NAN : std::max(acc, v));
        }
        out.set(o * inner + j, acc);
      } else {
        int64_t acc = op == Op::SumReduce ? 0 : x.get_int(base);
        for (int64_t r = 0; r < n; ++r) {
          const int64_t v = x.get_int(base + r * inner);
          acc = op == Op::SumReduce ? static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v))
                                    : std::max(acc, v);
        }
        out.set_int(o * inner + j, acc);
      }
    }
  }
  return out;
}

}  // namespace detail

namespace {
using detail::eval_reduce;

// Walks every multi-index of `shape` in row-major order.
class IndexWalker {
 public:
  explicit IndexWalker(const Shape& shape) : shape_(shape), index_(shape.size(), 0) {}
  const Shape& index() const { return index_; }
  void next() {
    for (size_t axis = shape_.size(); axis-- > 0;) {
      if (++index_[axis] < shape_[axis]) return;
      index_[axis] = 0;
    }
  }

 private:
  const Shape& shape_;
  Shape index_;
};

int64_t flat_index(const Shape& index, const Shape& strides) {
  int64_t flat = 0;
  for (size_t i = 0; i < index.size(); ++i) flat += index[i] * strides[i];
  return flat;
}

void copy_element(HostTensor& dst, int64_t dst_index, const HostTensor& src, int64_t src_index) {
  if (is_float(src.dtype()))
    dst.set(dst_index, src.get(src_index));
  else
    dst.set_int(dst_index, src.get_int(src_index));
}

// Applies one view step by building its output densely.
HostTensor apply_step(const HostTensor& in, const ViewStep& step) {
  const Shape out_shape = view_step_shape(step, in.shape(), "view");
  HostTensor out(in.dtype(), out_shape);
  if (step.kind == ViewKind::Reshape) {
    for (int64_t i = 0; i < in.size(); ++i) copy_element(out, i, in, i);
    return out;
  }
  const Shape in_strides = dense_strides(in.shape());
  Shape source(in.shape().size());
  IndexWalker walk(out_shape);
  for (int64_t i = 0; i < out.size(); ++i, walk.next()) {
    const Shape& index = walk.index();
    bool padding = false;
    for (size_t axis = 0; axis < index.size(); ++axis) {
      switch (step.kind) {
        case ViewKind::Permute: source[static_cast<size_t>(step.a[axis])] = index[axis]; break;
        case ViewKind::Slice: source[axis] = step.a[axis] + index[axis] * step.c[axis]; break;
        case ViewKind::Expand: source[axis] = in.shape()[axis] == 1 ? 0 : index[axis]; break;
        case ViewKind::Pad:
          source[axis] = index[axis] - step.a[axis];
          padding |= source[axis] < 0 || source[axis] >= in.shape()[axis];
          break;
        case ViewKind::Reshape: SPOOL_ASSERT(false, "handled above");
      }
    }
    if (padding)
      out.set(i, step.value);
    else
      copy_element(out, i, in, flat_index(source, in_strides));
  }
  return out;
}

HostTensor read_edge(const HostTensor& value, const View& view) {
  HostTensor current = value;
  for (const ViewStep& step : view.steps()) current = apply_step(current, step);
  return current;
}

// Every elementwise op, one element at a time (the semantics live in elementwise.cpp).
HostTensor eval_elementwise(const Node& node, const std::vector<HostTensor>& in) {
  HostTensor out(node.dtype, node.shape);
  const DType cast_to = node.op == Op::Cast ? std::get<DTypeAttr>(node.attr).to : node.dtype;
  std::array<Scalar, 3> args;
  for (int64_t i = 0; i < out.size(); ++i) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = detail::load(in[k], i);
    detail::store(out, i, detail::apply(node.op, std::span<const Scalar>(args.data(), in.size()), cast_to));
  }
  return out;
}

int64_t checked_index(const HostTensor& indices, int64_t i, int64_t bound, std::string_view op, int64_t axis) {
  const int64_t value = indices.get_int(i);
  if (value < 0 || value >= bound)
    fail("{}: index {} is out of range for axis {} of size {}", op, value, axis, bound);
  return value;
}

HostTensor eval_gather(const HostTensor& data, const HostTensor& indices, int64_t axis) {
  HostTensor out(data.dtype(), indices.shape());
  const Shape data_strides = dense_strides(data.shape());
  const int64_t bound = data.shape()[static_cast<size_t>(axis)];
  IndexWalker walk(indices.shape());
  for (int64_t i = 0; i < indices.size(); ++i, walk.next()) {
    Shape source = walk.index();
    source[static_cast<size_t>(axis)] = checked_index(indices, i, bound, "gather", axis);
    copy_element(out, i, data, flat_index(source, data_strides));
  }
  return out;
}

HostTensor eval_scatter_add(const HostTensor& data, const HostTensor& indices, const HostTensor& src, int64_t axis) {
  HostTensor out = data;
  const Shape out_strides = dense_strides(data.shape());
  const int64_t bound = data.shape()[static_cast<size_t>(axis)];
  IndexWalker walk(indices.shape());
  for (int64_t i = 0; i < indices.size(); ++i, walk.next()) {
    Shape target = walk.index();
    target[static_cast<size_t>(axis)] = checked_index(indices, i, bound, "scatter_add", axis);
    const int64_t t = flat_index(target, out_strides);
    if (is_float(data.dtype()))
      out.set(t, out.get(t) + src.get(i));
    else
      out.set_int(t, static_cast<int64_t>(static_cast<uint64_t>(out.get_int(t)) + static_cast<uint64_t>(src.get_int(i))));
  }
  return out;
}

// rows [R, K] in G consecutive groups of counts[g] rows; out[r] = rows[r] . w[g]^T
// as nn::matmul computes it (each product rounded to the dtype, the sum once).
HostTensor eval_grouped_matmul(const HostTensor& rows, const HostTensor& w, const HostTensor& counts) {
  const int64_t R = rows.shape()[0], K = rows.shape()[1], G = w.shape()[0], N = w.shape()[1];
  int64_t total = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t c = counts.get_int(g);
    if (c < 0) fail("grouped_matmul: group {} has {} rows", g, c);
    total += c;
    if (total > R) break;
  }
  if (total > R) fail("grouped_matmul: the group counts sum to more than the {} rows", R);
  if (total < R) fail("grouped_matmul: the group counts sum to {}, not to the {} rows", total, R);
  HostTensor out(rows.dtype(), {R, N});
  int64_t r = 0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t end = r + counts.get_int(g); r < end; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < K; ++k)
          acc += round_to_float(rows.dtype(), rows.get(r * K + k) * w.get((g * N + n) * K + k));
        out.set(r * N + n, acc);
      }
  return out;
}

HostTensor eval_topk(const HostTensor& x, int64_t k, const Shape& out_shape) {
  HostTensor out(DType::I64, out_shape);
  const int64_t n = x.shape().back();
  const int64_t rows = n == 0 ? 0 : x.size() / n;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t row = 0; row < rows; ++row) {
    std::iota(order.begin(), order.end(), 0);
    // Descending; NaN counts as the largest value; ties keep index order.
    auto key = [&](int64_t j) { return x.get(row * n + j); };
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      const double a = key(p), b = key(q);
      if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
      return a > b;
    });
    for (int64_t j = 0; j < k; ++j) out.set_int(row * k + j, order[static_cast<size_t>(j)]);
  }
  return out;
}

HostTensor eval_source(const Node& node, const Env& inputs) {
  switch (node.op) {
    case Op::Input:
    case Op::Weight: {
      const std::string& name = std::get<NameAttr>(node.attr).name;
      const auto it = inputs.find(name);
      if (it == inputs.end()) fail("{} '{}' has no value", op_name(node.op), name);
      const HostTensor& value = it->second;
      if (value.dtype() != node.dtype || value.shape() != node.shape)
        fail("{} '{}': expected {}{}, got {}{}", op_name(node.op), name, dtype_name(node.dtype),
             shape_str(node.shape), dtype_name(value.dtype()), shape_str(value.shape()));
      return value;
    }
    case Op::Constant: {
      HostTensor out(node.dtype, node.shape);
      const Scalar& value = std::get<ScalarAttr>(node.attr).value;
      if (is_float(node.dtype))
        out.set(0, value.f);
      else
        out.set_int(0, value.i);
      return out;
    }
    case Op::Iota: {
      HostTensor out(node.dtype, node.shape);
      const size_t axis = static_cast<size_t>(std::get<AxisAttr>(node.attr).axis);
      IndexWalker walk(node.shape);
      for (int64_t i = 0; i < out.size(); ++i, walk.next()) out.set_int(i, walk.index()[axis]);
      return out;
    }
    default: SPOOL_ASSERT(false, "{} is not a source", op_name(node.op));
  }
}

HostTensor eval_node(const Node& node, const std::vector<HostTensor>& in, const Env& inputs) {
  switch (node.op) {
    case Op::Input:
    case Op::Weight:
    case Op::Constant:
    case Op::Iota: return eval_source(node, inputs);
    case Op::Exp2:
    case Op::Log2:
    case Op::Sin:
    case Op::Sqrt:
    case Op::Recip:
    case Op::Neg:
    case Op::Not:
    case Op::Cast:
    case Op::Add:
    case Op::Mul:
    case Op::Mod:
    case Op::Max:
    case Op::LessThan:
    case Op::Equal:
    case Op::Where: return eval_elementwise(node, in);
    case Op::Fused:
    case Op::Gemm:
    case Op::Reduce:
    case Op::Softmax:
    case Op::RmsNorm:
    case Op::LayerNorm:
    case Op::Copy: return detail::eval_kernel(node, in);
    case Op::SumReduce:
    case Op::MaxReduce: return eval_reduce(node.op, in[0], std::get<AxisAttr>(node.attr).axis, node.shape);
    case Op::Gather: return eval_gather(in[0], in[1], std::get<AxisAttr>(node.attr).axis);
    case Op::ScatterAdd: return eval_scatter_add(in[0], in[1], in[2], std::get<AxisAttr>(node.attr).axis);
    case Op::TopK: return eval_topk(in[0], std::get<TopKAttr>(node.attr).k, node.shape);
    case Op::GroupedMatmul: return eval_grouped_matmul(in[0], in[1], in[2]);
    case Op::LoopStart:
    case Op::LoopEnd:
    case Op::LoopInput:
    case Op::LoopInputStatic:
    case Op::LoopOutput:
      fail("interp: {} of loop {}: a rolled graph must be unrolled (roll::unroll) before it runs", op_name(node.op),
           std::get<LoopAttr>(node.attr).loop);
  }
  SPOOL_ASSERT(false, "bad op");
}

}  // namespace

int64_t work_estimate(const Graph& graph) {
  int64_t total = 0;
  for (const NodeId id : graph.live_ids()) {
    const int64_t n = num_elements(graph.node(id).shape);
    total = n > INT64_MAX - total ? INT64_MAX : total + n;
  }
  return total;
}

std::map<std::string, HostTensor> run(const Graph& graph, const Env& inputs) {
  const std::vector<NodeId> order = graph.topo_order();
  // Values are freed after their last use, so peak memory is the live set.
  std::vector<int> remaining_uses(graph.id_bound(), 0);
  for (const NodeId id : order)
    for (const Edge& edge : graph.node(id).inputs) ++remaining_uses[edge.src.value];
  for (const Output& output : graph.outputs()) ++remaining_uses[output.edge.src.value];

  std::vector<HostTensor> values(graph.id_bound());
  for (const NodeId id : order) {
    const Node& node = graph.node(id);
    std::vector<HostTensor> in;
    in.reserve(node.inputs.size());
    for (const Edge& edge : node.inputs) {
      in.push_back(read_edge(values[edge.src.value], edge.view));
      if (--remaining_uses[edge.src.value] == 0) values[edge.src.value] = HostTensor();
    }
    values[id.value] = eval_node(node, in, inputs);
  }
  std::map<std::string, HostTensor> outputs;
  for (const Output& output : graph.outputs()) outputs[output.name] = read_edge(values[output.edge.src.value], output.edge.view);
  return outputs;
}

Env random_inputs(const Graph& graph, uint64_t seed, int64_t integer_bound) {
  Env env;
  for (const NodeId id : graph.live_ids()) {
    const Node& node = graph.node(id);
    if (node.op != Op::Input && node.op != Op::Weight) continue;
    const std::string& name = std::get<NameAttr>(node.attr).name;
    if (env.contains(name)) continue;
    // Each tensor gets its own stream derived from the seed and its name, so
    // adding an input does not change the values of the others.
    uint64_t name_hash = 14695981039346656037ULL;  // FNV-1a: the same on every platform
    for (unsigned char c : name) name_hash = (name_hash ^ c) * 1099511628211ULL;
    std::mt19937_64 rng(seed ^ name_hash);
    HostTensor value(node.dtype, node.shape);
    double scale = 1.0;
    if (node.op == Op::Weight && node.shape.size() >= 2)
      scale = 1.0 / std::sqrt(static_cast<double>(node.shape.back()));
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::uniform_int_distribution<int64_t> integer(0, std::max<int64_t>(integer_bound, 1) - 1);
    for (int64_t i = 0; i < value.size(); ++i) {
      if (is_float(node.dtype))
        value.set(i, uniform(rng) * scale);
      else if (node.dtype == DType::Bool)
        value.set_int(i, static_cast<int64_t>(rng() & 1));
      else
        value.set_int(i, integer(rng));
    }
    env.emplace(name, std::move(value));
  }
  return env;
}

}  // namespace spool::interp
