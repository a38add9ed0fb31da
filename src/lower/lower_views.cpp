// Reading an edge (lowering.hpp): its view's strided steps compose into a
// DRAM alias read by strided DMA; only a pad, or a reshape of axes that are
// not contiguous, materialises a copy first. Copy and fill kernels.

#include "lowering.hpp"
#include "tiled.hpp"

#include <spool/support/error.hpp>

#include <algorithm>

namespace spool::lower::detail {

using npu::BufferKind;
using npu::ScalarType;

Access Lowering::base(NodeId id) const {
  SPOOL_ASSERT(values_[id.value].has_value(), "node {} read before it was lowered", id.value);
  return *values_[id.value];
}

// The access through which a consumer reads the edge; copies only where a
// step has no strided form. `steps` limits the view to its first steps.
Access Lowering::read(const Edge& e, const std::string& consumer, size_t steps) {
  Access a = base(e.src);
  const size_t end = std::min(steps, e.view.steps().size());
  size_t at = 0;
  while ((at = apply_view_steps(a, e.view, at, end)) < end) {
    const ViewStep& step = e.view.steps()[at];
    if (step.kind == ViewKind::Pad) {
      if (a.is_literal) a = materialize(a, consumer);
      a = materialize_pad(a, step, consumer);
      ++at;
    } else {
      a = materialize(a, consumer);  // the reshape applies to the dense copy
    }
  }
  return em_.through_alias(a, "view");
}

Access Lowering::new_dense(const std::string& name, DType dtype, const Shape& shape, BufferKind kind) {
  return dense_access(em_.add_buffer(name, dtype, shape, kind), dtype, shape);
}

// The rows of an elementwise, copy or fill tile: the longest axis but the
// last. Any axis will do for a kernel that reads and writes element for
// element, and the longest gives the fewest, largest tiles (a head-major
// [heads, S, D] output read token-major as [S, heads, D] is copied in
// tiles of S rows, not of one row per head; a decode step's [heads, 1, D]
// values go in one tile, not one per head).
int Lowering::widest_row_axis(const Shape& shape) {
  const int r = static_cast<int>(shape.size());
  int row = r - 2;
  for (int a = r - 3; a >= 0; --a)
    if (shape[static_cast<size_t>(a)] > shape[static_cast<size_t>(row)]) row = a;
  return row;
}

void Lowering::copy(const Access& from, const Access& to, const std::string& name) {
  TiledSpec s;
  s.info = KernelInfo{em_.unique_name(name), "copy", false, 0, "", 1};
  s.shape = from.shape;
  s.col_axis = std::max<int>(0, static_cast<int>(from.shape.size()) - 1);
  s.row_axis = widest_row_axis(from.shape);
  s.inputs = {from};
  s.outputs = {TiledOutput{to, TileOut::Full, 1}};
  s.body = [](VecBuilder&, const std::vector<int>& in, const SpadRef*) { return std::vector<int>{in[0]}; };
  emit_tiled(em_, s);
}

Access Lowering::materialize(const Access& a, const std::string& consumer) {
  Access dense = new_dense(consumer + ".dense", a.dtype, a.shape);
  if (a.is_literal)
    fill(dense, a.literal, consumer + "_fill");
  else
    copy(em_.through_alias(a, "view"), dense, consumer + "_copy");
  return dense;
}

void Lowering::fill(const Access& to, double value, const std::string& name) {
  TiledSpec s;
  s.info = KernelInfo{em_.unique_name(name), "fill", false, 0, "", 1};
  s.shape = to.shape;
  s.col_axis = std::max<int>(0, static_cast<int>(to.shape.size()) - 1);
  s.row_axis = widest_row_axis(to.shape);
  s.outputs = {TiledOutput{to, TileOut::Full, 1}};
  const ScalarType t = value_type(to.dtype);
  s.body = [t, value](VecBuilder& vb, const std::vector<int>&, const SpadRef*) { return std::vector<int>{vb.constant(t, value)}; };
  emit_tiled(em_, s);
}

// A padded view no consumer can read strided: the pad value everywhere,
// then the interior copied in.
Access Lowering::materialize_pad(const Access& a, const ViewStep& pad, const std::string& consumer) {
  Shape shape = a.shape;
  for (size_t i = 0; i < shape.size(); ++i) shape[i] += pad.a[i] + pad.b[i];
  Access out = new_dense(consumer + ".padded", a.dtype, shape);
  const double value = is_float(a.dtype) ? pad.value : static_cast<double>(static_cast<int64_t>(pad.value));
  fill(out, value, consumer + "_pad_fill");
  Access interior = out;
  interior.shape = a.shape;
  for (size_t i = 0; i < shape.size(); ++i) interior.offset += pad.a[i] * out.strides[i];
  copy(em_.through_alias(a, "view"), em_.through_alias(interior, "interior"), consumer + "_pad_copy");
  return out;
}

void Lowering::lower_copy(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  Access out = output_buffer(id);
  copy(read(n.inputs[0], name), out, name);
  values_[id.value] = out;
}

}  // namespace spool::lower::detail
