#pragma once
// The `spool sim` workloads: single operators and blocks defined like
// PyTorchSim's TPU v3 validation set (f32, batch 1), built as HLIR from
// spool::nn and the model builders and compiled by the normal pipeline
// (roll, saturate, extract, unroll, lower), so the simulator is judged on
// Spool's own programs:
//
//   gemm:MxKxN         a [M, K] times w [K, N]
//   layernorm:RxC      LayerNorm over the last axis (affine weight and bias, eps 1e-5)
//   softmax:RxC        softmax over the last axis
//   attention:HxSxD    q, k, v [H, S, D]: scores = k qᵀ / √D [H, S, S], softmax over
//                      axis −2, out = vᵀ · probs [H, D, S]
//   bert:base|large|xlarge  one encoder block at sequence 512 (models: bert)
//   llama:LAYERS       llama-3-8B-shaped prefill of 512 tokens with LAYERS layers (models: llama)

#include <spool/ir/graph.hpp>
#include <spool/npu/kernel.hpp>
#include <spool/pipeline/pipeline.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace spool::models {

// The HLIR of a workload spec. Throws spool::Error naming the spec for an
// unknown kind or a malformed or non-positive dimension.
Graph workload_graph(std::string_view spec);

// One line per workload form, for help texts.
std::vector<std::string> workload_forms();

// The shipped default rule file (rules/default.rules of the source tree).
std::string default_rules_file();

struct Workload {
  std::string name;
  npu::Program program;                // the lowered program, named after the spec
  pipeline::Report report;             // compile, lowering and timing simulation
  // Graph input/weight name -> DRAM buffer; graph output name -> DRAM buffer.
  std::vector<std::pair<std::string, std::string>> inputs, outputs;
};

// Builds the spec's HLIR and runs the pipeline on it in timing mode with the
// default rules (unless `options.compile.rule_files` names others).
Workload compile_workload(std::string_view spec, const target::NpuConfig& config, pipeline::Options options = {});

// The simulator's fidelity against measured cycles. A calibration file is
// JSON: {"config": NAME, "workloads": {SPEC: MEASURED_CYCLES, ...}} (other
// keys are notes). Every workload is compiled and simulated on the config
// (`npu`, when not empty, overrides the file's).
struct CalibrationPoint {
  std::string workload;
  double predicted = 0, measured = 0;
  double error = 0;  // (predicted - measured) / measured
};
struct Calibration {
  std::string config;
  std::vector<CalibrationPoint> points;
  double mean_abs_error = 0;

  std::string to_text() const;  // one line per workload, then the mean absolute error
  nlohmann::json to_json() const;
};
Calibration calibrate(const std::string& path, const std::string& npu = {});

}  // namespace spool::models
