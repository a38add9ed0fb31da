// auto_roll: finds repeated bodies and keeps one copy between loop markers.
//
// 0. Equal constants and iotas are merged into one node each
//    (first_roll.cpp).
// 1. Order. Nodes of one loop context (top level, or one loop's body) in a
//    stable topological order, sources left out (they are never part of a
//    body: a body reads them through loop_input / loop_input_static).
// 2. Candidates (signatures.cpp). Each node gets a structural signature
//    (op, attribute, type, the views it reads through, and for source
//    inputs their op and type but not their name). Prefix hashes over the
//    signature sequence compare windows in O(1); a run of positions where
//    window i equals window i+P marks N >= 2 adjacent occurrences of a
//    period-P body.
// 3. Exact check of a candidate (check.cpp): the occurrences match node for
//    node; every input is internal (same position in the same occurrence),
//    carried (the same position of the previous occurrence, an outside node
//    in the first: a state slot), or outside (per iteration, or static when
//    the same in every iteration); no input comes from an occurrence further
//    back or from an outside node that itself reads an occurrence (rolling
//    would create a cycle); at least one state slot; the markers cost less
//    than the nodes removed.
// 4. Rewrite (rewrite.cpp). Occurrence 0 becomes the body: its inputs are
//    rewired to markers, outside readers of any occurrence read loop_end
//    (the last state) or loop_output (a per-iteration value), occurrences
//    1..N-1 go.
// The best candidate (most nodes saved) is rolled and the search repeats
// until nothing rolls, so periodic patterns (a body of two alternating
// layers) and nested repeats (a repeat inside a body) roll too.
//
// Cost: the first search reads the caller's graph, with step 0 applied only
// to how it names constants and iotas; the graph returned is then built from
// the nodes that survive the first roll (a few hundred of a model's
// thousands) instead of copied whole and cut down, and later searches edit
// it in place.

#include "roller.hpp"

#include <spool/roll/roll.hpp>

#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <map>

namespace spool::roll {
namespace detail {

std::optional<Found> Roller::search_prepared() {
  std::optional<Found> best;
  for (std::vector<NodeId>& order : orders_) {
    std::optional<Candidate> c = best_candidate(order);
    if (c && (!best || c->saving > best->candidate.saving)) best = Found{std::move(order), std::move(*c)};
  }
  orders_.clear();
  return best;
}

bool Roller::roll_once(Graph& g, int64_t loop_id, RollReport& report, const std::function<void(const Graph&)>& beside) {
  std::optional<Found> found;
  if (beside)
    tbb::parallel_invoke([&] { found = search(); }, [&] { beside(g); });
  else
    found = search();
  if (!found) return false;
  rewrite(g, g, *found, loop_id);
  report.trips.push_back(static_cast<int64_t>(found->candidate.count));
  return true;
}

// The node table, whether the graph has markers, and the nodes graph
// outputs read.
void Roller::index_nodes() {
  const uint32_t bound = static_cast<uint32_t>(g_->id_bound());
  nodes_.reset(new const Node*[bound]);  // every entry written below
  has_markers_ = false;
  for (uint32_t id = 0; id < bound; ++id) {
    nodes_[id] = g_->contains(NodeId{id}) ? &g_->node(NodeId{id}) : nullptr;
    if (nodes_[id]) has_markers_ |= is_loop_marker(nodes_[id]->op);
  }
  is_output_.assign(g_->id_bound(), false);
  for (const Output& o : g_->outputs()) is_output_[o.edge.src.value] = true;
  user_begin_.clear();  // built when first asked for
}

// Readers of a node (one entry per reading edge, readers in id order),
// from one flat array built at the first call of a search: only the rare
// candidate whose outside inputs need a walk asks, from the search's own
// thread.
std::span<const NodeId> Roller::users(NodeId id) const {
  if (user_begin_.empty()) {
    const uint32_t bound = static_cast<uint32_t>(g_->id_bound());
    user_begin_.assign(bound + 1, 0);
    for (uint32_t u = 0; u < bound; ++u)
      if (nodes_[u])
        for (const Edge& e : nodes_[u]->inputs) ++user_begin_[e.src.value + 1];
    for (size_t i = 1; i < user_begin_.size(); ++i) user_begin_[i] += user_begin_[i - 1];
    user_list_.resize(user_begin_.back());
    std::vector<uint32_t> next(user_begin_.begin(), user_begin_.end() - 1);
    for (uint32_t u = 0; u < bound; ++u)
      if (nodes_[u])
        for (const Edge& e : nodes_[u]->inputs) user_list_[next[e.src.value]++] = NodeId{u};
  }
  return {user_list_.data() + user_begin_[id.value], user_list_.data() + user_begin_[id.value + 1]};
}

// Nodes grouped by their innermost loop, each in topological order. Left
// out: sources, and a loop's own entry markers, which are its body's
// outside inputs just as sources are the top level's.
std::vector<std::vector<NodeId>> Roller::context_orders() {
  topo_ = topo_order(*g_);
  const std::vector<NodeId>& topo = topo_;
  topo_position_.reset(new uint32_t[g_->id_bound()]);  // read for live ids only
  for (size_t i = 0; i < topo.size(); ++i) topo_position_[topo[i].value] = static_cast<uint32_t>(i);
  if (has_markers_)
    loops_ = find_loops(*g_, topo);
  else
    loops_.clear();  // what find_loops finds in a graph without markers
  const std::vector<Loop>& loops = loops_;
  if (loops.empty()) {  // one context, the top level (a graph before its first roll)
    std::vector<NodeId> order;
    for (const NodeId id : topo)
      if (!is_source(node(id).op)) order.push_back(id);
    std::vector<std::vector<NodeId>> orders;
    if (!order.empty()) orders.push_back(std::move(order));
    return orders;
  }
  std::vector<int64_t> context(g_->id_bound(), -1);
  // Outermost first, so inner loops overwrite: the innermost wins.
  for (const Loop& loop : loops)
    for (const NodeId n : loop.body) context[n.value] = loop.id;
  outside_like_.assign(g_->id_bound(), false);
  for (const Loop& loop : loops)
    for (const NodeId n : loop.entries) outside_like_[n.value] = true;
  std::map<int64_t, std::vector<NodeId>> by_context;
  for (const NodeId id : topo)
    if (!is_source(node(id).op) && !outside_like_[id.value]) by_context[context[id.value]].push_back(id);
  std::vector<std::vector<NodeId>> orders;
  for (auto& [ctx, order] : by_context) orders.push_back(std::move(order));
  return orders;
}

std::optional<Candidate> Roller::best_candidate(const std::vector<NodeId>& order) const {
  const size_t n = order.size();
  if (n < 2) return std::nullopt;
  const std::vector<size_t> sig = signatures(order);
  const Windows window(sig);
  std::vector<Run> runs = repeat_runs(sig, window);
  // Most promising first; stop once no run can beat the best found.
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.bound() > b.bound(); });
  // A candidate adds at least a loop_start and a loop_end, and a
  // loop_output for every node of its occurrences but the last that a
  // graph output reads: its saving is at most (c - 1) * period - 2 -
  // (graph outputs read in its first c - 1 occurrences). For one phase
  // that bound does not fall as c grows (an occurrence holds at most
  // `period` nodes), so the most any candidate of a run with c or fewer
  // occurrences can save is that bound at each phase's largest count.
  std::vector<uint32_t> outputs_before;  // graph outputs read at order positions below i
  outputs_before.reserve(n + 1);
  outputs_before.push_back(0);
  for (size_t i = 0; i < n; ++i) outputs_before.push_back(outputs_before[i] + is_output_[order[i].value]);
  auto most_saved = [&](const Run& run, size_t c) {
    int64_t most = INT64_MIN;
    for (size_t phase = 0; phase < run.period; ++phase) {
      const size_t s = run.start + phase;
      const size_t fit = s <= n ? std::min(c, (n - s) / run.period) : 0;
      if (fit < 2) continue;
      const uint32_t outputs = outputs_before[s + (fit - 1) * run.period] - outputs_before[s];
      most = std::max(most, static_cast<int64_t>((fit - 1) * run.period) - 2 - static_cast<int64_t>(outputs));
    }
    return most;
  };
  std::optional<Candidate> best;
  for (const Run& run : runs) {
    if (best && static_cast<int64_t>(run.bound()) <= best->saving) break;
    const size_t period = run.period;
    // Each phase that keeps c occurrences inside the run, then one fewer;
    // the first phase that passes wins (later phases roll the same repeat,
    // rotated).
    for (size_t c = run.count; c >= 2; --c) {
      if (best && most_saved(run, c) <= best->saving) break;
      std::optional<Candidate> cand;
      for (size_t phase = 0; phase < period && run.start + phase + c * period <= n && !cand; ++phase) {
        if (phase > 0 && window(run.start + phase + (c - 1) * period, period) != window(run.start + phase, period))
          break;
        cand = check(order, run.start + phase, period, c);
      }
      if (cand) {
        if (!best || cand->saving > best->saving) best = std::move(cand);
        break;
      }
    }
  }
  return best;
}

}  // namespace detail

namespace {

using namespace detail;

// The id for a new loop: above every loop of the graph (find_loops lists
// the loop of every marker).
int64_t next_loop_id(const std::vector<Loop>& loops) {
  int64_t next = 1;
  for (const Loop& loop : loops) next = std::max(next, loop.id + 1);
  return next;
}

}  // namespace

RollResult auto_roll(const Graph& graph) { return auto_roll(graph, nullptr); }

RollResult auto_roll(const Graph& graph, const std::function<void(const Graph&)>& beside) {
  RollResult result;
  RollReport& report = result.report;
  report.hlir_nodes_before = graph.num_live();
  std::vector<NodeId> duplicates;
  std::vector<NodeId> canonical;
  // The first search reads the caller's graph (merging equal sources only
  // in how it names them); the graph the rest edits is built after it. Its
  // index and orders are built while the equal sources are found.
  Roller roller(graph, &canonical);
  tbb::parallel_invoke([&] { canonical = value_canonical(graph, duplicates); }, [&] { roller.prepare(); });
  if (std::optional<Found> found = roller.search_prepared()) {
    std::vector<NodeId> id_in_copy;
    result.graph = build_survivors(graph, canonical, roller.topo(), *found, found->candidate.markers, id_in_copy);
    // Each roll takes the next id: the loop just rolled has the largest.
    int64_t loop_id = next_loop_id(roller.loops());
    roller.rewrite(result.graph, graph, *found, loop_id, &id_in_copy);
    report.trips.push_back(static_cast<int64_t>(found->candidate.count));
    ++report.loops;
    roller.retarget(result.graph);
    while (roller.roll_once(result.graph, ++loop_id, report, beside)) ++report.loops;
  } else {
    result.graph = merge_value_sources(graph, canonical, duplicates);
  }
  report.hlir_nodes_after = result.graph.num_live();
  // The last search rolled nothing: its loops are the final graph's.
  for (const Loop& loop : roller.loops())
    if (loop.parent < 0) report.body_nodes += static_cast<int64_t>(loop.body.size());
  return result;
}

}  // namespace spool::roll