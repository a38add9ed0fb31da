#pragma once
// spool::Tensor: a cheap handle for building HLIR graphs in C++.
//
// A Tensor is a node of a Graph read through a View. Movement methods
// (permute, reshape, slice, pad, expand, ...) return a new handle on the same
// node with a longer view and never add a node; every other operation adds
// one node whose inputs carry the operands' views. Binary operations
// broadcast numpy-style (through reshape and expand views), and a scalar
// operand becomes a Constant of the other operand's dtype.
//
// Axes may be negative (counted from the end) everywhere in this API; the
// graph stores them normalised.

#include <spool/ir/graph.hpp>

#include <initializer_list>
#include <vector>

namespace spool {

class Tensor {
 public:
  Tensor() = default;
  Tensor(Graph* graph, NodeId node, View view = {});

  Graph& graph() const { return *graph_; }
  bool is_null() const { return graph_ == nullptr; }  // a default-constructed handle
  NodeId node() const { return node_; }
  const View& view() const { return view_; }
  Edge edge() const { return Edge{node_, view_}; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t rank() const { return static_cast<int64_t>(type_.shape.size()); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return num_elements(type_.shape); }

  // ---- views (no node is added) ----
  Tensor permute(const Shape& perm) const;
  Tensor transpose(int64_t axis0, int64_t axis1) const;
  Tensor reshape(const Shape& shape) const;  // one size may be -1 (inferred)
  Tensor flatten(int64_t start_axis = 0, int64_t end_axis = -1) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor squeeze(int64_t axis) const;
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor pad(int64_t axis, int64_t before, int64_t after, double value = 0.0) const;
  Tensor expand(const Shape& shape) const;        // size-1 axes grow; rank must match
  Tensor broadcast_to(const Shape& shape) const;  // numpy rules: may add leading axes
  std::vector<Tensor> chunk(int64_t chunks, int64_t axis) const;  // equal parts; the axis must divide
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t axis) const;

  // ---- elementwise and reductions (one node each) ----
  Tensor cast(DType to) const;
  Tensor sum(int64_t axis, bool keepdim = false) const;
  Tensor max(int64_t axis, bool keepdim = false) const;
  Tensor mean(int64_t axis, bool keepdim = false) const;

  // Normalises a possibly negative axis against this tensor's rank or fails
  // with a message naming `op`.
  int64_t normalize_axis(int64_t axis, std::string_view op) const;

 private:
  Tensor with_step(const ViewStep& step, std::string_view op) const;

  Graph* graph_ = nullptr;
  NodeId node_;
  View view_;
  TensorType type_;
};

// ---- sources ----
Tensor input(Graph& graph, const std::string& name, DType dtype, const Shape& shape);
Tensor weight(Graph& graph, const std::string& name, DType dtype, const Shape& shape);
// A scalar constant broadcast (as a view) to `shape`.
Tensor constant(Graph& graph, double value, DType dtype, const Shape& shape = {});
// out[..i_axis..] = i_axis, as `dtype`.
Tensor iota(Graph& graph, const Shape& shape, int64_t axis, DType dtype = DType::I64);
void output(const std::string& name, const Tensor& tensor);

// ---- elementwise primitives ----
Tensor exp2(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor recip(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor operator-(const Tensor& x);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);  // a * recip(b) (floats only)
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator%(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor less_than(const Tensor& a, const Tensor& b);
Tensor less_than(const Tensor& a, double b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);

// ---- indexing ----
Tensor gather(const Tensor& data, const Tensor& indices, int64_t axis);
Tensor scatter_add(const Tensor& data, const Tensor& indices, const Tensor& src, int64_t axis);
Tensor topk_indices(const Tensor& x, int64_t k);  // along the last axis
// rows [R, K] in consecutive groups of counts[g] rows (counts [G], summing to
// R), each times its group's w[g] [N, K] transposed: [R, N] (ops.def).
Tensor grouped_matmul(const Tensor& rows, const Tensor& w, const Tensor& counts);

// numpy broadcasting of two shapes, or spool::Error naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

}  // namespace spool
