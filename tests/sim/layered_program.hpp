#pragma once
// A program of layers (kernels of one shape over their own weights) and a
// comparison of every figure two runs of a program report: the replay and
// walk-ahead tests run one program two ways and require the same figures.

#include <spool/sim/sim.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spool::sim_test {

// `layers` kernels of one shape, each a strided tile copy from its own
// weight (read through an alias `offsets[i]` elements into it) with a
// vector step and a matmul between load and store, like a layer's kernel.
inline std::string layered(const std::vector<int64_t>& offsets) {
  std::string t = "program \"layers\" spad 4194304\n";
  for (size_t i = 0; i < offsets.size(); ++i) {
    t += fmt::format("buffer @w{} : f32[4096, 512] weight\n", i);
    t += fmt::format("buffer @v{} : f32[2048, 256] alias @w{} + {}\n", i, i, offsets[i]);
    t += fmt::format("buffer @o{} : f32[2048, 128] output\n", i);
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    t += fmt::format(R"(kernel "k{0}" {{
  spad %A : f32[16384] x2 at 0
  spad %B : f32[16384] x1 at 131072
  spad %C : f32[16384] x1 at 262144
  for r in 0..16 {{
    dma.load [128, 128] %A{{r}}[0 : 128, 1] <- @v{0}[32768*r : 256, 1] tag 0
    matmul [128, 128, 128] %C[0 : 128] = %A{{r}}[0 : 128], %A{{r}}[0 : 128]
    vector "scale" [128, 128] {{
      %x = load %C[0 : 128] : f32
      %y = mul %x, %x : f32
      store %B[0 : 128], %y
    }}
    dma.store [128, 128] @o{0}[16384*r : 128, 1] <- %B[0 : 128, 1] tag 1
  }}
  wait 1
}}
)",
                     i);
  }
  return t;
}

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

}  // namespace spool::sim_test
