#pragma once
// Subcommands of the `spool` tool, one file each, registered by main.cpp.

#include <CLI/CLI.hpp>

namespace spool::cli {

void add_run_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_rules_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);

}  // namespace spool::cli
