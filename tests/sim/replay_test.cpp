// Replaying kernels of a shape simulated before (timing_memo.cpp) changes
// nothing the simulator reports: every figure of a run with replays equals
// the run that steps every kernel, whether the replays are taken or
// refused.

#include <spool/npu/text.hpp>
#include <spool/sim/sim.hpp>

#include <doctest/doctest.h>

#include "layered_program.hpp"
#include "parse_program.hpp"

#include <string>
#include <tuple>
#include <vector>

using namespace spool;

namespace {

using sim_test::check_same;
using sim_test::layered;
using sim_test::parse_program;

sim::Report run(const npu::Program& p, const target::NpuConfig& c, bool replay) {
  sim::Options o;
  o.replay = replay;
  return sim::run(p, c, o);
}

}  // namespace

TEST_CASE("replay: layers of one shape are replayed, with every figure of stepping them") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  // Weights 8 MiB apart: every layer meets DRAM alike.
  const npu::Program p = parse_program(layered({0, 0, 0, 0, 0, 0}));
  const sim::Report stepped = run(p, v3, false);
  const sim::Report replayed = run(p, v3, true);
  check_same(stepped, replayed);
  CHECK(stepped.profile.kernels_replayed == 0);
  CHECK(stepped.profile.kernels_stepped == 6);
  CHECK(replayed.profile.kernels_replayed >= 1);
  CHECK(replayed.profile.kernels_stepped + replayed.profile.kernels_replayed == 6);
}

TEST_CASE("replay: a kernel that meets DRAM differently is stepped, and the figures still agree") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  // Layer 2 reads one element off its weight's start: its rows straddle
  // DMA requests, so it makes more requests than layer 1 and cannot be
  // replayed from it; nor can layer 3 from layer 2.
  const npu::Program p = parse_program(layered({0, 1, 0, 1, 3, 0}));
  const sim::Report stepped = run(p, v3, false);
  const sim::Report replayed = run(p, v3, true);
  check_same(stepped, replayed);
  CHECK(replayed.profile.replays_refused >= 1);
  CHECK(replayed.profile.kernels_stepped + replayed.profile.kernels_replayed == 6);
}

TEST_CASE("replay: a traced or multi-core run steps every kernel") {
  const npu::Program p = parse_program(layered({0, 0, 0}));
  const target::NpuConfig v3 = target::load_config("tpuv3");
  sim::Trace trace;
  sim::Options o;
  o.trace = &trace;
  const sim::Report traced = sim::run(p, v3, o);
  CHECK(traced.profile.kernels_replayed == 0);
  check_same(traced, run(p, v3, true));
  const target::NpuConfig v4 = target::load_config("tpuv4");
  if (v4.cores > 1) {
    const sim::Report multi = run(p, v4, true);
    CHECK(multi.profile.kernels_replayed == 0);
    check_same(multi, run(p, v4, false));
  }
}

TEST_CASE("progress: called as each kernel ends, stepped or replayed, with the cycle it ended at") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const npu::Program p = parse_program(layered({0, 0, 0, 0}));
  for (const bool replay : {false, true}) {
    std::vector<std::tuple<size_t, size_t, int64_t>> seen;
    sim::Options o;
    o.replay = replay;
    o.progress = [&](size_t finished, size_t total, int64_t cycle) { seen.emplace_back(finished, total, cycle); };
    const sim::Report r = sim::run(p, v3, o);
    REQUIRE(seen.size() == 4);
    for (size_t i = 0; i < seen.size(); ++i) {
      CHECK(std::get<0>(seen[i]) == i + 1);
      CHECK(std::get<1>(seen[i]) == 4);
      CHECK(std::get<2>(seen[i]) == r.kernel_stats[i].end_cycle);
    }
    CHECK(std::get<2>(seen.back()) == r.cycles);
  }
}
