// The soundness checker over the shipped HLIR rules and a fixture of wrong ones.

#include <doctest/doctest.h>

#include <cstdlib>

#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/rules/soundness.hpp>

using namespace spool;

namespace {
std::vector<rules::SoundnessResult> check(const std::string& path, std::vector<rules::CheckResult>* checks = nullptr) {
  Result<rules::RuleFile> file = rules::load_rule_file(path);
  REQUIRE_MESSAGE(file.ok(), file.error().render());
  hlir::HlirLanguage lang;
  const egraph::Registry& registry = hlir::registry();
  auto sets = rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  REQUIRE_MESSAGE(sets.ok(), sets.error().render());
  if (checks)
    *checks = rules::run_checks(file.value(), sets.value(), [&] { return hlir::make_egraph(lang); },
                                lang.parse_options());
  return rules::check_soundness(sets.value(), lang, 1, 8);
}
}  // namespace

TEST_CASE("every shipped rule is sound and every inline check holds") {
  for (const char* name : {"algebra.rules", "default.rules"}) {
    INFO(name);
    std::vector<rules::CheckResult> checks;
    const auto results = check(std::string(SPOOL_SOURCE_DIR) + "/rules/" + name, &checks);
    CHECK(!results.empty());
    for (const auto& r : results) {
      INFO(r.rule << ": " << r.detail);
      if (std::getenv("SPOOL_VERBOSE")) MESSAGE(r.rule << ": " << r.trials << " trials " << r.detail);
      if (r.rule == "static-input-is-value" || r.rule == "loop-input-same-sources") {
        // Loop markers: defined by roll::unroll, not on tensors.
        CHECK(r.status == rules::SoundnessResult::Status::NotChecked);
        CHECK(r.detail == "loop markers are not checked on tensors (roll::unroll defines them)");
        continue;
      }
      if (r.rule == "variance-two-pass") {
        // Canonicalises a one-pass variance (norms.rules says why it is not
        // exact); a multi-pattern rule. tests/onnx checks the kernels it
        // leads to against ONNX's reference outputs.
        CHECK(r.status == rules::SoundnessResult::Status::NotChecked);
        CHECK(r.detail == "multi-pattern rules are not checked");
        continue;
      }
      CHECK(r.status == rules::SoundnessResult::Status::Sound);
      CHECK(r.trials == 8);
    }
    for (const auto& c : checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.message);
  }
}

TEST_CASE("every deliberately wrong rule is caught, with its location") {
  const auto results = check(std::string(SPOOL_SOURCE_DIR) + "/tests/rules/fixtures/wrong.rules");
  REQUIRE(results.size() == 14);
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(results[i].rule << ": " << results[i].detail);
    if (std::getenv("SPOOL_VERBOSE")) MESSAGE(results[i].rule << ": " << results[i].detail);
    CHECK(results[i].status == rules::SoundnessResult::Status::Unsound);
    CHECK(results[i].loc.line == static_cast<int>(i) + 2);  // one rule per line after the comment
    // The name follows `(rewrite ` (formula rules) or `(rule ` (applier and attribute rules).
    CHECK(results[i].loc.col == (i < 8 ? 10 : 7));
    CHECK(!results[i].detail.empty());
  }
}
