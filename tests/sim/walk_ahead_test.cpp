// A timing run whose strided DRAM rows a second thread walks ahead
// (rows_ahead.hpp) reports every figure of the run that walks them itself,
// with kernels replayed, replays refused (whose rows are walked twice) and
// every kernel stepped. The run here waits for the thread at every call
// (TimingSim::WalkAhead::Patient), so the walk ahead is used whatever the
// machine's load.

#include "timing.hpp"

#include <spool/sim/sim.hpp>

#include <doctest/doctest.h>

#include "layered_program.hpp"
#include "parse_program.hpp"

#include <vector>

using namespace spool;
using sim::detail::TimingSim;

namespace {

sim::Report run(const npu::Program& p, const target::NpuConfig& c, bool replay, TimingSim::WalkAhead mode) {
  TimingSim sim(p, c, nullptr, replay);
  sim.set_walk_ahead(mode);
  return sim.run();
}

}  // namespace

TEST_CASE("walk ahead: every figure as when the run walks its own rows, replays taken, refused or none") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  // The second program's refused replays give a kernel's rows twice: the
  // walk ahead goes back to the kernel's first call for the second time.
  sim_test::for_layered_programs([&](const npu::Program& p, const std::vector<int64_t>& offsets, bool replay) {
    const sim::Report own = run(p, v3, replay, TimingSim::WalkAhead::Off);
    const sim::Report ahead = run(p, v3, replay, TimingSim::WalkAhead::Patient);
    sim_test::check_same(own, ahead);
    CHECK(own.profile.rows_walked_ahead == 0);
    // Every layer at offset 0 reads 16 tiles of 128 rows of whole granules.
    int64_t aligned = 0;
    for (const int64_t o : offsets) aligned += o == 0 ? 1 : 0;
    CHECK(ahead.profile.rows_walked_ahead >= 16 * aligned);
    if (replay) CHECK(ahead.profile.replays_refused == own.profile.replays_refused);
  });
}

TEST_CASE("walk ahead: a run with a cycle limit or several cores walks its own rows") {
  const npu::Program p = sim_test::parse_program(sim_test::layered({0, 0, 0}));
  const target::NpuConfig v3 = target::load_config("tpuv3");
  TimingSim limited(p, v3, nullptr);
  limited.set_walk_ahead(TimingSim::WalkAhead::Patient);
  limited.set_limit(1000);
  CHECK(limited.run().profile.rows_walked_ahead == 0);
  target::NpuConfig two = v3;
  two.cores = 2;
  const sim::Report own = run(p, two, true, TimingSim::WalkAhead::Off);
  const sim::Report ahead = run(p, two, true, TimingSim::WalkAhead::Patient);
  sim_test::check_same(own, ahead);
  CHECK(ahead.profile.rows_walked_ahead == 0);
}
