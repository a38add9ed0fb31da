// The conformance runner: ONNX's backend node tests through the whole pipeline.

#include <spool/onnx/conformance.hpp>
#include <spool/onnx/onnx.hpp>
#include <spool/pipeline/pipeline.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

namespace spool::onnx {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Every element within atol + rtol * |ref|; NaN only against NaN, an
// infinity only against itself. Returns the first mismatch, or "".
std::string compare(const interp::HostTensor& got, const interp::HostTensor& want, double rtol, double atol,
                    double& max_abs) {
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} but the reference is {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return fmt::format("shape {} but the reference is {}", shape_str(got.shape()), shape_str(want.shape()));
  for (int64_t i = 0; i < want.size(); ++i) {
    if (!is_float(want.dtype())) {
      if (got.get_int(i) != want.get_int(i))
        return fmt::format("element {} is {} but the reference is {}", i, got.get_int(i), want.get_int(i));
      continue;
    }
    const double a = got.get(i), b = want.get(i);
    if (std::isnan(b) || std::isnan(a)) {
      if (std::isnan(a) != std::isnan(b)) return fmt::format("element {} is {} but the reference is {}", i, a, b);
      continue;
    }
    if (std::isinf(b) || std::isinf(a)) {
      if (a != b) return fmt::format("element {} is {} but the reference is {}", i, a, b);
      continue;
    }
    const double diff = std::abs(a - b);
    max_abs = std::max(max_abs, diff);
    if (diff > atol + rtol * std::abs(b))
      return fmt::format("element {} is {:.9g} but the reference is {:.9g} (|diff| {:.3g} > {:.0e} + {:.0e} * |ref|)", i,
                         a, b, diff, atol, rtol);
  }
  return "";
}

std::vector<std::string> data_sets(const std::string& test_dir) {
  std::vector<std::string> sets;
  for (const auto& entry : fs::directory_iterator(test_dir))
    if (entry.is_directory() && entry.path().filename().string().starts_with("test_data_set_"))
      sets.push_back(entry.path().string());
  std::sort(sets.begin(), sets.end());
  return sets;
}

}  // namespace

TestResult run_test(const std::string& test_dir, const target::NpuConfig& config, const ConformanceOptions& options) {
  TestResult result;
  result.name = fs::path(test_dir).filename().string();
  const auto start = Clock::now();
  const std::string model = (fs::path(test_dir) / "model.onnx").string();
  bool imported_once = false;
  try {
    const std::vector<std::string> sets = data_sets(test_dir);
    if (sets.empty()) fail("{}: no test_data_set_N folder", test_dir);
    for (const std::string& set : sets) {
      ImportOptions import_options;
      try {
        import_options.input_values = read_inputs_dir(set);
      } catch (const std::exception&) {
        // Data that is not a tensor (a sequence, an optional): the model's
        // own inputs say what is unsupported, if anything; else the data is bad.
        import_file(model);
        throw;
      }
      const Imported imported = import_file(model, import_options);
      if (!imported_once) result.ops.assign(imported.ops.begin(), imported.ops.end());
      imported_once = true;
      // Reference outputs: output_K.pb is the K-th graph output unless it names one.
      std::vector<std::pair<std::string, interp::HostTensor>> expected;
      for (size_t k = 0;; ++k) {
        const std::string path = (fs::path(set) / fmt::format("output_{}.pb", k)).string();
        if (!fs::exists(path)) break;
        NamedTensor t = read_tensor_file(path);
        if (t.name.empty() || std::find(imported.outputs.begin(), imported.outputs.end(), t.name) == imported.outputs.end()) {
          if (k >= imported.outputs.size()) fail("{}: the model has only {} outputs", path, imported.outputs.size());
          t.name = imported.outputs[k];
        }
        expected.emplace_back(t.name, std::move(t.value));
      }
      if (expected.empty()) fail("{}: no output_N.pb", set);

      pipeline::Options pipeline_options;
      pipeline_options.compile.rule_files = options.rule_files;
      pipeline_options.inputs = run_inputs(imported, /*seed=*/1);
      const pipeline::Report report = pipeline::run(imported.graph, config, pipeline_options);
      for (const auto& [name, want] : expected) {
        const auto got = report.outputs.find(name);
        if (got == report.outputs.end()) fail("the simulated program has no output '{}'", name);
        const std::string diff = compare(got->second, want, options.rtol, options.atol, result.max_abs_err);
        if (!diff.empty()) fail("{}: output '{}': {}", fs::path(set).filename().string(), name, diff);
      }
      // The pipeline's own check (simulator against interpreter) must hold
      // too, except where NaN or infinities make it unmeasurable (the
      // reference comparison above has checked those elements).
      if (report.check && !report.check->ok && report.check->non_finite == 0)
        fail("the simulated program differs from the interpreter: {} by {:.3g} relative to scale",
             report.check->worst_output, report.check->max_rel_err);
    }
    result.status = "passed";
  } catch (const Unsupported& e) {
    result.status = "unsupported";
    result.feature = e.feature();
    result.message = e.what();
  } catch (const std::exception& e) {
    result.status = "failed";
    result.message = e.what();
  }
  result.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return result;
}

ConformanceReport run_conformance(const std::string& dir, const target::NpuConfig& config,
                                  const ConformanceOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("{}: no such folder", dir);
  std::vector<std::string> tests;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "model.onnx")) continue;
    const std::string name = entry.path().filename().string();
    bool wanted = options.filters.empty();
    for (const std::string& f : options.filters) wanted = wanted || name.find(f) != std::string::npos;
    if (wanted) tests.push_back(entry.path().string());
  }
  std::sort(tests.begin(), tests.end());
  if (tests.empty()) fail("{}: no test folders (model.onnx) to run", dir);
  ConformanceReport report;
  for (const std::string& test : tests) {
    report.results.push_back(run_test(test, config, options));
    const std::string& status = report.results.back().status;
    ++report.tried;
    if (status == "passed") ++report.passed;
    else if (status == "failed") ++report.failed;
    else ++report.unsupported;
  }
  return report;
}

nlohmann::json ConformanceReport::to_json() const {
  nlohmann::json j;
  j["tried"] = tried;
  j["passed"] = passed;
  j["failed"] = failed;
  j["unsupported"] = unsupported;
  nlohmann::json by_feature = nlohmann::json::object();
  nlohmann::json tests = nlohmann::json::array();
  for (const TestResult& r : results) {
    if (r.status == "unsupported") by_feature[r.feature].push_back(r.name);
    nlohmann::json t = {{"name", r.name}, {"status", r.status}, {"ops", r.ops}, {"ms", r.ms}};
    if (!r.feature.empty()) t["feature"] = r.feature;
    if (!r.message.empty()) t["message"] = r.message;
    if (r.status == "passed") t["max_abs_err"] = r.max_abs_err;
    tests.push_back(std::move(t));
  }
  j["unsupported_by_feature"] = std::move(by_feature);
  j["results"] = std::move(tests);
  return j;
}

std::string ConformanceReport::table() const {
  std::string out;
  std::map<std::string, std::vector<std::string>> by_feature;
  for (const TestResult& r : results) {
    if (r.status == "passed") out += fmt::format("passed       {:<56} {:8.1f} ms\n", r.name, r.ms);
    else if (r.status == "failed") out += fmt::format("FAILED       {:<56} {}\n", r.name, r.message);
    else by_feature[r.feature].push_back(r.name);
  }
  if (!by_feature.empty()) {
    out += fmt::format("unsupported: {} tests, by what stopped them\n", unsupported);
    for (const auto& [feature, names] : by_feature) {
      std::string list;
      for (size_t i = 0; i < names.size(); ++i) {
        if (i == 4) {
          list += fmt::format(", ... ({} more)", names.size() - 4);
          break;
        }
        list += (i ? ", " : "") + names[i];
      }
      out += fmt::format("  {:<36} {:4}  {}\n", feature, names.size(), list);
    }
  }
  out += fmt::format("tried {}: {} passed, {} failed, {} unsupported\n", tried, passed, failed, unsupported);
  out += fmt::format("{} passed, {} failed\n", passed, failed);
  return out;
}

}  // namespace spool::onnx
