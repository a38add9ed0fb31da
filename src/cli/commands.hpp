#pragma once
// Subcommands of the `spool` tool, one file each, registered by main.cpp.

#include <CLI/CLI.hpp>

namespace spool::examples {
struct ModelOptions;
}  // namespace spool::examples

namespace spool::cli {

// --size, --layers, --phase, --seq and --context into `options`.
void add_model_options(CLI::App* cmd, examples::ModelOptions& options);

void add_run_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_rules_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);

}  // namespace spool::cli
