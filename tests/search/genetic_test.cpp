// The genetic search: it never returns worse than greedy, respects its
// genome budget, and gives the same result with 1 and 2 threads.

#include <spool/ir/tensor.hpp>
#include <spool/search/genetic.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace spool;
using namespace spool::search;

namespace {

// Two layers' worth of products and sums with negations: the algebra rules
// give it many equivalent programs.
Graph graph_with_choices() {
  Graph g("choices");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor w = weight(g, "w", DType::F32, {4, 8});
  const Tensor v = weight(g, "v", DType::F32, {4, 8});
  const Tensor h = (-(-(x + w))) * v + x * w;
  output("y", (-h) * (-v) + h * x);
  return g;
}

// graph_with_choices saturated (unrolled) with the algebra rules.
compile::Saturated saturated_choices() {
  compile::Options so;
  so.roll = false;
  so.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/algebra.rules"};
  return compile::saturate(graph_with_choices(), so);
}

// An arbitrary but deterministic landscape over programs: the search has to
// measure to find the low points.
int64_t pseudo_cycles(const Graph& program) { return 1000 + static_cast<int64_t>(program_fingerprint(program) % 1000); }

}  // namespace

TEST_CASE("genetic search: no worse than greedy, within budget, the same with 1 and 2 threads") {
  const compile::Saturated sat = saturated_choices();
  const SearchSpace space = search_space(sat);
  SearchOptions o;
  o.max_genomes = 120;
  o.population = 16;
  o.seed = 42;
  o.progress = false;
  o.threads = 1;
  const SearchResult one = genetic(space, pseudo_cycles, o);
  o.threads = 2;
  const SearchResult two = genetic(space, pseudo_cycles, o);
  MESSAGE(one.summary());
  CHECK(one.greedy_cycles == pseudo_cycles(space.program(space.greedy())));
  CHECK(one.best_cycles <= one.greedy_cycles);
  CHECK(one.best_cycles < one.greedy_cycles);  // many distinct programs were measured
  CHECK(one.programs > 20);
  CHECK(one.genomes <= o.max_genomes);
  CHECK(one.best_cycles == pseudo_cycles(one.best_program));
  CHECK(space.genomes().valid(one.best));
  const nlohmann::json j = one.to_json();
  CHECK(j.at("greedy_cycles") == one.greedy_cycles);
  CHECK(j.at("best_cycles") == one.best_cycles);
  CHECK(j.at("genomes") == one.genomes);
  // Determinism across thread counts.
  CHECK(two.best == one.best);
  CHECK(two.best_cycles == one.best_cycles);
  CHECK(two.genomes == one.genomes);
  CHECK(two.generations == one.generations);
  // Another seed explores differently (same greedy baseline).
  o.seed = 43;
  const SearchResult other = genetic(space, pseudo_cycles, o);
  CHECK(other.greedy_cycles == one.greedy_cycles);
  CHECK(other.best_cycles <= other.greedy_cycles);
}

TEST_CASE("genetic search: failing programs are never picked; an unmeasurable greedy program is an error") {
  const compile::Saturated sat = saturated_choices();
  const SearchSpace space = search_space(sat);
  const uint64_t greedy_print = program_fingerprint(space.program(space.greedy()));
  // Every program but the greedy one "cannot be measured".
  const FitnessFn only_greedy = [&](const Graph& p) -> int64_t {
    if (program_fingerprint(p) != greedy_print) fail("not measurable");
    return 7;
  };
  SearchOptions o;
  o.max_genomes = 40;
  o.progress = false;
  const SearchResult r = genetic(space, only_greedy, o);
  CHECK(r.best_cycles == 7);
  CHECK(r.failed > 0);
  CHECK(program_fingerprint(r.best_program) == greedy_print);
  const FitnessFn none = [](const Graph&) -> int64_t { fail("not measurable"); };
  CHECK_THROWS_WITH_AS(genetic(space, none, o), "search: the greedy program cannot be measured", spool::Error);
}

TEST_CASE("genetic search: a time budget stops between generations and says so") {
  const compile::Saturated sat = saturated_choices();
  const SearchSpace space = search_space(sat);
  SearchOptions o;
  o.max_genomes = 100000;
  o.max_seconds = 1e-9;  // already spent when the first generation would start
  o.progress = false;
  const SearchResult r = genetic(space, pseudo_cycles, o);
  CHECK(r.stopped_by_time);
  CHECK(r.generations == 0);
  CHECK(r.genomes <= o.population);  // the greedy genome and the first population only
  CHECK(r.best_cycles <= r.greedy_cycles);
  CHECK(r.summary().find("stopped by the time budget") != std::string::npos);
}
