// lower::to_npu, top to bottom: sources become DRAM buffers (constants and
// iotas are written by tiny kernels into buffers read with broadcast
// strides), concats (sums of zero-padded parts that partition the output)
// become copy kernels into one buffer, every other kernel node is emitted by
// its generator, and graph outputs are bound to the buffers that hold them.
// Views are resolved on the final kernels, when an edge is read: strided steps
// compose into a DRAM alias read by strided DMA; only a pad, or a reshape of
// axes that are not contiguous, materialises a copy first.
//
// The Lowering class (lowering.hpp) runs here and dispatches each node on its
// op; each family of nodes is lowered in its own lower_*.cpp.

#include <spool/lower/lower.hpp>

#include "indexing.hpp"
#include "lowering.hpp"

#include <spool/npu/verify.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

namespace spool::lower {
namespace detail {

Lowering::Lowering(const Graph& g, const target::NpuConfig& config, const LowerOptions& options)
    : g_(g), em_(g, config, options), values_(g.id_bound()) {}

Lowered Lowering::run() {
  const std::vector<NodeId> order = g_.topo_order();
  find_concats(order);
  for (NodeId id : order) {
    if (absorbed_.count(id.value) || values_[id.value]) continue;  // a cache input lowered early (concat_buffer)
    lower_node(id);
  }
  bind_outputs();
  em_.finish();
  Lowered out;
  out.program = std::move(em_.program);
  out.report = std::move(em_.report);
  out.tuned = std::move(em_.tuned);
  out.inputs = std::move(inputs_);
  out.outputs = std::move(outputs_);
  return out;
}

std::string Lowering::name_of(NodeId id) const { return fmt::format("{}_{}", op_name(g_.node(id).op), id.value); }

void Lowering::lower_node(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  switch (op_info(n.op).cls) {
    case OpClass::Source: return lower_source(id);
    case OpClass::Unary:
    case OpClass::Cast:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Select: {
      ProgramAttr p;
      ProgramInstr instr;
      instr.op = n.op;
      for (size_t i = 0; i < n.inputs.size(); ++i) instr.args[i] = static_cast<uint16_t>(i);
      if (n.op == Op::Cast) instr.dtype = std::get<DTypeAttr>(n.attr).to;
      p.instrs.push_back(instr);
      if (concats_.count(id.value)) return lower_concat(id);
      return lower_fused(id, p, false);
    }
    case OpClass::Reduce: {
      ReduceAttr r;
      r.kind = n.op;
      r.axis = std::get<AxisAttr>(n.attr).axis;
      return lower_reduce(id, r);
    }
    case OpClass::TopK: return lower_topk(id);
    case OpClass::Grouped: return lower_grouped(id);
    case OpClass::Gather:
      return gather_by_dma(n.shape, std::get<AxisAttr>(n.attr).axis) ? lower_indexing(id) : lower_gather(id);
    case OpClass::Scatter: return lower_indexing(id);
    case OpClass::LoopMarker:
      fail("lower: {} is a loop marker; unroll the graph before lowering", name);
    case OpClass::Kernel: break;
  }
  switch (n.op) {
    case Op::Fused: {
      if (concats_.count(id.value)) return lower_concat(id);
      const auto& p = std::get<ProgramAttr>(n.attr);
      return lower_fused(id, p, p.instrs.size() > 1);
    }
    case Op::Gemm: return lower_gemm(id);
    case Op::Reduce: return lower_reduce(id, std::get<ReduceAttr>(n.attr));
    case Op::Softmax:
    case Op::RmsNorm:
    case Op::LayerNorm: return lower_rows(id);
    case Op::Copy: return lower_copy(id);
    default: SPOOL_ASSERT(false, "{} is not a kernel op", name);
  }
}

}  // namespace detail

Lowered to_npu(const Graph& llir, const target::NpuConfig& config, const LowerOptions& options) {
  Lowered out = detail::Lowering(llir, config, options).run();
  npu::verify_or_throw(out.program);
  return out;
}

std::string KernelChoice::to_string() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (tile_m > 0) add(fmt::format("m{}", tile_m));
  if (tile_n > 0) add(fmt::format("n{}", tile_n));
  if (tile_k > 0) add(fmt::format("k{}", tile_k));
  if (slots > 0) add(fmt::format("slots{}", slots));
  if (order > 0) add(order == 1 ? "n-outer" : "m-outer");
  if (cores > 0) add(cores == 1 ? "one-core" : "spread");
  return s.empty() ? "default" : s;
}

std::string LowerReport::to_text() const {
  std::string s = fmt::format("kernels          {} ({} fused, {} copy)\n", kernels, fused_kernels, copy_kernels);
  s += fmt::format("dram aliases     {}\n", dram_aliases);
  s += fmt::format("spad peak        {} bytes\n", spad_peak_bytes);
  for (const std::string& n : notes) s += fmt::format("note             {}\n", n);
  return s;
}

}  // namespace spool::lower
