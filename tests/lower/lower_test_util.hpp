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

#include "support/allclose.hpp"

#include <map>
#include <string>

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

// `options` with the simulator as the lowering's tile timer, as the
// pipeline lowers.
inline lower::LowerOptions timed(const target::NpuConfig& config, lower::LowerOptions options = {}) {
  if (!options.tile_cycles) options.tile_cycles = sim::tile_timer(config);
  return options;
}

// One graph's outputs from the interpreter and from the simulated lowering,
// on the same inputs.
struct Outputs {
  std::map<std::string, interp::HostTensor> expected;  // the interpreter's
  std::map<std::string, interp::HostTensor> got;       // the simulator's

  // Every simulated output against the interpreter's (test::allclose):
  // floats within `tolerance` times the output's largest |value|, integers
  // and bools exactly; a NaN matches nothing.
  test::AllClose within(double tolerance) const { return test::allclose(got, expected, {.stol = tolerance}); }
  test::AllClose exactly() const { return test::allclose(got, expected); }
};

// Lowers `g`, runs it on the interpreter's random inputs, and returns both
// runs' outputs. Also returns the lowering through `lowered_out` when asked.
inline Outputs lower_and_run(const Graph& g, const std::string& config_name, uint64_t seed, int64_t integer_bound = 2,
                             lower::Lowered* lowered_out = nullptr, const lower::LowerOptions& options = {}) {
  const target::NpuConfig config = target::load_config(config_name);
  const interp::Env env = interp::random_inputs(g, seed, integer_bound);
  Outputs out;
  out.expected = interp::run(g, env);
  lower::Lowered lowered = lower::to_npu(g, config, timed(config, options));
  // Every lowered program round-trips through the NPU text form.
  auto reparsed = npu::parse(npu::print(lowered.program));
  REQUIRE_MESSAGE(reparsed.ok(), reparsed.error().render());
  CHECK(reparsed.value() == lowered.program);
  out.got = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, env).outputs;
  if (lowered_out) *lowered_out = std::move(lowered);
  return out;
}

}  // namespace spool::lower_test
