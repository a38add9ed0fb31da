// `spool fuzz MODEL`: checks that the programs the saturated e-graphs of an
// example model can produce compute what the model computes. Draws random
// valid genomes (search::fuzz), builds each program, lowers it and runs it in
// functional simulation (or on the interpreter with --on interp), compares
// with the reference interpreter on the HLIR, and on a failure prints the
// minimal choices that fail, the rules that made them, and the first kernel
// that diverges. Exits with status 1 on any failure.

#include "commands.hpp"

#include <spool/compile/compile.hpp>
#include <spool/search/fuzz.hpp>
#include <spool/target/npu.hpp>
#include <spool/support/error.hpp>

#include <spool/models/registry.hpp>

#include <chrono>
#include <cstdio>

namespace spool::cli {
namespace {

struct FuzzCommandOptions {
  std::string model;
  models::ModelOptions model_options;
  std::vector<std::string> rules;
  bool no_check_rules = false;
  bool no_roll = false;
  size_t genomes = 100;
  uint64_t seed = 1;
  uint64_t input_seed = 1;
  std::string on = "sim";
  std::string npu = "tpuv3";
  double tolerance = -1;
  int threads = 0;
  bool no_shrink = false;
  double interp_budget = kInterpWorkBudget;
  bool no_lowering_genes = false;
};

void run_fuzz(const FuzzCommandOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const models::ModelRef ref = models::find_model(o.model);
  models::ModelOptions model_options = o.model_options;
  model_options.variant = ref.variant;
  if (model_options.size == "real")
    fail("fuzz: the reference interpreter cannot run the real {} (use --size tiny)", ref.entry->name);
  progress_step(fmt::format("build {}", o.model));
  const Graph hlir = ref.entry->build(model_options);
  check_interp_work(hlir, o.interp_budget, o.model, "use fewer tokens (--seq, --context)");

  compile::Options options;
  options.roll = !o.no_roll;
  options.rule_files = rule_files_or_default(o.rules);
  options.threads = o.threads;
  progress_step(fmt::format("saturate {} ({} hlir nodes)", o.model, hlir.num_live()));
  const compile::Saturated saturated = compile::saturate(hlir, options);
  search::SearchSpace space = search::search_space(saturated);

  progress_step("run the reference interpreter for the expected outputs");
  const search::Reference reference = search::make_reference(hlir, o.input_seed);
  // The interpreter runs the LLIR with the HLIR's exact semantics; the
  // simulator computes in f32 (bf16/f16 rounded on stores).
  const double tolerance = o.tolerance >= 0 ? o.tolerance : (o.on == "interp" ? 1e-5 : 1e-3);
  std::optional<target::NpuConfig> config;
  if (o.on == "sim") config = target::load_config(o.npu);
  // Lowered genomes also draw the lowering's choices for the greedy
  // program's GEMMs (tiles, operand slots, loop order, placement).
  if (config && !o.no_lowering_genes)
    space.add_lowering_genes(search::gemm_lowering_genes(search::canonical_program(space.program(space.greedy())),
                                                         *config, lower::LowerOptions{}));
  const search::ProgramCheck check = o.on == "interp" ? search::interpreter_check(reference, tolerance)
                                                      : search::simulator_check(reference, *config, tolerance);
  search::FuzzOptions fo;
  fo.genomes = o.genomes;
  fo.seed = o.seed;
  fo.threads = o.threads;
  fo.shrink = !o.no_shrink;
  fo.tolerance = tolerance;
  fo.lowered_config = config;
  progress_step(fmt::format("check {} random genomes ({} genes with a choice){}", o.genomes,
                            space.genomes().num_choice_genes(), fo.shrink ? ", then shrink a failure" : ""));
  const search::FuzzReport report = search::fuzz(space, reference, check, fo);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("model      %s (%s, %s)\n", ref.entry->name.c_str(), model_options.size.c_str(),
              model_options.phase.c_str());
  std::printf("space      %zu regions, %zu genes, %zu with a choice, %zu of them the lowering's\n",
              space.genomes().num_regions(), space.genomes().num_genes(), space.genomes().num_choice_genes(),
              space.num_lowering_genes());
  // Half-precision outputs allow at least interp::check_tolerance's floor.
  double half_floor = 0;
  for (const Output& out : hlir.outputs())
    half_floor = std::max(half_floor, interp::check_tolerance(tolerance, hlir.edge_type(out.edge).dtype));
  const std::string allowed = half_floor > tolerance ? fmt::format(" (bf16/f16 outputs: {:.3g})", half_floor) : "";
  std::printf("check      %s, tolerance %.3g of each output's scale%s, seed %llu\n",
              o.on == "interp" ? "reference interpreter on the LLIR" : ("lowered, functional simulation on " + o.npu).c_str(),
              tolerance, allowed.c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("%s", report.to_text(space).c_str());
  std::printf("result     %s in %.1f s\n", report.ok() ? "ok" : "FAILED", seconds);
  if (!report.ok()) throw CLI::RuntimeError(1);
}

}  // namespace

void add_fuzz_command(CLI::App& app) {
  auto o = std::make_shared<FuzzCommandOptions>();
  CLI::App* cmd = app.add_subcommand("fuzz", "Check random extractions of an example model against the interpreter");
  cmd->add_option("model", o->model, "Model name (see `spool models`)")->required();
  add_model_options(cmd, o->model_options);
  cmd->add_option("--genomes", o->genomes, "Distinct genomes to check")
      ->check(count(1'000'000, 1))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the genome draws")->check(count(INT64_MAX))->capture_default_str();
  cmd->add_option("--input-seed", o->input_seed, "Seed of the random inputs")->check(count(INT64_MAX))->capture_default_str();
  cmd->add_option("--on", o->on, "sim (lower and simulate) or interp (the LLIR on the interpreter)")
      ->check(CLI::IsMember({"sim", "interp"}))->capture_default_str();
  cmd->add_option("--npu", o->npu, "NPU config for --on sim")->capture_default_str();
  cmd->add_option("--tolerance", o->tolerance, "Largest error relative to an output's scale (default 1e-3 sim, 1e-5 interp)")
      ->check(non_negative_real());
  cmd->add_option("--rules", o->rules, "Rule files (default: rules/default.rules), checked first")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-check-rules", o->no_check_rules, "Do not check the --rules files on random tensors (they are still parsed, compiled and their checks run)");
  cmd->add_flag("--no-roll", o->no_roll, "Saturate the whole unrolled graph");
  cmd->add_flag("--no-shrink", o->no_shrink, "Report the first failure without shrinking it");
  add_interp_budget(cmd, o->interp_budget);
  cmd->add_flag("--no-lowering-genes", o->no_lowering_genes,
                "Draw only the e-graph's choices (by default --on sim also draws the GEMMs' lowering choices)");
  cmd->add_option("--threads", o->threads, "Threads (0: all); the result never depends on it")
      ->check(count(1024))
      ->capture_default_str();
  cmd->callback([o] {
    if (o->no_check_rules && o->rules.empty()) fail("--no-check-rules needs --rules FILE");
    if (!o->rules.empty()) check_rule_files(o->rules, !o->no_check_rules);
    with_unchecked_rules_note(o->rules, o->no_check_rules, [&] { run_fuzz(*o); });
  });
}

}  // namespace spool::cli
