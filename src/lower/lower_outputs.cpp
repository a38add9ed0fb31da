// Where kernel nodes write (lowering.hpp): a part of a concat, a graph
// output's buffer (through the inverse of the output's view when it reads
// the value permuted or reshaped), or a temporary; then graph outputs are
// bound to the buffers that hold them.

#include "lowering.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

namespace spool::lower::detail {

using npu::BufferKind;

// The dense buffer a kernel node writes: a graph output's buffer when an
// output reads it unchanged, else a temporary.
Access Lowering::output_buffer(NodeId id) {
  if (auto it = claimed_.find(id.value); it != claimed_.end()) return it->second;
  if (concats_.count(id.value)) return concat_buffer(id);
  return producer_buffer(id);
}

// A kernel's own output: its place in the concat it is a part of, else a
// graph output's buffer or a temporary.
Access Lowering::producer_buffer(NodeId id) {
  if (auto it = writes_into_.find(id.value); it != writes_into_.end()) {
    const auto [concat, k] = it->second;
    const Access whole = concat_buffer(NodeId{concat});
    const Piece& piece = concats_.at(concat)[k];
    Access part = whole;
    part.shape = piece_shape(piece);
    for (size_t i = 0; i < part.shape.size(); ++i) part.offset += piece.before[i] * whole.strides[i];
    // Back through the part's permutes and reshapes to the producer's own
    // shape: the producer stores each element where the concat reads it.
    if (std::optional<Access> mine =
            unview(part, piece.edge.view, g_.node(id).shape, piece.edge.view.steps().size() - 1)) {
      in_place_.insert({concat, k});
      return em_.through_alias(*mine, "part");
    }
    // Not expressible as strides (a reshape across non-adjacent strides): a copy writes the part.
    writes_into_.erase(it);
  }
  return plain_output_buffer(id);
}

Access Lowering::plain_output_buffer(NodeId id) {
  const Node& n = g_.node(id);
  const auto& outs = g_.outputs();
  for (size_t o = 0; o < outs.size(); ++o) {
    if (bound_.count(o) || outs[o].edge.src != id || !outs[o].edge.view.is_identity()) continue;
    bound_.insert(o);
    Access a = new_dense(outs[o].name, n.dtype, n.shape, BufferKind::Output);
    outputs_.push_back({outs[o].name, em_.program.buffers[a.buffer].name});
    return a;
  }
  // An output that reads the value transposed or reshaped (a KV cache
  // token-major): the kernel stores straight into the output's buffer
  // through the inverse view, and its other readers read it there.
  const bool strided_store = stores_strided(n.op);
  for (size_t o = 0; o < outs.size() && strided_store; ++o) {
    const View& v = outs[o].edge.view;
    if (bound_.count(o) || outs[o].edge.src != id || !only_permutes_and_reshapes(v)) continue;
    const TensorType t = g_.edge_type(outs[o].edge);
    const Access whole = new_dense(outs[o].name, t.dtype, t.shape, BufferKind::Output);
    if (std::optional<Access> mine = unview(whole, v, n.shape, v.steps().size())) {
      bound_.insert(o);
      outputs_.push_back({outs[o].name, em_.program.buffers[whole.buffer].name});
      return em_.through_alias(*mine, "out");
    }
    SPOOL_ASSERT(false, "an output view of permutes and reshapes has no inverse");
  }
  return new_dense(fmt::format("t{}", id.value), n.dtype, n.shape);
}

bool Lowering::only_permutes_and_reshapes(const View& v) {
  if (v.is_identity()) return false;
  for (const ViewStep& step : v.steps())
    if (step.kind != ViewKind::Permute && step.kind != ViewKind::Reshape) return false;
  return true;
}

// Kernels whose generators store through a strided output access.
bool Lowering::stores_strided(Op op) {
  const OpClass cls = op_info(op).cls;
  return cls == OpClass::Unary || cls == OpClass::Cast || cls == OpClass::Binary || cls == OpClass::Compare ||
         cls == OpClass::Select || cls == OpClass::Reduce || cls == OpClass::TopK || cls == OpClass::Kernel;
}

void Lowering::bind_outputs() {
  const auto& outs = g_.outputs();
  for (size_t o = 0; o < outs.size(); ++o) {
    if (bound_.count(o)) continue;
    const TensorType t = g_.edge_type(outs[o].edge);
    Access a = read(outs[o].edge, outs[o].name);
    if (!a.is_literal && is_dense(Access{a.buffer, a.dtype, 0, a.shape, a.strides, false, 0.0})) {
      // A contiguous window of a buffer (a reshape, a leading slice): an alias, no copy.
      const int root = em_.program.root_of(a.buffer);
      const int alias =
          em_.named_alias(outs[o].name, root, em_.program.buffers[a.buffer].alias_offset + a.offset, t.shape);
      outputs_.push_back({outs[o].name, em_.program.buffers[alias].name});
      continue;
    }
    Access dst = new_dense(outs[o].name, t.dtype, t.shape, BufferKind::Output);
    copy(em_.through_alias(a, "view"), dst, outs[o].name + "_copy");
    outputs_.push_back({outs[o].name, em_.program.buffers[dst.buffer].name});
  }
  // In graph output order.
  std::vector<std::pair<std::string, std::string>> ordered;
  for (const Output& o : outs)
    for (const auto& p : outputs_)
      if (p.first == o.name) ordered.push_back(p);
  outputs_ = std::move(ordered);
}

}  // namespace spool::lower::detail
