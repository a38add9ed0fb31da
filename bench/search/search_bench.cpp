// Greedy against searched extraction, in simulated cycles, on an example
// model (default: llama-3-8B shapes, prefill of 512 tokens; shapes only, no
// data). Saturates with the shipped rules (rules/default.rules), runs
// search::genetic with the per-kernel simulated-cycles fitness
// (search/fitness.hpp), and prints greedy and best cycles under that
// fitness and, for both programs, the cycles of the whole lowered program
// simulated at once.
//
//   search_bench [MODEL] [--size tiny|real] [--layers L] [--seq S]
//                [--genomes N] [--seconds T] [--seed S] [--npu NAME] [--threads T]
//                [--whole]   rank by whole-program cycles (slower: no memo)

#include <spool/search/fitness.hpp>
#include <spool/search/genetic.hpp>
#include <spool/sim/config.hpp>
#include <spool/support/error.hpp>

#include "models.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace spool;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int run(int argc, char** argv) {
  std::string model = "llama", npu = "tpuv3";
  examples::ModelOptions mo;
  mo.size = "real";
  mo.seq = 512;
  search::SearchOptions so;
  so.max_genomes = 200;
  bool whole = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("{} needs a value", a);
      return argv[++i];
    };
    if (a == "--size") mo.size = value();
    else if (a == "--layers") mo.layers = std::stoll(value());
    else if (a == "--seq") mo.seq = std::stoll(value());
    else if (a == "--genomes") so.max_genomes = std::stoull(value());
    else if (a == "--seconds") so.max_seconds = std::stod(value());
    else if (a == "--seed") so.seed = std::stoull(value());
    else if (a == "--npu") npu = value();
    else if (a == "--threads") so.threads = std::stoi(value());
    else if (a == "--whole") whole = true;
    else if (!a.empty() && a[0] != '-') model = a;
    else fail("unknown option {}", a);
  }
  spdlog::set_level(spdlog::level::warn);
  const examples::ModelRef ref = examples::find_model(model);
  mo.variant = ref.variant;
  const Graph hlir = ref.entry->build(mo);
  const sim::NpuConfig config = sim::load_config(npu);

  auto t = std::chrono::steady_clock::now();
  CompileOptions co;
  co.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  const Saturated saturated = saturate(hlir, co);
  const search::SearchSpace space = search::search_space(saturated);
  const double saturate_s = seconds_since(t);
  std::printf("model        %s (%s, %s, seq %lld), npu %s\n", ref.entry->name.c_str(), mo.size.c_str(),
              mo.phase.c_str(), static_cast<long long>(mo.seq), npu.c_str());
  std::printf("space        %zu regions, %zu genes, %zu with a choice (saturated in %.2f s)\n",
              space.genomes().num_regions(), space.genomes().num_genes(), space.genomes().num_choice_genes(), saturate_s);

  const search::SimulatedCycles fitness(config);
  t = std::chrono::steady_clock::now();
  const search::SearchResult r = search::genetic(
      space, [&](const Graph& p) { return whole ? fitness.whole(p) : fitness.kernels(p); }, so);
  std::printf("search       %s (ranked by %s)\n", r.summary().c_str(),
              whole ? "whole-program cycles" : "per-kernel cycles");
  std::printf("memo         %zu kernels simulated, %zu memo hits\n", fitness.simulations(), fitness.memo_hits());
  const std::vector<uint32_t> changed = search::differing_genes(space.genomes(), r.best, space.greedy());
  std::printf("changes      %zu choices differ from greedy\n", changed.size());
  for (size_t i = 0; i < changed.size() && i < 12; ++i) {
    const uint32_t g = changed[i];
    std::printf("  e-class c%u (region %u)\n    best    %s\n    greedy  %s\n", space.genomes().gene(g).cls.value,
                space.genomes().gene(g).region, space.describe(g, r.best[g]).c_str(),
                space.describe(g, space.greedy()[g]).c_str());
  }
  t = std::chrono::steady_clock::now();
  const int64_t greedy_whole = fitness.whole(space.program(space.greedy()));
  const int64_t best_whole = fitness.whole(r.best_program);
  std::printf("whole        greedy %lld cycles, best %lld cycles (x%.3f), simulated in %.2f s\n",
              static_cast<long long>(greedy_whole), static_cast<long long>(best_whole),
              best_whole > 0 ? static_cast<double>(greedy_whole) / static_cast<double>(best_whole) : 1.0,
              seconds_since(t));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "search_bench: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "search_bench: error: %s\n", e.what());
    return 1;
  }
}
