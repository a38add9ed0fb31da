#pragma once
// Rule files: the .rules language (rules/README.md documents it).
//
//   ; a comment
//   (ruleset fusion)
//   (rewrite NAME LHS RHS [:ruleset R] [:when (GUARD ?x ...)]...)
//   (birewrite NAME LHS RHS ...)          ; also NAME-rev, right to left
//   (rule NAME :match (PATTERN | (= ?x PATTERN) ...)
//              [:when (GUARD ?x ...)]...
//              :actions ((union ?x PATTERN) | (apply APPLIER ?x ...) ...)
//              [:ruleset R])
//   (include "other.rules")               ; relative to this file
//   (schedule (seq (saturate (run algebra)) (run fusion 3)))
//   (check NAME INPUT => EXPECTED)        ; INPUT must become equal to EXPECTED
//
// Patterns are the e-graph's S-expression patterns (`(op[attr] child...)`,
// `?x` variables, `_` wildcards). Rules without :ruleset go to `default`.
// Every error is `file:line:col: error: message`, with notes where useful.

#include <spool/egraph/rule.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/support/diagnostic.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spool::rules {

struct RuleDecl {
  std::string ruleset;
  egraph::RuleSpec spec;
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
