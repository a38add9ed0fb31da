// Simulator fidelity and speed.
//
// First the fidelity report: every workload of a calibration file (default:
// bench/sim/tpuv3-measured.json, cycles measured on one TPU v3 TensorCore as
// published with the PyTorchSim artifact's validation set; then
// bench/sim/tpuv3-validation.json, the whole set Spool's workloads express)
// compiled, simulated, and its predicted cycles against the measured ones. Then the
// speed: wall time and simulated cycles per wall second for timing-mode runs
// of built-in workloads (the whole sim::run, which verifies the program
// first); target: bert:large on tpuv3 in <= 0.5 s.
//
//   sim_bench [--repeat N] [--reports] [--calibration FILE] [workload@config ...]

#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <spool/models/workloads.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  bool print_reports = false;
  std::vector<std::string> cases;
  std::vector<std::string> calibrations{std::string(SPOOL_SOURCE_DIR) + "/bench/sim/tpuv3-measured.json",
                                        std::string(SPOOL_SOURCE_DIR) + "/bench/sim/tpuv3-validation.json"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--calibration" && i + 1 < argc) {
      calibrations = {argv[++i]};
    } else if (arg == "--reports") {
      print_reports = true;
    } else {
      cases.push_back(arg);
    }
  }
  if (cases.empty())
    cases = {"gemm:2048x2048x2048@tpuv3", "bert:large@tpuv3", "bert:base@tpuv3", "bert:xlarge@tpuv3",
             "bert:large@tpuv4", "bert:large@toy"};

  try {
    for (const std::string& calibration : calibrations) {
      const spool::models::Calibration c = spool::models::calibrate(calibration);
      std::printf("fidelity: %s\n%s\n", calibration.c_str(), c.to_text().c_str());
    }
  } catch (const spool::Error& e) {
    std::fprintf(stderr, "sim_bench: error: %s\n", e.what());
    return 1;
  }
  std::printf("%-28s %7s %9s %9s %14s %10s %16s\n", "workload@config", "kernels", "build ms", "sim ms", "cycles",
              "sim ms", "cycles/wall s");
  std::printf("%-28s %7s %9s %9s %14s %10s %16s\n", "", "", "(wall)", "(wall)", "(simulated)", "(simul.)", "");
  double bert_large_wall = -1;
  try {
    for (const std::string& c : cases) {
      const size_t at = c.find('@');
      const std::string spec = c.substr(0, at);
      const std::string config_name = at == std::string::npos ? "tpuv3" : c.substr(at + 1);
      const spool::target::NpuConfig config = spool::target::load_config(config_name);
      const auto t_build = Clock::now();
      const spool::models::Workload w = spool::models::compile_workload(spec, config);
      const double build = seconds_since(t_build);
      double best = 1e30;
      spool::sim::Report report;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = Clock::now();
        report = spool::sim::run(w.program, config);
        best = std::min(best, seconds_since(t0));
      }
      std::printf("%-28s %7lld %9.2f %9.2f %14lld %10.3f %16.3g\n", c.c_str(), static_cast<long long>(report.kernels),
                  build * 1e3, best * 1e3, static_cast<long long>(report.cycles), report.time_ms,
                  static_cast<double>(report.cycles) / best);
      if (print_reports) std::printf("%s\n", report.to_text().c_str());
      if (spec == "bert:large" && config_name == "tpuv3") bert_large_wall = best + build;
    }
  } catch (const spool::Error& e) {
    std::fprintf(stderr, "sim_bench: error: %s\n", e.what());
    return 1;
  }
  if (bert_large_wall >= 0)
    std::printf("\nbert:large on tpuv3, timing mode, build + simulate: %.1f ms wall (target <= 500 ms: %s)\n",
                bert_large_wall * 1e3, bert_large_wall <= 0.5 ? "met" : "NOT met");
  return 0;
}
