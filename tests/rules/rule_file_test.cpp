// The rule-file language: parsing, diagnostics with exact locations,
// includes, schedules and inline checks.

#include <doctest/doctest.h>

#include <spool/hlir/language.hpp>
#include <math_language/math.hpp>
#include <spool/nn/nn.hpp>
#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace spool;
using namespace spool::egraph;

namespace {

// The rendered diagnostic of parsing, or of compiling against the math language.
std::string error_of(const std::string& text) {
  Result<rules::RuleFile> file = rules::parse_rule_text(text, "bad.rules");
  if (!file) return file.error().render();
  auto lang = math::make_language();
  const Registry registry = math::make_registry(*lang);
  Result<std::vector<RuleSet>> sets = rules::compile_rules(file.value(), lang->language, registry);
  if (!sets) return sets.error().render();
  return "<no error>";
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::filesystem::path dir = std::filesystem::path(SPOOL_BINARY_DIR) / "rules_test_files";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("a rule file with every kind of declaration parses and its checks pass") {
  const char* text = R"(
; Arithmetic for the tests.
(ruleset algebra)
(ruleset cleanup)
(rewrite comm-add (+ ?a ?b) (+ ?b ?a) :ruleset algebra)
(birewrite assoc-add (+ ?a (+ ?b ?c)) (+ (+ ?a ?b) ?c) :ruleset algebra)
(rewrite mul-one (* ?a 1) ?a :ruleset cleanup)
(rewrite cancel-div (/ ?a ?a) 1 :ruleset cleanup :when (is-not-zero ?a))
(rule two-facts
  :match ((= ?s (+ ?a 0)) (* ?a 1))
  :actions ((union ?s ?a))
  :ruleset cleanup)
(schedule (seq (saturate (run cleanup)) (repeat 4 (run algebra) (run cleanup 2))))
(check one (* x 1) => x)
(check sum (+ 1 (+ 2 3)) => (+ 3 (+ 2 1)))
(check cancel (/ (+ y 2) (+ y 2)) => 1)
)";
  Result<rules::RuleFile> file = rules::parse_rule_text(text, "good.rules");
  REQUIRE_MESSAGE(file.ok(), file.error().render());
  CHECK(file.value().rulesets.size() == 3);  // default, algebra, cleanup
  CHECK(file.value().rules.size() == 6);     // birewrite gives two
  CHECK(file.value().rules[2].spec.name == "assoc-add-rev");
  CHECK(file.value().schedule->str() != "");
  CHECK(file.value().checks.size() == 3);

  auto lang = math::make_language();
  const Registry registry = math::make_registry(*lang);
  Result<std::vector<RuleSet>> sets = rules::compile_rules(file.value(), lang->language, registry);
  REQUIRE_MESSAGE(sets.ok(), sets.error().render());
  CHECK(sets.value()[1].name == "algebra");
  CHECK(sets.value()[1].rules.size() == 3);
  RunnerConfig config;
  config.node_limit = 20'000;
  const auto results = rules::run_checks(file.value(), sets.value(), [&] { return math::make_egraph(*lang); }, {},
                                         config);
  REQUIRE(results.size() == 3);
  for (const rules::CheckResult& r : results) CHECK_MESSAGE(r.passed, r.name << ": " << r.message);
}

TEST_CASE("a check that does not hold is reported with its location") {
  const char* text = "(rewrite comm-add (+ ?a ?b) (+ ?b ?a))\n(check wrong (+ x y) => (* x y))\n";
  Result<rules::RuleFile> file = rules::parse_rule_text(text, "c.rules");
  REQUIRE(file.ok());
  auto lang = math::make_language();
  const Registry registry = math::make_registry(*lang);
  auto sets = rules::compile_rules(file.value(), lang->language, registry);
  REQUIRE(sets.ok());
  const auto results = rules::run_checks(file.value(), sets.value(), [&] { return math::make_egraph(*lang); }, {});
  REQUIRE(results.size() == 1);
  CHECK(!results[0].passed);
  CHECK(results[0].loc.line == 2);
  CHECK(results[0].message.find("not proven: stopped (saturated)") == 0);
}

TEST_CASE("malformed rule files give exact diagnostics") {
  // Structure.
  CHECK(error_of("(rewrite a (+ ?x 0) ?x") == "bad.rules:1:23: error: unbalanced '(': end of file inside a list\n"
                                              "bad.rules:1:1: note: the innermost open list starts here");
  CHECK(error_of("(rewrite a (+ ?x 0) ?x))") == "bad.rules:1:24: error: unbalanced ')': no list is open");
  CHECK(error_of("(frobnicate a)") ==
        "bad.rules:1:2: error: unknown declaration 'frobnicate' (expected ruleset, rewrite, birewrite, rule, include, "
        "schedule or check)");
  CHECK(error_of("(rewrite a (+ ?x 0))") == "bad.rules:1:1: error: rewrite expects (rewrite NAME LHS RHS [options])");
  CHECK(error_of("(rewrite a ?x ?x :rulset r)") == "bad.rules:1:18: error: unknown option ':rulset'");
  CHECK(error_of("(rewrite a ?x ?x :ruleset)") == "bad.rules:1:18: error: option :ruleset has no value");
  CHECK(error_of("(include \"x.rules\" extra)") == "bad.rules:1:1: error: include expects (include \"path\")");
  // Names.
  CHECK(error_of("(rewrite a (+ ?x 0) ?x)\n(rewrite a (* ?x 1) ?x)") ==
        "bad.rules:2:10: error: rule 'a' is defined twice\nbad.rules:1:10: note: first defined here");
  CHECK(error_of("(birewrite a (+ ?x 0) ?x)\n(rewrite a-rev ?x ?x)") ==
        "bad.rules:2:10: error: rule 'a-rev' is defined twice\nbad.rules:1:12: note: first defined here");
  CHECK(error_of("(ruleset r)\n(ruleset r)") ==
        "bad.rules:2:10: error: ruleset 'r' is declared twice\nbad.rules:1:10: note: first declared here");
  CHECK(error_of("(rewrite a (+ ?x 0) ?x :ruleset nope)") == "bad.rules:1:33: error: unknown ruleset 'nope'");
  CHECK(error_of("(ruleset r)\n(schedule (run r x))") ==
        "bad.rules:2:18: error: bad number 'x' (expected a non-negative integer)");
  CHECK(error_of("(schedule (run missing))") == "bad.rules:1:16: error: unknown ruleset 'missing'");
  CHECK(error_of("(schedule (loop default))") ==
        "bad.rules:1:12: error: unknown schedule 'loop' (expected run, repeat, saturate or seq)");
  CHECK(error_of("(check c (+ x 0) x)") == "bad.rules:1:1: error: check expects (check NAME INPUT => EXPECTED)");
  CHECK(error_of("(rewrite a ?x ?x :when (is-not-zero x))") ==
        "bad.rules:1:37: error: guard arguments are variables like ?x, found 'x'");
  CHECK(error_of("(rule r :match ((+ ?a 0)) :actions ((merge ?a ?a)))") ==
        "bad.rules:1:38: error: unknown action 'merge' (expected union or apply)");
  CHECK(error_of("(rule r :actions ((union ?a ?a)))") == "bad.rules:1:1: error: rule 'r' has no :match");
  // Strings.
  CHECK(error_of("(include \"x.rules)") == "bad.rules:1:10: error: unterminated string");
}

TEST_CASE("constants in patterns must hold their value exactly in their dtype") {
  CHECK(error_of("(rewrite a (add ?x (constant[value=4294967296 : i32[]])) ?x)") ==
        "bad.rules:1:21: error: constant 4294967296 does not fit in i32");
  CHECK(error_of("(rewrite a ?x (constant[value=99999999999999999999 : i64[]]))") ==
        "bad.rules:1:16: error: constant 99999999999999999999 does not fit in i64");
  CHECK(error_of("(rewrite a ?x (constant[value=1.5 : i32[]]))") ==
        "bad.rules:1:16: error: bad i32 constant '1.5' (expected an integer)");
  CHECK(error_of("(rewrite a ?x (constant[value=0.1 : f32[]]))") ==
        "bad.rules:1:16: error: constant 0.1 is not exactly representable in f32 (it would round to "
        "0.10000000149011612)");
  CHECK(error_of("(rewrite a ?x (constant[value=1e39 : f32[]]))") ==
        "bad.rules:1:16: error: constant 1e39 is not exactly representable in f32 (it would round to inf)");
  CHECK(error_of("(rewrite a ?x (constant[value=2 : bool[]]))") ==
        "bad.rules:1:16: error: bad bool constant '2' (expected true or false)");
  CHECK(error_of("(check c (constant[value=70000 : f16[]]) => (constant[value=1 : f16[]]))") ==
        "bad.rules:1:11: error: constant 70000 is not exactly representable in f16 (it would round to inf)");
  // The HLIR attribute parser itself refuses them too (any pattern, not only a rule file's).
  hlir::HlirLanguage hlang;
  const OpId constant = hlang.op(Op::Constant);
  CHECK(!hlang.parse_attr(constant, "value=4294967296 : i32[]").has_value());
  CHECK(!hlang.parse_attr(constant, "value=1e30 : i64[]").has_value());
  CHECK(!hlang.parse_attr(constant, "value=1.5 : i32[]").has_value());
  CHECK(!hlang.parse_attr(constant, "value=0.1 : bf16[]").has_value());
  CHECK(hlang.parse_attr(constant, "value=-2147483648 : i32[]").has_value());
  CHECK(hlang.parse_attr(constant, "value=0.5 : bf16[]").has_value());
  CHECK(hlang.parse_attr(constant, "value=inf : f32[]").has_value());
  // In range: parsed (the math language then rejects the op, which is not its own).
  CHECK(error_of("(rewrite a ?x (constant[value=-2147483648 : i32[]]))").find("does not fit") == std::string::npos);
}

TEST_CASE(":approx declares a rule approximate with its tolerances") {
  Result<rules::RuleFile> file = rules::parse_rule_text(
      "(birewrite assoc (+ ?a (+ ?b ?c)) (+ (+ ?a ?b) ?c) :approx (f32 1e-6 bf16 1e-2))\n(rewrite b (+ ?a 0) ?a)",
      "ok.rules");
  REQUIRE_MESSAGE(file.ok(), file.error().render());
  REQUIRE(file.value().rules.size() == 3);
  REQUIRE(file.value().rules[0].approx.has_value());
  CHECK(file.value().rules[0].approx->of(DType::F32) == 1e-6);
  CHECK(file.value().rules[0].approx->of(DType::BF16) == 1e-2);
  CHECK(!file.value().rules[0].approx->of(DType::F16).has_value());
  CHECK(file.value().rules[1].approx.has_value());  // assoc-rev
  CHECK(!file.value().rules[2].approx.has_value());
  const auto approx = rules::approximations(file.value());
  CHECK(approx.size() == 2);
  CHECK(approx.count("assoc-rev") == 1);

  CHECK(error_of("(rewrite a ?x ?x :approx 1e-5)") ==
        "bad.rules:1:26: error: :approx expects a list of floating dtypes and tolerances, like (f32 1e-5 bf16 1e-2)");
  CHECK(error_of("(rewrite a ?x ?x :approx (i32 1))") ==
        "bad.rules:1:27: error: :approx: 'i32' is not a floating dtype (f32, bf16 or f16); integers and bool are "
        "always compared exactly");
  CHECK(error_of("(rewrite a ?x ?x :approx (f32 -1))") ==
        "bad.rules:1:31: error: :approx: bad tolerance '-1' for f32 (expected a relative tolerance greater than 0 "
        "and below 1, like 1e-5)");
  CHECK(error_of("(rewrite a ?x ?x :approx (f32 nan))").find("bad tolerance 'nan'") != std::string::npos);
  CHECK(error_of("(rewrite a ?x ?x :approx (f32 1e-5 f32 1e-4))") ==
        "bad.rules:1:36: error: :approx: f32 is given twice");
  CHECK(error_of("(rewrite a ?x ?x :approx (f32 1e-5) :approx (f32 1e-4))") ==
        "bad.rules:1:37: error: :approx is given twice");
}

TEST_CASE("rules that do not compile name the rule and the place") {
  // Pattern errors come from the pattern reader, at the offending token.
  CHECK(error_of("(rewrite a (+ ?x 0) ?x :when (is-positive ?x))") ==
        "bad.rules:1:30: error: rule 'a': unknown guard 'is-positive'");
  CHECK(error_of("(rewrite a (+ ?x 0) (+ ?x ?y))") ==
        "bad.rules:1:21: error: rule 'a': variable '?y' is not bound by the left-hand side");
  CHECK(error_of("(rewrite a (sqrt ?x ?y) ?x)") == "bad.rules:1:13: error: op 'sqrt' takes 1 children, got 2");
  CHECK(error_of("(rewrite a (frob ?x) ?x)") == "bad.rules:1:13: error: unknown op 'frob'");
  CHECK(error_of("(rule r :match ((+ ?a 0)) :actions ((apply fuse ?a)))") ==
        "bad.rules:1:37: error: rule 'r': unknown applier 'fuse'");
}

TEST_CASE("includes are followed relative to the including file, and cycles are caught") {
  const std::string base = write_file("base.rules", "(ruleset algebra)\n(rewrite comm-add (+ ?a ?b) (+ ?b ?a) :ruleset algebra)\n");
  const std::string top = write_file("top.rules", "(include \"base.rules\")\n(check c (+ x y) => (+ y x))\n");
  Result<rules::RuleFile> file = rules::load_rule_file(top);
  REQUIRE_MESSAGE(file.ok(), file.error().render());
  CHECK(file.value().files.size() == 2);
  CHECK(file.value().rules.size() == 1);
  CHECK(file.value().rules[0].ruleset == "algebra");

  const std::string a = write_file("cycle_a.rules", "(include \"cycle_b.rules\")\n");
  const std::string b = write_file("cycle_b.rules", "\n(include \"cycle_a.rules\")\n");
  Result<rules::RuleFile> cyclic = rules::load_rule_file(a);
  REQUIRE(!cyclic.ok());
  CHECK(cyclic.error().loc.line == 2);
  CHECK(cyclic.error().loc.col == 10);
  CHECK(cyclic.error().message.rfind("include cycle: ", 0) == 0);

  Result<rules::RuleFile> missing = rules::parse_rule_text("(include \"nowhere.rules\")", write_file("m.rules", ""));
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("cannot open included file") == 0);

  // Only regular files: a directory would read as empty, /dev/zero never ends.
  const std::string dir = std::filesystem::path(write_file("d.rules", "")).parent_path().string();
  Result<rules::RuleFile> directory = rules::parse_rule_text("(include \"" + dir + "\")", write_file("dir.rules", ""));
  REQUIRE(!directory.ok());
  CHECK(directory.error().message == "included file '" + dir + "': is a directory, not a rule file");
  CHECK(directory.error().loc.col == 10);
  Result<rules::RuleFile> device = rules::parse_rule_text("(include \"/dev/zero\")", write_file("dev.rules", ""));
  REQUIRE(!device.ok());
  CHECK(device.error().message == "included file '/dev/zero': is not a regular file");
}

TEST_CASE("lists nested beyond the depth limit are an error with a location, not a stack overflow") {
  const std::string deep = std::string(400000, '(') + std::string(400000, ')');
  Result<rules::RuleFile> file = rules::parse_rule_text(deep, write_file("deep.rules", ""));
  REQUIRE(!file.ok());
  CHECK(file.error().message == "lists nested deeper than 10000 levels");
  CHECK(file.error().loc.line == 1);
  CHECK(file.error().loc.col == 10001);
  // Just under the limit reads (and is then rejected for what it says).
  const std::string fine = std::string(9999, '(') + std::string(9999, ')');
  Result<rules::RuleFile> shallow = rules::parse_rule_text(fine, write_file("shallow.rules", ""));
  REQUIRE(!shallow.ok());
  CHECK(shallow.error().message.find("nested deeper") == std::string::npos);
}

TEST_CASE("the rule-file parser survives random mutations") {
  const std::string text = R"((ruleset algebra)
(rewrite comm-add (+ ?a ?b) (+ ?b ?a) :ruleset algebra)
(birewrite assoc-add (+ ?a (+ ?b ?c)) (+ (+ ?a ?b) ?c) :ruleset algebra)
(rule two :match ((= ?s (+ ?a 0)) (* ?a 1)) :actions ((union ?s ?a)) :when (is-not-zero ?a))
(schedule (seq (saturate (run algebra)) (repeat 2 (run default 3))))
(check one (* x 1) => x)
)";
  auto lang = math::make_language();
  const Registry registry = math::make_registry(*lang);
  uint64_t state = 99;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  const std::string alphabet = "()[]?:;\"=> +*/-01az_\n";
  int ok = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string mutated = text;
    for (int e = 0; e < 1 + static_cast<int>(next() % 4); ++e) {
      const size_t pos = next() % mutated.size();
      switch (next() % 3) {
        case 0: mutated.erase(pos, 1 + next() % 6); break;
        case 1: mutated.insert(pos, 1, alphabet[next() % alphabet.size()]); break;
        default: mutated[pos] = alphabet[next() % alphabet.size()]; break;
      }
      if (mutated.empty()) mutated = "(";
    }
    Result<rules::RuleFile> file = rules::parse_rule_text(mutated, "fuzz.rules");
    if (!file) {
      CHECK(file.error().render().rfind("fuzz.rules:", 0) == 0);
      continue;
    }
    Result<std::vector<RuleSet>> sets = rules::compile_rules(file.value(), lang->language, registry);
    if (sets) ++ok;
  }
  MESSAGE(ok << " of 2000 mutated files still compiled");
}

TEST_CASE("every shipped rule file survives random mutations, parsed, compiled and run") {
  // Mutated copies are written next to the originals' includes (a copy of
  // rules/ in the build tree), so includes still resolve.
  const std::filesystem::path src = std::filesystem::path(SPOOL_SOURCE_DIR) / "rules";
  const std::filesystem::path dir = std::filesystem::path(SPOOL_BINARY_DIR) / "rules_fuzz";
  std::filesystem::create_directories(dir);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(src))
    if (entry.path().extension() == ".rules") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 4);
  for (const std::string& name : names)
    std::filesystem::copy_file(src / name, dir / name, std::filesystem::copy_options::overwrite_existing);

  // A small graph the mutated rules run on: a linear layer, SiLU, softmax, rms_norm.
  Graph g("fuzz");
  const Tensor x = input(g, "x", DType::F32, {2, 4});
  const Tensor h = nn::silu(nn::linear(x, weight(g, "w", DType::F32, {4, 4}), weight(g, "b", DType::F32, {4})));
  output("y", nn::softmax(nn::rms_norm(h, weight(g, "n", DType::F32, {4})), -1));

  uint64_t state = 7;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
  const std::string alphabet = "()[]?:;\"=> _-01axvp\n";
  int parsed = 0, compiled = 0, ran = 0;
  for (const std::string& name : names) {
    std::ifstream in(src / name);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (int trial = 0; trial < 150; ++trial) {
      std::string mutated = text;
      for (int e = 0; e < 1 + static_cast<int>(next() % 3); ++e) {
        const size_t pos = next() % mutated.size();
        switch (next() % 3) {
          case 0: mutated.erase(pos, 1 + next() % 6); break;
          case 1: mutated.insert(pos, 1, alphabet[next() % alphabet.size()]); break;
          default: mutated[pos] = alphabet[next() % alphabet.size()]; break;
        }
        if (mutated.empty()) mutated = "(";
      }
      const std::string path = (dir / ("mutated-" + name)).string();
      Result<rules::RuleFile> file = rules::parse_rule_text(mutated, path);
      if (!file) {
        CHECK(file.error().render().rfind(path + ":", 0) == 0);
        continue;
      }
      ++parsed;
      hlir::HlirLanguage lang;
      const Registry& registry = hlir::registry();
      Result<std::vector<RuleSet>> sets =
          rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
      if (!sets) {
        CHECK(sets.error().render().find("error: ") != std::string::npos);
        continue;
      }
      ++compiled;
      if (ran >= 300) continue;  // running is the slow part (under sanitizers): a bounded sample
      ++ran;
      std::unique_ptr<EGraph> eg = hlir::make_egraph(lang);
      hlir::add_graph(*eg, lang, g);
      eg->rebuild();
      RunnerConfig config;
      config.iter_limit = 6;
      config.node_limit = 3000;
      config.time_limit_ms = 500;
      try {
        Runner(config).run(*eg, sets.value(), rules::schedule_of(file.value()));
      } catch (const Error& e) {
        // A rule whose applier is called with the wrong arguments, or that
        // would merge classes of different types, is a diagnostic.
        CHECK(std::string(e.what()).size() > 0);
      }
    }
  }
  MESSAGE(names.size() << " shipped files, " << 150 * names.size() << " mutations: " << parsed << " parsed, "
                       << compiled << " compiled, " << ran << " run");
  CHECK(compiled > 0);
}
