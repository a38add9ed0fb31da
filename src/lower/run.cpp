// lower::run_functional: DRAM filled from named host tensors, the functional
// simulator, the outputs read back as host tensors of the graph's types.

#include <spool/lower/lower.hpp>

#include <spool/support/error.hpp>

namespace spool::lower {

Executed run_functional(const Lowered& lowered, const target::NpuConfig& config,
                        const std::map<std::string, interp::HostTensor>& inputs) {
  const npu::Program& p = lowered.program;
  sim::Memory memory(p);
  for (const auto& [name, buffer] : lowered.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) fail("run_functional: no value for input '{}'", name);
    const npu::DramBuffer& b = p.buffers[static_cast<size_t>(p.find_buffer(buffer))];
    const interp::HostTensor& t = it->second;
    if (t.dtype() != b.dtype || t.shape() != b.shape)
      fail("run_functional: input '{}' is {}{}, the program expects {}{}", name, dtype_name(t.dtype()),
           shape_str(t.shape()), dtype_name(b.dtype), shape_str(b.shape));
    std::vector<double> values(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i) values[static_cast<size_t>(i)] = t.get(i);
    memory.write(buffer, values);
  }
  sim::Options options;
  options.mode = sim::Mode::Functional;
  options.memory = &memory;
  Executed out;
  out.report = sim::run(p, config, options);
  for (const auto& [name, buffer] : lowered.outputs) {
    const npu::DramBuffer& b = p.buffers[static_cast<size_t>(p.find_buffer(buffer))];
    const std::vector<double> values = memory.read(buffer);
    interp::HostTensor t(b.dtype, b.shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      if (is_float(b.dtype))
        t.set(i, values[static_cast<size_t>(i)]);
      else
        t.set_int(i, static_cast<int64_t>(values[static_cast<size_t>(i)]));
    }
    out.outputs.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace spool::lower
