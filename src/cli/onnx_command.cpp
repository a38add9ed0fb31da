// ONNX models: `spool import MODEL.onnx`, `spool run MODEL.onnx` and
// `spool conformance DIR`.
//
// `import` prints (or writes with -o) the HLIR the importer builds.
// `run` imports the model, runs the whole pipeline on it as `spool run`
// does for the built-in models (compile, lower, simulate functionally and
// check against the interpreter) with inputs from a folder of input_N.pb
// files (ONNX's test-data layout) or seeded random values; where the folder
// also holds output_N.pb files the simulated outputs are compared with them.
// `conformance` runs every test folder of ONNX's backend test data.

#include "commands.hpp"

#include <spool/ir/text.hpp>
#include <spool/onnx/conformance.hpp>
#include <spool/onnx/onnx.hpp>
#include <spool/pipeline/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace spool::cli {
namespace {

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> out;
  for (const std::string& d : dims) {
    const size_t eq = d.find('=');
    int64_t value = -1;
    size_t used = 0;
    if (eq != std::string::npos && eq > 0) {
      try {
        value = std::stoll(d.substr(eq + 1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || used != d.size() - eq - 1 || value < 1)
      fail("--dim: '{}' is not NAME=VALUE with a positive whole VALUE", d);
    out[d.substr(0, eq)] = value;
  }
  return out;
}

void print_imported(const onnx::Imported& m, const std::string& path) {
  int64_t weight_elements = 0;
  for (const auto& [name, value] : m.weights) weight_elements += value.size();
  std::printf("model      %s (ONNX opset %lld): %zu inputs, %zu outputs, ops %s\n", path.c_str(),
              static_cast<long long>(m.opset), m.inputs.size(), m.outputs.size(),
              fmt::format("{}", fmt::join(m.ops, " ")).c_str());
  std::printf("hlir       %zu nodes, %zu weights (%lld values)\n", m.graph.num_live(), m.weights.size(),
              static_cast<long long>(weight_elements));
}

}  // namespace

bool check_onnx_run_options(const CLI::App& run_cmd, const std::string& model) {
  const bool onnx = model.ends_with(".onnx");
  if (!onnx) {
    for (const char* flag : {"--inputs", "--dim"})
      if (run_cmd.count(flag) > 0) fail("{} applies to MODEL.onnx only, not to the built-in model {}", flag, model);
    return false;
  }
  for (const char* flag : {"--size", "--layers", "--phase", "--seq", "--context", "--dtype", "--weights", "--tokens",
                           "--dump-logits", "--check-logits", "--search", "--timing-only", "--ignore-capacity",
                           "--trace", "--kernels", "--interp", "--dot", "--hlir"})
    if (run_cmd.count(flag) > 0)
      fail("{} does not apply to an ONNX model (its shapes and values come from the file and --inputs)", flag);
  return true;
}

std::shared_ptr<OnnxRunOptions> add_onnx_run_options(CLI::App* cmd) {
  auto options = std::make_shared<OnnxRunOptions>();
  cmd->add_option("--inputs", options->inputs_dir,
                  "MODEL.onnx: a folder of input_N.pb files (ONNX test data); output_N.pb files there are compared");
  cmd->add_option("--dim", options->dims, "MODEL.onnx: bind a symbolic dimension, NAME=VALUE (repeatable)");
  return options;
}

void run_onnx(const OnnxRunOptions& onnx_options, const OnnxRun& run) {
  onnx::ImportOptions import_options;
  import_options.dims = parse_dims(onnx_options.dims);
  const std::jthread rules = prepare_rules_beside(rule_files_or_default(run.rules));
  if (!onnx_options.inputs_dir.empty()) import_options.input_values = onnx::read_inputs_dir(onnx_options.inputs_dir);
  const onnx::Imported imported = onnx::import_file(run.model, import_options);
  print_imported(imported, run.model);
  if (!onnx_options.inputs_dir.empty())
    std::printf("inputs     %zu of %zu from %s%s\n", imported.input_values.size(), imported.inputs.size(),
                onnx_options.inputs_dir.c_str(),
                imported.input_values.size() < imported.inputs.size() ? fmt::format(", the rest seed {}", run.seed).c_str()
                                                                      : "");
  else
    std::printf("inputs     random, seed %llu\n", static_cast<unsigned long long>(run.seed));
  if (parameter_count(imported.graph) > kInterpParameterLimit)
    fail("the reference interpreter cannot run {} parameters", parameter_count(imported.graph));
  check_interp_work(imported.graph, run.interp_budget, run.model, "bind smaller dimensions (--dim)");

  pipeline::Options options;
  options.compile.roll = !run.no_roll;
  options.compile.rule_files = rule_files_or_default(run.rules);
  options.compile.print_after = stage_printer(run.print);
  options.inputs = onnx::run_inputs(imported, run.seed);
  options.tile_cache_dir = run.tile_cache;
  const target::NpuConfig config = target::load_config(run.npu);
  const pipeline::Report report = pipeline::run(imported.graph, config, options);
  const compile::Report& c = report.compile;
  std::printf("egraph     %zu e-graph(s): %zu nodes, %zu classes, %zu iterations\n", c.egraph.egraphs, c.egraph.nodes,
              c.egraph.classes, c.egraph.iterations);
  std::printf("program    %zu LLIR nodes -> %d NPU kernels (%d fused, %d copies)\n", report.llir_nodes,
              report.lowering.kernels, report.lowering.fused_kernels, report.lowering.copy_kernels);
  print_tiles(report);
  std::printf("sim        %s: %lld cycles, %.4f ms\n", config.name.c_str(), static_cast<long long>(report.sim.cycles),
              report.sim.time_ms);
  bool ok = true;
  if (report.check) {
    std::printf("check      simulated vs interpreter: max abs err %.3g, relative to scale %.3g (%s): %s\n",
                report.check->max_abs_err, report.check->max_rel_err, report.check->worst_output.c_str(),
                report.check->ok ? "ok" : report.check->non_finite > 0 ? "NaN or infinite values" : "FAILED");
    ok = report.check->ok || report.check->non_finite > 0;
  }
  for (const auto& [name, value] : report.outputs) {
    double sum = 0;
    for (int64_t i = 0; i < value.size(); ++i) sum += value.get(i);
    std::printf("output     %s %s%s  sum=%.6f\n", name.c_str(), std::string(dtype_name(value.dtype())).c_str(),
                shape_str(value.shape()).c_str(), sum);
  }
  // Reference outputs beside the inputs.
  size_t compared = 0;
  for (size_t k = 0; !onnx_options.inputs_dir.empty(); ++k) {
    const std::string path = (std::filesystem::path(onnx_options.inputs_dir) / fmt::format("output_{}.pb", k)).string();
    if (!std::filesystem::exists(path)) break;
    onnx::NamedTensor want = onnx::read_tensor_file(path);
    if (want.name.empty() && k < imported.outputs.size()) want.name = imported.outputs[k];
    const auto got = report.outputs.find(want.name);
    if (got == report.outputs.end()) fail("{}: names output '{}', which the model does not have", path, want.name);
    const interp::Difference d = interp::compare(got->second, want.value);
    double worst = 0;
    for (int64_t i = 0; i < want.value.size(); ++i) {
      const double a = got->second.get(i), b = want.value.get(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;
      worst = std::max(worst, std::abs(a - b) / (1e-5 + 1e-3 * std::abs(b)));
      if (std::isnan(a) || std::isnan(b)) worst = INFINITY;
    }
    const bool match = worst <= 1.0 && got->second.dtype() == want.value.dtype();
    std::printf("reference  %s vs %s: max abs err %.3g: %s\n", want.name.c_str(), path.c_str(), d.max_abs,
                match ? "ok" : "FAILED");
    ok = ok && match;
    ++compared;
  }
  if (!run.json_file.empty()) {
    nlohmann::json j = report.to_json();
    j["model"] = run.model;
    j["opset"] = imported.opset;
    j["references_compared"] = compared;
    write_file(run.json_file, j.dump(2) + "\n");
  }
  std::fflush(stdout);
  if (!ok) fail("{}: the simulated outputs differ from the interpreter or the reference outputs", run.model);
}

void add_onnx_commands(CLI::App& app) {
  struct ImportCli {
    std::string model, out;
    std::vector<std::string> dims;
  };
  auto imp = std::make_shared<ImportCli>();
  CLI::App* import_cmd = app.add_subcommand("import", "Import an ONNX model and print its HLIR");
  import_cmd->add_option("model", imp->model, "MODEL.onnx")->required();
  import_cmd->add_option("-o,--output", imp->out, "Write the HLIR text here (default: standard output)");
  import_cmd->add_option("--dim", imp->dims, "Bind a symbolic dimension, NAME=VALUE (repeatable)");
  import_cmd->callback([imp] {
    onnx::ImportOptions options;
    options.dims = parse_dims(imp->dims);
    const onnx::Imported imported = onnx::import_file(imp->model, options);
    write_file(imp->out, print_graph(imported.graph));
    if (!imp->out.empty() && imp->out != "-") {
      print_imported(imported, imp->model);
      std::printf("written    %s\n", imp->out.c_str());
    }
  });

  struct ConformanceCli {
    std::string dir, json, npu = "tpuv3";
    std::vector<std::string> filters, rules;
    bool quiet = false;
  };
  auto conf = std::make_shared<ConformanceCli>();
  CLI::App* conf_cmd =
      app.add_subcommand("conformance", "Run ONNX's backend node tests through the whole pipeline");
  conf_cmd->add_option("dir", conf->dir, "The folder of test folders (onnx/backend/test/data/node)")->required();
  conf_cmd->add_option("--json", conf->json, "Write tried, passed, failed, unsupported and every result as JSON");
  conf_cmd->add_option("--filter", conf->filters, "Only tests whose name contains this (repeatable)");
  conf_cmd->add_option("--npu", conf->npu, "NPU config")->capture_default_str();
  conf_cmd->add_option("--rules", conf->rules, "Rule files (default: rules/default.rules)")->check(CLI::ExistingFile);
  conf_cmd->callback([conf] {
    onnx::ConformanceOptions options;
    options.filters = conf->filters;
    options.rule_files = rule_files_or_default(conf->rules);
    const target::NpuConfig config = target::load_config(conf->npu);
    const onnx::ConformanceReport report = onnx::run_conformance(conf->dir, config, options);
    if (!conf->json.empty()) write_file(conf->json, report.to_json().dump(2) + "\n");
    const std::string table = report.table();
    std::fwrite(table.data(), 1, table.size(), stdout);
    std::fflush(stdout);
    if (report.failed > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace spool::cli
