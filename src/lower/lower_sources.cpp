// Sources (lowering.hpp): inputs and weights become DRAM buffers; constants
// are literals that readers use directly; iotas are written by tiny kernels
// into buffers read with broadcast strides.

#include "lowering.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace spool::lower::detail {

using npu::BufferKind;
using npu::ScalarType;
using npu::VecOp;

void Lowering::lower_source(NodeId id) {
  const Node& n = g_.node(id);
  switch (n.op) {
    case Op::Input:
    case Op::Weight: {
      const std::string& nm = std::get<NameAttr>(n.attr).name;
      const Access a = new_dense(nm, n.dtype, n.shape, n.op == Op::Input ? BufferKind::Input : BufferKind::Weight);
      inputs_.push_back({nm, em_.program.buffers[a.buffer].name});
      values_[id.value] = a;
      return;
    }
    case Op::Constant: {
      // No kernel: readers use the value as a literal.
      Access lit;
      lit.dtype = n.dtype;
      lit.shape = n.shape;
      lit.strides = Shape(n.shape.size(), 0);
      lit.is_literal = true;
      lit.literal = std::get<ScalarAttr>(n.attr).value.as_double();
      values_[id.value] = lit;
      return;
    }
    case Op::Iota: {
      const int64_t axis = std::get<AxisAttr>(n.attr).axis;
      values_[id.value] = iota(n.dtype, n.shape, axis, name_of(id));
      return;
    }
    default: SPOOL_ASSERT(false, "{} is not a source", op_name(n.op));
  }
}

// An iota of `shape` along `axis`: a 1-D buffer of the axis's indices, read
// with stride 0 on every other axis. Written tile by tile with the tile's
// first index as a literal, so no loop variable enters the body.
Access Lowering::iota(DType dtype, const Shape& shape, int64_t axis, const std::string& name) {
  const int64_t len = shape[static_cast<size_t>(axis)];
  auto key = std::make_pair(static_cast<int>(dtype), len);
  auto it = iotas_.find(key);
  if (it == iotas_.end()) {
    const Access buf = new_dense(fmt::format("iota{}", len), dtype, {len});
    const int64_t TC = std::min<int64_t>(len, std::max<int64_t>(1, std::min<int64_t>(4096, em_.budget / 16)));
    KernelBuilder kb(em_.unique_name(name));
    const int out = kb.spad("out", dtype, TC, 2);
    for (int64_t t = 0; t * TC < len; ++t) {
      const int64_t w = std::min(TC, len - t * TC);
      VecBuilder vb("iota", Extent::of(1), Extent::of(w));
      const int col = vb.iota(true);
      const int idx = vb.op(VecOp::Add, ScalarType::Index, {col, vb.constant(ScalarType::Index, double(t * TC))});
      vb.store(SpadRef{out, Affine::of(t), Affine::of(0), w}, vb.op(VecOp::Cast, value_type(dtype), {idx}));
      kb.emit(vb.done());
      kb.emit(dma(false, buf.buffer, Affine::of(t * TC), {1}, SpadRef{out, Affine::of(t), Affine::of(0), 0}, {1},
                  {Extent::of(w)}, kStoreTag));
    }
    kb.emit(Stmt{npu::WaitOp{kStoreTag}});
    int64_t footprint = 0;
    npu::Kernel k = kb.finish(footprint);
    em_.add_kernels({std::move(k)}, KernelInfo{name, "iota", false, 0, fmt::format("cols {}", TC), 1}, footprint);
    it = iotas_.emplace(key, buf).first;
  }
  Access a = it->second;
  a.shape = shape;
  a.strides = Shape(shape.size(), 0);
  a.strides[static_cast<size_t>(axis)] = 1;
  return a;
}

// Iota instructions of a program over `shape`: their values as extra inputs.
std::vector<std::pair<size_t, Access>> Lowering::program_iotas(const ProgramAttr& p, const Shape& shape,
                                                               const std::string& name) {
  std::vector<std::pair<size_t, Access>> out;
  for (size_t i = 0; i < p.instrs.size(); ++i)
    if (p.instrs[i].op == Op::Iota) out.push_back({i, iota(p.instrs[i].dtype, shape, p.instrs[i].axis, name + "_iota")});
  return out;
}

}  // namespace spool::lower::detail
