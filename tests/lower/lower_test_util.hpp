#pragma once
// Shared by the lower tests: lower a graph, run it in functional simulation
// on the interpreter's random inputs and compare every output.

#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/lower/lower.hpp>
#include <spool/npu/text.hpp>
#include <spool/sim/sim.hpp>
#include <spool/target/npu.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

namespace spool::lower_test {

// One instruction of an elementwise program: an op over earlier values.
inline ProgramInstr instr(Op op, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0) {
  ProgramInstr in;
  in.op = op;
  in.args = {a, b, c};
  return in;
}
// A constant instruction of the given dtype.
inline ProgramInstr constant_instr(double v, DType dtype = DType::F32) {
  ProgramInstr in;
  in.op = Op::Constant;
  in.value = Scalar::of(dtype, v);
  return in;
}

// Largest error of the simulated outputs against the interpreter's, relative
// to each output's largest |value| (integer and bool outputs: any difference
// counts as 1; NaN against NaN is no error).
template <typename Expected>
double worst_error(const Expected& expected, const sim::Executed& got) {
  double worst = 0;
  for (const auto& [name, ref] : expected) {
    CAPTURE(name);
    REQUIRE(got.outputs.count(name));
    const interp::HostTensor& act = got.outputs.at(name);
    REQUIRE(act.shape() == ref.shape());
    REQUIRE(act.dtype() == ref.dtype());
    double scale = 0, err = 0;
    for (int64_t i = 0; i < ref.size(); ++i) {
      scale = std::max(scale, std::fabs(ref.get(i)));
      const double d = std::fabs(act.get(i) - ref.get(i));
      err = std::max(err, std::isnan(d) ? (std::isnan(ref.get(i)) && std::isnan(act.get(i)) ? 0.0 : 1e30) : d);
    }
    const double rel = is_float(ref.dtype()) ? err / std::max(scale, 1e-30) : (err > 0 ? 1.0 : 0.0);
    if (rel > 1e-5) MESSAGE(name << ": relative error " << rel);
    worst = std::max(worst, rel);
  }
  return worst;
}

// `options` with the simulator as the lowering's tile timer, as the
// pipeline lowers.
inline lower::LowerOptions timed(const target::NpuConfig& config, lower::LowerOptions options = {}) {
  if (!options.tile_cycles) options.tile_cycles = sim::tile_timer(config);
  return options;
}

// check_against_interp: lower `g`, run it on the interpreter's random inputs
// and return worst_error. Also returns the lowering through `lowered_out`
// when asked.
inline double check_against_interp(const Graph& g, const std::string& config_name, uint64_t seed,
                                   int64_t integer_bound = 2, lower::Lowered* lowered_out = nullptr,
                                   const lower::LowerOptions& options = {}) {
  const target::NpuConfig config = target::load_config(config_name);
  const interp::Env env = interp::random_inputs(g, seed, integer_bound);
  const auto expected = interp::run(g, env);
  lower::Lowered lowered = lower::to_npu(g, config, timed(config, options));
  // Every lowered program round-trips through the NPU text form.
  auto reparsed = npu::parse(npu::print(lowered.program));
  REQUIRE_MESSAGE(reparsed.ok(), reparsed.error().render());
  CHECK(reparsed.value() == lowered.program);
  const sim::Executed got = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, env);
  const double worst = worst_error(expected, got);
  if (lowered_out) *lowered_out = std::move(lowered);
  return worst;
}

}  // namespace spool::lower_test
