// Serving figures of the real-shaped example models: for each model, phase
// and dtype, the simulated TTFT (prefill) or TPOT (decode step), its two
// rooflines and the program's DRAM footprint against the NPU's capacity.
//
//   compute roofline  the program's matmul FLOPs at the arrays' peak (for
//                     the MoE models this counts the padded expert rows the
//                     program computes, not only the routed ones)
//   DRAM roofline     the bytes any program must read (every weight and
//                     input once; pipeline::required_source_bytes) at the
//                     DRAM's peak bandwidth
//   x roofline        time over the larger of the two
//
// Models that do not fit run under ignore_capacity and are marked. Every
// run is timing-only (no tensor data).
//
//   serving_bench [--npu NAME] [--models a,b,...] [--dtypes bf16,f32]
//                 [--phases prefill,decode] [--seq N] [--context N] [--layers N]

#include <spool/pipeline/pipeline.hpp>
#include <spool/support/error.hpp>

#include <spdlog/spdlog.h>

#include <spool/models/registry.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spool;
  std::string npu = "tpuv3";
  std::vector<std::string> models = {"llama",       "gemma",  "qwen3",          "qwen3_moe",
                                     "deepseek_v3", "llama4", "llama4:maverick"};
  std::vector<std::string> dtypes = {"bf16", "f32"}, phases = {"prefill", "decode"};
  int64_t seq = 512, context = 512, layers = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "serving_bench: error: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--npu") npu = value();
    else if (arg == "--models") models = split(value());
    else if (arg == "--dtypes") dtypes = split(value());
    else if (arg == "--phases") phases = split(value());
    else if (arg == "--seq") seq = std::stoll(value());
    else if (arg == "--context") context = std::stoll(value());
    else if (arg == "--layers") layers = std::stoll(value());
    else {
      std::fprintf(stderr, "serving_bench: error: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  try {
    const target::NpuConfig config = target::load_config(npu);
    const double peak_flops_per_ms = static_cast<double>(config.cores) * config.systolic.arrays * 2.0 *
                                     static_cast<double>(config.systolic.rows * config.systolic.cols) *
                                     config.core_clock_mhz * 1e3;
    std::printf("serving on %s (%.0f GB/s DRAM, %.1f TFLOP/s arrays, %.2f GiB DRAM); prefill %lld tokens, decode "
                "after %lld%s\n",
                config.name.c_str(), config.dram_bytes_per_second() / 1e9, peak_flops_per_ms / 1e9,
                static_cast<double>(config.dram.capacity_bytes) / (1 << 30), static_cast<long long>(seq),
                static_cast<long long>(context), layers ? fmt::format(", {} layers", layers).c_str() : "");
    std::printf("%-16s %-7s %-5s %12s %12s %12s %8s %12s  %s\n", "model", "phase", "dtype", "TTFT/TPOT ms",
                "compute ms", "DRAM ms", "x roof", "footprint", "fits");
    for (const std::string& model : models)
      for (const std::string& phase : phases)
        for (const std::string& dtype : dtypes) {
          models::ModelOptions o;
          o.size = "real";
          o.phase = phase;
          o.dtype = dtype;
          o.layers = layers;
          if (phase == "prefill") o.seq = seq;
          else o.context = context;
          const models::ModelRef ref = models::find_model(model);
          o.variant = ref.variant;
          const Graph graph = ref.entry->build(o);
          pipeline::Options options;
          options.compile.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
          options.ignore_capacity = true;
          const auto t0 = std::chrono::steady_clock::now();
          const pipeline::Report r = pipeline::run(graph, config, options);
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const double compute_ms = static_cast<double>(r.sim.matmul_flops) / peak_flops_per_ms;
          const double bound = std::max(compute_ms, r.dram_roofline_ms);
          std::printf("%-16s %-7s %-5s %12.2f %12.2f %12.2f %8.3f %8.2f GiB  %s  (%.1f s)\n", model.c_str(),
                      phase.c_str(), dtype.c_str(), r.sim.time_ms, compute_ms, r.dram_roofline_ms,
                      bound > 0 ? r.sim.time_ms / bound : 0.0,
                      static_cast<double>(r.memory.footprint.total()) / (1 << 30),
                      r.memory.fits ? "yes" : fmt::format("no ({} cores)", r.memory.cores_needed).c_str(), wall);
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serving_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
