#pragma once
// The conformance runner over ONNX's backend test data (the `node` folder
// of onnx/backend/test/data: one folder per test with model.onnx and
// test_data_set_N/{input,output}_K.pb).
//
// Each test is imported with its data set's input values; a test whose
// model uses something the importer does not support is `unsupported`,
// grouped by what stopped it. Every other test runs the whole pipeline as
// `spool run MODEL.onnx` does (pipeline::run: compile, lower, simulate
// functionally, check against the interpreter) and each simulated output
// is compared with the reference: |sim - ref| <= atol + rtol * |ref|, NaN
// only where the reference has NaN, infinities only equal. Any error after
// the import, or a difference, makes the test `failed`.

#include <spool/target/npu.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace spool::onnx {

struct ConformanceOptions {
  std::vector<std::string> rule_files;  // the pipeline's rules (required)
  double rtol = 1e-3, atol = 1e-5;
  // Only the tests whose folder name contains one of these (empty: all).
  std::vector<std::string> filters;
};

struct TestResult {
  std::string name;
  std::string status;   // "passed", "failed" or "unsupported"
  std::string feature;  // unsupported: the op (or op and detail) that stopped it
  std::string message;  // failed or unsupported: why
  std::vector<std::string> ops;  // the model's op types
  double max_abs_err = 0;        // over the outputs compared
  double ms = 0;
};

struct ConformanceReport {
  std::vector<TestResult> results;
  size_t tried = 0, passed = 0, failed = 0, unsupported = 0;
  // {tried, passed, failed, unsupported, unsupported_by_feature: {feature: [tests]}, results: [...]}
  nlohmann::json to_json() const;
  // The table `spool conformance` prints, ending with "N passed, M failed".
  std::string table() const;
};

// One test folder.
TestResult run_test(const std::string& test_dir, const target::NpuConfig& config, const ConformanceOptions& options);
// Every test folder directly under `dir`, in name order.
ConformanceReport run_conformance(const std::string& dir, const target::NpuConfig& config,
                                  const ConformanceOptions& options);

}  // namespace spool::onnx
