// The timing model against its documented analytic formulas, bandwidth and
// roofline bounds, double buffering, multi-core overlap and the trace.

#include <spool/npu/text.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <spool/models/workloads.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include "parse_program.hpp"

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

using namespace spool;

namespace {

using sim_test::parse_program;

target::NpuConfig toy_with(int weight_buffers) {
  std::ifstream in(std::string(SPOOL_SOURCE_DIR) + "/configs/toy.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["systolic"]["weight_buffers"] = weight_buffers;
  return target::parse_config(j.dump(), "toy.json");
}

// A kernel of matmul tile steps only, operands resident in the scratchpad,
// tiled like the GEMM workload on an R x R array: n, m, k loops with ragged
// edges; every (n, k) weight tile lives in its own slot.
std::string matmul_only(int64_t M, int64_t K, int64_t N, int64_t TM, int64_t R) {
  const int64_t MT = (M + TM - 1) / TM, KT = (K + R - 1) / R, NT = (N + R - 1) / R;
  std::string t = fmt::format("program \"mm\" spad 262144\nkernel \"mm\" {{\n");
  t += fmt::format("  spad %A : f32[{}] x1 at 0\n", TM * R);
  t += fmt::format("  spad %B : f32[{}] x{} at {}\n", R * R, NT * KT, TM * R * 4);
  t += fmt::format("  spad %C : f32[{}] x1 at {}\n", TM * R, TM * R * 4 + NT * KT * R * R * 4);
  t += fmt::format("  for n in 0..{} {{\n    for m in 0..{} {{\n      for k in 0..{} {{\n", NT, MT, KT);
  t += fmt::format("        matmul [min({}, {} - {}*m), min({}, {} - {}*k), min({}, {} - {}*n)] %C[0 : {}] = "
                   "%A[0 : {}], %B{{{}*n + k}}[0 : {}]\n",
                   TM, M, TM, R, K, R, R, N, R, R, R, KT, R);
  t += "      }\n    }\n  }\n}\n";
  return t;
}

// The documented weight-stationary model (timing.cpp), evaluated tile by
// tile: preload R cycles, stream m, done at start + m + R + n - 1; shadow
// weights overlap the next preload with the current stream; a tile whose
// weights are already in the array needs no preload.
int64_t analytic_cycles(int64_t M, int64_t K, int64_t N, int64_t TM, int64_t R, int weight_buffers) {
  const int64_t MT = (M + TM - 1) / TM, KT = (K + R - 1) / R, NT = (N + R - 1) / R;
  int64_t stream_free = 0, preload_free = 0, drained = 0, end = 0;
  int64_t last_n = -1, last_k = -1;
  for (int64_t n = 0; n < NT; ++n)
    for (int64_t m = 0; m < MT; ++m)
      for (int64_t k = 0; k < KT; ++k) {
        const int64_t mm = std::min(TM, M - TM * m), nn = std::min(R, N - R * n);
        const bool resident = n == last_n && k == last_k;
        int64_t start = 0;
        if (resident) {
          start = stream_free;
        } else if (weight_buffers == 2) {
          start = std::max(stream_free, preload_free + R);
          preload_free = start;
        } else {
          start = std::max(drained, stream_free) + R;
        }
        stream_free = start + mm;
        drained = start + mm + R + nn - 1;
        end = std::max(end, drained);
        last_n = n;
        last_k = k;
      }
  return end;
}

int64_t kernel_cycles(const sim::Report& r, size_t k = 0) {
  return r.kernel_stats.at(k).end_cycle - r.kernel_stats.at(k).start_cycle;
}

}  // namespace

TEST_CASE("timing: GEMM tile steps follow the weight-stationary analytic model") {
  struct Case {
    int64_t M, K, N, TM;
  };
  const Case cases[] = {{32, 32, 32, 32}, {64, 16, 24, 16}, {21, 13, 19, 16}, {5, 3, 30, 4}, {100, 8, 8, 100}};
  for (int wb : {1, 2}) {
    const target::NpuConfig config = toy_with(wb);
    for (const Case& c : cases) {
      CAPTURE(wb);
      CAPTURE(c.M);
      CAPTURE(c.K);
      CAPTURE(c.N);
      const sim::Report r = sim::run(parse_program(matmul_only(c.M, c.K, c.N, c.TM, 8)), config);
      CHECK(kernel_cycles(r) == analytic_cycles(c.M, c.K, c.N, c.TM, 8, wb));
      CHECK(r.matmul_flops == 2 * c.M * c.K * c.N);
    }
  }
  // Closed forms for aligned shapes with distinct weight tiles (T tiles of m rows, n columns):
  //   one weight buffer:   T * (R + m + R + n - 1)
  //   two weight buffers:  R + (T - 1) * max(m, R) + m + R + n - 1
  const int64_t R = 8, T = 4 * 4;  // 32x32x32 with TM = 32: NT = KT = 4, MT = 1
  CHECK(kernel_cycles(sim::run(parse_program(matmul_only(32, 32, 32, 32, R)), toy_with(1))) == T * (R + 32 + R + 8 - 1));
  CHECK(kernel_cycles(sim::run(parse_program(matmul_only(32, 32, 32, 32, R)), toy_with(2))) ==
        R + (T - 1) * 32 + 32 + R + 8 - 1);
  CHECK(kernel_cycles(sim::run(parse_program(matmul_only(4, 32, 32, 4, R)), toy_with(2))) ==
        R + (T - 1) * R + 4 + R + 8 - 1);
}

TEST_CASE("timing: full GEMM workloads are bounded below by the array model and the roofline") {
  for (const char* config_name : {"toy", "tpuv3"}) {
    const target::NpuConfig config = target::load_config(config_name);
    for (const char* spec :
         {"gemm:64x64x64", "gemm:37x20x19", "gemm:256x512x128", "gemm:1000x300x70", "gemm:512x4096x1024"}) {
      CAPTURE(config_name);
      CAPTURE(spec);
      const models::Workload w = models::compile_workload(spec, config);
      const sim::Report r = sim::run(w.program, config);
      CHECK(r.cycles >= r.roofline_cycles);
      int64_t array_busy = 0;
      for (const sim::UnitStats& u : r.units)
        if (u.name.find(".array") != std::string::npos) array_busy += u.busy_cycles;
      // Every tile streams its m rows: the arrays are busy at least 2*M*K*N / (2*R*C) cycles in total.
      CHECK(array_busy * 2 * config.systolic.rows * config.systolic.cols >= r.matmul_flops);
      CHECK(kernel_cycles(r) * config.systolic.arrays >= array_busy / 2);
      // No unit is busy for longer than the run (double-buffered weights
      // load while the array streams: that is not time it is busy twice).
      for (const sim::UnitStats& u : r.units) {
        CAPTURE(u.name);
        CHECK(u.utilisation <= 1.0);
      }
    }
  }
}

namespace {

// Copies `bytes` of f32 from @src to @dst in tiles of `tile` elements through
// a scratchpad buffer of `slots` slots. Pipelined (needs two slots): the load
// of tile i + 1 is issued before the store of tile i, as the DMA engine is
// in order; otherwise each tile is loaded, then stored.
std::string copy_program(int64_t bytes, int64_t tile, int slots, int64_t spad, bool pipelined) {
  const int64_t elements = bytes / 4, tiles = elements / tile;
  if (!pipelined)
    return fmt::format(R"(program "copy" spad {0}
buffer @src : f32[{1}] input
buffer @dst : f32[{1}] output
kernel "copy" {{
  spad %T : f32[{2}] x{3} at 0
  for i in 0..{4} {{
    dma.load [{2}] %T{{i}}[0 : 1] <- @src[{2}*i : 1] tag 0
    dma.store [{2}] @dst[{2}*i : 1] <- %T{{i}}[0 : 1] tag 1
  }}
  wait 1
}}
)",
                       spad, elements, tile, slots, tiles);
  return fmt::format(R"(program "copy" spad {0}
buffer @src : f32[{1}] input
buffer @dst : f32[{1}] output
kernel "copy" {{
  spad %T : f32[{2}] x{3} at 0
  dma.load [{2}] %T[0 : 1] <- @src[0 : 1] tag 0
  for i in 0..{4} {{
    dma.load [{2}] %T{{i + 1}}[0 : 1] <- @src[{2}*i + {2} : 1] tag 0
    dma.store [{2}] @dst[{2}*i : 1] <- %T{{i}}[0 : 1] tag 1
  }}
  dma.store [{2}] @dst[{5} : 1] <- %T{{{4}}}[0 : 1] tag 1
  wait 1
}}
)",
                     spad, elements, tile, slots, tiles - 1, elements - tile);
}

// Of what the channels sustain between refreshes.
double achieved_fraction(const sim::Report& r, const target::NpuConfig& c) {
  const double seconds = r.time_ms * 1e-3;
  return static_cast<double>(r.dram_useful_bytes) / seconds / c.dram_sustained_bytes_per_second();
}

}  // namespace

TEST_CASE("timing: a bandwidth-bound copy reaches at least 90% of the DRAM bandwidth") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const sim::Report big = sim::run(parse_program(copy_program(64 << 20, 65536, 2, v3.spad_bytes(), true)), v3);
  CHECK(big.dram_useful_bytes == int64_t{2} * (64 << 20));
  CHECK(achieved_fraction(big, v3) >= 0.90);
  CHECK(achieved_fraction(big, v3) <= 1.0);
  CHECK(big.cycles >= big.roofline_cycles);

  const target::NpuConfig toy = target::load_config("toy");
  const sim::Report small = sim::run(parse_program(copy_program(1 << 20, 4096, 2, toy.spad_bytes(), true)), toy);
  CHECK(achieved_fraction(small, toy) >= 0.90);
  CHECK(achieved_fraction(small, toy) <= 1.0);
}

TEST_CASE("timing: all-bank refresh takes its share of a DRAM-bound stream's time") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  REQUIRE(v3.dram.t_refi == 3432);
  REQUIRE(v3.dram.t_rfc == 308);
  CHECK(v3.dram_available() == doctest::Approx(3124.0 / 3432));
  target::NpuConfig no_refresh = v3;
  no_refresh.dram.t_refi = no_refresh.dram.t_rfc = 0;
  CHECK(no_refresh.dram_available() == 1.0);
  const npu::Program copy = parse_program(copy_program(64 << 20, 65536, 2, v3.spad_bytes(), true));
  const sim::Report with = sim::run(copy, v3), without = sim::run(copy, no_refresh);
  // The copy is bound by the channels: refresh stretches it by t_refi / (t_refi - t_rfc).
  CHECK(static_cast<double>(with.cycles) / static_cast<double>(without.cycles) ==
        doctest::Approx(3432.0 / 3124).epsilon(0.01));
  CHECK(with.roofline_cycles == without.roofline_cycles);  // the roofline is the peak
  CHECK(achieved_fraction(without, no_refresh) >= 0.90);
}

TEST_CASE("timing: DMA and compute overlap only as far as the allocated buffers allow") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const sim::Report single = sim::run(parse_program(copy_program(16 << 20, 65536, 1, v3.spad_bytes(), false)), v3);
  const sim::Report twice = sim::run(parse_program(copy_program(16 << 20, 65536, 2, v3.spad_bytes(), true)), v3);
  // With one slot each load waits until the previous tile has been stored
  // and each store until its load has completed (a DRAM round trip).
  CHECK(static_cast<double>(single.cycles) > 1.1 * static_cast<double>(twice.cycles));
  // Both programs copy correctly.
  for (const auto& [slots, pipelined] : {std::pair<int, bool>{1, false}, {2, true}}) {
    const npu::Program p = parse_program(copy_program(64 << 10, 1024, slots, v3.spad_bytes(), pipelined));
    sim::Memory memory(p);
    std::vector<double> src(16 << 10);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i % 977) - 300.0;
    memory.write("src", src);
    sim::Options options;
    options.mode = sim::Mode::Functional;
    options.memory = &memory;
    (void)sim::run(p, v3, options);
    CHECK(memory.read("dst") == src);
  }
  // A strided (transposing) access pays a whole request per element.
  const std::string strided = R"(program "t" spad 16777216
buffer @src : f32[256, 256] input
buffer @dst : f32[256, 256] output
kernel "t" {
  spad %T : f32[65536] x1 at 0
  dma.load [256, 256] %T[0 : 256, 1] <- @src[0 : 1, 256] tag 0
  dma.store [256, 256] @dst[0 : 256, 1] <- %T[0 : 256, 1] tag 1
}
)";
  const sim::Report r = sim::run(parse_program(strided), v3);
  CHECK(r.dram_read_bytes == 256 * 256 * 32);
  CHECK(r.dram_write_bytes == 256 * 256 * 4);
}

TEST_CASE("timing: no built-in workload finishes below its roofline") {
  const std::pair<const char*, const char*> cases[] = {
      {"toy", "gemm:48x40x24"},       {"toy", "softmax:33x100"},     {"toy", "layernorm:17x64"},
      {"toy", "attention:2x24x16"},   {"tpuv3", "softmax:512x1024"}, {"tpuv3", "layernorm:512x768"},
      {"tpuv3", "attention:12x512x64"}, {"tpuv3", "bert:base"},       {"tpuv3", "bert:large"},
      {"tpuv4", "bert:large"}};
  for (const auto& [config_name, spec] : cases) {
    CAPTURE(config_name);
    CAPTURE(spec);
    const target::NpuConfig config = target::load_config(config_name);
    const sim::Report r = sim::run(models::compile_workload(spec, config).program, config);
    CHECK(r.cycles > 0);
    CHECK(r.cycles >= r.roofline_cycles);
    CHECK(r.time_ms == doctest::Approx(static_cast<double>(r.cycles) / (config.core_clock_mhz * 1e3)).epsilon(1e-3));
    CHECK(r.spad_peak_bytes > 0);
    CHECK(r.spad_peak_bytes <= config.spad_bytes());
    for (const sim::UnitStats& u : r.units) {
      CAPTURE(u.name);
      CHECK(u.utilisation <= 1.0);
    }
  }
}

TEST_CASE("timing: results are deterministic") {
  const target::NpuConfig config = target::load_config("tpuv4");
  const models::Workload w = models::compile_workload("bert:base", config);
  CHECK(sim::run(w.program, config).to_json() == sim::run(w.program, config).to_json());
}

TEST_CASE("timing: a cycle limit stops the run above it and changes nothing below it") {
  for (const char* name : {"tpuv3", "tpuv4"}) {
    CAPTURE(name);
    const target::NpuConfig config = target::load_config(name);
    const models::Workload w = models::compile_workload("bert:base", config);
    const int64_t cycles = sim::simulate_timing(w.program, config, nullptr).cycles;
    REQUIRE(cycles > 1000);
    CHECK(sim::timing_cycles(w.program, config, INT64_MAX) == cycles);
    CHECK(sim::timing_cycles(w.program, config, cycles) == cycles);
    for (const int64_t limit : {int64_t{0}, cycles / 10, cycles / 2, cycles - 1}) {
      CAPTURE(limit);
      const int64_t stopped = sim::timing_cycles(w.program, config, limit);
      CHECK(stopped > limit);
      CHECK(stopped <= cycles);  // a lower bound of the cycles
    }
    // The tile timer the lowering uses is the same function.
    CHECK(sim::tile_timer(config)(w.program, cycles / 2) > cycles / 2);
  }
}

TEST_CASE("timing: independent kernels overlap across cores") {
  const target::NpuConfig v4 = target::load_config("tpuv4");
  REQUIRE(v4.cores == 2);
  const models::Workload w = models::compile_workload("bert:base", v4);
  const sim::Report r = sim::run(w.program, v4);
  // The first two kernels are two of the q/k/v projections: independent.
  const sim::KernelStats& q = r.kernel_stats.at(0);
  const sim::KernelStats& k = r.kernel_stats.at(1);
  REQUIRE(w.program.kernels.at(1).deps.empty());
  CHECK(q.core != k.core);
  CHECK(k.start_cycle < q.end_cycle);
  // Every kernel launches after each kernel it depends on has ended.
  size_t waits = 0;
  for (size_t i = 0; i < w.program.kernels.size(); ++i) {
    for (const int d : w.program.kernels[i].deps) {
      CHECK(r.kernel_stats.at(i).launch_cycle >= r.kernel_stats.at(static_cast<size_t>(d)).end_cycle);
      ++waits;
    }
  }
  CHECK(waits >= w.program.kernels.size() - 3);
}

TEST_CASE("timing: programs must fit the config") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const target::NpuConfig toy = target::load_config("toy");
  const models::Workload w = models::compile_workload("gemm:64x64x64", v3);
  CHECK_THROWS_WITH_AS(sim::run(w.program, toy),
                       "program 'gemm:64x64x64' was allocated for a 16777216-byte scratchpad; config 'toy' has 262144 bytes",
                       spool::Error);
  const std::string big_tile = R"(program "p" spad 65536
kernel "k" {
  spad %A : f32[256] x1 at 0
  spad %C : f32[256] x1 at 1024
  matmul [16, 16, 16] %C[0 : 16] = %A[0 : 16], %A[0 : 16]
}
)";
  CHECK_THROWS_WITH_AS(sim::run(parse_program(big_tile), toy),
                       "kernel 'k': matmul tile k=16 n=16 exceeds the 8x8 systolic array of config 'toy'", spool::Error);
}

TEST_CASE("trace: valid trace-event JSON with a track per unit") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const models::Workload w = models::compile_workload("bert:base", v3);
  sim::Trace trace;
  sim::Options options;
  options.trace = &trace;
  const sim::Report r = sim::run(w.program, v3, options);
  std::ostringstream out;
  trace.write_json(out);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  REQUIRE(j.contains("traceEvents"));
  std::set<std::string> tracks;
  std::map<int, std::string> names;
  std::set<std::string> busy_tracks;
  double last_end_us = 0;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["ts"].get<double>() >= 0);
    busy_tracks.insert(names.at(e["tid"].get<int>()));
    last_end_us = std::max(last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (const char* t : {"core0.array0", "core0.array1", "core0.vector", "core0.dma", "core0.kernels", "dram.ch0", "dram.ch15"})
    CHECK(busy_tracks.count(t) == 1);
  CHECK(last_end_us * 1e-3 == doctest::Approx(r.time_ms).epsilon(1e-3));
}

namespace {

// One vector step over a rows x cols f32 tile resident in the scratchpad:
// `body` reads %v0 (the tile) and defines %r, stored back as a full tile or
// one value per row.
std::string vector_step(int64_t rows, int64_t cols, const std::string& body, bool per_row) {
  std::string t = "program \"v\" spad 16777216\nkernel \"v\" {\n";
  t += fmt::format("  spad %X : f32[{}] x1 at 0\n", rows * cols);
  t += fmt::format("  spad %Y : f32[{}] x1 at {}\n", rows * cols, rows * cols * 4);
  t += fmt::format("  vector \"step\" [{}, {}] {{\n    %v0 = load %X[0 : {}] : f32\n{}", rows, cols, cols, body);
  t += fmt::format("    store %Y[0 : {}], %r\n  }}\n}}\n", per_row ? 1 : cols);
  return t;
}

target::NpuConfig tpuv3_with(const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(std::string(SPOOL_SOURCE_DIR) + "/configs/tpuv3.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  return target::parse_config(j.dump(), "tpuv3.json");
}

}  // namespace

TEST_CASE("timing: a vector step is priced in registers of lanes x sublanes on its busiest unit") {
  // tpuv3: 128 lanes x 8 sublanes of f32 per register, 2 ALU slots.
  const target::NpuConfig v3 = target::load_config("tpuv3");
  const std::string add = "    %r = add %v0, %v0 : f32\n";
  auto cycles = [&](const target::NpuConfig& c, int64_t rows, int64_t cols, const std::string& body, bool per_row = false) {
    return kernel_cycles(sim::run(parse_program(vector_step(rows, cols, body, per_row)), c));
  };
  // A ragged edge fills a whole register: 100 or 128 columns, 5 or 8 rows cost the same.
  CHECK(cycles(v3, 64, 100, add) == cycles(v3, 64, 128, add));
  CHECK(cycles(v3, 5, 128, add) == cycles(v3, 8, 128, add));
  // 64 x 1024 is 64 registers: a load and a store each on their own slot
  // (64 cycles each), the add on two ALU slots (32): load and store bound.
  // Doubling the columns doubles the registers and the time of the busy part.
  const int64_t small = cycles(v3, 64, 1024, add), big = cycles(v3, 64, 2048, add);
  CHECK(big - small == 64);
  // Three more ALU ops per register make the two ALU slots the busiest unit:
  // 4 ops x 128 registers / 2 slots = 256 cycles against 128 loads.
  const std::string four = "    %a = add %v0, %v0 : f32\n    %b = mul %a, %a : f32\n    %c = add %b, %a : f32\n"
                           "    %r = mul %c, %b : f32\n";
  const target::NpuConfig one_alu = tpuv3_with([](nlohmann::json& j) { j["vector"]["slots"]["alu"] = 1; });
  CHECK(cycles(one_alu, 64, 2048, four) - cycles(v3, 64, 2048, four) == 256);
}

TEST_CASE("timing: a reduction across lanes uses the cross-lane unit once per row group") {
  const std::string sum = "    %r = reduce.sum %v0 : f32\n";
  auto with_lane_reduce = [](int64_t interval) {
    return tpuv3_with([&](nlohmann::json& j) { j["vector"]["lane_reduce"]["interval"] = interval; });
  };
  auto cycles = [&](const target::NpuConfig& c, int64_t rows, int64_t cols) {
    return kernel_cycles(sim::run(parse_program(vector_step(rows, cols, sum, true)), c));
  };
  // 256 rows are 32 row groups: with the cross-lane unit the busiest, each
  // more cycle of its interval adds 32 cycles; the columns do not matter to
  // it (the registers of a row group are first combined on the ALUs).
  const int64_t slow = cycles(with_lane_reduce(100), 256, 512), slower = cycles(with_lane_reduce(101), 256, 512);
  CHECK(slower - slow == 32);
  // (384 columns are 3 registers, combined in a tree as deep as for 4.)
  CHECK(cycles(with_lane_reduce(100), 256, 384) == slow);
  CHECK(cycles(with_lane_reduce(100), 264, 512) - slow == 100);
  // Down the rows (one value per column) the cross-lane unit is not used:
  // 64 x 256 is 8 row groups x 2 column registers, combined in 7 + 3
  // (sublane) steps per column register on two ALU slots, under the 16
  // register loads.
  auto down = [&](const target::NpuConfig& c) {
    return kernel_cycles(sim::run(parse_program(vector_step(64, 256, "    %r = reduce.sum.rows %v0 : f32\n", true)), c));
  };
  CHECK(down(with_lane_reduce(100)) == down(with_lane_reduce(8)));
  CHECK(down(with_lane_reduce(8)) < cycles(with_lane_reduce(8), 64, 256));
}
