// Gather and scatter_add (lowering.hpp): by indirect DMA (indexing.cpp),
// fused into the GEMM that reads the gather, or gathered on the vector unit
// from whole rows of the data.

#include "lowering.hpp"
#include "indexing.hpp"
#include "tiled.hpp"

namespace spool::lower::detail {

using npu::ScalarType;
using npu::VecOp;

// Gather / ScatterAdd by indirect DMA (indexing.cpp).
void Lowering::lower_indexing(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  std::vector<Access> in;
  for (const Edge& e : n.inputs) in.push_back(read(e, name));
  const int64_t axis = std::get<AxisAttr>(n.attr).axis;
  if (n.op == Op::Gather && gather_into_gemm(id)) {
    if (auto fused = fused_gather(in[0], in[1], n.shape, axis)) {
      values_[id.value] = *fused;  // no kernel: the GEMM reads its operand through the index
      return;
    }
  }
  Access out = output_buffer(id);
  if (n.op == Op::Gather)
    emit_gather(em_, em_.unique_name(name), in[0], in[1], axis, out);
  else
    emit_scatter_add(em_, em_.unique_name(name), in[0], in[1], in[2], axis, out);
  values_[id.value] = out;
}

// A gather whose only reader is a batched GEMM taking it, through permutes
// and reshapes that keep the batch axis first, as its only operand on one side.
bool Lowering::gather_into_gemm(NodeId id) const {
  if (!em_.options.fuse || g_.use_count(id) != 1) return false;
  for (const Output& o : g_.outputs())
    if (o.edge.src == id) return false;
  for (NodeId u : g_.live_ids()) {
    const Node& user = g_.node(u);
    for (size_t i = 0; i < user.inputs.size(); ++i) {
      if (user.inputs[i].src != id) continue;
      if (user.op != Op::Gemm || user.shape.size() < 3) return false;
      for (const ViewStep& step : user.inputs[i].view.steps()) {
        const bool keeps = step.kind == ViewKind::Permute   ? step.a.at(0) == 0
                           : step.kind == ViewKind::Reshape ? step.a.at(0) == g_.node(id).shape.at(0)
                                                            : false;
        if (!keeps) return false;
      }
      const GemmAttr& attr = std::get<GemmAttr>(user.attr);
      const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
      if (i < na) return na == 1 && attr.a.instrs.empty();
      if (i < na + nb) return nb == 1 && attr.b.instrs.empty();
      return false;
    }
  }
  return false;
}

// out[..i..] = data[..idx[..i..]..] along the axis: the gather axis is the
// columns; each row tile loads whole rows of the table and the index tile,
// and the vector unit gathers with the indices cast explicitly to `index`.
void Lowering::lower_gather(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  const int64_t axis = std::get<AxisAttr>(n.attr).axis;
  TiledSpec s;
  s.info = KernelInfo{em_.unique_name(name), "gather", false, 0, "", 1};
  row_layout(s, n.shape, axis);
  Access data = read(n.inputs[0], name);
  if (data.is_literal) data = materialize(data, name);
  Access idx = read(n.inputs[1], name);
  s.inputs = {idx};
  s.has_table = true;
  s.table = data;
  Access out = output_buffer(id);
  s.outputs = {TiledOutput{out, TileOut::Full, 1}};
  const DType dtype = n.dtype;
  s.body = [dtype](VecBuilder& vb, const std::vector<int>& in, const SpadRef* table) {
    const int index = vb.op(VecOp::Cast, ScalarType::Index, {in[0]});
    return std::vector<int>{vb.gather(value_type(dtype), index, *table)};
  };
  emit_tiled(em_, s);
  values_[id.value] = out;
}

}  // namespace spool::lower::detail
