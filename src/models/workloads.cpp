// The `spool sim` workloads as HLIR (see workloads.hpp), compiled by
// pipeline::run like any model.

#include <spool/models/workloads.hpp>

#include <spool/models/bert.hpp>
#include <spool/models/registry.hpp>

#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <fstream>

namespace spool::models {
namespace {

// Dimensions beyond this are refused before any graph is built: a dimension
// product must stay far from int64 overflow.
constexpr int64_t kMaxDim = int64_t{1} << 24;

std::vector<int64_t> parse_dims(std::string_view spec, std::string_view text, size_t count) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    int64_t value = 0;
    const std::string_view part = text.substr(pos, end - pos);
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || value <= 0)
      fail("workload '{}': '{}' is not a positive integer", spec, part);
    if (value > kMaxDim) fail("workload '{}': dimension {} is larger than {}", spec, value, kMaxDim);
    dims.push_back(value);
    pos = end + 1;
  }
  if (dims.size() != count) fail("workload '{}': expected {} dimensions separated by 'x'", spec, count);
  return dims;
}

}  // namespace

std::vector<std::string> workload_forms() {
  return {"gemm:MxKxN", "layernorm:RxC", "softmax:RxC", "attention:HxSxD", "bert:base|large|xlarge", "llama:LAYERS"};
}

std::string default_rules_file() { return std::string(SPOOL_RULES_DIR) + "/default.rules"; }

Graph workload_graph(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  if (colon == std::string_view::npos || kind.empty())
    fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
  const std::string_view args = spec.substr(colon + 1);
  Graph g{std::string(spec)};
  if (kind == "gemm") {
    const auto d = parse_dims(spec, args, 3);
    const Tensor a = input(g, "a", DType::F32, {d[0], d[1]});
    const Tensor w = weight(g, "w", DType::F32, {d[1], d[2]});
    output("out", nn::matmul(a, w));
  } else if (kind == "softmax") {
    const auto d = parse_dims(spec, args, 2);
    output("out", nn::softmax(input(g, "x", DType::F32, {d[0], d[1]}), -1));
  } else if (kind == "layernorm") {
    const auto d = parse_dims(spec, args, 2);
    const Tensor x = input(g, "x", DType::F32, {d[0], d[1]});
    output("out", nn::layer_norm(x, weight(g, "weight", DType::F32, {d[1]}), weight(g, "bias", DType::F32, {d[1]}),
                                 1e-5));
  } else if (kind == "attention") {
    const auto d = parse_dims(spec, args, 3);
    const Tensor q = input(g, "q", DType::F32, {d[0], d[1], d[2]});
    const Tensor k = input(g, "k", DType::F32, {d[0], d[1], d[2]});
    const Tensor v = input(g, "v", DType::F32, {d[0], d[1], d[2]});
    const Tensor scores = nn::matmul(k, q.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(d[2])));
    output("out", nn::matmul(v.transpose(1, 2), nn::softmax(scores, -2)));
  } else if (kind == "bert") {
    if (args != "base" && args != "large" && args != "xlarge")
      fail("workload '{}': bert size must be base, large or xlarge", spec);
    const BertConfig c = BertConfig::variant_named(std::string(args));
    Phase phase;
    phase.seq = c.seq;
    g = build_bert(c, phase);
  } else if (kind == "llama") {
    ModelOptions options;
    options.size = "real";
    options.layers = parse_dims(spec, args, 1)[0];
    options.phase = "prefill";
    options.seq = 512;
    g = find_model("llama").entry->build(options);
  } else {
    fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
  }
  return g;
}

Workload compile_workload(std::string_view spec, const target::NpuConfig& config, pipeline::Options options) {
  const Graph hlir = workload_graph(spec);
  if (options.compile.rule_files.empty()) options.compile.rule_files.push_back(default_rules_file());
  Workload w;
  w.name = std::string(spec);
  w.report = pipeline::run(hlir, config, options);
  w.program = w.report.lowered->program;
  w.program.name = w.name;
  w.inputs = w.report.lowered->inputs;
  w.outputs = w.report.lowered->outputs;
  return w;
}

Calibration calibrate(const std::string& path, const std::string& npu) {
  std::ifstream in(path);
  if (!in) fail("cannot read the calibration file '{}'", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("workloads") || !j["workloads"].is_object() || j["workloads"].empty())
    fail("{}: expected an object with a non-empty object \"workloads\" of SPEC: measured cycles", path);
  std::string config_name = npu;
  if (config_name.empty()) {
    if (!j.contains("config") || !j["config"].is_string())
      fail("{}: \"config\" must be a string naming an NPU config (or give one)", path);
    config_name = j["config"].get<std::string>();
  }
  const target::NpuConfig config = target::load_config(config_name);
  Calibration c;
  c.config = config.name;
  double abs_sum = 0;
  for (const auto& [spec, measured] : j["workloads"].items()) {
    if (!measured.is_number() || !(measured.get<double>() > 0))
      fail("{}: workload '{}': measured cycles must be a positive number", path, spec);
    CalibrationPoint p;
    p.workload = spec;
    p.measured = measured.get<double>();
    p.predicted = static_cast<double>(compile_workload(spec, config).report.sim.cycles);
    p.error = (p.predicted - p.measured) / p.measured;
    abs_sum += std::fabs(p.error);
    c.points.push_back(p);
  }
  c.mean_abs_error = abs_sum / static_cast<double>(c.points.size());
  return c;
}

std::string Calibration::to_text() const {
  std::string out = fmt::format("{:<26} {:>14} {:>14} {:>9}\n", "workload", "predicted", "measured", "error");
  for (const CalibrationPoint& p : points)
    out += fmt::format("{:<26} {:>14.0f} {:>14.0f} {:>+8.1f}%\n", p.workload, p.predicted, p.measured, 100 * p.error);
  out += fmt::format("mean absolute error {:.1f}% over {} workloads on {}\n", 100 * mean_abs_error, points.size(), config);
  return out;
}

nlohmann::json Calibration::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const CalibrationPoint& p : points)
    rows.push_back({{"workload", p.workload},
                    {"predicted_cycles", p.predicted},
                    {"measured_cycles", p.measured},
                    {"error", p.error}});
  return {{"config", config}, {"workloads", rows}, {"mean_abs_error", mean_abs_error}};
}

}  // namespace spool::models
