// GEMM nodes (lowering.hpp): the GEMM kernel with its prologues and
// epilogue inside (gemm.cpp), and a softmax that is its only reader fused as
// its epilogue; standalone vector kernels around a plain GEMM when they
// cannot be placed.

#include "lowering.hpp"
#include "gemm.hpp"

#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace spool::lower::detail {

void Lowering::lower_gemm(NodeId id) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  const GemmAttr& attr = std::get<GemmAttr>(n.attr);
  const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
  GemmJob job;
  job.a_program = attr.a;
  job.b_program = attr.b;
  job.epilogue_program = attr.epilogue;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    Access a = read(n.inputs[i], name);
    if (a.is_literal && i < na + nb) a = materialize(a, name);  // operands stream from DRAM
    (i < na ? job.a : i < na + nb ? job.b : job.epilogue).push_back(a);
  }
  std::vector<DType> a_types, b_types;
  for (const Access& a : job.a) a_types.push_back(a.dtype);
  for (const Access& b : job.b) b_types.push_back(b.dtype);
  job.dtype = program_result(attr.a, a_types, job.a[0].shape.size(), "gemm A");
  const bool fused = !attr.a.instrs.empty() || !attr.b.instrs.empty() || !attr.epilogue.instrs.empty() || na > 1 ||
                     nb > 1 || n.inputs.size() > na + nb;
  job.info = KernelInfo{em_.unique_name(name), "gemm", fused, 0, "", 1};
  if (em_.options.choice) job.choice = em_.options.choice(g_, id);
  // A softmax along the rows or down the columns as the only reader: fused
  // into the epilogue (when no tile spans the rows or the columns, it stays
  // a kernel of its own, and keeps the output buffer it was given here).
  if (em_.options.fuse)
    if (const auto softmax = softmax_reader(id)) {
      GemmJob with_softmax = job;
      with_softmax.softmax = softmax->second;
      with_softmax.info.fused = true;
      with_softmax.out = output_buffer(softmax->first);
      if (!emit_gemm(em_, with_softmax)) {
        absorbed_.insert(softmax->first.value);
        values_[id.value] = with_softmax.out;
        values_[softmax->first.value] = with_softmax.out;
        return;
      }
      claimed_.emplace(softmax->first.value, with_softmax.out);
    }
  const Access out = output_buffer(id);
  job.out = out;
  std::optional<std::string> why;
  if (!em_.options.fuse && fused) why = "fusion is disabled";
  if (!why) why = emit_gemm(em_, job);
  if (!why) {
    values_[id.value] = out;
    return;
  }
  lower_gemm_unfused(id, job, out, *why);
}

// The fallback when the prologues and the epilogue cannot be placed in the
// GEMM kernel: they run as standalone vector kernels around a plain GEMM.
void Lowering::lower_gemm_unfused(NodeId id, const GemmJob& job, const Access& out, const std::string& why) {
  const std::string name = name_of(id);
  const GemmAttr& attr = std::get<GemmAttr>(g_.node(id).attr);
  const std::string note = fmt::format("{}: prologue/epilogue not fused into the GEMM ({}); standalone kernels", name, why);
  spdlog::debug("lower: {}", note);
  em_.report.notes.push_back(note);
  auto standalone = [&](const std::vector<Access>& ins, const ProgramAttr& p, const std::string& what) {
    if (p.instrs.empty() && ins.size() == 1) return ins[0];
    std::vector<DType> types;
    for (const Access& a : ins) types.push_back(a.dtype);
    const DType dt = program_result(p, types, ins[0].shape.size(), what);
    Access dst = new_dense(name + "." + what, dt, ins[0].shape);
    emit_program_kernel(ins, p, dst, name + "_" + what);
    return dst;
  };
  GemmJob plain;
  plain.dtype = job.dtype;
  plain.a = {standalone(job.a, attr.a, "a")};
  plain.b = {standalone(job.b, attr.b, "b")};
  plain.info = KernelInfo{em_.unique_name(name), "gemm", false, 0, "", 1};
  plain.choice = job.choice;
  const bool has_epilogue = !attr.epilogue.instrs.empty() || !job.epilogue.empty();
  Shape product_shape = out.shape;
  plain.out = has_epilogue ? new_dense(name + ".product", job.dtype, product_shape) : out;
  if (auto again = emit_gemm(em_, plain))
    fail("lower: {}: no GEMM tile fits the {}-byte scratchpad budget: {}", name, em_.budget, *again);
  if (has_epilogue) {
    std::vector<Access> ins{plain.out};
    for (const Access& e : job.epilogue) ins.push_back(e);
    emit_program_kernel(ins, attr.epilogue, out, name + "_epilogue");
  }
  values_[id.value] = out;
}

// The softmax along the last axis (Rows) or the one before it (Columns) that
// is the only reader of a GEMM's result, read unchanged, or nothing.
std::optional<std::pair<NodeId, FusedSoftmax>> Lowering::softmax_reader(NodeId id) {
  if (g_.use_count(id) != 1) return std::nullopt;
  if (!users_built_) {
    users_.assign(g_.id_bound(), {});
    for (NodeId n : g_.live_ids())
      for (const Edge& e : g_.node(n).inputs) users_[e.src.value].push_back(n);
    users_built_ = true;
  }
  if (users_[id.value].size() != 1) return std::nullopt;
  const NodeId u = users_[id.value][0];
  const Node& n = g_.node(u);
  if (n.op != Op::Softmax || !n.inputs[0].view.is_identity()) return std::nullopt;
  const int64_t axis = std::get<AxisAttr>(n.attr).axis, rank = static_cast<int64_t>(n.shape.size());
  if (axis == rank - 1) return std::pair{u, FusedSoftmax::Rows};
  if (axis == rank - 2) return std::pair{u, FusedSoftmax::Columns};
  return std::nullopt;
}

}  // namespace spool::lower::detail
