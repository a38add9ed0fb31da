// Reductions (lowering.hpp) with their prologue and epilogue programs in
// the kernel.

#include "lowering.hpp"
#include "tiled.hpp"

#include <spool/support/error.hpp>

namespace spool::lower::detail {

using npu::ScalarType;
using npu::VecOp;

void Lowering::lower_reduce(NodeId id, const ReduceAttr& r) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  const Shape& in_shape = g_.edge_type(n.inputs[0]).shape;
  TiledSpec s;
  const bool fused = !r.prologue.instrs.empty() || !r.epilogue.instrs.empty() || n.inputs.size() > 1;
  s.info = KernelInfo{em_.unique_name(name), "reduce", fused, 0, "", 1};
  for (const Edge& e : n.inputs) s.inputs.push_back(read(e, name));
  // Down the rows when DRAM holds another axis contiguous (no transposing
  // load, no cross-lane reduction); across the columns otherwise.
  const int col = contiguous_axis(s.inputs[0], r.axis);
  const bool down = col >= 0 && column_layout(s, in_shape, r.axis, col, em_.budget, dtype_bytes(s.inputs[0].dtype));
  if (!down) row_layout(s, in_shape, r.axis, /*widest=*/true);
  const size_t k = s.inputs.size();
  const auto iotas = program_iotas(r.prologue, in_shape, name);
  for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
  Access out = output_buffer(id);
  Access out_domain = out;  // the output seen over the input's axes (reduced axis: stride 0)
  out_domain.shape = in_shape;
  out_domain.strides.insert(out_domain.strides.begin() + r.axis, 0);
  s.outputs = {TiledOutput{out_domain, down ? TileOut::Col : TileOut::Row, 1}};
  if (!r.epilogue.instrs.empty())
    for (const ProgramInstr& in : r.epilogue.instrs)
      if (in.op == Op::Iota) fail("lower: {}: an iota in a reduce epilogue is not supported", name);
  const bool sum = r.kind == Op::SumReduce;
  const VecOp reduce = down ? (sum ? VecOp::ReduceSumRows : VecOp::ReduceMaxRows) : (sum ? VecOp::ReduceSum : VecOp::ReduceMax);
  s.body = [r, k, iotas, reduce](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
    std::map<size_t, int> iota_values;
    for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
    int v = emit_program(vb, r.prologue, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)), iota_values);
    v = vb.full(v);
    ScalarType t = vb.type(v);
    if (t == ScalarType::I1) fail("lower: reduce of bool values is not supported");
    const bool bf16 = t == ScalarType::BF16;
    if (bf16) v = vb.op(VecOp::Cast, ScalarType::F32, {v});  // accumulate in f32, round once
    int red = vb.op(reduce, vb.type(v), {v});
    if (bf16) red = vb.op(VecOp::Cast, ScalarType::BF16, {red});
    return std::vector<int>{emit_program(vb, r.epilogue, {red}, {})};
  };
  emit_tiled(em_, s);
  values_[id.value] = out;
}

}  // namespace spool::lower::detail
