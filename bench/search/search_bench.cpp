// Greedy against searched extraction, in simulated cycles, on an example
// model (default: llama-3-8B shapes, prefill of 512 tokens; shapes only, no
// data). Saturates with the shipped rules (rules/default.rules), runs
// search::genetic ranked by the per-kernel simulated-cycles fitness and
// decided by whole-program cycles (search/fitness.hpp), as `spool run
// --search` does, and prints greedy and best cycles under both.
//
//   search_bench [MODEL] [--size tiny|real] [--layers L] [--seq S]
//                [--genomes N] [--seconds T] [--seed S] [--npu NAME] [--threads T]
//                [--rules FILE]  (default: rules/default.rules)
//                [--whole]   rank by whole-program cycles (slower: no memo)
//                [--neighbours]  instead of a search: every single-choice
//                    change of the greedy genome, with its analytic estimate,
//                    per-kernel and whole-program cycles against greedy's
//                [--no-lowering-genes]  only the e-graph's choices (by
//                    default genomes also carry the lowering's choices for
//                    the greedy program's GEMMs, as `spool run --search`)

#include <spool/search/fitness.hpp>
#include <spool/search/genetic.hpp>
#include <spool/search/space.hpp>
#include <spool/support/error.hpp>
#include <spool/target/npu.hpp>

#include <spool/models/registry.hpp>

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

// Every single-choice change of the greedy genome, measured three ways.
int print_neighbours(const search::SearchSpace& space, const search::SimulatedCycles& fitness) {
  const search::GenomeSpace& genomes = space.genomes();
  const search::Genome& greedy = space.greedy();
  std::vector<uint32_t> changed;
  const std::vector<search::Genome> near = genomes.neighbours(greedy, &changed);
  const Graph greedy_program = space.program(greedy);
  const double greedy_estimate = space.estimate(greedy);
  const int64_t greedy_kernels = fitness.kernels(greedy_program);
  const int64_t greedy_whole = fitness.whole(greedy_program);
  std::printf("greedy       estimate %.4g, kernels %lld cycles, whole %lld cycles; %zu neighbours\n", greedy_estimate,
              static_cast<long long>(greedy_kernels), static_cast<long long>(greedy_whole), near.size());
  std::fflush(stdout);
  for (size_t i = 0; i < near.size(); ++i) {
    const uint32_t g = changed[i];
    int64_t kernels = -1, whole_cycles = -1;
    std::string error;
    uint64_t print = 0;
    const double estimate = space.estimate(near[i]);
    try {
      // What the search prunes (SearchOptions::prune_factor) is not simulated here either.
      if (estimate > 4 * greedy_estimate) fail("estimate {:.4g}: pruned", estimate);
      const Graph program = space.program(near[i]);
      print = search::program_fingerprint(program);
      kernels = fitness.kernels(program);
      if (kernels < greedy_kernels * 11 / 10) whole_cycles = fitness.whole(program);
    } catch (const Error& e) {
      error = e.what();
    }
    const std::vector<uint32_t> diff = search::differing_genes(genomes, near[i], greedy);
    std::printf("n%-3zu c%u (region %u), %zu genes differ, program %016llx\n    to      %s\n    from    %s\n", i,
                genomes.gene(g).cls.value, genomes.gene(g).region, diff.size(),
                static_cast<unsigned long long>(print), space.describe(g, near[i][g]).c_str(),
                space.describe(g, greedy[g]).c_str());
    if (!error.empty()) {
      std::printf("    error   %s\n", error.c_str());
      continue;
    }
    std::printf("    estimate %+.4g  kernels %+lld  whole %+lld\n", estimate - greedy_estimate,
                static_cast<long long>(kernels - greedy_kernels),
                whole_cycles < 0 ? 0LL : static_cast<long long>(whole_cycles - greedy_whole));
    std::fflush(stdout);
  }
  return 0;
}

int run(int argc, char** argv) {
  std::string model = "llama", npu = "tpuv3";
  models::ModelOptions mo;
  mo.size = "real";
  mo.seq = 512;
  search::SearchOptions so;
  so.max_genomes = 200;
  bool whole = false, neighbours = false, lowering_genes = true;
  std::string rules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";
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
    else if (a == "--rules") rules = value();
    else if (a == "--whole") whole = true;
    else if (a == "--neighbours") neighbours = true;
    else if (a == "--no-lowering-genes")
      lowering_genes = false;
    else if (!a.empty() && a[0] != '-') model = a;
    else fail("unknown option {}", a);
  }
  spdlog::set_level(spdlog::level::warn);
  const models::ModelRef ref = models::find_model(model);
  mo.variant = ref.variant;
  const Graph hlir = ref.entry->build(mo);
  const target::NpuConfig config = target::load_config(npu);

  auto t = std::chrono::steady_clock::now();
  compile::Options co;
  co.rule_files = {rules};
  const compile::Saturated saturated = compile::saturate(hlir, co);
  search::SearchSpace space = search::search_space(saturated);
  // The lowering's choices for the greedy program's GEMMs, as `spool run --search` adds them.
  if (lowering_genes && !neighbours)
    space.add_lowering_genes(search::gemm_lowering_genes(search::canonical_program(space.program(space.greedy())),
                                                         config, lower::LowerOptions{}));
  const double saturate_s = seconds_since(t);
  std::printf("model        %s (%s, %s, seq %lld), npu %s\n", ref.entry->name.c_str(), mo.size.c_str(),
              mo.phase.c_str(), static_cast<long long>(mo.seq), npu.c_str());
  std::printf("space        %zu regions, %zu genes, %zu with a choice, %zu lowering genes (saturated in %.2f s)\n",
              space.genomes().num_regions(), space.genomes().num_genes(), space.genomes().num_choice_genes(),
              space.num_lowering_genes(), saturate_s);

  const search::SimulatedCycles fitness(config);
  if (neighbours) return print_neighbours(space, fitness);
  const search::LoweredFitnessFn exact = [&](const Graph& p, const search::LoweringChoices& l) {
    return fitness.whole(p, l);
  };
  const search::SearchResult r = search::genetic(
      space,
      [&](const Graph& p, const search::LoweringChoices& l) {
        return whole ? fitness.whole(p, l) : fitness.kernels(p, l);
      },
      exact, so);
  std::printf("search       %s (ranked by %s, decided by whole-program cycles)\n", r.summary().c_str(),
              whole ? "whole-program cycles" : "per-kernel cycles");
  std::printf("memo         %zu kernels simulated, %zu memo hits\n", fitness.simulations(), fitness.memo_hits());
  std::printf("changes      %zu choices differ from greedy\n", r.changed_genes.size());
  for (size_t i = 0; i < r.changed_genes.size() && i < 12; ++i) std::printf("  %s\n", r.changed_genes[i].c_str());
  std::printf("whole        greedy %lld cycles, best %lld cycles (x%.3f)\n", static_cast<long long>(r.greedy_cycles),
              static_cast<long long>(r.best_cycles), r.ratio());
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
