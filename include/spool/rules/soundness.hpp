#pragma once
// The rule soundness checker: every rewrite, run on random tensors.
//
// For each rule whose left side is one pattern and whose actions build
// patterns, the checker gives every variable a random type (shapes and
// dtypes drawn until the left side type-checks), builds both sides as one
// HLIR graph, runs it with the reference interpreter on random inputs and
// compares the sides under a per-dtype tolerance. A right side that does not
// type-check, or that computes something else, is unsound; the report keeps
// the counterexample. Rules with attribute variables, attribute patterns or
// custom appliers are run instead: a random instance of the left side
// (variables as inputs, views, fused programs, gemms or reductions;
// attributes drawn for their op), or a small spool::nn graph with random
// shapes (softmax, norms, linear layers, attention) in a small e-graph, the rule's actions
// applied without merging, and each built class compared on random tensors
// with the class it would be merged into. A rule that never applies to its
// random instances, and multi-pattern rules, are reported as not checked,
// never as passing.

#include <spool/hlir/language.hpp>
#include <spool/egraph/runner.hpp>

#include <span>
#include <string>
#include <vector>

namespace spool::rules {

struct SoundnessResult {
  enum class Status { Sound, Unsound, NotChecked };
  std::string rule;
  SourceLoc loc;
  Status status = Status::NotChecked;
  int trials = 0;      // samples that ran both sides
  std::string detail;  // the counterexample, or why it was not checked
};

std::vector<SoundnessResult> check_soundness(std::span<const egraph::RuleSet> rulesets,
                                             hlir::HlirLanguage& language, uint64_t seed = 1,
                                             int trials = 4);

}  // namespace spool::rules
