// A one-core timing run in parts side by side (timing_parts.cpp) reports
// every figure of the run in one part: with the guessed open rows holding,
// with them not holding (the part is stepped again), with replays and
// without, and with an error in a later part.

#include "timing.hpp"

#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>

#include "layered_program.hpp"
#include "parse_program.hpp"

#include <fmt/format.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace spool;

namespace {

sim::Report in_one(const npu::Program& p, const target::NpuConfig& c, bool replay) {
  sim::detail::TimingSim sim(p, c, nullptr, replay);
  return sim.run();
}

// `parts` parts on `threads` threads.
sim::Report in_parts(const npu::Program& p, const target::NpuConfig& c, bool replay, size_t parts, size_t threads,
                     size_t guess_kernels = 16, const sim::ProgressFn& progress = {}) {
  sim::detail::PartsOptions o;
  o.threads = threads;
  o.parts_per_thread = (parts + threads - 1) / threads;
  o.guess_kernels = guess_kernels;
  o.min_part_work = 1;
  std::optional<sim::Report> r = sim::detail::simulate_parts(p, c, replay, progress, o);
  REQUIRE(r.has_value());
  return std::move(*r);
}

// Kernels that each read what the one before wrote, the tile it wrote
// last first: each kernel's first load hits the rows the last one's final
// store left open.
std::string chained(int kernels) {
  std::string t = "program \"chain\" spad 4194304\n";
  for (int i = 0; i <= kernels; ++i)
    t += fmt::format("buffer @x{} : f32[2048, 128] {}\n", i, i == 0 ? "input" : "output");
  for (int i = 0; i < kernels; ++i) {
    t += fmt::format(R"(kernel "k{0}" {{
  spad %A : f32[16384] x2 at 0
  spad %B : f32[16384] x1 at 131072
  dma.load [128, 128] %A{{1}}[0 : 128, 1] <- @x{0}[245760 : 128, 1] tag 0
  for r in 0..16 {{
    dma.load [128, 128] %A{{r}}[0 : 128, 1] <- @x{0}[16384*r : 128, 1] tag 0
    vector "twice" [128, 128] {{
      %x = load %A{{r}}[0 : 128] : f32
      %y = add %x, %x : f32
      store %B[0 : 128], %y
    }}
    dma.store [128, 128] @x{1}[16384*r : 128, 1] <- %B[0 : 128, 1] tag 1
  }}
  wait 1
}}
)",
                     i, i + 1);
  }
  return t;
}

}  // namespace

TEST_CASE("parts: every figure of the run in one part, replays taken, refused or none") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  sim_test::for_layered_programs([&](const npu::Program& p, const std::vector<int64_t>& offsets, bool replay) {
    const sim::Report one = in_one(p, v3, replay);
    for (const auto& [parts, threads] : {std::pair<size_t, size_t>{2, 2}, {3, 3}, {6, 2}, {6, 3}}) {
      CAPTURE(parts);
      CAPTURE(threads);
      const sim::Report r = in_parts(p, v3, replay, parts, threads);
      sim_test::check_same(one, r);
      CHECK(r.profile.parts == static_cast<int64_t>(parts));
      CHECK(r.profile.kernels_stepped + r.profile.kernels_replayed == static_cast<int64_t>(offsets.size()));
    }
  });
}

TEST_CASE("parts: a part whose guessed rows do not hold is stepped again, with the same figures") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const npu::Program p = sim_test::parse_program(chained(4));
  const sim::Report one = in_one(p, v3, true);
  // No kernel walked back: every row guessed closed, but each part's first
  // load hits the rows the kernel before it left open.
  const sim::Report blind = in_parts(p, v3, true, 2, 2, 0);
  sim_test::check_same(one, blind);
  CHECK(blind.profile.parts == 2);
  CHECK(blind.profile.parts_stepped_again == 1);
  // Walked back, the guess holds.
  const sim::Report walked = in_parts(p, v3, true, 2, 2);
  sim_test::check_same(one, walked);
  CHECK(walked.profile.parts_stepped_again == 0);
  CHECK(one.dram_row_hits > 0);
}

TEST_CASE("parts: progress as the parts join, to the last kernel's cycle") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const npu::Program p = sim_test::parse_program(sim_test::layered({0, 0, 0, 0, 0, 0}));
  std::vector<std::tuple<size_t, size_t, int64_t>> seen;
  const sim::Report r = in_parts(p, v3, true, 3, 2, 16, [&](size_t finished, size_t total, int64_t cycle) {
    seen.emplace_back(finished, total, cycle);
  });
  REQUIRE(!seen.empty());
  for (size_t i = 0; i < seen.size(); ++i) {
    CHECK(std::get<1>(seen[i]) == 6);
    CHECK(std::get<2>(seen[i]) == r.kernel_stats[std::get<0>(seen[i]) - 1].end_cycle);
    if (i > 0) CHECK(std::get<0>(seen[i]) > std::get<0>(seen[i - 1]));
  }
  CHECK(std::get<0>(seen.back()) == 6);
  CHECK(std::get<2>(seen.back()) == r.cycles);
}

TEST_CASE("parts: an error in a later part is the error of the run in one part") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  // The last kernel's matmul is wider than the 128-column array.
  std::string text = sim_test::layered({0, 0, 0, 0});
  const std::string step = "matmul [128, 128, 128] %C[0 : 128] = %A{r}[0 : 128], %A{r}[0 : 128]";
  const size_t at = text.rfind(step);
  REQUIRE(at != std::string::npos);
  text.replace(at, step.size(), "matmul [64, 128, 256] %C[0 : 128] = %A{r}[0 : 128], %A{r}[0 : 256]");
  const npu::Program p = sim_test::parse_program(text);
  std::string one_error, parts_error;
  try {
    (void)in_one(p, v3, true);
  } catch (const Error& e) {
    one_error = e.what();
  }
  try {
    (void)in_parts(p, v3, true, 2, 2);
  } catch (const Error& e) {
    parts_error = e.what();
  }
  CHECK(!one_error.empty());
  CHECK(parts_error == one_error);
}

TEST_CASE("parts: sim::run in parts or in one, the same report; a small program runs in one") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const npu::Program p = sim_test::parse_program(sim_test::layered({0, 1, 0, 1}));
  sim::Options one;
  one.threads = 1;
  sim::Options two;
  two.threads = 2;
  const sim::Report a = sim::run(p, v3, one);
  const sim::Report b = sim::run(p, v3, two);
  sim_test::check_same(a, b);
  CHECK(a.profile.parts == 1);
  // Four small kernels are not worth a second thread.
  CHECK(b.profile.parts == 1);
}
