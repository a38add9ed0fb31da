// The genetic extraction search.
//
// Determinism: every random draw comes from one generator seeded by the
// options, in the main thread, in a fixed order; only the evaluation of a
// generation's new genomes runs in parallel, each into its own slot, and the
// de-duplication that decides what is measured runs sequentially in
// candidate order. So the thread count changes only the speed.

#include <spool/search/genetic.hpp>

#include <spool/support/error.hpp>

#include <nlohmann/json.hpp>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <unistd.h>
#include <unordered_map>

namespace spool::search {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kFailed = std::numeric_limits<int64_t>::max();

struct Scored {
  Genome genome;
  uint64_t hash = 0;
  int64_t cycles = kFailed;
};

bool better(const Scored& a, const Scored& b) {
  return a.cycles != b.cycles ? a.cycles < b.cycles : a.hash < b.hash;
}

// Measures genomes, each distinct genome and each distinct program once.
class Evaluator {
 public:
  Evaluator(const SearchSpace& space, const FitnessFn& fitness, tbb::task_arena& arena)
      : space_(space), fitness_(fitness), arena_(arena) {}

  // Genomes whose estimate is above `limit` are pruned (0: none).
  void set_estimate_limit(double limit) { limit_ = limit; }

  // Scores `batch` in place. Genomes not seen before are evaluated, at most
  // `budget` of them (in batch order); new genomes past the budget are
  // removed from the batch. Returns how many were evaluated.
  size_t evaluate(std::vector<Scored>& batch, size_t budget) {
    std::vector<size_t> fresh;
    std::vector<uint8_t> keep(batch.size(), 1);
    std::unordered_map<uint64_t, size_t> first_in_batch;
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].hash = space_.genomes().hash(batch[i].genome);
      if (by_genome_.count(batch[i].hash) || first_in_batch.count(batch[i].hash)) continue;
      if (fresh.size() >= budget) {
        keep[i] = 0;
        continue;
      }
      first_in_batch.emplace(batch[i].hash, i);
      fresh.push_back(i);
    }
    // Build the programs in parallel, each into its own slot.
    std::vector<Graph> programs(fresh.size());
    std::vector<uint64_t> prints(fresh.size(), 0);
    std::vector<uint8_t> built(fresh.size(), 0), pruned(fresh.size(), 0);
    arena_.execute([&] {
      tbb::parallel_for(size_t{0}, fresh.size(), [&](size_t k) {
        if (limit_ > 0 && space_.estimate(batch[fresh[k]].genome) > limit_) {
          pruned[k] = 1;
          return;
        }
        try {
          programs[k] = space_.program(batch[fresh[k]].genome);
          prints[k] = program_fingerprint(programs[k]);
          built[k] = 1;
        } catch (const Error&) {
          built[k] = 0;
        }
      });
    });
    // Decide sequentially which programs are new.
    std::vector<size_t> measure;
    std::unordered_map<uint64_t, size_t> first_program;
    for (size_t k = 0; k < fresh.size(); ++k)
      if (built[k] && !by_program_.count(prints[k]) && !first_program.count(prints[k])) {
        first_program.emplace(prints[k], k);
        measure.push_back(k);
      }
    std::vector<int64_t> cycles(fresh.size(), kFailed);
    arena_.execute([&] {
      tbb::parallel_for(size_t{0}, measure.size(), [&](size_t j) {
        try {
          cycles[measure[j]] = fitness_(programs[measure[j]]);
        } catch (const Error&) {
          cycles[measure[j]] = kFailed;
        }
      });
    });
    for (size_t k : measure) by_program_.emplace(prints[k], cycles[k]);
    programs_ += measure.size();
    for (size_t k = 0; k < fresh.size(); ++k) {
      const int64_t c = built[k] ? by_program_.at(prints[k]) : kFailed;
      if (pruned[k]) {
        ++pruned_;
      } else if (c == kFailed) {
        ++failed_;
      }
      by_genome_.emplace(batch[fresh[k]].hash, c);
    }
    genomes_ += fresh.size();
    std::vector<Scored> kept;
    for (size_t i = 0; i < batch.size(); ++i)
      if (keep[i]) {
        batch[i].cycles = by_genome_.at(batch[i].hash);
        kept.push_back(std::move(batch[i]));
      }
    batch = std::move(kept);
    return fresh.size();
  }

  bool seen(uint64_t hash) const { return by_genome_.count(hash) != 0; }
  size_t genomes() const { return genomes_; }
  size_t programs() const { return programs_; }
  size_t failed() const { return failed_; }
  size_t pruned() const { return pruned_; }

 private:
  const SearchSpace& space_;
  const FitnessFn& fitness_;
  tbb::task_arena& arena_;
  // Looked up, never iterated: their order cannot leak into the result.
  std::unordered_map<uint64_t, int64_t> by_genome_;
  std::unordered_map<uint64_t, int64_t> by_program_;
  size_t genomes_ = 0, programs_ = 0, failed_ = 0, pruned_ = 0;
  double limit_ = 0;
};

class Progress {
 public:
  explicit Progress(bool wanted) : on_(wanted && isatty(STDERR_FILENO)) {}
  void update(const SearchResult& r, double seconds) {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[Ksearch: generation %zu, best %lld cycles (greedy %lld, x%.3f), %zu genomes, %.0f genomes/s",
                 r.generations, static_cast<long long>(r.best_cycles), static_cast<long long>(r.greedy_cycles),
                 r.ratio(), r.genomes, seconds > 0 ? static_cast<double>(r.genomes) / seconds : 0.0);
    std::fflush(stderr);
    drawn_ = true;
  }
  ~Progress() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool on_;
  bool drawn_ = false;
};

const Scored& tournament(const std::vector<Scored>& pop, Rng& rng) {
  const Scored* best = &pop[rng.below(pop.size())];
  for (int i = 0; i < 2; ++i) {
    const Scored& other = pop[rng.below(pop.size())];
    if (better(other, *best)) best = &other;
  }
  return *best;
}

}  // namespace

std::string SearchResult::summary() const {
  return fmt::format("greedy {} cycles, best {} cycles (x{:.3f}) after {} genomes, {} programs, {} failed, {} "
                     "pruned, {} generations, {} restarts, {:.1f} s{}",
                     greedy_cycles, best_cycles, ratio(), genomes, programs, failed, pruned, generations, restarts,
                     seconds, stopped_by_time ? " (stopped by the time budget)" : "");
}

nlohmann::json SearchResult::to_json() const {
  return {{"genomes", genomes},         {"greedy_cycles", greedy_cycles}, {"best_cycles", best_cycles},
          {"ratio", ratio()},           {"programs", programs},           {"failed", failed},
          {"pruned", pruned},           {"generations", generations},     {"restarts", restarts},
          {"seconds", seconds},         {"stopped_by_time", stopped_by_time}};
}

SearchResult genetic(const SearchSpace& space, const FitnessFn& fitness, const SearchOptions& options) {
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  Evaluator eval(space, fitness, arena);
  const GenomeSpace& genomes = space.genomes();
  Rng rng(options.seed);
  SearchResult result;
  Progress progress(options.progress);
  const size_t population = std::max<size_t>(options.population, 2);
  const size_t elite = std::min(std::max<size_t>(options.elite, 1), population - 1);
  const size_t budget = std::max<size_t>(options.max_genomes, 1);

  // The greedy genome first: it is the baseline and stays in the elite.
  Genome greedy = space.greedy();
  genomes.normalize(greedy);
  std::vector<Scored> pop{Scored{greedy, 0, kFailed}};
  eval.evaluate(pop, budget);
  if (pop.empty() || pop[0].cycles == kFailed) fail("search: the greedy program cannot be measured");
  result.greedy_cycles = pop[0].cycles;
  Scored best = pop[0];
  if (options.prune_factor > 0) eval.set_estimate_limit(options.prune_factor * space.estimate(greedy));

  auto fill_random = [&](std::vector<Scored>& into) {
    std::vector<Scored> fresh;
    for (size_t attempt = 0; into.size() + fresh.size() < population && attempt < 4 * population; ++attempt) {
      Genome g = rng.unit() < options.near_greedy
                     ? genomes.mutate(greedy, rng, 1 + rng.below(std::max<size_t>(options.max_mutations, 1)))
                     : genomes.random(rng);
      fresh.push_back(Scored{std::move(g), 0, kFailed});
    }
    eval.evaluate(fresh, budget - std::min(budget, eval.genomes()));
    for (Scored& s : fresh) into.push_back(std::move(s));
  };
  fill_random(pop);

  size_t stale = 0, idle = 0;
  while (eval.genomes() < budget) {
    if (options.max_seconds > 0 && seconds() >= options.max_seconds) {
      result.stopped_by_time = true;
      break;
    }
    std::sort(pop.begin(), pop.end(), better);
    // The elite (distinct genomes), then children never seen before.
    std::vector<Scored> next;
    std::unordered_map<uint64_t, int> in_next;
    for (const Scored& s : pop)
      if (next.size() < elite && !in_next.count(s.hash)) {
        in_next.emplace(s.hash, 1);
        next.push_back(s);
      }
    std::vector<Scored> children;
    for (size_t attempt = 0; next.size() + children.size() < population && attempt < 8 * population; ++attempt) {
      const Scored& a = tournament(pop, rng);
      Genome child = a.genome;
      if (rng.unit() < options.crossover_rate) child = genomes.crossover(a.genome, tournament(pop, rng).genome, rng);
      const size_t mutations = 1 + rng.below(std::max<size_t>(options.max_mutations, 1));
      child = genomes.mutate(child, rng, mutations);
      const uint64_t h = genomes.hash(child);
      if (in_next.count(h) || eval.seen(h)) continue;
      in_next.emplace(h, 1);
      children.push_back(Scored{std::move(child), h, kFailed});
    }
    const size_t evaluated = eval.evaluate(children, budget - std::min(budget, eval.genomes()));
    for (Scored& c : children) next.push_back(std::move(c));
    pop = std::move(next);
    ++result.generations;

    bool improved = false;
    for (const Scored& s : pop)
      if (s.cycles < best.cycles) {
        best = s;
        improved = true;
      }
    stale = improved ? 0 : stale + 1;
    idle = evaluated == 0 ? idle + 1 : 0;
    if (stale >= options.stagnation || idle > 0) {
      // Restart: keep the elite, the rest random.
      std::sort(pop.begin(), pop.end(), better);
      pop.resize(std::min(pop.size(), elite));
      const size_t before = eval.genomes();
      fill_random(pop);
      ++result.restarts;
      stale = 0;
      // A space too small to give new genomes: nothing left to search.
      if (idle > 0 && eval.genomes() == before) break;
    }
    result.genomes = eval.genomes();
    result.best_cycles = best.cycles;
    progress.update(result, seconds());
  }

  for (const Scored& s : pop)
    if (s.cycles < best.cycles) best = s;
  result.best_cycles = best.cycles;
  result.best = best.genome;
  result.best_program = space.program(best.genome);
  result.genomes = eval.genomes();
  result.programs = eval.programs();
  result.failed = eval.failed();
  result.pruned = eval.pruned();
  result.seconds = seconds();
  progress.update(result, result.seconds);
  return result;
}

}  // namespace spool::search
