// sim::run_functional on host tensors, and the lowering's tile timer.

#include <spool/sim/sim.hpp>

#include <spool/support/error.hpp>

#include <memory>

namespace spool::sim {

Executed run_functional(const npu::Program& p, const target::NpuConfig& config, const BufferNames& inputs,
                        const BufferNames& outputs, const std::map<std::string, interp::HostTensor>& values) {
  Memory memory(p);
  for (const auto& [name, buffer] : inputs) {
    auto it = values.find(name);
    if (it == values.end()) fail("run_functional: no value for input '{}'", name);
    const npu::DramBuffer& b = p.buffers[static_cast<size_t>(p.find_buffer(buffer))];
    const interp::HostTensor& t = it->second;
    if (t.dtype() != b.dtype || t.shape() != b.shape)
      fail("run_functional: input '{}' is {}{}, the program expects {}{}", name, dtype_name(t.dtype()),
           shape_str(t.shape()), dtype_name(b.dtype), shape_str(b.shape));
    std::vector<double> data(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) data[static_cast<size_t>(i)] = t.get(i);
    memory.write(buffer, data);
  }
  Options options;
  options.mode = Mode::Functional;
  options.memory = &memory;
  Executed out;
  out.report = run(p, config, options);
  for (const auto& [name, buffer] : outputs) {
    const npu::DramBuffer& b = p.buffers[static_cast<size_t>(p.find_buffer(buffer))];
    const std::vector<double> data = memory.read(buffer);
    interp::HostTensor t(b.dtype, b.shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      if (is_float(b.dtype))
        t.set(i, data[static_cast<size_t>(i)]);
      else
        t.set_int(i, static_cast<int64_t>(data[static_cast<size_t>(i)]));
    }
    out.outputs.emplace(name, std::move(t));
  }
  return out;
}

std::function<int64_t(const npu::Program&, int64_t)> tile_timer(const target::NpuConfig& config) {
  auto owned = std::make_shared<const target::NpuConfig>(config);
  return [owned](const npu::Program& p, int64_t limit) { return timing_cycles(p, *owned, limit); };
}

}  // namespace spool::sim
