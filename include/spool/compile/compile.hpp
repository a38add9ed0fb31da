#pragma once
// spool::compile: the pipeline from an HLIR graph to a kernel-level program,
// as one linear function (DESIGN §1). Stages so far:
//
//   roll::auto_roll        repeated layers -> one body between loop markers
//   e-graph saturation     the rolled graph with the rules of rule files
//   greedy extraction      the cheapest program (node count for now)
//   roll::unroll           loops cloned back out
//
// Lowering to NPU kernels and simulation come after it.

#include <spool/egraph/runner.hpp>
#include <spool/ir/graph.hpp>
#include <spool/roll/roll.hpp>

#include <string>
#include <vector>

namespace spool {

struct CompileOptions {
  bool roll = true;
  std::vector<std::string> rule_files;  // empty: no rewriting
  egraph::RunnerConfig runner;
};

struct CompileTimes {
  double roll_ms = 0, saturate_ms = 0, extract_ms = 0, unroll_ms = 0, total_ms = 0;
};

struct CompileResult {
  Graph program;  // kernel-level (LLIR), no loop markers
  roll::RollReport roll;
  egraph::RunReport saturation;  // iterations summed over the rule files; the last file's stop reason
  size_t egraph_nodes = 0, egraph_classes = 0;
  CompileTimes times;
};

// Throws spool::Error on a bad rule file or a graph the pipeline cannot handle.
CompileResult compile(const Graph& hlir, const CompileOptions& options = {});

}  // namespace spool
