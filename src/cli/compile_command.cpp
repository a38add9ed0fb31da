// `spool compile MODEL`: runs spool::compile (roll, saturate, extract,
// unroll) on an example model's HLIR and prints what each stage did. With
// --check (tiny models) the compiled program is run on the interpreter and
// compared with the HLIR. Lowering and simulation are not part of it yet.

#include "commands.hpp"

#include <spool/compile/compile.hpp>
#include <spool/interp/interp.hpp>

#include <spool/models/registry.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace spool::cli {
namespace {

struct CompileCommandOptions {
  std::string model;
  models::ModelOptions model_options;
  bool no_roll = false;
  std::vector<std::string> rules;
  bool no_check_rules = false;
  bool check = false;
  double interp_budget = kInterpWorkBudget;
  std::string json;
  PrintAfter print;
};

void run_compile(const CompileCommandOptions& o) {
  const models::ModelRef ref = models::find_model(o.model);
  models::ModelOptions model_options = o.model_options;
  model_options.variant = ref.variant;
  progress_step(fmt::format("build {}", o.model));
  const std::jthread rules = prepare_rules_beside(rule_files_or_default(o.rules));
  const Graph hlir = ref.entry->build(model_options);
  if (o.check && parameter_count(hlir) > kInterpParameterLimit)
    fail("--check runs the reference interpreter, which holds every value as a double and cannot run {} "
         "parameters; drop --check or use --size tiny",
         parameter_count(hlir));
  if (o.check) check_interp_work(hlir, o.interp_budget, o.model, "drop --check");
  compile::Options options;
  options.roll = !o.no_roll;
  options.rule_files = rule_files_or_default(o.rules);
  options.print_after = stage_printer(o.print);
  progress_step(fmt::format("compile {} ({} hlir nodes)", o.model, hlir.num_live()));
  const compile::Compiled c = compile::run(hlir, options);
  const compile::Report& r = c.report;
  std::printf("model      %s (%s, %s)\n", ref.entry->name.c_str(), model_options.size.c_str(), model_options.phase.c_str());
  std::printf("roll       %lld loops, trips", static_cast<long long>(r.roll.loops));
  for (int64_t t : r.roll.trips) std::printf(" %lld", static_cast<long long>(t));
  std::printf(", hlir %zu -> %zu nodes, body %lld\n", r.roll.hlir_nodes_before, r.roll.hlir_nodes_after,
              static_cast<long long>(r.roll.body_nodes));
  std::printf("egraph     %zu e-graphs for %zu regions, %zu nodes, %zu classes, %zu iterations, stop %s\n",
              r.egraph.egraphs, r.egraph.regions, r.egraph.nodes, r.egraph.classes, r.egraph.iterations,
              std::string(egraph::stop_reason_name(r.egraph.stop)).c_str());
  for (const std::string& line : r.egraph.budget_stops) std::printf("egraph     budget: %s\n", line.c_str());
  std::printf("program    %zu nodes (kernel-level, unrolled)\n", c.program.num_live());
  std::printf("time ms    roll %.1f, saturate %.1f, extract %.1f, unroll %.1f, total %.1f\n", r.times.roll_ms,
              r.times.saturate_ms, r.times.extract_ms, r.times.unroll_ms, r.times.total_ms);
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    if (!out) fail("cannot write {}", o.json);
    nlohmann::json j = to_json(r);
    j["model"] = ref.entry->name;
    j["program"] = {{"nodes", c.program.num_live()}};
    out << j.dump(2) << "\n";
    out.flush();
    if (!out) fail("failed to write {}", o.json);
  }
  if (!o.check) return;
  const interp::Env env = interp::random_inputs(hlir, 1, 16);
  const auto want = interp::run(hlir, env);
  const auto got = interp::run(c.program, env);
  double worst = 0.0;
  int64_t non_finite = 0;
  for (const auto& [name, value] : want) {
    const interp::Difference d = interp::compare(got.at(name), value);
    worst = std::max(worst, d.max_rel_to_scale);
    non_finite += d.non_finite;
  }
  const bool ok = worst <= 1e-5 && non_finite == 0;
  std::printf("check      max error relative to scale %.3g over %zu outputs, %lld values not finite: %s\n", worst,
              want.size(), static_cast<long long>(non_finite), ok ? "ok" : "FAILED");
  if (!ok) fail("the compiled program differs from the HLIR (max relative error {}, {} values not finite)", worst, non_finite);
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto o = std::make_shared<CompileCommandOptions>();
  CLI::App* cmd = app.add_subcommand("compile", "Roll, saturate, extract and unroll an example model; print the stages");
  cmd->add_option("model", o->model, "Model name (see `spool models`)")->required();
  add_model_options(cmd, o->model_options);
  add_print_options(cmd, o->print);
  cmd->add_flag("--no-roll", o->no_roll, "Saturate the whole unrolled graph");
  cmd->add_option("--rules", o->rules, "Rule files (default: rules/default.rules), checked first")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-check-rules", o->no_check_rules, "Do not check the --rules files on random tensors (they are still parsed, compiled and their checks run)");
  cmd->add_option("--json", o->json, "Write the compile report (roll, egraph, compile keys) as JSON");
  CLI::Option* check =
      cmd->add_flag("--check", o->check, "Run the compiled program on the interpreter against the HLIR (tiny models)");
  add_interp_budget(cmd, o->interp_budget)->needs(check);
  cmd->callback([o] {
    if (o->no_check_rules && o->rules.empty()) fail("--no-check-rules needs --rules FILE");
    if (!o->rules.empty()) check_rule_files(o->rules, !o->no_check_rules);
    with_unchecked_rules_note(o->rules, o->no_check_rules, [&] { run_compile(*o); });
  });
}

}  // namespace spool::cli
