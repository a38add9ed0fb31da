// The runner: iterations of search (parallel, read-only), apply (sequential,
// budgeted per match) and rebuild, driven by a schedule over rulesets.
//
// Determinism: the candidates of every rule are cut into chunks of a fixed
// size, each chunk is matched into its own buffer, and the buffers are
// applied in (rule, chunk) order. Neither the chunking nor the apply order
// depends on the number of threads, so neither does the e-graph.

#include <spool/egraph/runner.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>
#if !SPOOL_EGRAPH_SERIAL
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

namespace spool::egraph {

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::Saturated: return "saturated";
    case StopReason::IterLimit: return "iter-limit";
    case StopReason::NodeLimit: return "node-limit";
    case StopReason::TimeLimit: return "time-limit";
    case StopReason::Goal: return "goal";
  }
  return "?";
}

std::string Schedule::str() const {
  switch (kind) {
    case Kind::Run: return count == 1 ? fmt::format("(run {})", ruleset) : fmt::format("(run {} {})", ruleset, count);
    case Kind::Repeat: return fmt::format("(repeat {} {})", count, children.at(0).str());
    case Kind::Saturate: return fmt::format("(saturate {})", children.at(0).str());
    case Kind::Seq: {
      std::string out = "(seq";
      for (const Schedule& c : children) out += " " + c.str();
      return out + ")";
    }
  }
  return "";
}

nlohmann::json RunReport::to_json() const {
  nlohmann::json j;
  j["stop_reason"] = std::string(stop_reason_name(stop));
  j["iterations"] = iterations;
  j["nodes"] = nodes;
  j["classes"] = classes;
  j["total_ms"] = total_ms;
  j["search_ms"] = search_ms;
  j["apply_ms"] = apply_ms;
  j["rebuild_ms"] = rebuild_ms;
  nlohmann::json steps_json = nlohmann::json::array();
  for (const StepReport& s : steps)
    steps_json.push_back({{"schedule", s.schedule},
                          {"stop_reason", std::string(stop_reason_name(s.stop))},
                          {"iterations", s.iterations},
                          {"nodes_added", s.nodes_added},
                          {"ms", s.ms}});
  j["budget_stops"] = std::move(steps_json);
  nlohmann::json iters = nlohmann::json::array();
  for (const IterationReport& it : per_iteration) {
    nlohmann::json ji;
    ji["index"] = it.index;
    ji["ruleset"] = it.ruleset;
    ji["nodes"] = it.nodes;
    ji["classes"] = it.classes;
    ji["unions"] = it.unions;
    ji["rebuild_unions"] = it.rebuild_unions;
    ji["search_ms"] = it.search_ms;
    ji["apply_ms"] = it.apply_ms;
    ji["rebuild_ms"] = it.rebuild_ms;
    nlohmann::json rules = nlohmann::json::array();
    for (const RuleReport& r : it.rules)
      rules.push_back({{"name", r.name},
                       {"matches", r.matches},
                       {"applications", r.applications},
                       {"search_ms", r.search_ms},
                       {"apply_ms", r.apply_ms},
                       {"banned", r.banned}});
    ji["rules"] = std::move(rules);
    iters.push_back(std::move(ji));
  }
  j["per_iteration"] = std::move(iters);
  return j;
}

std::string RunReport::summary() const {
  std::string out =
      fmt::format("{} after {} iterations: {} nodes, {} classes, {:.2f} ms (search {:.2f}, apply {:.2f}, rebuild {:.2f})",
                  stop_reason_name(stop), iterations, nodes, classes, total_ms, search_ms, apply_ms, rebuild_ms);
  for (const StepReport& s : steps)
    out += fmt::format("; step {} stopped at its {} after {} iterations (+{} nodes)", s.schedule,
                       stop_reason_name(s.stop), s.iterations, s.nodes_added);
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Candidates per search task: small enough to spread one big rule over
// threads and to notice the time budget quickly; fixed, so results never
// depend on the thread count.
constexpr size_t kChunk = 128;

struct Chunk {
  uint32_t rule = 0;
  uint32_t begin = 0, end = 0;
  MatchSet matches;
  double ms = 0;
};

struct RuleState {
  size_t times_banned = 0;
  size_t banned_until = 0;
  uint32_t applied_gen = kAllMatches;  // every match of the search at this generation was applied
};

// Whether re-applying an old match is certainly a no-op: its result depends
// only on the matched classes, not on client code reading analysis data.
bool incremental_ok(const Rule& rule) {
  if (!rule.guards.empty()) return false;
  for (const Rule::Action& a : rule.actions)
    if (a.kind == ActionSpec::Kind::Apply) return false;
  return true;
}

}  // namespace

struct Runner::State {
  const RunnerConfig& cfg;
  EGraph& g;
  std::vector<SetRef> sets;
  Clock::time_point start;
  Clock::time_point deadline;
  RunReport report;
  bool stopped = false;
  // The saturate steps being run, outermost first: each with its own budgets.
  struct Step {
    size_t first_iteration = 0;
    size_t first_nodes = 0;
    Clock::time_point start, deadline;
    std::optional<StopReason> hit;  // the budget it ran out of
  };
  std::vector<Step> steps;
  // The tightest node count and deadline of the steps being run (the run's
  // own outside any step), which the search and apply loops check.
  size_t node_cap = 0;
  Clock::time_point cap_deadline;
  std::vector<std::vector<RuleState>> rule_state;
  std::vector<std::vector<uint32_t>> origins;  // per ruleset and rule: its provenance id in the graph
  std::vector<Chunk> chunks;
  std::vector<ClassId> scratch;
  // What a guard or an applier is shown of a match (refilled per call).
  boost::container::small_vector<ClassId, 8> args;
  boost::container::small_vector<AttrId, 4> attr_args;
  std::vector<uint8_t> dropped;
  std::vector<size_t> rule_matches;
  std::vector<uint32_t> since;  // per rule: report only matches newer than this generation
  // Per rule: the backoff scheduler's ban threshold, shared by the rule's
  // chunks so its search stops once the rule is over it.
  std::unique_ptr<MatchBudget[]> budgets;
  size_t num_budgets = 0;
#if !SPOOL_EGRAPH_SERIAL
  std::unique_ptr<tbb::task_arena> arena;
#endif

  State(const RunnerConfig& c, EGraph& graph, std::vector<SetRef> s)
      : cfg(c), g(graph), sets(std::move(s)), start(Clock::now()) {
    const double limit = std::max(0.0, cfg.time_limit_ms);
    deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(limit));
    refresh_caps();
    for (const SetRef& set : sets) {
      rule_state.emplace_back(set.rules.size());
      origins.emplace_back();
      for (const Rule& rule : set.rules) origins.back().push_back(g.intern_origin(rule.reason));
    }
#if SPOOL_EGRAPH_SERIAL
    if (cfg.threads != 1)
      fail("this build of the e-graph engine (SPOOL_EGRAPH_SERIAL) searches on one thread; {} were asked for",
           cfg.threads);
#else
    if (cfg.threads != 1)
      arena = cfg.threads > 0 ? std::make_unique<tbb::task_arena>(cfg.threads) : std::make_unique<tbb::task_arena>();
#endif
  }

  void stop(StopReason reason) {
    stopped = true;
    report.stop = reason;
  }

  void refresh_caps() {
    node_cap = cfg.node_limit;
    cap_deadline = deadline;
    if (steps.empty()) return;
    node_cap = SIZE_MAX;
    cap_deadline = Clock::time_point::max();
    for (const Step& s : steps) {
      node_cap = std::min(node_cap, s.first_nodes + cfg.node_limit);
      cap_deadline = std::min(cap_deadline, s.deadline);
    }
  }

  // A node or time budget ran out in the middle of an iteration: the run's
  // outside any step, else the outermost step whose budget it is.
  void budget_hit(StopReason reason) {
    if (steps.empty()) {
      stop(reason);
      return;
    }
    const auto now = Clock::now();
    for (Step& s : steps)
      if ((reason == StopReason::NodeLimit && g.num_nodes() >= s.first_nodes + cfg.node_limit) ||
          (reason == StopReason::TimeLimit && now >= s.deadline)) {
        s.hit = reason;
        return;
      }
    steps.back().hit = reason;
  }

  // Whether the run, or a step being run, is out of budget.
  bool halted() const { return stopped || step_over(); }

  Clock::time_point deadline_after(Clock::time_point t) const {
    const double limit = std::max(0.0, cfg.time_limit_ms);
    return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(limit));
  }

  // Which budget `iterations`, `nodes` and the time (it is `now`) exceed, if any.
  std::optional<StopReason> over(size_t iterations, size_t nodes, Clock::time_point now,
                                 Clock::time_point until) const {
    if (iterations >= cfg.iter_limit) return StopReason::IterLimit;
    if (nodes >= cfg.node_limit) return StopReason::NodeLimit;
    if (now >= until) return StopReason::TimeLimit;
    return std::nullopt;
  }

  // Inside saturate steps, their budgets (an exhausted one ends that step,
  // not the run); outside, the run's. It is `now`.
  bool out_of_budget_before_iteration(Clock::time_point now) {
    if (steps.empty()) {
      if (const auto reason = over(report.iterations, g.num_nodes(), now, deadline)) stop(*reason);
      return stopped;
    }
    for (Step& s : steps) {
      if (s.hit) return true;
      const size_t added = g.num_nodes() > s.first_nodes ? g.num_nodes() - s.first_nodes : 0;
      if ((s.hit = over(report.iterations - s.first_iteration, added, now, s.deadline))) return true;
    }
    return false;
  }
  bool step_over() const {
    return std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.hit.has_value(); });
  }

  // One iteration of ruleset `si`; returns whether it changed the graph.
  bool iterate(size_t si) {
    if (stopped || out_of_budget_before_iteration(Clock::now())) return false;
    const SetRef& set = sets[si];
    std::vector<RuleState>& states = rule_state[si];
    const size_t iter = report.iterations;
    if (!g.clean()) g.rebuild();
    (void)g.classes();  // builds the op index before the parallel search reads it
    // Changes from here on carry a newer stamp than this search saw.
    const uint32_t gen = g.generation();
    g.next_generation();

    IterationReport it;
    it.index = iter;
    it.ruleset = set.name;
    it.rules.resize(set.rules.size());
    for (size_t r = 0; r < set.rules.size(); ++r) it.rules[r].name = set.rules[r].name;

    // ---- search --------------------------------------------------------------
    const auto t_search = Clock::now();
    const size_t num_chunks = cut_chunks(set, states, iter, it);
    Clock::time_point t_apply;
    const bool timed_out = match_chunks(set, num_chunks, t_search, t_apply);
    it.search_ms = ms_between(t_search, t_apply);
    count_matches(set, num_chunks, it);
    if (timed_out) {
      budget_hit(StopReason::TimeLimit);
      finish_iteration(it, t_apply, t_apply, 0);
      return false;
    }
    ban_rules(states, iter, it);

    // ---- apply -------------------------------------------------------------------
    const size_t nodes_before = g.num_nodes();
    const uint64_t unions_before = g.union_count();
    const auto t_rebuild = apply_chunks(si, num_chunks, it, t_apply);
    if (!halted())
      for (size_t r = 0; r < set.rules.size(); ++r)
        if (!it.rules[r].banned) states[r].applied_gen = gen;
    it.unions = static_cast<size_t>(g.union_count() - unions_before);
    it.apply_ms = ms_between(t_apply, t_rebuild);

    // ---- rebuild -------------------------------------------------------------------
    const size_t rebuild_unions = g.rebuild();
    if (cfg.check_invariants) g.check_invariants();
    bool changed = it.unions > 0 || g.num_nodes() != nodes_before || rebuild_unions > 0;
    finish_iteration(it, t_rebuild, Clock::now(), rebuild_unions);
    // egg's runner asks the backoff scheduler whether it may stop whenever
    // no action merged anything, even when a guard or an applier added
    // nodes: the bans are fast-forwarded then, and the run goes on.
    if (it.unions == 0 && cfg.scheduler == SchedulerKind::Backoff && lift_bans(states, iter)) changed = true;
    if (!stopped && cfg.stop_when && cfg.stop_when(g)) stop(StopReason::Goal);
    return changed;
  }

  // Cuts the candidates of every rule that is not banned into chunks, and
  // sets the generation each rule reports matches since. Returns the number
  // of chunks.
  size_t cut_chunks(const SetRef& set, const std::vector<RuleState>& states, size_t iter, IterationReport& it) {
    since.assign(set.rules.size(), kAllMatches);
    if (cfg.incremental)
      for (size_t r = 0; r < set.rules.size(); ++r)
        if (incremental_ok(set.rules[r])) since[r] = states[r].applied_gen;
    if (num_budgets < set.rules.size()) {
      budgets = std::make_unique<MatchBudget[]>(set.rules.size());
      num_budgets = set.rules.size();
    }
    for (size_t r = 0; r < set.rules.size(); ++r) {
      budgets[r].found.store(0, std::memory_order_relaxed);
      budgets[r].limit = cfg.scheduler == SchedulerKind::Backoff ? threshold(states[r]) : SIZE_MAX;
    }
    size_t num_chunks = 0;
    for (size_t r = 0; r < set.rules.size(); ++r) {
      const bool banned = cfg.scheduler == SchedulerKind::Backoff && states[r].banned_until > iter;
      if (banned) {
        it.rules[r].banned = true;
        continue;
      }
      const size_t n = query_candidates(g, set.rules[r].query).size();
      for (size_t b = 0; b < n; b += kChunk) {
        if (num_chunks == chunks.size()) chunks.emplace_back();
        Chunk& c = chunks[num_chunks++];
        c.rule = static_cast<uint32_t>(r);
        c.begin = static_cast<uint32_t>(b);
        c.end = static_cast<uint32_t>(std::min(n, b + kChunk));
        c.matches.clear();
        c.ms = 0;
      }
    }
    return num_chunks;
  }

  // Matches the first `num_chunks` chunks, each into its own buffer; the
  // search started at `start` and ends at `end`. Returns whether the time
  // budget ran out.
  bool match_chunks(const SetRef& set, size_t num_chunks, Clock::time_point start, Clock::time_point& end) {
    std::atomic<bool> timed_out{false};
    // Times the chunk from `t0` (one clock read per chunk when run in a row).
    auto search_chunk = [&](size_t i, Clock::time_point t0) {
      Chunk& c = chunks[i];
      const Query& q = set.rules[c.rule].query;
      search(g, q, query_candidates(g, q).subspan(c.begin, c.end - c.begin), c.matches, &timed_out, since[c.rule],
             &budgets[c.rule]);
      const auto t1 = Clock::now();
      c.ms = ms_between(t0, t1);
      if (t1 >= cap_deadline) timed_out.store(true, std::memory_order_relaxed);
      return t1;
    };
    // A few chunks are cheaper to match here than to hand to other threads;
    // either way each chunk fills its own buffer, so the result is the same.
    if (num_chunks <= 4 || cfg.threads == 1) {
      end = start;
      for (size_t i = 0; i < num_chunks; ++i) end = search_chunk(i, end);
      if (num_chunks == 0) end = Clock::now();
    } else {
#if !SPOOL_EGRAPH_SERIAL
      arena->execute([&] {
        tbb::parallel_for(tbb::blocked_range<size_t>(0, num_chunks, 1), [&](const tbb::blocked_range<size_t>& range) {
          for (size_t i = range.begin(); i != range.end(); ++i) search_chunk(i, Clock::now());
        });
      });
#endif
      end = Clock::now();
    }
    return timed_out.load();
  }

  void count_matches(const SetRef& set, size_t num_chunks, IterationReport& it) {
    rule_matches.assign(set.rules.size(), 0);
    for (size_t i = 0; i < num_chunks; ++i) {
      rule_matches[chunks[i].rule] += chunks[i].matches.size();
      it.rules[chunks[i].rule].search_ms += chunks[i].ms;
    }
    for (size_t r = 0; r < set.rules.size(); ++r) it.rules[r].matches = rule_matches[r];
  }

  size_t threshold(const RuleState& st) const { return cfg.match_limit << std::min<size_t>(st.times_banned, 40); }

  // The backoff scheduler: bans the rules with too many matches and marks
  // their matches dropped. (The search of such a rule stopped at its
  // threshold: its match count is only known to be over it.)
  void ban_rules(std::vector<RuleState>& states, size_t iter, IterationReport& it) {
    dropped.assign(states.size(), 0);
    if (cfg.scheduler != SchedulerKind::Backoff) return;
    for (size_t r = 0; r < states.size(); ++r) {
      RuleState& st = states[r];
      if (it.rules[r].banned) continue;
      if (rule_matches[r] > threshold(st)) {
        st.banned_until = iter + (cfg.ban_length << std::min<size_t>(st.times_banned, 40));
        ++st.times_banned;
        dropped[r] = 1;
        it.rules[r].banned = true;
      }
    }
  }

  // Applies the matches of the chunks whose rule was not dropped, in chunk
  // order, until a budget runs out; started at `start`, returns when it
  // ended (one clock read per chunk applied).
  Clock::time_point apply_chunks(size_t si, size_t num_chunks, IterationReport& it, Clock::time_point start) {
    size_t since_clock = 0;
    Clock::time_point t = start;
    bool read = false;  // whether `t` was read after the last chunk applied
    for (size_t i = 0; i < num_chunks && !halted(); ++i) {
      const Chunk& c = chunks[i];
      if (dropped[c.rule] || c.matches.size() == 0) continue;
      RuleReport& rr = it.rules[c.rule];
      apply_chunk(sets[si].rules[c.rule], origins[si][c.rule], c.matches, rr, since_clock);
      const auto t1 = Clock::now();
      rr.apply_ms += ms_between(t, t1);
      t = t1;
      read = true;
    }
    return read ? t : Clock::now();
  }

  // Applies the matches of one chunk of `rule`; `since_clock` counts the
  // matches since the clock was last read, across chunks.
  void apply_chunk(const Rule& rule, uint32_t origin, const MatchSet& matches, RuleReport& rr, size_t& since_clock) {
    // The apply loop waits on memory: prefetch the first hashcons lookup of
    // match m + 16, and the node its slot holds for match m + 8.
    // The clock is read every 64 matches of a plain rewrite (cheap to
    // apply: a few microseconds between reads), and before every match of a
    // rule with guards or custom appliers (client code of unknown cost).
    size_t clock_every = rule.guards.empty() ? 64 : 1;
    for (const Rule::Action& a : rule.actions)
      if (a.kind == ActionSpec::Kind::Apply) clock_every = 1;
    const Rule::Action* predict = nullptr;
    // (Only when the hashcons outgrows the caches: on a small graph the
    // prediction costs more than the misses it hides.)
    if (rule.guards.empty() && !rule.actions.empty() && rule.actions[0].first_lookup != UINT32_MAX &&
        g.num_nodes() > kPrefetchNodes)
      predict = &rule.actions[0];
    // Counted in a local (the calls below may not change it), stored back
    // once the chunk is done.
    size_t ticks = since_clock;
    for (size_t m = 0; m < matches.size(); ++m) {
      if (predict) {
        if (m + 16 < matches.size()) {
          ring[(m + 16) % kRing] = predicted_hash(*predict, matches, m + 16);
          g.prefetch_slot(ring[(m + 16) % kRing]);
        }
        if (m >= 8 && m + 8 < matches.size()) g.prefetch_node(ring[(m + 8) % kRing]);
      }
      if (g.num_nodes() >= node_cap) {
        budget_hit(StopReason::NodeLimit);
        break;
      }
      if (++ticks >= clock_every) {
        ticks = 0;
        if (Clock::now() >= cap_deadline) {
          budget_hit(StopReason::TimeLimit);
          break;
        }
      }
      g.set_origin(origin);
      const bool applied = apply_match(rule, matches, m);
      g.set_origin(0);
      if (applied) ++rr.applications;
    }
    since_clock = ticks;
  }

  // An iteration that changed nothing saturates the ruleset only if no rule
  // is banned: otherwise every ban is shortened by the same number of
  // iterations so the one ending first ends now, and the run goes on (egg's
  // backoff scheduler does the same). Returns whether a rule was banned.
  static bool lift_bans(std::vector<RuleState>& states, size_t iter) {
    size_t first_end = SIZE_MAX;
    for (const RuleState& st : states)
      if (st.banned_until > iter) first_end = std::min(first_end, st.banned_until);
    if (first_end == SIZE_MAX) return false;
    const size_t delta = first_end - iter;
    for (RuleState& st : states)
      if (st.banned_until > iter) st.banned_until -= delta;
    return true;
  }

  void finish_iteration(IterationReport& it, Clock::time_point t_rebuild, Clock::time_point t_end,
                        size_t rebuild_unions) {
    it.rebuild_ms = ms_between(t_rebuild, t_end);
    it.rebuild_unions = rebuild_unions;
    it.nodes = g.num_nodes();
    it.classes = g.num_classes();
    report.search_ms += it.search_ms;
    report.apply_ms += it.apply_ms;
    report.rebuild_ms += it.rebuild_ms;
    ++report.iterations;
    report.per_iteration.push_back(std::move(it));
  }

  static constexpr size_t kRing = 32;
  static constexpr size_t kPrefetchNodes = 32'768;
  uint32_t ring[kRing] = {};

  uint32_t predicted_hash(const Rule::Action& action, const MatchSet& ms, size_t m) {
    const PatternNode& n = action.pattern.nodes[action.first_lookup];
    const ClassId* vars = ms.vars(m);
    ChildBuf kids;
    for (uint32_t k : action.pattern.kids(n)) kids.push_back(g.find(vars[action.pattern.nodes[k].var]));
    return g.lookup_hash(n.op, n.attr.id, kids.span());
  }

  // Applies one match: guards, then every action. Returns whether it changed
  // the graph.
  bool apply_match(const Rule& rule, const MatchSet& ms, size_t m) {
    const ClassId root = ms.root(m);
    const ClassId* vars = ms.vars(m);
    const AttrId* attrs = ms.attr_vars(m);
    auto view = [&](const Rule::Args& a) {
      args.clear();
      attr_args.clear();
      for (uint32_t v : a.classes) args.push_back(g.find(vars[v]));
      for (uint32_t v : a.attrs) attr_args.push_back(attrs[v]);
      return MatchView{g.find(root), span_of(args), span_of(attr_args)};
    };
    for (const Rule::Guard& guard : rule.guards)
      if (!guard.fn(g, view(guard.args))) return false;
    bool changed = false;
    for (const Rule::Action& action : rule.actions) {
      const ClassId target = action.target == UINT32_MAX ? root : vars[action.target];
      if (action.kind == ActionSpec::Kind::Union) {
        const bool compiled = !action.builder.steps.empty() || action.builder.var != UINT32_MAX;
        changed |= compiled ? build_into(g, action.builder, vars, attrs, target, rule.reason)
                            : instantiate_into(g, action.pattern, vars, attrs, scratch, target, rule.reason);
      } else if (std::optional<ClassId> built = action.applier(g, view(action.args))) {
        changed |= g.merge(target, *built, rule.reason);
      }
    }
    return changed;
  }

  // Runs `body` (which executes `s`) as a step with budgets of its own.
  template <typename Body>
  bool step(const Schedule& s, Body&& body) {
    const Clock::time_point now = Clock::now();
    steps.push_back(Step{report.iterations, g.num_nodes(), now, deadline_after(now), std::nullopt});
    refresh_caps();
    const bool any = body();
    const Step done = steps.back();
    steps.pop_back();
    refresh_caps();
    if (done.hit && !stopped && !step_over()) {
      // This step's budget, not an outer one's: say so; the run goes on.
      StepReport r;
      r.schedule = s.str();
      r.stop = *done.hit;
      r.iterations = report.iterations - done.first_iteration;
      r.nodes_added = g.num_nodes() > done.first_nodes ? g.num_nodes() - done.first_nodes : 0;
      r.ms = ms_between(done.start, Clock::now());
      report.steps.push_back(std::move(r));
    }
    return any;
  }

  // The schedule's top-level steps (a seq's children, or the schedule
  // itself) each with budgets of their own.
  void exec_top(const Schedule& s) {
    if (s.kind != Schedule::Kind::Seq) {
      step(s, [&] { return exec(s); });
      return;
    }
    for (const Schedule& c : s.children) {
      if (stopped) break;
      step(c, [&] { return exec(c); });
    }
  }

  bool exec(const Schedule& s) {
    bool any = false;
    switch (s.kind) {
      case Schedule::Kind::Run: {
        size_t si = sets.size();
        for (size_t i = 0; i < sets.size(); ++i)
          if (sets[i].name == s.ruleset) si = i;
        if (si == sets.size()) fail("schedule: unknown ruleset '{}'", s.ruleset);
        for (size_t k = 0; k < s.count && !halted(); ++k) {
          const bool changed = iterate(si);
          any |= changed;
          if (!changed) break;
        }
        return any;
      }
      case Schedule::Kind::Repeat:
        for (size_t k = 0; k < s.count && !halted(); ++k) {
          const bool changed = exec(s.children.at(0));
          any |= changed;
          if (!changed) break;
        }
        return any;
      case Schedule::Kind::Saturate:
        return step(s, [&] {
          bool changed_any = false;
          while (!halted()) {
            const bool changed = exec(s.children.at(0));
            changed_any |= changed;
            if (!changed) break;
          }
          return changed_any;
        });
      case Schedule::Kind::Seq:
        for (const Schedule& c : s.children) {
          if (halted()) break;
          any |= exec(c);
        }
        return any;
    }
    return any;
  }
};

// Duplicate nodes a run leaves uncompacted at most (about 100 KB of nodes,
// lists and hashcons slots).
constexpr size_t kCompactDeadNodes = 4096;

Runner::Runner(RunnerConfig config) : config_(std::move(config)) {}
Runner::~Runner() = default;

RunReport Runner::run(EGraph& graph, std::span<const RuleSet> rulesets, const Schedule& schedule) {
  std::vector<SetRef> sets;
  sets.reserve(rulesets.size());
  for (const RuleSet& set : rulesets) sets.push_back(SetRef{set.name, set.rules});
  return run_sets(graph, std::move(sets), schedule);
}

RunReport Runner::run(EGraph& graph, std::span<const Rule> rules) {
  // One ruleset of the caller's rules, borrowed for the length of the run.
  return run_sets(graph, {SetRef{"all", rules}}, Schedule::saturate(Schedule::run("all")));
}

RunReport Runner::run_sets(EGraph& graph, std::vector<SetRef> sets, const Schedule& schedule) {
  State st(config_, graph, std::move(sets));
  if (!graph.clean()) graph.rebuild();
  st.exec_top(schedule);
  // A run whose steps all saturated saturated; one whose step stopped at a
  // budget reports that budget (and the step, in `steps`).
  if (!st.stopped) st.report.stop = st.report.steps.empty() ? StopReason::Saturated : st.report.steps.front().stop;
  if (!graph.clean()) graph.rebuild();
  // Drop the duplicates congruence found so the graph handed back is compact,
  // when there are enough of them to pay for a pass over the whole graph
  // (not for a small run's few: that pass cost egg's short goals 4 % of
  // their time) and there is time for it.
  if (graph.dead_nodes() > kCompactDeadNodes && st.report.stop != StopReason::TimeLimit) graph.compact();
  st.report.nodes = graph.num_nodes();
  st.report.classes = graph.num_classes();
  st.report.total_ms = ms_between(st.start, Clock::now());
  return std::move(st.report);
}

}  // namespace spool::egraph
