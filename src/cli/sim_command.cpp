// `spool sim WORKLOAD [--npu CONFIG] [--json F] [--trace F] [--functional]`
//
// Builds a built-in workload as an LLIR graph, lowers it for the config
// (lower::to_npu), verifies it, simulates it in timing mode (or functional mode on seeded random inputs) and prints the
// report; --json writes it as JSON ({"workload", "config", "sim": {...}}),
// --trace writes Chrome/Perfetto trace events.

#include <spool/npu/text.hpp>
#include <spool/sim/sim.hpp>
#include <spool/lower/workloads.hpp>
#include <spool/support/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

namespace spool::cli {
namespace {

struct SimOptions {
  std::string workload;
  std::string npu = "tpuv3";
  std::string json_file;
  std::string trace_file;
  std::string program_file;
  bool functional = false;
  uint64_t seed = 0;
  int64_t spad_budget = 0;
};

std::ofstream open_output(const std::string& path) {
  std::ofstream out(path);
  if (!out) fail("cannot open '{}' for writing", path);
  return out;
}

void run_sim(const SimOptions& o) {
  const sim::NpuConfig config = sim::load_config(o.npu);
  const auto t_lower = std::chrono::steady_clock::now();
  const lower::Workload workload = lower::make_workload(o.workload, config, [&] {
    lower::LowerOptions lo;
    lo.spad_budget = o.spad_budget;
    return lo;
  }());
  const double lower_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_lower).count();
  if (!o.program_file.empty()) open_output(o.program_file) << npu::print(workload.program);

  sim::Trace trace;
  sim::Options options;
  options.trace = o.trace_file.empty() ? nullptr : &trace;
  std::unique_ptr<sim::Memory> memory;
  if (o.functional) {
    memory = std::make_unique<sim::Memory>(workload.program);
    std::mt19937_64 rng(o.seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (const std::string& name : workload.inputs) {
      const int b = workload.program.find_buffer(name);
      std::vector<double> values(static_cast<size_t>(workload.program.buffer_elements(b)));
      for (double& v : values) v = uniform(rng);
      memory->write(name, values);
    }
    options.mode = sim::Mode::Functional;
    options.memory = memory.get();
  }

  const auto t0 = std::chrono::steady_clock::now();
  const sim::Report report = sim::run(workload.program, config, options);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::printf("workload         %s\n", workload.name.c_str());
  std::fputs(workload.report.to_text().c_str(), stdout);
  std::printf("lowered in       %.1f ms wall\n", lower_ms);
  std::fputs(report.to_text().c_str(), stdout);
  std::printf("simulated in     %.1f ms wall\n", wall_ms);
  nlohmann::json outputs = nlohmann::json::object();
  if (memory) {
    for (const std::string& name : workload.outputs) {
      const std::vector<double> values = memory->read(name);
      double sum = 0, abs_sum = 0;
      for (double v : values) {
        sum += v;
        abs_sum += std::fabs(v);
      }
      std::printf("output @%s       sum %.6g, mean |x| %.6g\n", name.c_str(), sum,
                  abs_sum / static_cast<double>(values.size()));
      outputs[name] = {{"sum", sum}, {"mean_abs", abs_sum / static_cast<double>(values.size())}};
    }
  }
  if (!o.json_file.empty()) {
    nlohmann::json j;
    j["workload"] = workload.name;
    j["config"] = config.name;
    j["sim"] = report.to_json();
    j["program"] = {{"kernels", workload.report.kernels},
                    {"fused_kernels", workload.report.fused_kernels},
                    {"copy_kernels", workload.report.copy_kernels},
                    {"spad_peak_bytes", workload.report.spad_peak_bytes}};
    j["compile"] = {{"lower_ms", lower_ms}};
    j["sim"]["wall_ms"] = wall_ms;
    if (memory) j["outputs"] = outputs;
    open_output(o.json_file) << j.dump(2) << "\n";
  }
  if (!o.trace_file.empty()) {
    std::ofstream out = open_output(o.trace_file);
    trace.write_json(out);
    if (!out) fail("failed to write '{}'", o.trace_file);
  }
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto options = std::make_shared<SimOptions>();
  std::string forms;
  for (const std::string& f : lower::workload_forms()) forms += (forms.empty() ? "" : ", ") + f;
  CLI::App* cmd = app.add_subcommand("sim", "Simulate a built-in workload on an NPU config");
  cmd->add_option("workload", options->workload, "One of: " + forms)->required();
  cmd->add_option("--npu", options->npu, "NPU config: a name in configs/ (tpuv3, tpuv4, toy) or a JSON file")
      ->capture_default_str();
  cmd->add_option("--json", options->json_file, "Write the report as JSON");
  cmd->add_option("--trace", options->trace_file, "Write a Chrome/Perfetto trace (trace-event JSON)");
  cmd->add_option("--program", options->program_file, "Write the NPU program in its text form");
  cmd->add_flag("--functional", options->functional, "Also execute on seeded random inputs (slow for big shapes)");
  cmd->add_option("--spad-budget", options->spad_budget,
                  "Scratchpad bytes a kernel may use when tiles are chosen (default: the whole scratchpad)");
  cmd->add_option("--seed", options->seed, "Seed of the functional-mode inputs")->capture_default_str();
  cmd->callback([options] { run_sim(*options); });
}

}  // namespace spool::cli
