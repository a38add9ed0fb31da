#pragma once
// Rule files: the .rules language (rules/README.md documents it).
//
//   ; a comment
//   (ruleset fusion)
//   (rewrite NAME LHS RHS [:ruleset R] [:when (GUARD ?x ...)]... [:approx (DTYPE TOL...)])
//   (birewrite NAME LHS RHS ...)          ; also NAME-rev, right to left
//   (rule NAME :match (PATTERN | (= ?x PATTERN) ...)
//              [:when (GUARD ?x ...)]...
//              :actions ((union ?x PATTERN) | (apply APPLIER ?x ...) ...)
//              [:ruleset R] [:approx (DTYPE TOL...)])
//   (include "other.rules")               ; relative to this file
//   (schedule (seq (saturate (run algebra)) (run fusion 3)))
//   (check NAME INPUT => EXPECTED)        ; INPUT must become equal to EXPECTED
//
// `:approx (f32 1e-5 bf16 1e-2)` declares a rule that is only approximately
// right in floating point (reassociation, say): the soundness checker
// compares its sides within those relative tolerances (dtypes not listed
// exactly) and reports it as approximate; every other rule must be exact.
// Integer constants in patterns must fit their dtype and float constants be
// exactly representable in theirs.
//
// Patterns are the e-graph's S-expression patterns (`(op[attr] child...)`,
// `?x` variables, `_` wildcards). Rules without :ruleset go to `default`.
// Every error is `file:line:col: error: message`, with notes where useful.

#include <spool/egraph/rule.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/ir/dtype.hpp>
#include <spool/support/diagnostic.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spool::rules {

// The tolerances a rule declared with `:approx`: relative error allowed per
// floating dtype (a dtype not listed is compared exactly).
struct Approximation {
  SourceLoc loc;
  std::vector<std::pair<DType, double>> tolerance;

  std::optional<double> of(DType dtype) const {
    for (const auto& [d, tol] : tolerance)
      if (d == dtype) return tol;
    return std::nullopt;
  }
};

struct RuleDecl {
  std::string ruleset;
  egraph::RuleSpec spec;
  std::optional<Approximation> approx;
};

struct CheckDecl {
  std::string name;
  SourceLoc loc;
  egraph::PatternSpec input, expected;
};

struct RuleFile {
  std::vector<std::pair<std::string, SourceLoc>> rulesets;  // "default" first
  std::vector<RuleDecl> rules;
  std::optional<egraph::Schedule> schedule;
  SourceLoc schedule_loc;
  std::vector<CheckDecl> checks;
  std::vector<std::string> files;  // every file read, the root first
};

// Reads a rule file and everything it includes.
[[nodiscard]] Result<RuleFile> load_rule_file(const std::string& path);
// The same for text already in memory; includes resolve relative to the
// directory of `file_name`.
[[nodiscard]] Result<RuleFile> parse_rule_text(std::string_view text, const std::string& file_name);

// Compiles every rule into its ruleset, in declaration order. A bad pattern,
// an unknown op, guard or applier, or a right-hand variable the left does
// not bind is a diagnostic at the rule.
[[nodiscard]] Result<std::vector<egraph::RuleSet>> compile_rules(const RuleFile& file, egraph::Language& language,
                                                                const egraph::Registry& registry,
                                                                const egraph::ParseOptions& options = {});

// The approximate rules of `file` by rule name (a birewrite's two rules both).
std::map<std::string, Approximation> approximations(const RuleFile& file);

// The schedule to run: the file's, or every ruleset saturated in turn.
egraph::Schedule schedule_of(const RuleFile& file);

// Runs the file's inline checks: each INPUT in a fresh e-graph from
// `make_graph`, the file's schedule within `config`'s budgets (stopping as
// soon as INPUT and EXPECTED are equal), then asks whether they are.
struct CheckResult {
  std::string name;
  SourceLoc loc;
  bool passed = false;
  std::string message;  // why it failed: the stop reason and the sizes reached
};
std::vector<CheckResult> run_checks(const RuleFile& file, std::span<const egraph::RuleSet> rulesets,
                                    const std::function<std::unique_ptr<egraph::EGraph>()>& make_graph,
                                    const egraph::ParseOptions& options, egraph::RunnerConfig config = {});

}  // namespace spool::rules
