#pragma once
// search::genetic: a search over genomes for the program with the fewest
// cycles: a descent from the greedy genome, then a genetic search.
//
// Two measures of a program: `fitness`, cheap (simulated cycles of each
// kernel alone, memoised), ranks every genome; `exact`, dear (the whole
// program simulated), decides. The descent measures every single-choice
// change of the current genome (first the greedy one) by fitness, measures
// the best few that fitness says improve by exact, and combines those that
// exact confirms, one at a time, each kept only if exact improves; it
// repeats from the result while that improves. The genetic phase then
// starts from the greedy genome, the descent's result, its best neighbours
// and random genomes near it; each generation keeps the elite, breeds the
// rest by tournament selection, crossover and mutation, and evaluates the
// new genomes in parallel (TBB). At the end the best few genomes by fitness
// are measured by exact, and the best by exact is the result, so it is never
// worse than greedy under exact. Genomes are de-duplicated by their hash and
// programs by their fingerprint, so a program is measured once by each
// measure. After `stagnation` generations without a better genome the
// population restarts from the elite and fresh random genomes. The result
// depends only on the seed and the budgets in genomes, never on the thread
// count; a time budget is checked only between generations and descent
// rounds, so a search stopped by time depends on the machine's speed (the
// result says when that happened).

#include <spool/search/space.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace spool::search {

// The cost of a program in cycles (lower is better). Called from several
// threads at once: it must be thread-safe and deterministic. Throws
// spool::Error for a program it cannot measure; the search then counts the
// genome as failed and never picks it. The search passes programs in
// canonical form (canonical_program).
using FitnessFn = std::function<int64_t(const Graph& program)>;
// The same with the lowering choices the genome makes for the program's
// kernels (used_choices: only kernels the program has are named).
using LoweredFitnessFn = std::function<int64_t(const Graph& program, const LoweringChoices& lowering)>;

// One candidate of a batch: a program (canonical form) and its lowering.
struct Candidate {
  const Graph* program = nullptr;
  const LoweringChoices* lowering = nullptr;
};
// Measures a batch of candidates at once, by the cheap measure (exact ==
// false) or the exact one; one figure per candidate, in order, and
// kUnmeasured for a candidate that could not be measured. It must give what
// the fitness and exact functions give, whoever computes it (an MPI run
// spreads each batch over its ranks: mpi_search.hpp).
using BatchFn = std::function<std::vector<int64_t>(std::span<const Candidate> batch, bool exact)>;
inline constexpr int64_t kUnmeasured = INT64_MAX;

struct SearchResult;

struct SearchOptions {
  size_t population = 24;
  size_t elite = 4;
  size_t max_genomes = 200;  // distinct genomes evaluated (the greedy one included)
  double max_seconds = 0;    // 0: no time budget; checked between generations and descent rounds
  size_t stagnation = 8;     // generations without improvement before a restart
  double crossover_rate = 0.5;
  // Genomes whose analytic cost (SearchSpace::estimate) exceeds this many
  // times the greedy genome's are not measured (counted as pruned): uniform
  // random choices often pick primitive forms (a matmul as a broadcast
  // multiply and a sum over a [m,k,n] tensor) that are hundreds of times
  // slower and slow to simulate. 0: measure everything.
  double prune_factor = 4;
  // Of the random genomes that start and restart the population, this
  // share are the descent's result (the greedy genome when the descent
  // found nothing) mutated 1..max_mutations times; the rest uniform.
  double near_greedy = 0.5;
  size_t max_mutations = 3;  // a child gets 1..max_mutations mutations
  // Descent rounds before the genetic phase (0: none), and how many genomes
  // that fitness ranks best are measured by exact per round and at the end.
  size_t descent_rounds = 4;
  size_t confirm = 6;
  uint64_t seed = 1;
  int threads = 0;       // 0: TBB's default; the result never depends on it
  bool progress = true;  // a progress line on stderr when it is a terminal
  // Called with the result so far (and the seconds spent) whenever the
  // progress line would be drawn, terminal or not: where a Ctrl-C report
  // reads how far the search got.
  std::function<void(const SearchResult&, double)> on_progress;
  // When set, every measurement goes through it in batches (the fitness
  // and exact functions given to genetic() are then not called).
  BatchFn batch;
  int ranks = 1;  // processes that measure (reported; the result never depends on it)
};

struct SearchResult {
  // Under exact (fitness when no exact measure is given).
  int64_t greedy_cycles = 0;
  int64_t best_cycles = 0;
  // Under fitness, of the same two genomes.
  int64_t greedy_rank_cycles = 0;
  int64_t best_rank_cycles = 0;
  Genome best;
  Graph best_program;         // in canonical form (canonical_program), as measured
  LoweringChoices best_lowering;           // its lowering choices (used_choices)
  std::vector<std::string> changed_genes;  // SearchSpace::changed_genes of the best genome
  int ranks = 1;
  size_t genomes = 0;         // distinct genomes evaluated
  size_t exact = 0;           // distinct programs measured by exact
  size_t descent_rounds = 0;  // rounds of the descent that ran
  size_t descent_steps = 0;   // single-choice changes the descent kept
  size_t programs = 0;        // distinct programs measured (by fingerprint)
  size_t failed = 0;          // genomes whose program could not be built or measured
  size_t pruned = 0;          // genomes not measured: estimate above prune_factor x greedy's
                              // (the descent's pruned neighbours are not counted in genomes)
  size_t generations = 0;
  size_t restarts = 0;
  bool stopped_by_time = false;
  double seconds = 0;

  double ratio() const { return best_cycles > 0 ? static_cast<double>(greedy_cycles) / best_cycles : 1.0; }
  std::string summary() const;  // one line
  // The report's "search" object: {genomes, greedy_cycles,
  // best_cycles, ratio, greedy_rank_cycles, best_rank_cycles, programs,
  // exact, failed, pruned, descent_rounds, descent_steps, generations,
  // restarts, seconds, stopped_by_time, ranks, changed_genes}.
  nlohmann::json to_json() const;
};

// Throws spool::Error if the greedy genome's program cannot be measured (by
// fitness or by exact). An empty `exact` is `fitness`.
SearchResult genetic(const SearchSpace& space, const LoweredFitnessFn& fitness, const LoweredFitnessFn& exact,
                     const SearchOptions& options = {});
// Measures that ignore the lowering choices (a space without lowering genes).
SearchResult genetic(const SearchSpace& space, const FitnessFn& fitness, const FitnessFn& exact,
                     const SearchOptions& options = {});
inline SearchResult genetic(const SearchSpace& space, const FitnessFn& fitness, const SearchOptions& options = {}) {
  return genetic(space, fitness, FitnessFn{}, options);
}

}  // namespace spool::search
