// `spool sim WORKLOAD [--npu CONFIG] [--json F] [--trace F] [--program F] [--functional]`
// `spool sim --calibration FILE [--npu CONFIG] [--json F]`
//
// Builds a workload (models/workloads.hpp) as HLIR, compiles it through
// the pipeline (roll, saturate, extract, unroll, lower), simulates it in
// timing mode — or in functional mode on seeded random inputs, checked
// against the reference interpreter — and prints the report.
//
// --calibration reads measured cycles ({"config": NAME, "workloads": {SPEC:
// CYCLES, ...}}), simulates every workload on that config and prints the
// predicted and measured cycles, the error of each and the mean absolute
// error: the simulator's fidelity report.

#include "commands.hpp"

#include <spool/npu/text.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <spool/models/workloads.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace spool::cli {
namespace {

struct SimOptions {
  std::string workload;
  std::string calibration;
  std::string npu = "tpuv3";
  std::string json_file;
  std::string trace_file;
  std::string program_file;
  bool functional = false;
  double interp_budget = kInterpWorkBudget;
  uint64_t seed = 0;
  int64_t spad_budget = 0;
  bool npu_given = false;
  bool ignore_capacity = false;
  int sim_threads = 0;
};

pipeline::Options pipeline_options(const SimOptions& o, const Graph* functional_graph, sim::Trace* trace) {
  pipeline::Options options;
  options.lower.spad_budget = o.spad_budget;
  options.trace = trace;
  options.sim_progress = [](std::string_view line) { progress_detail(line); };
  options.ignore_capacity = o.ignore_capacity;
  options.sim_threads = o.sim_threads;
  if (functional_graph) options.inputs = interp::random_inputs(*functional_graph, o.seed);
  return options;
}

void print_compile(const pipeline::Report& r) {
  const compile::Report& c = r.compile;
  std::printf("compile          roll %lld loop(s), %zu e-graph(s) of %zu nodes, %zu LLIR nodes\n",
              static_cast<long long>(c.roll.loops), c.egraph.egraphs, c.egraph.nodes, r.llir_nodes);
  std::printf("stages ms        roll %.1f, saturate %.1f, extract %.1f, unroll %.1f, lower %.1f, simulate %.1f\n",
              c.times.roll_ms, c.times.saturate_ms, c.times.extract_ms, c.times.unroll_ms, r.lower_ms, r.simulate_ms);
}

void run_workload(const SimOptions& o) {
  const target::NpuConfig config = target::load_config(o.npu);
  sim::Trace trace;
  const Graph hlir = models::workload_graph(o.workload);
  if (o.functional) {
    int64_t values = 0;
    for (const NodeId id : hlir.live_ids())
      if (is_source(hlir.node(id).op)) values += num_elements(hlir.node(id).shape);
    if (values > kInterpParameterLimit)
      fail("--functional runs the reference interpreter, which holds every value as a double and cannot run {}'s "
           "{} input values (at most {}); drop --functional to simulate for time",
           o.workload, values, kInterpParameterLimit);
    check_interp_work(hlir, o.interp_budget, o.workload, "drop --functional to simulate for time");
  }
  pipeline::Options options = pipeline_options(o, o.functional ? &hlir : nullptr, o.trace_file.empty() ? nullptr : &trace);
  options.compile.rule_files.push_back(models::default_rules_file());
  progress_step(fmt::format("compile, lower and simulate {} ({} hlir nodes{})", o.workload, hlir.num_live(),
                            o.functional ? ", then check against the interpreter" : ""));
  const pipeline::Report report = pipeline::run(hlir, config, options);
  npu::Program program = report.lowered->program;
  program.name = o.workload;
  if (!o.program_file.empty()) write_file(o.program_file, npu::print(program));

  std::printf("workload         %s\n", o.workload.c_str());
  print_compile(report);
  std::fputs(report.lowering.to_text().c_str(), stdout);
  std::fputs(report.sim.to_text().c_str(), stdout);
  std::printf("dram footprint   %s of %s: %s\n", format_bytes(report.memory.footprint.total()).c_str(),
              format_bytes(report.memory.capacity_bytes).c_str(),
              report.memory.fits ? "fits" : "DOES NOT FIT (simulated under --ignore-capacity)");
  if (report.check)
    std::printf("check            simulated vs interpreter: max abs err %.3g, relative to scale %.3g (%s): %s\n",
                report.check->max_abs_err, report.check->max_rel_err, report.check->worst_output.c_str(),
                report.check->ok ? "ok" : "FAILED");
  if (report.check && report.check->non_finite > 0)
    std::printf("check            %lld values NaN or infinite (first in %s): NOT FINITE\n",
                static_cast<long long>(report.check->non_finite), report.check->non_finite_output.c_str());
  if (!o.json_file.empty()) {
    nlohmann::json j = report.to_json();
    j["workload"] = o.workload;
    j["config"] = config.name;
    j["sim"]["report"] = report.sim.to_json();
    write_file(o.json_file, j.dump(2) + "\n");
  }
  if (!o.trace_file.empty()) {
    std::ostringstream out;
    trace.write_json(out);
    write_file(o.trace_file, out.str());
  }
  if (report.check && !report.check->ok)
    fail("the simulated outputs differ from the interpreter's{}",
         report.check->non_finite > 0
             ? fmt::format(" or hold values a check cannot measure ({} NaN or infinite, first in {})",
                           report.check->non_finite, report.check->non_finite_output)
             : "");
}

// An NPU program in its text form (npu/text.hpp), simulated for time.
void run_program_file(const SimOptions& o) {
  const npu::Program program = npu::parse(read_file(o.workload), o.workload).take();
  const target::NpuConfig config = target::load_config(o.npu);
  sim::Trace trace;
  sim::Options options;
  if (!o.trace_file.empty()) options.trace = &trace;
  options.threads = o.sim_threads;
  options.progress = [](size_t finished, size_t total, int64_t cycle) {
    progress_detail(fmt::format("{} of {} kernels simulated, to cycle {}", finished, total, cycle));
  };
  progress_step(fmt::format("simulate the program ({} kernels)", program.kernels.size()));
  const sim::Report report = sim::run(program, config, options);
  std::printf("program file     %s\n", o.workload.c_str());
  std::fputs(report.to_text().c_str(), stdout);
  if (!o.json_file.empty()) write_file(o.json_file, report.to_json().dump(2) + "\n");
  if (!o.trace_file.empty()) {
    std::ostringstream out;
    trace.write_json(out);
    write_file(o.trace_file, out.str());
  }
}

void run_calibration(const SimOptions& o) {
  const models::Calibration c = models::calibrate(o.calibration, o.npu_given ? o.npu : std::string());
  std::printf("calibration      %s on %s\n", o.calibration.c_str(), c.config.c_str());
  std::fputs(c.to_text().c_str(), stdout);
  if (!o.json_file.empty()) write_file(o.json_file, c.to_json().dump(2) + "\n");
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto options = std::make_shared<SimOptions>();
  std::string forms;
  for (const std::string& f : models::workload_forms()) forms += (forms.empty() ? "" : ", ") + f;
  CLI::App* cmd = app.add_subcommand("sim", "Compile a built-in workload and simulate it on an NPU config");
  cmd->add_option("workload", options->workload, "One of: " + forms + "; or a file holding an NPU program's text");
  cmd->add_option("--calibration", options->calibration,
                  "Measured cycles (JSON: {\"config\", \"workloads\": {SPEC: CYCLES}}): print predicted against "
                  "measured and the mean absolute error");
  cmd->add_option("--npu", options->npu, "NPU config: a name in configs/ (tpuv3, tpuv4, toy) or a JSON file")
      ->capture_default_str();
  cmd->add_option("--json", options->json_file, "Write the report as JSON");
  cmd->add_option("--trace", options->trace_file, "Write a Chrome/Perfetto trace (trace-event JSON)");
  cmd->add_option("--program", options->program_file, "Write the NPU program in its text form");
  cmd->add_flag("--ignore-capacity", options->ignore_capacity,
                "Simulate a workload whose DRAM footprint exceeds the NPU's capacity");
  add_sim_threads(cmd, options->sim_threads);
  CLI::Option* functional =
      cmd->add_flag("--functional", options->functional,
                    "Also execute on seeded random inputs and check against the interpreter (slow for big shapes)");
  add_interp_budget(cmd, options->interp_budget)->needs(functional);
  cmd->add_option("--spad-budget", options->spad_budget,
                  "Scratchpad bytes a kernel may use when tiles are chosen (default: the whole scratchpad)")
      ->check(count(int64_t{1} << 40, 1024));
  cmd->add_option("--seed", options->seed, "Seed of the functional-mode inputs")->check(count(INT64_MAX))->capture_default_str();
  cmd->callback([options, cmd] {
    options->npu_given = cmd->count("--npu") > 0;
    const bool calibrate = !options->calibration.empty();
    if (calibrate == !options->workload.empty())
      fail("spool sim: give either a WORKLOAD or --calibration FILE");
    if (calibrate && (options->functional || !options->trace_file.empty() || !options->program_file.empty() ||
                      cmd->count("--sim-threads") > 0))
      fail("spool sim: --calibration takes only --npu and --json");
    if (calibrate) {
      run_calibration(*options);
    } else if (std::filesystem::is_regular_file(options->workload)) {
      if (options->functional || !options->program_file.empty() || options->spad_budget != 0 || options->ignore_capacity)
        fail("spool sim FILE simulates the program as written: it takes only --npu, --json, --trace and --sim-threads");
      run_program_file(*options);
    } else {
      run_workload(*options);
    }
  });
}

}  // namespace spool::cli
