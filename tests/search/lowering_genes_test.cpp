// Lowering genes: the lowering's choices for each distinct GEMM as free
// genes next to the e-graph's. The greedy genome takes every default; a
// changed gene reaches the lowering of every kernel with that key and
// changes its simulated cycles; the search over both kinds of genes is
// deterministic across thread counts and batch measures, never worse than
// greedy, and names the genes it changed.

#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/search/fitness.hpp>
#include <spool/search/genetic.hpp>
#include <spool/search/space.hpp>
#include <spool/target/npu.hpp>

#include <doctest/doctest.h>

#include "mlp.hpp"

#include <tbb/parallel_for.h>
#include <nlohmann/json.hpp>

using namespace spool;
using namespace spool::search;

namespace {

Graph two_layer_mlp() { return test::two_layer_mlp(256, 256); }
using test::shipped_rules;

}  // namespace

TEST_CASE("lowering genes: defaults in the greedy genome, choices reach the lowering of every kernel of their key") {
  const compile::Saturated sat = compile::saturate(two_layer_mlp(), shipped_rules());
  SearchSpace space = search_space(sat);
  const size_t egraph_genes = space.genomes().num_genes();
  const target::NpuConfig config = target::load_config("toy");
  const Graph greedy_program = canonical_program(space.program(space.greedy()));
  std::vector<LoweringGene> genes = gemm_lowering_genes(greedy_program, config, {});
  REQUIRE(!genes.empty());
  for (const LoweringGene& g : genes) {
    CHECK(g.values.size() >= 2);
    CHECK(g.values[0] == 0);
  }
  const uint32_t first = space.add_lowering_genes(genes);
  CHECK(first == egraph_genes);
  CHECK(space.genomes().num_genes() == egraph_genes + genes.size());
  CHECK(space.genomes().num_free_genes() == genes.size());
  CHECK(space.genomes().valid(space.greedy()));
  CHECK(space.lowering(space.greedy()).empty());
  CHECK(space.changed_genes(space.greedy()).empty());

  // The first GEMM's tile_m (or whatever its first gene is) set: the same
  // program, another lowering, another fingerprint and the genes named.
  Genome changed = space.greedy();
  changed[first] = 1;
  CHECK(space.genomes().valid(changed));
  CHECK(space.genomes().hash(changed) != space.genomes().hash(space.greedy()));
  const LoweringChoices lowering = space.lowering(changed);
  REQUIRE(lowering.size() == 1);
  CHECK(lowering.begin()->first == genes[0].kernel);
  const Graph program = canonical_program(space.program(changed));
  CHECK(program_fingerprint(program) == program_fingerprint(greedy_program));
  const LoweringChoices used = used_choices(program, lowering);
  CHECK(used == lowering);
  CHECK(with_lowering(canonical_fingerprint(program), used) != with_lowering(canonical_fingerprint(program), {}));
  const std::vector<std::string> names = space.changed_genes(changed);
  REQUIRE(names.size() == 1);
  CHECK(names[0].find(field_name(genes[0].field)) == 0);
  CHECK(space.describe(first, 1).find(field_name(genes[0].field)) == 0);

  // Every value of every gene lowers and simulates; the default's cycles are
  // greedy's, and at least one choice changes the cycles.
  const SimulatedCycles cycles(config);
  const int64_t base = cycles.kernels(program);
  CHECK(cycles.kernels(program, space.lowering(space.greedy())) == base);
  bool some_differ = false;
  for (size_t g = 0; g < genes.size(); ++g)
    for (uint32_t v = 1; v < genes[g].values.size(); ++v) {
      Genome one = space.greedy();
      one[first + g] = v;
      const LoweringChoices c = space.lowering(one);
      const int64_t k = cycles.kernels(program, c);
      CHECK(k > 0);
      CHECK(cycles.whole(program, c) > 0);
      some_differ = some_differ || k != base;
    }
  CHECK(some_differ);

  // Random genomes draw lowering genes too.
  Rng rng(5);
  bool drew = false;
  for (int i = 0; i < 20 && !drew; ++i) drew = !space.lowering(space.genomes().random(rng)).empty();
  CHECK(drew);
}

TEST_CASE(
    "lowering genes: the search is the same on 1 and 2 threads and through a batch measure, never worse than greedy") {
  const compile::Saturated sat = compile::saturate(two_layer_mlp(), shipped_rules());
  SearchSpace space = search_space(sat);
  const target::NpuConfig config = target::load_config("toy");
  space.add_lowering_genes(gemm_lowering_genes(canonical_program(space.program(space.greedy())), config, {}));
  const SimulatedCycles cycles(config);
  const LoweredFitnessFn fitness = [&](const Graph& p, const LoweringChoices& l) { return cycles.kernels(p, l); };
  const LoweredFitnessFn exact = [&](const Graph& p, const LoweringChoices& l) { return cycles.whole(p, l); };
  SearchOptions o;
  o.max_genomes = 60;
  o.population = 10;
  o.progress = false;
  o.seed = 7;
  o.threads = 1;
  const SearchResult one = genetic(space, fitness, exact, o);
  MESSAGE(one.summary());
  CHECK(one.best_cycles <= one.greedy_cycles);
  CHECK(one.best_cycles == cycles.whole(one.best_program, one.best_lowering));
  CHECK(one.best_lowering == used_choices(one.best_program, space.lowering(one.best)));
  CHECK(one.changed_genes == space.changed_genes(one.best));
  if (one.best_cycles < one.greedy_cycles) CHECK(!one.changed_genes.empty());

  o.threads = 2;
  const SimulatedCycles cycles2(config);
  const SearchResult two = genetic(
      space, [&](const Graph& p, const LoweringChoices& l) { return cycles2.kernels(p, l); },
      [&](const Graph& p, const LoweringChoices& l) { return cycles2.whole(p, l); }, o);
  CHECK(two.best == one.best);
  CHECK(two.best_cycles == one.best_cycles);
  CHECK(two.genomes == one.genomes);
  CHECK(two.changed_genes == one.changed_genes);

  // A batch measure (as an MPI run's): candidates split over three
  // "ranks", each with its own memo, give the same result.
  std::vector<std::unique_ptr<SimulatedCycles>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<SimulatedCycles>(config));
  size_t batches = 0;
  o.batch = [&](std::span<const Candidate> batch, bool whole) {
    ++batches;
    std::vector<int64_t> out(batch.size());
    tbb::parallel_for(size_t{0}, batch.size(), [&](size_t i) {
      const SimulatedCycles& c = *ranks[i % ranks.size()];
      out[i] =
          whole ? c.whole(*batch[i].program, *batch[i].lowering) : c.kernels(*batch[i].program, *batch[i].lowering);
    });
    return out;
  };
  o.ranks = 3;
  const SearchResult three = genetic(space, LoweredFitnessFn{}, LoweredFitnessFn{}, o);
  CHECK(batches > 0);
  CHECK(three.best == one.best);
  CHECK(three.best_cycles == one.best_cycles);
  CHECK(three.genomes == one.genomes);
  CHECK(three.ranks == 3);
  CHECK(three.to_json()["ranks"] == 3);
}
