// Stages run alone on text files: `spool opt` (HLIR in; roll, saturate,
// extract, unroll), `spool lower` (LLIR in, NPU program text out). `spool
// sim FILE` (sim_command.cpp) simulates an NPU program text. Errors in a
// file are `file:line:col: error: ...`.

#include "commands.hpp"

#include <spool/compile/compile.hpp>
#include <spool/ir/text.hpp>
#include <spool/lower/lower.hpp>
#include <spool/npu/text.hpp>
#include <spool/roll/roll.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>
#include <spool/target/npu.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace spool::cli {
namespace {

Graph read_graph(const std::string& path) { return parse_graph(read_file(path), path).take(); }

struct OptOptions {
  std::string file, output;
  std::vector<std::string> passes{"roll", "saturate", "extract", "unroll"};
  std::vector<std::string> rules;
  bool no_check_rules = false;
};

// The passes given must be in pipeline order; roll is optional, and
// saturate, extract and unroll each need the ones before them.
void run_opt(const OptOptions& o) {
  static const std::vector<std::string> order = {"roll", "saturate", "extract", "unroll"};
  std::vector<size_t> given;
  for (const std::string& pass : o.passes) {
    const auto it = std::find(order.begin(), order.end(), pass);
    if (it == order.end()) fail("--passes: unknown pass '{}' (expected roll, saturate, extract, unroll)", pass);
    const size_t i = static_cast<size_t>(it - order.begin());
    if (!given.empty() && i <= given.back())
      fail("--passes: '{}' after '{}': give the passes once each, in pipeline order (roll, saturate, extract, unroll)",
           pass, order[given.back()]);
    given.push_back(i);
  }
  if (given.empty()) fail("--passes: no pass given");
  const bool roll = given.front() == 0;
  const size_t last = given.back();
  for (size_t i = 1; i <= last; ++i)
    if (std::find(given.begin(), given.end(), i) == given.end())
      fail("--passes: '{}' needs '{}' first", order[last], order[i]);
  const Graph hlir = read_graph(o.file);
  if (order[last] == "roll") {
    write_file(o.output, print_graph(roll::auto_roll(hlir).graph));
    return;
  }
  compile::Options options;
  options.roll = roll;
  options.rule_files = rule_files_or_default(o.rules);
  std::string text;
  options.print_after = [&](std::string_view stage, const std::string& t) {
    if (stage == order[last]) text = t;
  };
  compile::run(hlir, options);
  write_file(o.output, text);
}

struct LowerOptionsCli {
  std::string file, output, npu = "tpuv3";
};

void run_lower(const LowerOptionsCli& o) {
  const Graph llir = read_graph(o.file);
  const target::NpuConfig config = target::load_config(o.npu);
  lower::LowerOptions options;
  options.tile_cycles = sim::tile_timer(config);
  lower::Lowered lowered = lower::to_npu(llir, config, options);
  lowered.program.name = llir.name();
  write_file(o.output, npu::print(lowered.program));
}

}  // namespace

void add_text_commands(CLI::App& app) {
  auto opt = std::make_shared<OptOptions>();
  CLI::App* opt_cmd = app.add_subcommand("opt", "Run compile passes on an HLIR text file and print the result");
  opt_cmd->add_option("file", opt->file, "HLIR text (as --print-after hlir writes it)")->required()->check(CLI::ExistingFile);
  opt_cmd->add_option("--passes", opt->passes, "Passes, in pipeline order: roll, saturate, extract, unroll (default: all)")
      ->delimiter(',');
  opt_cmd->add_option("--rules", opt->rules, "Rule files (default: rules/default.rules), checked first")
      ->check(CLI::ExistingFile);
  opt_cmd->add_flag("--no-check-rules", opt->no_check_rules,
                    "Do not check the --rules files on random tensors (they are still parsed, compiled and their "
                    "checks run)");
  opt_cmd->add_option("-o,--output", opt->output, "Where to write the result (default: standard output)");
  opt_cmd->callback([opt] {
    if (opt->no_check_rules && opt->rules.empty()) fail("--no-check-rules needs --rules FILE");
    if (!opt->rules.empty()) check_rule_files(opt->rules, !opt->no_check_rules);
    with_unchecked_rules_note(opt->rules, opt->no_check_rules, [&] { run_opt(*opt); });
  });

  auto low = std::make_shared<LowerOptionsCli>();
  CLI::App* lower_cmd = app.add_subcommand("lower", "Lower an LLIR text file to an NPU program and print it");
  lower_cmd->add_option("file", low->file, "LLIR text (as --print-after unroll writes it)")->required()->check(CLI::ExistingFile);
  lower_cmd->add_option("--npu", low->npu, "NPU config: a name in configs/ (tpuv3, tpuv4, toy) or a JSON file")
      ->capture_default_str();
  lower_cmd->add_option("-o,--output", low->output, "Where to write the NPU program (default: standard output)");
  lower_cmd->callback([low] { run_lower(*low); });
}

}  // namespace spool::cli
