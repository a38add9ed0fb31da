// `spool run MODEL` and `spool models`.
//
// For now `run` builds the model's HLIR and executes it with the reference
// interpreter (--interp); the compile pipeline (rolling, saturation,
// extraction, lowering, simulation) is added stage by stage and `run` refuses
// to pretend it ran a stage that does not exist yet.

#include "commands.hpp"

#include <spool/spool.hpp>

#include "models.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace spool::cli {
namespace {

struct RunOptions {
  std::string model;
  examples::ModelOptions model_options;
  bool interp = false;
  uint64_t seed = 0;
  std::string dot_file;
  std::string hlir_file;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) fail("cannot open '{}' for writing", path);
  out << text;
  if (!out) fail("failed to write '{}'", path);
}

void run(const RunOptions& options) {
  const examples::ModelEntry& entry = examples::find_model(options.model);
  using Clock = std::chrono::steady_clock;
  const auto build_start = Clock::now();
  const Graph graph = entry.build(options.model_options);
  const double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - build_start).count();
  if (!options.dot_file.empty()) write_file(options.dot_file, graph_to_dot(graph));
  if (!options.hlir_file.empty()) write_file(options.hlir_file, print_graph(graph));

  std::printf("model      %s (%s)\n", entry.name.c_str(), options.model_options.size.c_str());
  std::printf("seq        %lld tokens, prefill\n", static_cast<long long>(options.model_options.seq));
  std::printf("hlir       %zu nodes, built in %.1f ms\n", graph.num_live(), build_ms);
  if (!options.interp)
    fail("only the reference interpreter can run models so far: add --interp "
         "(compiling for the NPU is not available yet)");

  const interp::Env inputs = interp::random_inputs(graph, options.seed, /*integer_bound=*/16);
  const auto run_start = Clock::now();
  const auto outputs = interp::run(graph, inputs);
  const double run_ms = std::chrono::duration<double, std::milli>(Clock::now() - run_start).count();
  std::printf("interp     %.1f ms (reference interpreter, seed %llu)\n", run_ms,
              static_cast<unsigned long long>(options.seed));
  for (const auto& [name, value] : outputs) {
    double sum = 0.0, sum_abs = 0.0;
    for (int64_t i = 0; i < value.size(); ++i) {
      sum += value.get(i);
      sum_abs += std::abs(value.get(i));
    }
    std::printf("output     %s %s%s  checksum sum=%.6f mean|x|=%.6f\n", name.c_str(),
                std::string(dtype_name(value.dtype())).c_str(), shape_str(value.shape()).c_str(), sum,
                value.size() ? sum_abs / static_cast<double>(value.size()) : 0.0);
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run_cmd = app.add_subcommand("run", "Build an example model and run it");
  run_cmd->add_option("model", options->model, "Model name (see `spool models`)")->required();
  run_cmd->add_option("--size", options->model_options.size, "tiny or real")
      ->check(CLI::IsMember({"tiny", "real"}))
      ->capture_default_str();
  run_cmd->add_option("--layers", options->model_options.layers, "Number of layers (default: the size's own)")
      ->check(CLI::PositiveNumber);
  run_cmd->add_option("--seq", options->model_options.seq, "Prefill tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run_cmd->add_flag("--interp", options->interp, "Run the HLIR with the reference interpreter");
  run_cmd->add_option("--seed", options->seed, "Seed of the random weights and tokens")->capture_default_str();
  run_cmd->add_option("--dot", options->dot_file, "Write a Graphviz picture of the HLIR");
  run_cmd->add_option("--hlir", options->hlir_file, "Write the HLIR in text form");
  run_cmd->callback([options] { run(*options); });
}

void add_models_command(CLI::App& app) {
  app.add_subcommand("models", "List the example models and their shapes")->callback([] {
    for (const examples::ModelEntry& entry : examples::models()) {
      std::printf("%-12s %s\n", entry.name.c_str(), entry.description.c_str());
      std::printf("%-12s   tiny: %s\n", "", entry.tiny_shape.c_str());
      std::printf("%-12s   real: %s\n", "", entry.real_shape.c_str());
    }
  });
}

}  // namespace spool::cli
