// Elementwise ops and fused programs (lowering.hpp): one vector kernel over
// the output's tiles, iotas the program reads loaded as extra inputs.

#include "lowering.hpp"
#include "tiled.hpp"

#include <algorithm>

namespace spool::lower::detail {

void Lowering::lower_fused(NodeId id, const ProgramAttr& p, bool fused) {
  const Node& n = g_.node(id);
  const std::string name = name_of(id);
  TiledSpec s;
  s.info = KernelInfo{em_.unique_name(name), n.op == Op::Fused ? "fused" : std::string(op_name(n.op)), fused, 0, "", 1};
  s.shape = n.shape;
  s.col_axis = std::max<int>(0, static_cast<int>(n.shape.size()) - 1);
  s.row_axis = widest_row_axis(n.shape);
  for (const Edge& e : n.inputs) s.inputs.push_back(read(e, name));
  const size_t k = s.inputs.size();
  const auto iotas = program_iotas(p, n.shape, name);
  for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
  Access out = output_buffer(id);
  s.outputs = {TiledOutput{out, TileOut::Full, 1}};
  s.body = [p, k, iotas](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
    std::map<size_t, int> iota_values;
    for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
    return std::vector<int>{emit_program(vb, p, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)),
                                         iota_values)};
  };
  emit_tiled(em_, s);
  values_[id.value] = out;
}

void Lowering::emit_program_kernel(const std::vector<Access>& ins, const ProgramAttr& p, const Access& out,
                                   const std::string& name) {
  TiledSpec s;
  s.info = KernelInfo{em_.unique_name(name), "fused", p.instrs.size() > 1, 0, "", 1};
  s.shape = out.shape;
  s.col_axis = std::max<int>(0, static_cast<int>(out.shape.size()) - 1);
  s.row_axis = widest_row_axis(out.shape);
  s.inputs = ins;
  const size_t k = ins.size();
  const auto iotas = program_iotas(p, out.shape, name);
  for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
  s.outputs = {TiledOutput{out, TileOut::Full, 1}};
  s.body = [p, k, iotas](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
    std::map<size_t, int> iota_values;
    for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
    return std::vector<int>{emit_program(vb, p, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)),
                                         iota_values)};
  };
  emit_tiled(em_, s);
}

}  // namespace spool::lower::detail
