#pragma once
// What the benches that time the spool tool share (compile_bench --cold,
// sim_bench --model): one fresh `spool` process, its JSON report and its
// wall time, and the median of a mode's runs.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace spool::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct FreshRun {
  nlohmann::json report;
  double wall_ms = 0;  // the process, start to exit
};

// Runs `command`, a shell command line that starts the spool tool with
// `--json json_path` (and discards its output); throws std::runtime_error
// naming the command if it fails.
inline FreshRun run_fresh(const std::string& command, const std::string& json_path) {
  const auto start = std::chrono::steady_clock::now();
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  FreshRun run;
  run.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(json_path);
  run.report = nlohmann::json::parse(in);
  return run;
}

}  // namespace spool::bench
