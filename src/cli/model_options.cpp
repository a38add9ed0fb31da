// The options that choose an example model's shape and phase, shared by the
// commands that build one (run, compile, fuzz).

#include "commands.hpp"

#include <spool/models/registry.hpp>
#include <spool/models/workloads.hpp>

#include <spool/compile/compile.hpp>
#include <spool/interp/interp.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <charconv>
#include <cmath>
#include <string>

namespace spool::cli {

std::vector<std::string> rule_files_or_default(const std::vector<std::string>& given) {
  return given.empty() ? std::vector<std::string>{models::default_rules_file()} : given;
}

std::jthread prepare_rules_beside(std::vector<std::string> files) {
  return std::jthread([files = std::move(files)] { compile::prepare_rules(files); });
}

CLI::Validator count(int64_t max, int64_t min) {
  return CLI::Validator(
      [max, min](std::string& text) -> std::string {
        int64_t value = -1;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || ptr != text.data() + text.size() || value < min || value > max)
          return fmt::format("'{}' is not a whole number from {} to {}", text, min, max);
        return {};
      },
      fmt::format("INT in [{}, {}]", min, max));
}

CLI::Validator non_negative_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t used = 0;
        double value = -1;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value) || value < 0)
          return fmt::format("'{}' is not a finite number >= 0", text);
        return {};
      },
      "REAL >= 0");
}

CLI::Option* add_interp_budget(CLI::App* cmd, double& budget) {
  return cmd
      ->add_option("--interp-budget", budget,
                   "Values the reference interpreter may compute (default 1e8, about 20 s); a bigger run is refused")
      ->check(CLI::Range(1.0, 1e15));
}

CLI::Option* add_sim_threads(CLI::App* cmd, int& threads) {
  return cmd
      ->add_option("--sim-threads", threads,
                   "Threads that simulate a one-core run's kernels in parts side by side, joined exactly (0: one "
                   "per hardware thread; 1: in one run, whose DRAM rows a second thread walks ahead)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
}

void check_interp_work(const Graph& graph, double budget, std::string_view what, std::string_view instead) {
  const auto work = static_cast<double>(interp::work_estimate(graph));
  if (work > budget)
    fail(
        "the reference interpreter would compute about {:.3g} values for {} ({} hlir nodes), above --interp-budget "
        "{:.3g} (about 20 s); raise --interp-budget, or {}",
        work, what, graph.num_live(), budget, instead);
}

void add_model_options(CLI::App* cmd, models::ModelOptions& options) {
  cmd->add_option("--size", options.size, "tiny or real")->check(CLI::IsMember({"tiny", "real"}))->capture_default_str();
  // Bounds far above any released model, so that a typo fails at once
  // instead of building a graph for minutes.
  cmd->add_option("--layers", options.layers, "Number of layers (default: the size's own)")
      ->check(count(4096, 1));
  cmd->add_option("--phase", options.phase, "prefill, or decode (one token after a KV cache)")
      ->check(CLI::IsMember({"prefill", "decode"}))
      ->capture_default_str();
  cmd->add_option("--seq", options.seq, "Prefill tokens (default: 8 tiny, 512 real)")
      ->check(count(131072, 1));
  cmd->add_option("--context", options.context, "Decode: KV cache length (default: 8 tiny, 512 real)")
      ->check(count(1048576, 1));
  cmd->add_option("--dtype", options.dtype,
                  "Weights, activations and KV cache: bf16 or f32 (default: bf16 real, as served; f32 tiny)")
      ->check(CLI::IsMember({"bf16", "f32"}));
  cmd->add_option("--logits", options.logits,
                  "Prefill: the logits of the last token only, or of all tokens (default: last real, as served; "
                  "all tiny)")
      ->check(CLI::IsMember({"last", "all"}));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("failed to read '{}'", path);
  return text.str();
}

void write_file(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      fail("failed to write the output");
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot open '{}' for writing", path);
  out << text;
  out.flush();
  if (!out) fail("failed to write '{}'", path);
}

void add_print_options(CLI::App* cmd, PrintAfter& options) {
  std::vector<std::string> names{"all"};
  for (const char* stage : compile::kStages) names.push_back(stage);
  cmd->add_option("--print-after", options.stages,
                  fmt::format("Write the IR after a stage ({}; repeatable)", fmt::join(names, ", ")))
      ->check(CLI::IsMember(names));
  cmd->add_option("--print-dir", options.dir, "Where --print-after writes (default: standard error)");
}

std::function<void(std::string_view, const std::string&)> stage_printer(const PrintAfter& options) {
  if (options.stages.empty()) {
    if (!options.dir.empty()) fail("--print-dir needs --print-after STAGE or --print-after all");
    return {};
  }
  const bool all = std::find(options.stages.begin(), options.stages.end(), "all") != options.stages.end();
  if (!options.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.dir, ec);
    if (ec) fail("--print-dir: cannot create '{}': {}", options.dir, ec.message());
  }
  return [options, all](std::string_view stage, const std::string& text) {
    if (!all && std::find(options.stages.begin(), options.stages.end(), stage) == options.stages.end()) return;
    size_t place = 0;
    while (place < std::size(compile::kStages) && compile::kStages[place] != stage) ++place;
    if (options.dir.empty()) {
      std::fprintf(stderr, "; ---- after %.*s ----\n%s", static_cast<int>(stage.size()), stage.data(), text.c_str());
      return;
    }
    const std::string path = fmt::format("{}/{:02}-{}.txt", options.dir, place + 1, stage);
    std::ofstream out(path);
    out << text;
    out.flush();
    if (!out) fail("--print-dir: cannot write '{}'", path);
  };
}

}  // namespace spool::cli
