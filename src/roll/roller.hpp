#pragma once
// Internal to auto_roll: Roller, which finds the best repeat of a graph and
// rolls it, one file per concern: the search over the graph's loop contexts
// (auto_roll.cpp), the signatures and the repeated runs they reveal
// (signatures.cpp), the exact check of a candidate (check.cpp), and the
// rewrite of a checked candidate into a loop (rewrite.cpp).

#include "roll_detail.hpp"

#include <spool/roll/roll.hpp>

#include <tbb/parallel_invoke.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace spool::roll::detail {

// Where each node of a candidate's occurrences sits, by node id:
// (occurrence, position), or kNowhere.
using Where = std::vector<std::pair<size_t, size_t>>;
inline constexpr size_t kNowhere = SIZE_MAX;

// Orders at least this long are signed, and candidates covering at least
// this many nodes compared, on two threads.
inline constexpr size_t kParallelNodes = 1024;

// f(lo, mid) and f(mid, hi) at once, on two threads.
template <typename F>
void in_two_halves(size_t lo, size_t hi, const F& f) {
  const size_t mid = lo + (hi - lo) / 2;
  tbb::parallel_invoke([&] { f(lo, mid); }, [&] { f(mid, hi); });
}

// Prefix hashes over a signature sequence, so that any two windows compare
// in O(1): window(i, P) = sum sig[i+j] * B^(P-1-j), mod 2^64.
class Windows {
 public:
  explicit Windows(const std::vector<size_t>& sig);
  uint64_t operator()(size_t i, size_t p) const { return prefix_[i + p] - prefix_[i] * power_[p]; }

 private:
  std::vector<uint64_t> prefix_, power_;
};

// A maximal run of `count` equal adjacent windows of `period` signatures.
struct Run {
  size_t start, period, count;
  size_t bound() const { return (count - 1) * period; }  // nodes it could remove
};

// The runs of every period worth scanning (signatures.cpp).
std::vector<Run> repeat_runs(const std::vector<size_t>& sig, const Windows& window);

// The nodes a check examines: occurrence k's node at position j is
// order[start + k * period + j].
struct Occurrences {
  const std::vector<NodeId>& order;
  size_t start, period, count;
  NodeId at(size_t k, size_t j) const { return order[start + k * period + j]; }
};

class Roller {
 public:
  // Searches `g`, reading equal constants and iotas as `canonical` says
  // (nullptr: every node is its own).
  Roller(const Graph& g, const std::vector<NodeId>* canonical) : g_(&g), canonical_(canonical) {}

  // Searches another graph from now on (the result graph, once built).
  void retarget(const Graph& g) {
    g_ = &g;
    canonical_ = nullptr;
  }

  // The best candidate of any context; nullopt if nothing rolls.
  std::optional<Found> search() {
    prepare();
    return search_prepared();
  }

  // A search in two steps: the node table and the orders of the contexts
  // (which read no canonical sources, so may be built while they are
  // found), then the candidates.
  void prepare() {
    index_nodes();
    where_.assign(g_->id_bound(), {kNowhere, 0});
    orders_ = context_orders();
  }
  std::optional<Found> search_prepared();

  // Rolls the best candidate of the searched graph, which must be `g`, with
  // `beside(g)` run during the search if given; false if nothing rolls.
  bool roll_once(Graph& g, int64_t loop_id, RollReport& report, const std::function<void(const Graph&)>& beside);

  // Rolls `found`, a candidate of the searched graph `before`, into `g`: g
  // is `before` itself (id_in_g null), or `before` with equal constants and
  // iotas merged and without the occurrences 1..N-1, its ids renumbered as
  // id_in_g says (built by build_survivors, outside readers of those
  // occurrences reading occurrence 0 in their place).
  void rewrite(Graph& g, const Graph& before, const Found& found, int64_t loop_id,
               const std::vector<NodeId>* id_in_g = nullptr);

  // The loops of the graph as the last search found them: after a search
  // that rolled nothing, the loops of the final graph.
  const std::vector<Loop>& loops() const { return loops_; }
  // The topological order of the last search's graph.
  const std::vector<NodeId>& topo() const { return topo_; }

 private:
  // The search (auto_roll.cpp).
  void index_nodes();
  std::span<const NodeId> users(NodeId id) const;
  std::vector<std::vector<NodeId>> context_orders();
  // The candidate of one context that saves the most nodes.
  std::optional<Candidate> best_candidate(const std::vector<NodeId>& order) const;

  // Signatures (signatures.cpp).
  size_t signature(NodeId id) const;
  std::vector<size_t> signatures(const std::vector<NodeId>& order) const;

  // The exact check and its steps (check.cpp): the candidate of occurrences
  // order[start + k*period + j], or nullopt if they do not roll or rolling
  // them saves nothing.
  std::optional<Candidate> check(const std::vector<NodeId>& order, size_t start, size_t period, size_t count) const;
  bool occurrences_equal(const Occurrences& occ) const;
  std::optional<InputPlan> plan_input(const Occurrences& occ, size_t j, size_t i,
                                      std::vector<NodeId>& outside_reads) const;
  bool reads_downstream(const Occurrences& occ, const std::vector<NodeId>& outside_reads) const;
  size_t distinct_entries(const Candidate& cand) const;
  void find_outside_uses(const Occurrences& occ, Candidate& cand) const;
  int64_t count_loop_outputs(const Occurrences& occ, Candidate& cand, const std::vector<uint8_t>& is_slot) const;

  NodeId canonical(NodeId id) const { return canonical_ ? (*canonical_)[id.value] : id; }
  // The searched graph's nodes, through the table index_nodes() fills (the
  // graph does not change during a search).
  const Node& node(NodeId id) const { return *nodes_[id.value]; }
  bool same_source(NodeId a, NodeId b) const { return a == b || same_value(node(a), node(b)); }

  const Graph* g_;                             // the graph searched
  const std::vector<NodeId>* canonical_;       // its equal constants and iotas, or nullptr
  std::vector<NodeId> topo_;                   // of the last search
  std::unique_ptr<uint32_t[]> topo_position_;  // by id: the position in topo_ (live ids)
  std::unique_ptr<const Node*[]> nodes_;       // by id, nullptr for deleted ids
  bool has_markers_ = false;                   // the graph has loop markers
  mutable std::vector<uint32_t> user_begin_;   // users of node i: user_list_[user_begin_[i], user_begin_[i+1])
  mutable std::vector<NodeId> user_list_;      // of the graph as it is during one search; empty until asked
  std::vector<bool> is_output_;                // nodes a graph output reads, during one search
  std::vector<Loop> loops_;                    // found by the last search
  std::vector<std::vector<NodeId>> orders_;    // of the contexts, between prepare() and search_prepared()
  std::vector<bool> outside_like_;             // entry markers: outside inputs of their loop's body
  mutable Where where_;                        // check()'s scratch: all kNowhere between checks
};

}  // namespace spool::roll::detail
