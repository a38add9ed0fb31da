#pragma once
// Subcommands of the `spool` tool, one file each, registered by main.cpp.

#include <CLI/CLI.hpp>

#include <spool/support/units.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace spool {
class Graph;
}  // namespace spool
namespace spool::models {
struct ModelOptions;
}  // namespace spool::models

namespace spool::pipeline {
struct Report;
}

namespace spool::cli {

// Option checks shared by the commands. CLI11 validators read the text
// before it is converted, so "-5" given to an unsigned option is refused
// here instead of wrapping around.
//   count(max, min):   a whole number in [min, max]
//   non_negative_real: a finite number >= 0 (no nan or inf)
CLI::Validator count(int64_t max, int64_t min = 0);
CLI::Validator non_negative_real();

// The reference interpreter holds every value as a double: beyond this many
// parameters a run would need tens of gigabytes and hours, so the commands
// that would run it refuse first.
inline constexpr int64_t kInterpParameterLimit = 200'000'000;
// The values the reference interpreter may compute in one run by default
// (interp::work_estimate): about 20 s where Spool is tested (the
// interpreter computes in double and materialises every view: the tiny
// llama at 256 and 512 tokens, 4.6e7 and 1.3e8 values, took 8 s and 26 s,
// some 5 million values a second). --interp-budget raises it.
inline constexpr double kInterpWorkBudget = 1e8;
// Adds --interp-budget (values the interpreter may compute, default
// kInterpWorkBudget) to a command that runs the reference interpreter.
CLI::Option* add_interp_budget(CLI::App* cmd, double& budget);
// Adds --sim-threads (sim::Options::threads) to a command that simulates.
CLI::Option* add_sim_threads(CLI::App* cmd, int& threads);
// Refuses, before any work, a graph the interpreter would need more than
// `budget` values for (interp::work_estimate): names `what`, the flag that
// raises the budget and `instead`, what else the user can do.
void check_interp_work(const Graph& graph, double budget, std::string_view what, std::string_view instead);
// The elements of the graph's weights.
int64_t parameter_count(const Graph& graph);

// Files the commands read and write. read_file fails naming the file;
// write_file writes to `path` ("-" or "": standard output) and fails if any
// byte did not reach it (a full disk is an error, not a file silently cut).
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);

// --size, --layers, --phase, --seq and --context into `options`.
void add_model_options(CLI::App* cmd, models::ModelOptions& options);

// --print-after STAGE|all (repeatable) and --print-dir DIR: the IR after each
// named stage (compile::Options::print_after lists them), written to
// DIR/NN-STAGE.txt (NN the stage's place in the pipeline) or, without a
// directory, to standard error.
struct PrintAfter {
  std::vector<std::string> stages;
  std::string dir;
};
void add_print_options(CLI::App* cmd, PrintAfter& options);
// The callback for compile::Options::print_after; empty when no stage is asked for.
std::function<void(std::string_view, const std::string&)> stage_printer(const PrintAfter& options);

// The rule files a compile reads: those given with --rules, else the
// shipped rules (models::default_rules_file()).
std::vector<std::string> rule_files_or_default(const std::vector<std::string>& given);
// compile::prepare_rules(files) on a thread of its own, beside a command's
// first stage (building or reading the model, on one thread), so that a
// one-shot compile finds the rules read and compiled; joined when the
// returned thread is destroyed.
std::jthread prepare_rules_beside(std::vector<std::string> files);

// Rule files given with --rules: parsed, compiled and their inline checks
// run always, every rule checked on random tensors (rules check) unless
// `soundness` is false (--no-check-rules). Prints each error, then fails
// naming the files.
void check_rule_files(const std::vector<std::string>& files, bool soundness);
// Runs `body`. With --rules files not checked on tensors (--no-check-rules),
// an error it throws (a wrong result, or an invariant a wrong rule broke)
// also names those files and how to check them.
void with_unchecked_rules_note(const std::vector<std::string>& files, bool unchecked,
                               const std::function<void()>& body);

// Ctrl-C (and SIGTERM) end the command at once with exit status 130 and one
// line on standard error: how long it ran, the step under way and the steps
// completed, with their times. progress_step names the step that begins
// (the one before it counts as completed); call it from the main thread.
void install_interrupt_handler();
void progress_step(std::string_view what);
// How far the current step got (a search's genomes and best program so far,
// a simulation's kernels and cycles): Ctrl-C prints it after the step.
// From one thread at a time; progress_step clears it.
void progress_detail(std::string_view where);

void add_run_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_rules_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);
void add_onnx_commands(CLI::App& app);  // import, conformance

// `spool run MODEL.onnx` (onnx_command.cpp): the options only an ONNX model
// takes, registered on the run command, and the run itself.
struct OnnxRunOptions {
  std::string inputs_dir;
  std::vector<std::string> dims;
};
struct OnnxRun {
  std::string model, npu;
  std::vector<std::string> rules;
  uint64_t seed = 0;
  std::string json_file;
  bool no_roll = false;
  PrintAfter print;
  double interp_budget = kInterpWorkBudget;
  std::string tile_cache;  // empty: none
};

// The report's "tiles" line: how the distinct GEMMs' tiles were chosen
// (timed, or read from the tile cache) and where the cache is.
void print_tiles(const pipeline::Report& report);
// True for MODEL.onnx; fails on the run command's options that do not
// apply to it (or --inputs and --dim given for a built-in model).
bool check_onnx_run_options(const CLI::App& run_cmd, const std::string& model);
std::shared_ptr<OnnxRunOptions> add_onnx_run_options(CLI::App* cmd);
void run_onnx(const OnnxRunOptions& onnx_options, const OnnxRun& run);

}  // namespace spool::cli
