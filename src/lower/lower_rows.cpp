// Ops along one axis of each row (lowering.hpp): softmax, RMS and layer
// norms, top-k.

#include "lowering.hpp"
#include "tiled.hpp"
#include "topk.hpp"

namespace spool::lower::detail {

using npu::ScalarType;
using npu::VecOp;

void Lowering::lower_rows(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  TiledSpec s;
  const int64_t axis = n.op == Op::Softmax ? std::get<AxisAttr>(n.attr).axis : static_cast<int64_t>(n.shape.size()) - 1;
  s.info = KernelInfo{em_.unique_name(name), std::string(op_name(n.op)), false, 0, "", 1};
  s.inputs.push_back(read(n.inputs[0], name));
  // A softmax down an axis DRAM does not hold contiguous reduces down the
  // rows (see lower_reduce).
  const int col = n.op == Op::Softmax ? contiguous_axis(s.inputs[0], axis) : -1;
  const bool down = col >= 0 && column_layout(s, n.shape, axis, col, em_.budget, 4);
  if (!down) row_layout(s, n.shape, axis, /*widest=*/true);
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    Access w = read(n.inputs[i], name);  // [C], broadcast over the other axes
    const int64_t stride = w.strides[0];
    w.shape = n.shape;
    w.strides = Shape(n.shape.size(), 0);
    w.strides.back() = stride;
    s.inputs.push_back(w);
  }
  Access out = output_buffer(id);
  s.outputs = {TiledOutput{out, TileOut::Full, 1}};
  const Op op = n.op;
  const double cols = static_cast<double>(n.shape[static_cast<size_t>(axis)]);
  const NormAttr norm = op == Op::Softmax ? NormAttr{} : std::get<NormAttr>(n.attr);
  const VecOp reduce_max = down ? VecOp::ReduceMaxRows : VecOp::ReduceMax;
  const VecOp reduce_sum = down ? VecOp::ReduceSumRows : VecOp::ReduceSum;
  s.body = [op, cols, norm, reduce_max, reduce_sum](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
    const ScalarType F = ScalarType::F32;
    auto f32 = [&](int v) { return vb.type(v) == F ? v : vb.op(VecOp::Cast, F, {v}); };
    // In f32 whatever the stored dtype, rounded once by the store (nn's
    // composites compute half precision in f32).
    const int x = f32(in[0]);
    if (op == Op::Softmax) {
      const int m = vb.op(reduce_max, F, {x});
      const int e = vb.op(VecOp::Exp, F, {vb.op(VecOp::Sub, F, {x, m})});
      const int sum = vb.op(reduce_sum, F, {e});
      return std::vector<int>{vb.op(VecOp::Mul, F, {e, vb.op(VecOp::Recip, F, {sum})})};
    }
    const int inv_n = vb.constant(F, 1.0 / cols);
    const int eps = vb.constant(F, norm.eps);
    if (op == Op::RmsNorm) {
      const int ms = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {vb.op(VecOp::Mul, F, {x, x})}), inv_n});
      const int inv = vb.op(VecOp::Recip, F, {vb.op(VecOp::Sqrt, F, {vb.op(VecOp::Add, F, {ms, eps})})});
      int w = f32(in[1]);
      if (norm.unit_offset) w = vb.op(VecOp::Add, F, {w, vb.constant(F, 1.0)});
      return std::vector<int>{vb.op(VecOp::Mul, F, {vb.op(VecOp::Mul, F, {x, inv}), w})};
    }
    const int mean = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {x}), inv_n});
    const int d = vb.op(VecOp::Sub, F, {x, mean});
    const int var = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {vb.op(VecOp::Mul, F, {d, d})}), inv_n});
    const int inv = vb.op(VecOp::Recip, F, {vb.op(VecOp::Sqrt, F, {vb.op(VecOp::Add, F, {var, eps})})});
    const int y = vb.op(VecOp::Mul, F, {vb.op(VecOp::Mul, F, {d, inv}), f32(in[1])});
    return std::vector<int>{vb.op(VecOp::Add, F, {y, f32(in[2])})};
  };
  emit_tiled(em_, s);
  values_[id.value] = out;
}

// Top-k along the last axis (topk.cpp).
void Lowering::lower_topk(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  const Access in = read(n.inputs[0], name);
  Access out = output_buffer(id);
  emit_topk(em_, em_.unique_name(name), in, out, std::get<TopKAttr>(n.attr).k);
  values_[id.value] = out;
}

}  // namespace spool::lower::detail
