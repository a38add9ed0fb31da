// The soundness checker over the shipped HLIR rules and a fixture of wrong ones.

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/rules/soundness.hpp>

using namespace spool;

namespace {
std::vector<rules::SoundnessResult> check(const std::string& path, std::vector<rules::CheckResult>* checks = nullptr,
                                          int trials = 8) {
  Result<rules::RuleFile> file = rules::load_rule_file(path);
  REQUIRE_MESSAGE(file.ok(), file.error().render());
  hlir::HlirLanguage lang;
  const egraph::Registry& registry = hlir::registry();
  auto sets = rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  REQUIRE_MESSAGE(sets.ok(), sets.error().render());
  if (checks)
    *checks = rules::run_checks(file.value(), sets.value(), [&] { return hlir::make_egraph(lang); },
                                lang.parse_options());
  return rules::check_soundness(sets.value(), lang, 1, trials, rules::approximations(file.value()));
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
      if (std::getenv("SPOOL_VERBOSE")) MESSAGE(r.rule << ": " << r.trials << " trials, " << r.samples << " samples " << r.detail);
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
      CHECK((r.status == rules::SoundnessResult::Status::Sound || r.status == rules::SoundnessResult::Status::Approximate));
      CHECK(r.trials >= 8);
      CHECK(r.samples >= r.trials);
    }
    for (const auto& c : checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.message);
  }
}

TEST_CASE("every deliberately wrong rule is caught, with its location") {
  const auto results = check(std::string(SPOOL_SOURCE_DIR) + "/tests/rules/fixtures/wrong.rules");
  REQUIRE(results.size() == 20);
  for (size_t i = 0; i < results.size(); ++i) {
    INFO(results[i].rule << ": " << results[i].detail);
    if (std::getenv("SPOOL_VERBOSE")) MESSAGE(results[i].rule << ": " << results[i].detail);
    CHECK(results[i].status == rules::SoundnessResult::Status::Unsound);
    CHECK(results[i].loc.line == static_cast<int>(i) + 2);  // one rule per line after the comment
    // The name follows `(rewrite ` (formula rules) or `(rule ` (applier and attribute rules).
    CHECK(results[i].loc.col == (i < 8 || i >= 14 ? 10 : 7));
    CHECK(!results[i].detail.empty());
  }
}

namespace {
std::string detail_of(const std::vector<rules::SoundnessResult>& results, const std::string& rule) {
  for (const auto& r : results)
    if (r.rule == rule) return r.detail;
  return "<no such rule>";
}
}  // namespace

TEST_CASE("special values, every dtype and exact comparison catch what tolerances and ordinary values hide") {
  const auto results = check(std::string(SPOOL_SOURCE_DIR) + "/tests/rules/fixtures/wrong.rules", nullptr, 4);
  // x * 0 is NaN for an infinite or NaN x and -0 for a negative one.
  const std::string mul_zero = detail_of(results, "wrong-mul-zero");
  CHECK(mul_zero.find("the sides differ at element 0 of ") == 0);
  CHECK(mul_zero.find("inputs:\n    ?a : ") != std::string::npos);
  // -0 + 0 is +0: only a bit-exact comparison sees it.
  CHECK(detail_of(results, "wrong-add-zero").find("the sides differ") == 0);
  // Reassociation and recip(recip(x)) round differently: caught without a tolerance.
  CHECK(detail_of(results, "wrong-reassociate").find("the sides differ") == 0);
  CHECK(detail_of(results, "wrong-recip-recip").find("the sides differ") == 0);
  // neg is not defined on bool, which not requires.
  const std::string neg_bool = detail_of(results, "wrong-neg-neg-intro");
  CHECK(neg_bool.find("the right side does not type-check where the left does (?x : bool") == 0);
  CHECK(neg_bool.find("neg: not defined on bool") != std::string::npos);
  // A declared tolerance is enforced.
  CHECK(detail_of(results, "wrong-approx-too-tight").find("beyond the declared") != std::string::npos);
}

TEST_CASE("a rule declared approximate is reported as approximate, never as exact") {
  const std::string path = std::string(SPOOL_BINARY_DIR) + "/approx_test.rules";
  {
    std::ofstream out(path);
    out << "(rewrite assoc (add ?a (add ?b ?c)) (add (add ?a ?b) ?c) :approx (f32 1e-6 bf16 1e-2 f16 1e-3))\n"
           "(rewrite comm (add ?a ?b) (add ?b ?a))\n";
  }
  const auto results = check(path, nullptr, 4);
  REQUIRE(results.size() == 2);
  INFO(results[0].detail);
  CHECK(results[0].status == rules::SoundnessResult::Status::Approximate);
  CHECK(results[1].status == rules::SoundnessResult::Status::Sound);
  // Every dtype the left side accepts: f32, bf16, f16, i32, i64 (add is not defined on bool).
  CHECK(results[1].trials >= 5 * 4);
  // Each instance on ordinary values, 13 rotations of the special values and one random mixture.
  CHECK(results[1].samples == results[1].trials * 15);
}
