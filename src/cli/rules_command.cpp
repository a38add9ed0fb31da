// `spool rules check FILE...`: parse, compile, run the inline checks and the
// soundness checker over rule files; exit status 1 on any error.

#include "commands.hpp"

#include <spool/hlir/language.hpp>
#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/rules/soundness.hpp>

#include <spool/support/error.hpp>

#include <cstdio>

namespace spool::cli {
namespace {

std::string where(const SourceLoc& loc) { return fmt::format("{}:{}:{}", loc.file, loc.line, loc.col); }

// Checks one file; returns the number of errors. `soundness`: run the
// random-tensor check too; `notes`: print the rules not checked and a summary
// (approximate rules are always printed).
// `unsound_out` counts the rules the random-tensor check rejected.
int check_file(const std::string& path, uint64_t seed, int trials, bool soundness, bool notes,
               int* unsound_out = nullptr) {
  Result<rules::RuleFile> file = rules::load_rule_file(path);
  if (!file) {
    std::fprintf(stderr, "%s\n", file.error().render().c_str());
    return 1;
  }
  hlir::HlirLanguage lang;
  const egraph::Registry& registry = hlir::registry();
  Result<std::vector<egraph::RuleSet>> sets =
      rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  if (!sets) {
    std::fprintf(stderr, "%s\n", sets.error().render().c_str());
    return 1;
  }
  int errors = 0;
  int passed_checks = 0;
  egraph::RunnerConfig config;
  config.node_limit = 50'000;
  config.time_limit_ms = 10'000;
  for (const rules::CheckResult& check :
       rules::run_checks(file.value(), sets.value(), [&] { return hlir::make_egraph(lang); },
                         lang.parse_options(), config)) {
    if (check.passed) {
      ++passed_checks;
    } else {
      ++errors;
      std::fprintf(stderr, "%s: error: check '%s' failed: %s\n", where(check.loc).c_str(), check.name.c_str(),
                   check.message.c_str());
    }
  }
  if (!soundness) return errors;
  int sound = 0, approximate = 0, unsound = 0, unchecked = 0;
  const std::map<std::string, rules::Approximation> approx = rules::approximations(file.value());
  for (const rules::SoundnessResult& r : rules::check_soundness(sets.value(), lang, seed, trials, approx)) {
    switch (r.status) {
      case rules::SoundnessResult::Status::Sound: ++sound; break;
      case rules::SoundnessResult::Status::Approximate: {
        ++approximate;  // always said: such a rule changes the program's values
        std::string tolerances;
        for (const auto& [dtype, tol] : approx.at(r.rule).tolerance)
          tolerances += fmt::format("{}{} {}", tolerances.empty() ? "" : ", ", dtype_name(dtype), tol);
        std::fprintf(stderr, "%s: note: rule '%s' is approximate, not exact: within its declared tolerance (%s) "
                     "on %d samples\n", where(r.loc).c_str(), r.rule.c_str(), tolerances.c_str(), r.samples);
        break;
      }
      case rules::SoundnessResult::Status::Unsound:
        ++unsound;
        std::fprintf(stderr, "%s: error: rule '%s' is unsound: %s\n", where(r.loc).c_str(), r.rule.c_str(),
                     r.detail.c_str());
        break;
      case rules::SoundnessResult::Status::NotChecked:
        ++unchecked;
        if (!notes) break;
        std::fprintf(stderr, "%s: note: rule '%s' was not checked on tensors: %s\n", where(r.loc).c_str(),
                     r.rule.c_str(), r.detail.c_str());
        break;
    }
  }
  errors += unsound;
  if (unsound_out) *unsound_out += unsound;
  if (!notes) return errors;
  std::printf("%s: %d rules: %d exact, %d approximate, %d unsound, %d not checked; %d of %zu checks passed\n",
              path.c_str(), sound + approximate + unsound + unchecked, sound, approximate, unsound, unchecked,
              passed_checks, file.value().checks.size());
  return errors;
}

}  // namespace

void check_rule_files(const std::vector<std::string>& files, bool soundness) {
  progress_step(fmt::format("check the --rules files {}", fmt::join(files, ", ")));
  int errors = 0, unsound = 0;
  for (const std::string& file : files) errors += check_file(file, 1, 8, soundness, false, &unsound);
  if (errors > 0)
    fail("--rules: {} error(s) in {} (above){}", errors, fmt::join(files, ", "),
         unsound > 0 ? "; --no-check-rules skips the random-tensor check" : "");
}

void with_unchecked_rules_note(const std::vector<std::string>& files, bool unchecked,
                               const std::function<void()>& body) {
  if (files.empty() || !unchecked) return body();
  try {
    body();
  } catch (const Error& e) {
    throw Error(fmt::format("{}\n  note: the --rules files were not checked on tensors (--no-check-rules); an "
                            "unsound rule in them can cause this: `spool rules check {}` checks them",
                            e.what(), fmt::join(files, " ")));
  }
}

void add_rules_command(CLI::App& app) {
  CLI::App* rules_cmd = app.add_subcommand("rules", "Work with rule files");
  rules_cmd->require_subcommand(1);
  struct Options {
    std::vector<std::string> files;
    uint64_t seed = 1;
    int trials = 8;
  };
  auto options = std::make_shared<Options>();
  CLI::App* check = rules_cmd->add_subcommand(
      "check", "Parse and type-check rule files, run their inline checks, and test every rewrite on random tensors");
  check->add_option("files", options->files, "Rule files")->required()->check(CLI::ExistingFile);
  check->add_option("--seed", options->seed, "Seed of the random tensors")->capture_default_str();
  check->add_option("--trials", options->trials,
                    "Random instances per rule (per dtype for formula rules), each run on ordinary and special values")
      ->check(count(256, 1))
      ->capture_default_str();
  check->callback([options] {
    int errors = 0;
    for (const std::string& file : options->files) {
      progress_step(fmt::format("check {}", file));
      errors += check_file(file, options->seed, options->trials, true, true);
    }
    if (errors > 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace spool::cli
