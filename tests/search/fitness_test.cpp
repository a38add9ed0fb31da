// Simulated-cycles fitness: the per-kernel memo gives the same total as
// simulating each kernel alone, hits for kernels repeated across layers, and
// the search on it is deterministic across thread counts, never worse than
// greedy extraction in whole-program cycles, and better when a single-choice
// change of the greedy program is.

#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/search/fitness.hpp>
#include <spool/search/fuzz.hpp>
#include <spool/search/genetic.hpp>
#include <spool/target/npu.hpp>

#include <doctest/doctest.h>

#include "mlp.hpp"

#include <spool/models/llama.hpp>
#include <spool/models/qwen3.hpp>

using namespace spool;
using namespace spool::search;

namespace {

Graph two_layer_mlp() { return test::two_layer_mlp(16, 64); }
using test::shipped_rules;

}  // namespace

TEST_CASE("per-kernel cycles: memoised, equal to each kernel simulated alone") {
  const compile::Saturated sat = compile::saturate(two_layer_mlp(), shipped_rules());
  const SearchSpace space = search_space(sat);
  const SimulatedCycles fitness(target::load_config("toy"));
  const Graph program = space.program(space.greedy());
  const int64_t total = fitness.kernels(program);
  CHECK(total > 0);
  size_t kernels = 0;
  int64_t direct = 0;
  for (NodeId id : program.topo_order()) {
    const Op op = program.node(id).op;
    if (op == Op::Input || op == Op::Weight) continue;
    ++kernels;
    const Graph alone = SimulatedCycles::kernel_alone(program, id);
    direct += fitness.whole(alone);
  }
  CHECK(direct == total);
  // The second layer's kernels are the first layer's: simulated once.
  CHECK(fitness.memo_size() < kernels);
  CHECK(fitness.simulations() == fitness.memo_size());
  const size_t sims = fitness.simulations();
  CHECK(fitness.kernels(program) == total);
  CHECK(fitness.simulations() == sims);  // all from the memo
  CHECK(fitness.memo_hits() >= kernels);
  CHECK(fitness.whole(program) > 0);
}

TEST_CASE("genetic search on simulated cycles: no worse than greedy, same result on 1 and 2 threads") {
  const compile::Saturated sat = compile::saturate(two_layer_mlp(), shipped_rules());
  const SearchSpace space = search_space(sat);
  SearchOptions o;
  o.max_genomes = 40;
  o.population = 10;
  o.progress = false;
  o.seed = 5;
  o.threads = 1;
  const SimulatedCycles f1(target::load_config("toy"));
  const SearchResult one = genetic(space, [&](const Graph& p) { return f1(p); }, o);
  o.threads = 2;
  const SimulatedCycles f2(target::load_config("toy"));
  const SearchResult two = genetic(space, [&](const Graph& p) { return f2(p); }, o);
  MESSAGE(one.summary());
  CHECK(one.best_cycles <= one.greedy_cycles);
  CHECK(one.greedy_cycles == f1(space.program(space.greedy())));
  CHECK(one.best == two.best);
  CHECK(one.best_cycles == two.best_cycles);
  CHECK(one.genomes == two.genomes);
}

TEST_CASE("every kernel of a correct program, lowered alone on the interpreter's inputs, agrees with it") {
  const Graph g = two_layer_mlp();
  const compile::Saturated sat = compile::saturate(g, shipped_rules());
  const SearchSpace space = search_space(sat);
  const Reference ref = make_reference(g, 4);
  const target::NpuConfig config = target::load_config("toy");
  Rng rng(9);
  for (int i = 0; i < 3; ++i) {
    const Graph program = space.program(space.genomes().mutate(space.greedy(), rng, 2));
    const std::optional<std::string> d = first_lowered_divergence(program, ref, config, 1e-4);
    CHECK_MESSAGE(!d.has_value(), d.value_or(""));
  }
  // A tolerance nothing meets: the first kernel is reported, with its error.
  const std::optional<std::string> all = first_lowered_divergence(space.program(space.greedy()), ref, config, -1);
  REQUIRE(all.has_value());
  CHECK(all->find("lowered alone it differs by") != std::string::npos);
}

TEST_CASE("search decided by whole-program cycles: never worse than greedy, better when a neighbour is") {
  // The tiny qwen3's bf16 decode step (2 layers, the loop unrolled in one
  // e-graph): its greedy program has single-choice changes that run faster
  // on this config (the other tiny models' prefills and f32 decodes have
  // none).
  models::Qwen3Config qwen3 = models::Qwen3Config::tiny();
  qwen3.dtype = DType::BF16;
  const Graph g = models::build_qwen3(qwen3, models::Phase::decode(8));
  compile::Options co;
  co.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  const compile::Saturated sat = compile::saturate(g, co);
  const SearchSpace space = search_space(sat);
  const target::NpuConfig config = target::load_config("toy");
  const SimulatedCycles cycles(config);
  const FitnessFn fitness = [&](const Graph& p) { return cycles.kernels(p); };
  const FitnessFn exact = [&](const Graph& p) { return cycles.whole(p); };

  // Every single-choice change of the greedy genome, measured both ways: the
  // best whole-program cycles among those that both measures say improve is
  // what the descent's first round must reach when it confirms all of them.
  const Graph greedy_program = canonical_program(space.program(space.greedy()));
  const int64_t greedy_kernels = fitness(greedy_program), greedy_whole = exact(greedy_program);
  const std::vector<Genome> near = space.genomes().neighbours(space.greedy());
  REQUIRE(!near.empty());
  const double limit = 4 * space.estimate(space.greedy());  // SearchOptions::prune_factor
  int64_t best_neighbour = greedy_whole;
  for (const Genome& n : near) {
    CHECK(space.genomes().valid(n));
    CHECK(space.genomes().hash(n) != space.genomes().hash(space.greedy()));
    CHECK(differing_genes(space.genomes(), n, space.greedy()).size() >= 1);
    if (space.estimate(n) > limit) continue;
    const Graph p = canonical_program(space.program(n));
    if (fitness(p) < greedy_kernels) best_neighbour = std::min(best_neighbour, exact(p));
  }
  // The e-graph holds a faster program than greedy extraction's, one choice away.
  REQUIRE(best_neighbour < greedy_whole);

  SearchOptions o;
  o.max_genomes = near.size() + 30;
  o.population = 10;
  o.confirm = near.size();
  o.progress = false;
  o.seed = 3;
  o.threads = 1;
  // The progress hook sees the search as it goes (what a Ctrl-C report
  // prints): genomes never fewer than before, the best never worse.
  std::vector<std::pair<size_t, int64_t>> seen;
  o.on_progress = [&](const SearchResult& r, double) { seen.emplace_back(r.genomes, r.best_cycles); };
  const SearchResult one = genetic(space, fitness, exact, o);
  o.on_progress = nullptr;
  MESSAGE(one.summary());
  REQUIRE(seen.size() >= 2);
  for (size_t i = 1; i < seen.size(); ++i) {
    CHECK(seen[i].first >= seen[i - 1].first);
    CHECK(seen[i].second <= seen[i - 1].second);
  }
  CHECK(seen.back() == std::pair<size_t, int64_t>{one.genomes, one.best_cycles});
  CHECK(one.greedy_cycles == greedy_whole);
  CHECK(one.greedy_rank_cycles == greedy_kernels);
  CHECK(one.best_cycles <= best_neighbour);
  CHECK(one.best_cycles < one.greedy_cycles);
  CHECK(one.best_cycles == exact(one.best_program));
  CHECK(one.best_rank_cycles == fitness(one.best_program));
  CHECK(one.descent_rounds >= 1);
  CHECK(one.descent_steps >= 1);
  CHECK(one.exact >= 2);
  CHECK(space.genomes().valid(one.best));
  o.threads = 2;
  const SimulatedCycles cycles2(config);
  const SearchResult two = genetic(
      space, [&](const Graph& p) { return cycles2.kernels(p); }, [&](const Graph& p) { return cycles2.whole(p); }, o);
  CHECK(two.best == one.best);
  CHECK(two.best_cycles == one.best_cycles);
  CHECK(two.genomes == one.genomes);
  CHECK(two.exact == one.exact);

  // A budget of the greedy genome alone: the result is greedy's program.
  o.max_genomes = 1;
  const SearchResult alone = genetic(space, fitness, exact, o);
  CHECK(alone.best_cycles == greedy_whole);
  CHECK(alone.genomes == 1);
}
