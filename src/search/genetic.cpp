// The extraction search: a descent from the greedy genome, then a genetic
// search, both ranked by the cheap fitness and decided by the exact measure.
//
// Determinism: every random draw comes from one generator seeded by the
// options, in the main thread, in a fixed order; only the measurement of a
// batch of new genomes runs in parallel, each into its own slot, and the
// de-duplication that decides what is measured runs sequentially in batch
// order. So the thread count changes only the speed.

#include <spool/search/genetic.hpp>

#include <spool/support/error.hpp>

#include <nlohmann/json.hpp>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace spool::search {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kFailed = kUnmeasured;

struct Scored {
  Genome genome;
  uint64_t hash = 0;
  int64_t cycles = kFailed;  // by fitness
  uint64_t print = 0;        // the program's fingerprint (0: no program)
  int64_t exact = kFailed;   // by exact, once measured
  size_t tag = 0;            // the descent's move that made it
};

bool better(const Scored& a, const Scored& b) { return a.cycles != b.cycles ? a.cycles < b.cycles : a.hash < b.hash; }

bool better_exact(const Scored& a, const Scored& b) { return a.exact != b.exact ? a.exact < b.exact : better(a, b); }

// Measures genomes, each distinct genome and each distinct program once.
class Evaluator {
 public:
  Evaluator(const SearchSpace& space, const LoweredFitnessFn& fitness, const LoweredFitnessFn& exact,
            const BatchFn& batch, tbb::task_arena& arena)
      : space_(space), fitness_(fitness), exact_(exact), batch_(batch), arena_(arena) {}

  // Measures candidates [programs[i], lowerings[i]] for i in `which`, by
  // the batch function or by the measures on this process's threads.
  std::vector<int64_t> measure(const std::vector<Graph>& programs, const std::vector<LoweringChoices>& lowerings,
                               const std::vector<size_t>& which, bool exact) {
    std::vector<int64_t> cycles(which.size(), kFailed);
    if (which.empty()) return cycles;
    if (batch_) {
      std::vector<Candidate> candidates;
      for (size_t k : which) candidates.push_back(Candidate{&programs[k], &lowerings[k]});
      cycles = batch_(candidates, exact);
      SPOOL_ASSERT(cycles.size() == which.size(), "a batch measure gave {} figures for {} candidates", cycles.size(),
                   which.size());
      return cycles;
    }
    const LoweredFitnessFn& fn = exact && exact_ ? exact_ : fitness_;
    arena_.execute([&] {
      tbb::parallel_for(size_t{0}, which.size(), [&](size_t j) {
        try {
          cycles[j] = fn(programs[which[j]], lowerings[which[j]]);
        } catch (const Error&) {
          cycles[j] = kFailed;
        }
      });
    });
    return cycles;
  }

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
    std::vector<LoweringChoices> lowerings(fresh.size());
    std::vector<uint64_t> prints(fresh.size(), 0);
    std::vector<uint8_t> built(fresh.size(), 0), pruned(fresh.size(), 0);
    arena_.execute([&] {
      tbb::parallel_for(size_t{0}, fresh.size(), [&](size_t k) {
        if (limit_ > 0 && space_.estimate(batch[fresh[k]].genome) > limit_) {
          pruned[k] = 1;
          return;
        }
        try {
          programs[k] = canonical_program(space_.program(batch[fresh[k]].genome));
          lowerings[k] = used_choices(programs[k], space_.lowering(batch[fresh[k]].genome));
          prints[k] = with_lowering(canonical_fingerprint(programs[k]), lowerings[k]);
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
    const std::vector<int64_t> measured = this->measure(programs, lowerings, measure, false);
    for (size_t j = 0; j < measure.size(); ++j) cycles[measure[j]] = measured[j];
    for (size_t k : measure) by_program_.emplace(prints[k], cycles[k]);
    programs_ += measure.size();
    for (size_t k = 0; k < fresh.size(); ++k) {
      const int64_t c = built[k] ? by_program_.at(prints[k]) : kFailed;
      if (pruned[k]) {
        if (!skipped_.count(batch[fresh[k]].hash)) ++pruned_;
      } else if (c == kFailed) {
        ++failed_;
      }
      by_genome_.emplace(batch[fresh[k]].hash, Known{c, built[k] ? prints[k] : 0});
    }
    genomes_ += fresh.size();
    std::vector<Scored> kept;
    for (size_t i = 0; i < batch.size(); ++i)
      if (keep[i]) {
        const Known& known = by_genome_.at(batch[i].hash);
        batch[i].cycles = known.cycles;
        batch[i].print = known.print;
        if (const auto it = exact_by_program_.find(known.print);
            known.cycles != kFailed && it != exact_by_program_.end())
          batch[i].exact = it->second;
        kept.push_back(std::move(batch[i]));
      }
    batch = std::move(kept);
    return fresh.size();
  }

  // Measures by exact the scored genomes of `batch` (those fitness could
  // measure) whose programs exact has not measured yet, in parallel; fills
  // every one's exact. Without an exact measure, exact is the fitness.
  void measure_exact(std::vector<Scored>& batch) {
    std::vector<size_t> todo;
    std::unordered_map<uint64_t, size_t> first;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].cycles == kFailed) continue;
      if (!exact_ && !batch_) {
        batch[i].exact = batch[i].cycles;
        continue;
      }
      if (exact_by_program_.count(batch[i].print) || first.count(batch[i].print)) continue;
      first.emplace(batch[i].print, i);
      todo.push_back(i);
    }
    std::vector<Graph> programs(todo.size());
    std::vector<LoweringChoices> lowerings(todo.size());
    std::vector<uint8_t> built(todo.size(), 0);
    arena_.execute([&] {
      tbb::parallel_for(size_t{0}, todo.size(), [&](size_t j) {
        try {
          programs[j] = canonical_program(space_.program(batch[todo[j]].genome));
          lowerings[j] = used_choices(programs[j], space_.lowering(batch[todo[j]].genome));
          built[j] = 1;
        } catch (const Error&) {
          built[j] = 0;
        }
      });
    });
    std::vector<size_t> which;
    for (size_t j = 0; j < todo.size(); ++j)
      if (built[j]) which.push_back(j);
    const std::vector<int64_t> measured = this->measure(programs, lowerings, which, true);
    std::vector<int64_t> cycles(todo.size(), kFailed);
    for (size_t w = 0; w < which.size(); ++w) cycles[which[w]] = measured[w];
    for (size_t j = 0; j < todo.size(); ++j) exact_by_program_.emplace(batch[todo[j]].print, cycles[j]);
    exact_measured_ += todo.size();
    for (Scored& s : batch)
      if (s.cycles != kFailed && (exact_ || batch_)) s.exact = exact_by_program_.at(s.print);
  }
  void measure_exact(Scored& one) {
    std::vector<Scored> batch{std::move(one)};
    measure_exact(batch);
    one = std::move(batch[0]);
  }

  // Whether `genome` would be pruned; counted as pruned (once per genome)
  // when it is. The descent asks before evaluating, so a pruned neighbour
  // takes nothing of the genome budget.
  bool prune(const Genome& genome, uint64_t hash) {
    if (limit_ <= 0 || by_genome_.count(hash) || space_.estimate(genome) <= limit_) return false;
    if (skipped_.emplace(hash).second) ++pruned_;
    return true;
  }

  bool seen(uint64_t hash) const { return by_genome_.count(hash) != 0; }
  size_t exact_measured() const { return exact_measured_; }
  size_t genomes() const { return genomes_; }
  size_t programs() const { return programs_; }
  size_t failed() const { return failed_; }
  size_t pruned() const { return pruned_; }

 private:
  const SearchSpace& space_;
  const LoweredFitnessFn& fitness_;
  const LoweredFitnessFn& exact_;
  const BatchFn& batch_;
  tbb::task_arena& arena_;
  struct Known {
    int64_t cycles;
    uint64_t print;
  };
  // Looked up, never iterated: their order cannot leak into the result.
  std::unordered_map<uint64_t, Known> by_genome_;
  std::unordered_map<uint64_t, int64_t> by_program_;
  std::unordered_map<uint64_t, int64_t> exact_by_program_;
  std::unordered_set<uint64_t> skipped_;
  size_t genomes_ = 0, programs_ = 0, failed_ = 0, pruned_ = 0, exact_measured_ = 0;
  double limit_ = 0;
};

class Progress {
 public:
  Progress(bool wanted, std::function<void(const SearchResult&, double)> hook)
      : on_(wanted && isatty(STDERR_FILENO)), hook_(std::move(hook)) {}
  void update(const SearchResult& r, double seconds) {
    if (hook_) hook_(r, seconds);
    if (!on_) return;
    std::fprintf(
        stderr,
        "\r\033[Ksearch: generation %zu, best %lld cycles (greedy %lld, x%.3f), %zu genomes, %.0f genomes/s on "
        "%d rank%s",
        r.generations, static_cast<long long>(r.best_cycles), static_cast<long long>(r.greedy_cycles), r.ratio(),
        r.genomes, seconds > 0 ? static_cast<double>(r.genomes) / seconds : 0.0, r.ranks, r.ranks == 1 ? "" : "s");
    std::fflush(stderr);
    drawn_ = true;
  }
  ~Progress() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool on_;
  std::function<void(const SearchResult&, double)> hook_;
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

// One run of the search: the descent, then the genetic phase, sharing the
// evaluator, the generator and the best genomes found.
class SearchRun {
 public:
  SearchRun(const SearchSpace& space, const LoweredFitnessFn& fitness, const LoweredFitnessFn& exact,
            const SearchOptions& options)
      : start_(Clock::now()),
        space_(space),
        genomes_(space.genomes()),
        options_(options),
        arena_(options.threads > 0 ? options.threads : tbb::task_arena::automatic),
        eval_(space, fitness, exact, options.batch, arena_),
        rng_(options.seed),
        progress_(options.progress, options.on_progress),
        population_(std::max<size_t>(options.population, 2)),
        elite_(std::min(std::max<size_t>(options.elite, 1), population_ - 1)),
        budget_(std::max<size_t>(options.max_genomes, 1)),
        confirm_(std::max<size_t>(options.confirm, 1)) {}

  SearchResult run() {
    result_.ranks = options_.ranks;
    baseline();
    descend();
    seed_population();
    evolve();
    return finish();
  }

 private:
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool out_of_time() const { return options_.max_seconds > 0 && seconds() >= options_.max_seconds; }
  size_t left() const { return budget_ - std::min(budget_, eval_.genomes()); }

  void consider(const Scored& s) {
    if (s.cycles != kFailed && better(s, best_)) best_ = s;
    if (s.exact != kFailed && better_exact(s, best_exact_)) best_exact_ = s;
  }
  void report() {
    result_.genomes = eval_.genomes();
    result_.best_cycles = best_exact_.exact;
    result_.best_rank_cycles = best_exact_.cycles;
    progress_.update(result_, seconds());
  }

  // The greedy genome first: it is the baseline and stays in the elite.
  void baseline() {
    Genome greedy = space_.greedy();
    genomes_.normalize(greedy);
    pop_.push_back(Scored{greedy});
    eval_.evaluate(pop_, budget_);
    if (pop_.empty() || pop_[0].cycles == kFailed) fail("search: the greedy program cannot be measured");
    eval_.measure_exact(pop_[0]);
    if (pop_[0].exact == kFailed) fail("search: the greedy program cannot be measured");
    result_.greedy_cycles = pop_[0].exact;
    result_.greedy_rank_cycles = pop_[0].cycles;
    best_ = pop_[0];
    best_exact_ = pop_[0];
    if (options_.prune_factor > 0) eval_.set_estimate_limit(options_.prune_factor * space_.estimate(greedy));
    current_ = pop_[0];
  }

  // The descent. `current_` is measured by both measures.
  void descend() {
    for (size_t round = 0; round < options_.descent_rounds && left() > 0; ++round) {
      if (out_of_time()) {
        result_.stopped_by_time = true;
        break;
      }
      const std::vector<Scored> near = evaluate_neighbours();
      ++result_.descent_rounds;
      for (const Scored& s : near) consider(s);
      const std::vector<Scored> improving = confirm_improving(near);
      report();
      if (improving.empty()) break;
      current_ = combine(improving);
      near_best_.push_back(current_);
      report();
    }
  }

  // The neighbours of `current_` that are not pruned, scored by fitness (as
  // many new ones as the budget takes).
  std::vector<Scored> evaluate_neighbours() {
    std::vector<Scored> near;
    std::vector<std::pair<uint32_t, uint32_t>> moves;  // per neighbour: (gene, candidate) changed
    std::vector<uint32_t> changed;
    std::vector<Genome> drawn = genomes_.neighbours(current_.genome, &changed);
    for (size_t i = 0; i < drawn.size(); ++i) {
      const uint64_t h = genomes_.hash(drawn[i]);
      if (eval_.prune(drawn[i], h)) continue;
      Scored s{std::move(drawn[i]), h};
      s.tag = moves.size();
      moves.emplace_back(changed[i], s.genome[changed[i]]);
      near.push_back(std::move(s));
    }
    // When the budget cannot take the whole round, the moves that did best
    // in earlier rounds go first (moves never measured in the middle).
    auto last_delta = [&](const Scored& s) {
      const auto it = move_delta_.find(moves[s.tag]);
      return it == move_delta_.end() ? int64_t{0} : it->second;
    };
    std::stable_sort(near.begin(), near.end(),
                     [&](const Scored& a, const Scored& b) { return last_delta(a) < last_delta(b); });
    eval_.evaluate(near, left());  // past the budget, new genomes are dropped
    for (const Scored& s : near) move_delta_[moves[s.tag]] = s.cycles == kFailed ? kFailed : s.cycles - current_.cycles;
    return near;
  }

  // The neighbours fitness says improve on `current_` (all of them seeds of
  // the genetic phase); of the best `confirm_`, those exact confirms, best
  // first.
  std::vector<Scored> confirm_improving(const std::vector<Scored>& near) {
    std::vector<Scored> improving;
    for (const Scored& s : near)
      if (s.cycles != kFailed && s.cycles < current_.cycles) improving.push_back(s);
    std::sort(improving.begin(), improving.end(), better);
    near_best_.insert(near_best_.end(), improving.begin(), improving.end());
    if (improving.size() > confirm_) improving.resize(confirm_);
    eval_.measure_exact(improving);
    std::erase_if(improving, [&](const Scored& s) { return s.exact == kFailed || s.exact >= current_.exact; });
    std::sort(improving.begin(), improving.end(), better_exact);
    for (const Scored& s : improving) consider(s);
    return improving;
  }

  // The best confirmed change, then each other one on top of what is
  // kept, kept only if exact improves.
  Scored combine(const std::vector<Scored>& improving) {
    Scored kept = improving[0];
    size_t steps = 1;
    for (size_t i = 1; i < improving.size() && left() > 0; ++i) {
      const std::vector<uint32_t> genes = differing_genes(genomes_, improving[i].genome, current_.genome);
      Genome trial = kept.genome;
      for (uint32_t g : genes) trial[g] = improving[i].genome[g];
      genomes_.repair(trial, genes);
      genomes_.normalize(trial);
      if (!genomes_.valid(trial)) continue;
      std::vector<Scored> one{Scored{std::move(trial)}};
      eval_.evaluate(one, left());
      if (one.empty() || one[0].cycles == kFailed) continue;
      eval_.measure_exact(one[0]);
      consider(one[0]);
      if (one[0].exact != kFailed && one[0].exact < kept.exact) {
        kept = std::move(one[0]);
        ++steps;
      }
    }
    result_.descent_steps += steps;
    return kept;
  }

  // The genetic phase's first population: greedy, the descent's result and
  // its best neighbours, then random genomes, half of them near the
  // descent's result.
  void seed_population() {
    pop_.push_back(current_);
    std::sort(near_best_.begin(), near_best_.end(), better);
    for (const Scored& s : near_best_) {
      if (pop_.size() >= population_ / 2) break;
      if (std::none_of(pop_.begin(), pop_.end(), [&](const Scored& p) { return p.hash == s.hash; })) pop_.push_back(s);
    }
    if (left() > 0 && !result_.stopped_by_time) fill_random(pop_);
    for (const Scored& s : pop_) consider(s);
  }

  void fill_random(std::vector<Scored>& into) {
    std::vector<Scored> fresh;
    for (size_t attempt = 0; into.size() + fresh.size() < population_ && attempt < 4 * population_; ++attempt) {
      Genome g =
          rng_.unit() < options_.near_greedy
              ? genomes_.mutate(current_.genome, rng_, 1 + rng_.below(std::max<size_t>(options_.max_mutations, 1)))
              : genomes_.random(rng_);
      fresh.push_back(Scored{std::move(g)});
    }
    eval_.evaluate(fresh, left());
    for (Scored& s : fresh) into.push_back(std::move(s));
  }

  // Generations until the budget or the time runs out, restarting after
  // `stagnation` generations without a better genome.
  void evolve() {
    size_t stale = 0, idle = 0;
    while (eval_.genomes() < budget_ && !result_.stopped_by_time) {
      if (out_of_time()) {
        result_.stopped_by_time = true;
        break;
      }
      const size_t evaluated = generation();
      const int64_t before = best_.cycles;
      for (const Scored& s : pop_) consider(s);
      stale = best_.cycles < before ? 0 : stale + 1;
      idle = evaluated == 0 ? idle + 1 : 0;
      if (stale >= options_.stagnation || idle > 0) {
        const size_t before_genomes = eval_.genomes();
        restart();
        stale = 0;
        // A space too small to give new genomes: nothing left to search.
        if (idle > 0 && eval_.genomes() == before_genomes) break;
      }
      report();
    }
  }

  // One generation: the elite (distinct genomes), then children never seen
  // before, bred by tournament selection, crossover and mutation, and
  // evaluated. Returns how many genomes were evaluated.
  size_t generation() {
    std::sort(pop_.begin(), pop_.end(), better);
    std::vector<Scored> next;
    std::unordered_map<uint64_t, int> in_next;
    for (const Scored& s : pop_)
      if (next.size() < elite_ && !in_next.count(s.hash)) {
        in_next.emplace(s.hash, 1);
        next.push_back(s);
      }
    std::vector<Scored> children;
    for (size_t attempt = 0; next.size() + children.size() < population_ && attempt < 8 * population_; ++attempt) {
      const Scored& a = tournament(pop_, rng_);
      Genome child = a.genome;
      if (rng_.unit() < options_.crossover_rate)
        child = genomes_.crossover(a.genome, tournament(pop_, rng_).genome, rng_);
      const size_t mutations = 1 + rng_.below(std::max<size_t>(options_.max_mutations, 1));
      child = genomes_.mutate(child, rng_, mutations);
      const uint64_t h = genomes_.hash(child);
      if (in_next.count(h) || eval_.seen(h)) continue;
      in_next.emplace(h, 1);
      children.push_back(Scored{std::move(child), h});
    }
    const size_t evaluated = eval_.evaluate(children, left());
    for (Scored& c : children) next.push_back(std::move(c));
    pop_ = std::move(next);
    ++result_.generations;
    return evaluated;
  }

  // Keeps the elite, the rest random.
  void restart() {
    std::sort(pop_.begin(), pop_.end(), better);
    pop_.resize(std::min(pop_.size(), elite_));
    fill_random(pop_);
    for (const Scored& s : pop_) consider(s);
    ++result_.restarts;
  }

  // The genomes fitness ranks best, measured by exact; the best by exact wins.
  SearchResult finish() {
    std::vector<Scored> finalists{best_};
    std::sort(pop_.begin(), pop_.end(), better);
    for (const Scored& s : pop_)
      if (finalists.size() < confirm_ && s.cycles != kFailed &&
          std::none_of(finalists.begin(), finalists.end(), [&](const Scored& f) { return f.hash == s.hash; }))
        finalists.push_back(s);
    eval_.measure_exact(finalists);
    for (const Scored& s : finalists) consider(s);

    result_.best_cycles = best_exact_.exact;
    result_.best_rank_cycles = best_exact_.cycles;
    result_.best = best_exact_.genome;
    result_.best_program = canonical_program(space_.program(best_exact_.genome));
    result_.best_lowering = used_choices(result_.best_program, space_.lowering(best_exact_.genome));
    result_.changed_genes = space_.changed_genes(best_exact_.genome);
    result_.ranks = options_.ranks;
    result_.genomes = eval_.genomes();
    result_.programs = eval_.programs();
    result_.exact = eval_.exact_measured();
    result_.failed = eval_.failed();
    result_.pruned = eval_.pruned();
    result_.seconds = seconds();
    progress_.update(result_, result_.seconds);
    return std::move(result_);
  }

  const Clock::time_point start_;
  const SearchSpace& space_;
  const GenomeSpace& genomes_;
  const SearchOptions& options_;
  tbb::task_arena arena_;
  Evaluator eval_;
  Rng rng_;
  SearchResult result_;
  Progress progress_;
  const size_t population_, elite_, budget_, confirm_;
  std::vector<Scored> pop_;
  // The best by fitness (ranks the genetic phase) and by exact (the result).
  Scored best_, best_exact_;
  Scored current_;                 // the descent's genome, then its result
  std::vector<Scored> near_best_;  // the neighbours fitness ranks best, seeds of the genetic phase
  // The change in fitness each move (gene, candidate) gave in its last round.
  std::map<std::pair<uint32_t, uint32_t>, int64_t> move_delta_;
};

}  // namespace

std::string SearchResult::summary() const {
  return fmt::format(
      "greedy {} cycles, best {} cycles (x{:.3f}; ranked {} -> {}) after {} genomes, {} programs, {} "
      "measured exactly, {} failed, {} pruned, {} descent rounds keeping {} changes, {} generations, "
      "{} restarts, {:.1f} s{}",
      greedy_cycles, best_cycles, ratio(), greedy_rank_cycles, best_rank_cycles, genomes, programs, exact, failed,
      pruned, descent_rounds, descent_steps, generations, restarts, seconds,
      stopped_by_time ? " (stopped by the time budget)" : "");
}

nlohmann::json SearchResult::to_json() const {
  return {{"genomes", genomes},
          {"greedy_cycles", greedy_cycles},
          {"best_cycles", best_cycles},
          {"ratio", ratio()},
          {"greedy_rank_cycles", greedy_rank_cycles},
          {"best_rank_cycles", best_rank_cycles},
          {"programs", programs},
          {"exact", exact},
          {"failed", failed},
          {"pruned", pruned},
          {"descent_rounds", descent_rounds},
          {"descent_steps", descent_steps},
          {"generations", generations},
          {"restarts", restarts},
          {"seconds", seconds},
          {"stopped_by_time", stopped_by_time},
          {"ranks", ranks},
          {"changed_genes", changed_genes}};
}

SearchResult genetic(const SearchSpace& space, const LoweredFitnessFn& fitness, const LoweredFitnessFn& exact,
                     const SearchOptions& options) {
  return SearchRun(space, fitness, exact, options).run();
}

SearchResult genetic(const SearchSpace& space, const FitnessFn& fitness, const FitnessFn& exact,
                     const SearchOptions& options) {
  const LoweredFitnessFn f = [&fitness](const Graph& program, const LoweringChoices&) { return fitness(program); };
  LoweredFitnessFn e;
  if (exact) e = [&exact](const Graph& program, const LoweringChoices&) { return exact(program); };
  return SearchRun(space, f, e, options).run();
}

}  // namespace spool::search
