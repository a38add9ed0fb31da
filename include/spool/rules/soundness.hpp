#pragma once
// The rule soundness checker: every rewrite, run on random tensors.
//
// For each rule whose left side is one pattern and whose actions build
// patterns, the checker gives every variable a random type (shapes and
// dtypes drawn until the left side type-checks), builds both sides as one
// HLIR graph, runs it with the reference interpreter on random inputs and
// compares the sides bit for bit (NaN equal to NaN whatever its payload,
// -0 unequal to +0), or, for a rule declared `:approx`, within the
// tolerances it declares. The variables take every dtype in turn (bool
// included) and the inputs ordinary random values and special ones (+-0,
// +-Inf, NaN, denormals, the largest finite values, integer extremes). A
// right side that does not type-check, or that computes something else, is
// unsound; the report keeps the counterexample. Rules with guards, attribute
// variables, attribute patterns or custom appliers are run instead: a random
// instance of the left side (variables as inputs, views, fused programs,
// gemms or reductions; attributes drawn for their op), or a small spool::nn
// graph with random shapes (softmax, norms, linear layers, attention) in a
// small e-graph, the rule's actions applied without merging, and each built
// class compared on random tensors with the class it would be merged into.
// A rule that never applies to its random instances, and multi-pattern
// rules, are reported as not checked, never as passing.

#include <spool/hlir/language.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/rules/rule_file.hpp>

#include <map>
#include <span>
#include <string>
#include <vector>

namespace spool::rules {

struct SoundnessResult {
  // Sound: exact on every sample. Approximate: declared `:approx` and within
  // its tolerances on every sample (ordinary values only).
  enum class Status { Sound, Approximate, Unsound, NotChecked };
  std::string rule;
  SourceLoc loc;
  Status status = Status::NotChecked;
  int trials = 0;      // instances (types, or e-graphs) that ran both sides
  int samples = 0;     // input sets they ran on
  std::string detail;  // the counterexample, or why it was not checked
};

// `trials` is the number of instances per dtype the left side accepts
// (formula rules) or in all (rules that are run); each instance runs on
// ordinary and special inputs. `approx` holds the rules declared
// approximate (rules::approximations).
std::vector<SoundnessResult> check_soundness(std::span<const egraph::RuleSet> rulesets,
                                             hlir::HlirLanguage& language, uint64_t seed = 1,
                                             int trials = 4,
                                             const std::map<std::string, Approximation>& approx = {});

}  // namespace spool::rules
