#pragma once
// A program of layers (kernels of one shape over their own weights): the
// replay, walk-ahead and parts tests run one program two ways and require
// the same figures (support/same_sim_report.hpp).

#include <spool/sim/sim.hpp>

#include "parse_program.hpp"
#include "support/same_sim_report.hpp"

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

using test_support::check_same;

// Runs `f` on each of two layered programs, with replays and without: one
// whose layers all meet DRAM alike, and one whose odd offsets make some
// replays refused (a kernel's rows are then walked twice).
template <typename F>
void for_layered_programs(F&& f) {
  for (const std::vector<int64_t>& offsets :
       {std::vector<int64_t>{0, 0, 0, 0, 0, 0}, std::vector<int64_t>{0, 1, 0, 1, 3, 0, 0, 1}}) {
    CAPTURE(offsets.size());
    const npu::Program p = parse_program(layered(offsets));
    for (const bool replay : {false, true}) {
      CAPTURE(replay);
      f(p, offsets, replay);
    }
  }
}

}  // namespace spool::sim_test
