#pragma once
// Every figure two timing runs of one program report, required equal: the
// simulator's ways of running a program faster (replays, rows walked
// ahead, parts side by side) must not change any of them.

#include <spool/sim/sim.hpp>

#include <doctest/doctest.h>

namespace spool::test_support {

inline void check_same(const sim::Report& a, const sim::Report& b) {
  CHECK(a.cycles == b.cycles);
  CHECK(a.dram_read_bytes == b.dram_read_bytes);
  CHECK(a.dram_write_bytes == b.dram_write_bytes);
  CHECK(a.dram_useful_bytes == b.dram_useful_bytes);
  CHECK(a.dram_row_hits == b.dram_row_hits);
  CHECK(a.dram_row_misses == b.dram_row_misses);
  CHECK(a.flops == b.flops);
  CHECK(a.vector_element_ops == b.vector_element_ops);
  REQUIRE(a.units.size() == b.units.size());
  for (size_t i = 0; i < a.units.size(); ++i) CHECK(a.units[i].busy_cycles == b.units[i].busy_cycles);
  REQUIRE(a.kernel_stats.size() == b.kernel_stats.size());
  for (size_t i = 0; i < a.kernel_stats.size(); ++i) {
    CHECK(a.kernel_stats[i].launch_cycle == b.kernel_stats[i].launch_cycle);
    CHECK(a.kernel_stats[i].start_cycle == b.kernel_stats[i].start_cycle);
    CHECK(a.kernel_stats[i].end_cycle == b.kernel_stats[i].end_cycle);
  }
}

}  // namespace spool::test_support
