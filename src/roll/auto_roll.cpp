// auto_roll: finds repeated bodies and keeps one copy between loop markers.
//
// 0. Equal constants and iotas are merged into one node each.
// 1. Order. Nodes of one loop context (top level, or one loop's body) in a
//    stable topological order, sources left out (they are never part of a
//    body: a body reads them through loop_input / loop_input_static).
// 2. Candidates. Each node gets a structural signature (op, attribute, type,
//    the views it reads through, and for source inputs their op and type but
//    not their name). Prefix hashes over the signature sequence compare
//    windows in O(1); a run of positions where window i equals window i+P
//    marks N >= 2 adjacent occurrences of a period-P body.
// 3. Exact check of a candidate: the occurrences match node for node; every
//    input is internal (same position in the same occurrence), carried (the
//    same position of the previous occurrence, an outside node in the first:
//    a state slot), or outside (per iteration, or static when the same in
//    every iteration); no input comes from an occurrence further back or
//    from an outside node that itself reads an occurrence (rolling would
//    create a cycle); at least one state slot; the markers cost less than
//    the nodes removed.
// 4. Rewrite. Occurrence 0 becomes the body: its inputs are rewired to
//    markers, outside readers of any occurrence read loop_end (the last
//    state) or loop_output (a per-iteration value), occurrences 1..N-1 go.
// The best candidate (most nodes saved) is rolled and the search repeats
// until nothing rolls, so periodic patterns (a body of two alternating
// layers) and nested repeats (a repeat inside a body) roll too.
//
// Cost: the first search reads the caller's graph, with step 0 applied only
// to how it names constants and iotas; the graph returned is then built from
// the nodes that survive the first roll (a few hundred of a model's
// thousands) instead of copied whole and cut down, and later searches edit
// it in place.

#include "roll_detail.hpp"

#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <boost/container_hash/hash.hpp>
#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <memory>
#include <optional>
#include <span>

namespace spool::roll {
namespace {

using namespace detail;

// A running 64-bit hash of words: a multiply and a shift per word, a few
// instructions where boost::hash_combine over every dimension and view
// step was most of a search. A shape or a view step goes in as one word, a
// polynomial in its values (mod 2^64; distinct dimension lists of realistic
// sizes give distinct words). Signatures only need equal nodes to hash
// equal and unequal ones to collide rarely.
struct Hasher {
  static constexpr uint64_t kBase = 0x100000001b3ULL;
  uint64_t h = 0x243f6a8885a308d3ULL;
  void add(uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  static uint64_t fold(uint64_t acc, const Shape& values) {
    const size_t n = values.size();
    const int64_t* v = values.data();
    acc = acc * kBase + n;
    for (size_t i = 0; i < n; ++i) acc = acc * kBase + static_cast<uint64_t>(v[i]);
    return acc;
  }
  void add(DType dtype, const Shape& shape) { add(fold(static_cast<uint64_t>(dtype), shape)); }
  void add(const View& view) {
    for (const ViewStep& step : view.steps())
      add(fold(fold(fold(static_cast<uint64_t>(step.kind), step.a), step.b), step.c) * kBase +
          std::bit_cast<uint64_t>(step.value));
    add(view.steps().size());
  }
};

// Exactly Shape's and View's operator== (a view step's value bit for bit),
// written out: the exact check compares every input view of every
// occurrence, and the library comparisons cost several times this.
bool same_shape(const Shape& x, const Shape& y) {
  const size_t n = x.size();
  if (n != y.size()) return false;
  const int64_t* a = x.data();
  const int64_t* b = y.data();
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

bool same_view(const View& x, const View& y) {
  const std::vector<ViewStep>& a = x.steps();
  const std::vector<ViewStep>& b = y.steps();
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || !same_shape(a[i].a, b[i].a) || !same_shape(a[i].b, b[i].b) ||
        !same_shape(a[i].c, b[i].c) || std::bit_cast<uint64_t>(a[i].value) != std::bit_cast<uint64_t>(b[i].value))
      return false;
  return true;
}

// Where each node of a candidate's occurrences sits, by node id:
// (occurrence, position), or kNowhere.
using Where = std::vector<std::pair<size_t, size_t>>;
constexpr size_t kNowhere = SIZE_MAX;

// Periods worth scanning. If period-P windows repeat, every signature in a
// window reappears exactly P positions later; for a signature that occurs
// c times per window, that is its c-th next occurrence. Taking, for every
// signature, the gaps to its next kMaxPerWindow occurrences therefore finds
// every period whose windows hold some signature at most that often (a
// transformer layer has many that occur once), without scanning all n/2.
std::vector<size_t> candidate_periods(const std::vector<size_t>& sig) {
  constexpr size_t kMaxPerWindow = 16;
  const size_t n = sig.size();
  // next[i]: the next position holding sig[i] (n: none), through an
  // open-addressing table of the last position seen per signature, filled
  // from the back.
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  std::vector<std::pair<size_t, size_t>> last(slots, {0, n});  // (signature, position); position n: empty
  // None is 2n: its gap from any position is over n / 2, which ends a walk.
  std::vector<size_t> next(n, 2 * n);
  for (size_t i = n; i-- > 0;) {
    size_t h = (sig[i] ^ (sig[i] >> 29)) & (slots - 1);
    while (last[h].second != n && last[h].first != sig[i]) h = (h + 1) & (slots - 1);
    if (last[h].second != n) next[i] = last[h].second;
    last[h] = {sig[i], i};
  }
  std::vector<uint8_t> wanted(n / 2 + 1, 0);
  auto walk_from = [&](size_t a) {
    size_t b = next[a];
    for (size_t k = 0; k < kMaxPerWindow; ++k, b = next[b]) {
      const size_t gap = b - a;
      if (gap * 2 > n) break;  // later occurrences are further still
      wanted[gap] = 1;
    }
  };
  // By signature, from its first position: where its occurrences are evenly
  // spaced (a signature once per layer of a layer stack), every walk gives
  // multiples of the spacing that the first walk gives too.
  std::vector<uint8_t> has_previous(n, 0);
  for (size_t a = 0; a < n; ++a)
    if (next[a] < n) has_previous[next[a]] = 1;
  for (size_t first = 0; first < n; ++first) {
    if (has_previous[first] || next[first] >= n) continue;
    const size_t spacing = next[first] - first;
    size_t a = first;
    while (next[a] < n && next[a] - a == spacing) a = next[a];
    if (next[a] >= n) {
      walk_from(first);
    } else {
      for (a = first; a < n; a = next[a]) walk_from(a);
    }
  }
  std::vector<size_t> periods;
  for (size_t p = 1; p < wanted.size(); ++p)
    if (wanted[p]) periods.push_back(p);
  return periods;
}

// Orders at least this long are signed, and candidates covering at least
// this many nodes compared, on two threads.
constexpr size_t kParallelNodes = 1024;

// f(lo, mid) and f(mid, hi) at once, on two threads.
template <typename F>
void in_two_halves(size_t lo, size_t hi, const F& f) {
  const size_t mid = lo + (hi - lo) / 2;
  tbb::parallel_invoke([&] { f(lo, mid); }, [&] { f(mid, hi); });
}

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
  std::optional<Found> search_prepared() {
    std::optional<Found> best;
    for (std::vector<NodeId>& order : orders_) {
      std::optional<Candidate> c = best_candidate(order);
      if (c && (!best || c->saving > best->candidate.saving)) best = Found{std::move(order), std::move(*c)};
    }
    orders_.clear();
    return best;
  }

  // Rolls the best candidate of the searched graph, which must be `g`, with
  // `beside(g)` run during the search if given; false if nothing rolls.
  bool roll_once(Graph& g, int64_t loop_id, RollReport& report, const std::function<void(const Graph&)>& beside) {
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
  // The node table, whether the graph has markers, and the nodes graph
  // outputs read.
  void index_nodes() {
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
  std::span<const NodeId> users(NodeId id) const {
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
  std::vector<std::vector<NodeId>> context_orders() {
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

  std::optional<Candidate> best_candidate(const std::vector<NodeId>& order) const {
    const size_t n = order.size();
    if (n < 2) return std::nullopt;
    // A model's first search signs a few thousand nodes: in two halves at
    // once (each signature reads only its node and its producers).
    std::vector<size_t> sig(n);
    auto sign = [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) sig[i] = signature(order[i]);
    };
    if (n >= kParallelNodes)
      in_two_halves(0, n, sign);
    else
      sign(0, n);
    // Prefix hashes: window(i, P) = sum sig[i+j] * B^(P-1-j), mod 2^64.
    const uint64_t base = 0x100000001b3ULL;
    std::vector<uint64_t> prefix, power;
    prefix.reserve(n + 1);
    power.reserve(n + 1);
    prefix.push_back(0);
    power.push_back(1);
    for (size_t i = 0; i < n; ++i) {
      prefix.push_back(prefix[i] * base + sig[i]);
      power.push_back(power[i] * base);
    }
    auto window = [&](size_t i, size_t p) { return prefix[i + p] - prefix[i] * power[p]; };

    // Maximal runs of equal adjacent windows, for every period.
    struct Run {
      size_t start, period, count;
      size_t bound() const { return (count - 1) * period; }  // nodes it could remove
    };
    std::vector<Run> runs;
    for (const size_t period : candidate_periods(sig)) {
      // Window i equals window i + period only if sig[j] == sig[j + period]
      // for every j in [i, i + period) (equal windows with a different
      // signature would be a 64-bit hash collision). So a start is tested
      // from the back of its window: a mismatch at j rules out every start
      // up to j, and the scan jumps past it, O(n / period) probes where
      // matches are rare instead of one per position. [known_lo, known_hi]:
      // positions already seen to match.
      size_t i = 0;
      size_t known_lo = 1, known_hi = 0;  // empty
      while (i + 2 * period <= n) {
        const size_t last = i + period - 1;
        const size_t stop = known_lo <= i && i <= known_hi + 1 ? std::max(i, known_hi + 1) : i;
        size_t j = last + 1;
        while (j-- > stop)
          if (sig[j] != sig[j + period]) break;
        if (j + 1 > stop) {  // a mismatch at j
          if (j < last) {
            known_lo = j + 1;
            known_hi = last;
          }
          i = j + 1;
          continue;
        }
        if (stop > i) {
          known_hi = std::max(known_hi, last);
        } else {
          known_lo = i, known_hi = last;
        }
        if (window(i, period) != window(i + period, period)) {
          ++i;
          continue;
        }
        size_t count = 2;
        while (i + (count + 1) * period <= n &&
               window(i + (count - 1) * period, period) == window(i + count * period, period))
          ++count;
        runs.push_back({i, period, count});
        i += (count - 1) * period;
      }
    }
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

  // The exact check of occurrences order[start + k*period + j].
  std::optional<Candidate> check(const std::vector<NodeId>& order, size_t start, size_t period, size_t count) const {
    // Node-for-node equality first: it is cheap, and it is what rejects most
    // candidates (windows whose hashes agree but whose nodes differ). A
    // model's layers (a thousand nodes or more) are compared on two threads,
    // each taking half of the occurrences.
    auto equal_to_first = [&](size_t k_lo, size_t k_hi) {
      for (size_t j = 0; j < period; ++j) {
        const Node& first = node(order[start + j]);
        for (size_t k = k_lo; k < k_hi; ++k) {
          const Node& other = node(order[start + k * period + j]);
          if (other.op != first.op || other.dtype != first.dtype || !same_shape(other.shape, first.shape) ||
              other.inputs.size() != first.inputs.size() || other.attr != first.attr)
            return false;
          for (size_t i = 0; i < first.inputs.size(); ++i)
            if (!same_view(other.inputs[i].view, first.inputs[i].view)) return false;
        }
      }
      return true;
    };
    if (period * count >= kParallelNodes && count >= 3) {
      std::atomic<bool> differ{false};
      in_two_halves(1, count, [&](size_t lo, size_t hi) {
        if (!equal_to_first(lo, hi)) differ = true;
      });
      if (differ) return std::nullopt;
    } else if (!equal_to_first(1, count)) {
      return std::nullopt;
    }

    // node -> (occurrence, position): the search's scratch map, marked for
    // this check and cleared on every way out (one check per candidate
    // phase and count, so a map per check would cost more than the check).
    Where& where = where_;
    for (size_t k = 0; k < count; ++k)
      for (size_t j = 0; j < period; ++j) where[order[start + k * period + j].value] = {k, j};
    struct Unmark {
      Where& where;
      const NodeId* first;
      size_t size;
      ~Unmark() {
        for (size_t i = 0; i < size; ++i) where[first[i].value] = {kNowhere, 0};
      }
    } unmark{where, order.data() + start, count * period};
    auto at = [&](size_t k, size_t j) { return order[start + k * period + j]; };

    // Computed nodes read from outside the occurrences; checked below for
    // reading an occurrence themselves (sources read nothing).
    std::vector<NodeId> outside_reads;

    Candidate cand{start, period, count, 0, {}, {}, 0, {}, {}};
    cand.plans.resize(period);
    std::vector<uint8_t> is_slot(period, 0);  // positions whose value is carried
    size_t slots = 0;
    for (size_t j = 0; j < period; ++j) {
      const Node& first = node(at(0, j));
      for (size_t i = 0; i < first.inputs.size(); ++i) {
        InputPlan plan;
        for (size_t k = 0; k < count; ++k) {
          const Edge& e = node(at(k, j)).inputs[i];
          const auto it = &where[e.src.value];
          InputPlan::Kind kind;
          size_t position = 0;
          if (it->first == kNowhere) {
            if (!is_source(node(e.src).op)) outside_reads.push_back(e.src);
            kind = InputPlan::PerIteration;
          } else if (it->first == k) {
            kind = InputPlan::Internal;
            position = it->second;
          } else if (k > 0 && it->first == k - 1) {
            kind = InputPlan::Carried;
            position = it->second;
          } else {
            return std::nullopt;  // from another occurrence: not a loop
          }
          if (k == 0) {
            plan.kind = kind;
            plan.position = position;
          } else if (k == 1 && plan.kind == InputPlan::PerIteration && kind == InputPlan::Carried) {
            plan.kind = InputPlan::Carried;  // outside in occurrence 0, the previous occurrence after: a slot
            plan.position = position;
          } else if (kind != plan.kind || position != plan.position) {
            return std::nullopt;
          }
          if (kind == InputPlan::PerIteration) {
            if (plan.sources.empty()) plan.sources.reserve(count);
            plan.sources.push_back(canonical(e.src));
          }
        }
        if (plan.kind == InputPlan::Carried) {
          // The init (occurrence 0's outside input) must have the state's type.
          const NodeId init = plan.sources.front();
          const Node& state = node(at(0, plan.position));
          if (node(init).dtype != state.dtype || node(init).shape != state.shape) return std::nullopt;
          slots += !is_slot[plan.position];
          is_slot[plan.position] = 1;
        } else if (plan.kind == InputPlan::PerIteration) {
          bool all_same = true;
          for (const NodeId s : plan.sources) all_same &= same_source(s, plan.sources.front());
          if (all_same) {
            plan.kind = InputPlan::Static;
            plan.sources.resize(1);
          }
        }
        cand.plans[j].push_back(std::move(plan));
      }
    }
    if (slots == 0) return std::nullopt;  // no loop-carried state: independent repeats, not a loop

    // Nodes downstream of any occurrence (excluding occurrences): an outside
    // input from there would close a cycle once the occurrences merge. Such
    // a node comes after the first occurrence's first node in topological
    // order, so outside inputs that all come before it need no walk (the
    // state's init and the values a model computes once before its layers).
    const uint32_t first_position = topo_position_[at(0, 0).value];
    const bool all_before = std::all_of(outside_reads.begin(), outside_reads.end(),
                                        [&](NodeId id) { return topo_position_[id.value] < first_position; });
    if (!all_before) {
      std::vector<bool> downstream(g_->id_bound(), false);
      std::vector<NodeId> stack;
      for (size_t k = 0; k < count; ++k)
        for (size_t j = 0; j < period; ++j) stack.push_back(at(k, j));
      while (!stack.empty()) {
        const NodeId cur = stack.back();
        stack.pop_back();
        for (const NodeId u : users(cur))
          if (where[u.value].first == kNowhere && !downstream[u.value]) {
            downstream[u.value] = true;
            stack.push_back(u);
          }
      }
      for (const NodeId id : outside_reads)
        if (downstream[id.value]) return std::nullopt;  // would form a cycle
    }
    for (size_t j = 0; j < period; ++j)
      if (is_slot[j]) cand.slot_positions.push_back(j);

    // One slot position can be carried into several inputs; each position
    // carried is one loop_start/loop_end pair. A slot's inits must agree.
    std::vector<NodeId> init_of(period);
    for (size_t j = 0; j < period; ++j)
      for (const InputPlan& p : cand.plans[j])
        if (p.kind == InputPlan::Carried) {
          NodeId& init = init_of[p.position];
          if (!init.valid())
            init = p.sources.front();
          else if (init != p.sources.front())
            return std::nullopt;
        }

    // Cost of the markers: two per slot, one per distinct entry, one per
    // (position, iteration) read outside.
    std::vector<std::vector<size_t>> entries;  // distinct (kind, sources by key)
    for (size_t j = 0; j < period; ++j)
      for (const InputPlan& p : cand.plans[j])
        if (p.kind == InputPlan::Static || p.kind == InputPlan::PerIteration) {
          std::vector<size_t>& key = entries.emplace_back();
          key.reserve(p.sources.size() + 1);
          key.push_back(static_cast<size_t>(p.kind));
          for (const NodeId s : p.sources) key.push_back(source_key(*g_, s));
        }
    std::sort(entries.begin(), entries.end());
    const size_t distinct_entries = static_cast<size_t>(std::unique(entries.begin(), entries.end()) - entries.begin());
    // The occurrence nodes read outside the occurrences (by a graph output,
    // or by a node after the first occurrence's first node in topological
    // order, as every reader of an occurrence is), and those reading edges.
    cand.read_outside.assign(count * period, 0);
    for (size_t p = first_position; p < topo_.size(); ++p) {
      const NodeId u = topo_[p];
      if (where[u.value].first != kNowhere) continue;
      const Node& user = node(u);
      for (size_t i = 0; i < user.inputs.size(); ++i) {
        const auto& [k, j] = where[user.inputs[i].src.value];
        if (k == kNowhere) continue;
        cand.read_outside[k * period + j] = 1;
        cand.outside_uses.push_back({static_cast<uint32_t>(k * period + j), u, static_cast<uint32_t>(i)});
      }
    }
    std::stable_sort(cand.outside_uses.begin(), cand.outside_uses.end(),
                     [](const OutsideUse& a, const OutsideUse& b) { return a.position < b.position; });
    int64_t outputs = 0;
    for (size_t k = 0; k < count; ++k)
      for (size_t j = 0; j < period; ++j) {
        uint8_t& outside = cand.read_outside[k * period + j];
        outside |= static_cast<uint8_t>(is_output_[at(k, j).value]);
        if (outside && !(k + 1 == count && is_slot[j])) ++outputs;
      }
    const int64_t removed = static_cast<int64_t>((count - 1) * period);
    const int64_t added = static_cast<int64_t>(2 * slots + distinct_entries) + outputs;
    cand.saving = removed - added;
    cand.markers = static_cast<size_t>(added);
    if (cand.saving <= 0) return std::nullopt;
    return cand;
  }

  NodeId canonical(NodeId id) const { return canonical_ ? (*canonical_)[id.value] : id; }
  // The searched graph's nodes, through the table index_nodes() fills (the
  // graph does not change during a search).
  const Node& node(NodeId id) const { return *nodes_[id.value]; }
  bool same_source(NodeId a, NodeId b) const { return a == b || same_value(node(a), node(b)); }

  size_t signature(NodeId id) const {
    const Node& n = node(id);
    Hasher h;
    h.add(static_cast<uint64_t>(n.op));
    if (!is_loop_marker(n.op)) h.add(hash_attr(n.attr));
    h.add(n.dtype, n.shape);
    // Inputs by view and producer type only: the same position of different
    // occurrences may read a source in one and a computed node in another
    // (the first layer reads the model input, the others the previous layer).
    for (const Edge& e : n.inputs) {
      h.add(e.view);
      const Node& src = node(e.src);
      h.add(src.dtype, src.shape);
    }
    h.add(n.inputs.size());
    return h.h;
  }

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

void Roller::rewrite(Graph& g, const Graph& before, const Found& found, int64_t loop_id,
                     const std::vector<NodeId>* id_in_g) {
  const std::vector<NodeId>& order = found.order;
  const Candidate& c = found.candidate;
  const bool in_place = &g == &before;
  SPOOL_ASSERT(in_place == !id_in_g, "rewrite: a copy needs its id map, the graph itself none");
  // Ids of `before` (the candidate's, the search's) as ids of g.
  auto in_g = [&](NodeId id) { return id_in_g ? (*id_in_g)[id.value] : id; };
  // A marker has the type of its first input, read whole. check() made sure
  // a slot's init has its state's type, and the sources of one loop_input
  // are read at one position of every occurrence; should they differ in
  // type all the same, add() reports it.
  auto add_marker = [&](Op op, EdgeList inputs, LoopAttr attr) {
    const Node& first = g.node(inputs.front().src);
    bool same = true;
    for (const Edge& e : inputs) same &= g.node(e.src).dtype == first.dtype && g.node(e.src).shape == first.shape;
    if (!same) return g.add(op, std::vector<Edge>(inputs.begin(), inputs.end()), attr);
    TensorType type{first.dtype, first.shape};
    return g.add_known(op, std::move(inputs), attr, std::move(type));
  };
  auto at = [&](size_t k, size_t j) { return order[c.start + k * c.period + j]; };
  const int64_t trips = static_cast<int64_t>(c.count);
  g.reserve(g.id_bound() + c.markers);

  // Entry markers, one per slot and per distinct outside input.
  std::map<size_t, NodeId> start_of;  // slot position -> loop_start
  std::map<std::vector<uint32_t>, NodeId> entry_of;
  int64_t slot_index = 0;
  for (size_t j = 0; j < c.period; ++j) {
    for (size_t i = 0; i < c.plans[j].size(); ++i) {
      const InputPlan& plan = c.plans[j][i];
      NodeId marker;
      switch (plan.kind) {
        case InputPlan::Internal:
          continue;
        case InputPlan::Carried: {
          auto it = start_of.find(plan.position);
          if (it == start_of.end())
            it = start_of
                     .emplace(plan.position, add_marker(Op::LoopStart, {Edge{in_g(plan.sources.front()), {}}},
                                                        LoopAttr{loop_id, trips, slot_index++}))
                     .first;
          marker = it->second;
          break;
        }
        case InputPlan::Static:
        case InputPlan::PerIteration: {
          std::vector<uint32_t> key{static_cast<uint32_t>(plan.kind)};
          for (const NodeId s : plan.sources) key.push_back(s.value);
          auto it = entry_of.find(key);
          if (it == entry_of.end()) {
            EdgeList sources;
            sources.reserve(plan.sources.size());
            for (const NodeId s : plan.sources) sources.push_back(Edge{in_g(s), {}});
            const Op op = plan.kind == InputPlan::Static ? Op::LoopInputStatic : Op::LoopInput;
            it = entry_of.emplace(key, add_marker(op, std::move(sources), LoopAttr{loop_id, trips, 0})).first;
          }
          marker = it->second;
          break;
        }
      }
      g.set_input(in_g(at(0, j)), i, Edge{marker, g.node(in_g(at(0, j))).inputs[i].view});
    }
  }

  // Exit markers, and outside readers rewired to them.
  std::map<size_t, NodeId> end_of;
  for (const auto& [position, start] : start_of)
    end_of[position] = add_marker(Op::LoopEnd, {Edge{in_g(at(0, position)), {}}, Edge{start, {}}},
                                  LoopAttr{loop_id, trips, std::get<LoopAttr>(g.node(start).attr).index});
  // The outside uses and is_output_ describe the graph from before the
  // rewrite: an output is rewired only while its own node is.
  auto use = c.outside_uses.begin();
  for (size_t k = 0; k < c.count; ++k) {
    for (size_t j = 0; j < c.period; ++j) {
      if (!c.read_outside[k * c.period + j]) continue;
      const NodeId node = at(k, j);
      NodeId exit;
      if (k + 1 == c.count && end_of.count(j))
        exit = end_of.at(j);
      else
        exit = add_marker(Op::LoopOutput, {Edge{in_g(at(0, j)), {}}}, LoopAttr{loop_id, trips, static_cast<int64_t>(k)});
      // Rewire outside readers only (not the occurrences, not the markers).
      const uint32_t position = static_cast<uint32_t>(k * c.period + j);
      while (use != c.outside_uses.end() && use->position < position) ++use;
      for (; use != c.outside_uses.end() && use->position == position; ++use)
        g.set_input(in_g(use->user), use->input, Edge{exit, g.node(in_g(use->user)).inputs[use->input].view});
      if (is_output_[node.value])
        for (size_t o = 0; o < g.outputs().size(); ++o)
          if (before.outputs()[o].edge.src == node) g.set_output(o, Edge{exit, g.outputs()[o].edge.view});
    }
  }

  // The other occurrences go, readers before producers, and with them the
  // constants and iotas only they read (occurrence 0's copies serve all).
  // A copy (the first roll) holds no such source: it reads every constant
  // and iota through its canonical node, and each source an occurrence
  // k >= 1 reads is read after the rewrite by occurrence 0 (a static input:
  // the same canonical node) or by the loop_input of its position.
  // In place, g is `before`: its ids, no canonical renaming.
  if (!in_place) return;
  std::vector<uint8_t> is_read(g.id_bound(), 0);
  std::vector<NodeId> read_sources;
  for (size_t k = 1; k < c.count; ++k)
    for (size_t j = 0; j < c.period; ++j)
      for (const Edge& e : g.node(at(k, j)).inputs)
        if (is_value_source(g.node(e.src)) && !is_read[e.src.value]) {
          read_sources.push_back(e.src);
          is_read[e.src.value] = 1;
        }
  for (size_t k = c.count; k-- > 1;)
    for (size_t j = c.period; j-- > 0;) g.remove(at(k, j));
  for (const NodeId id : read_sources)
    if (g.use_count(id) == 0) g.remove(id);
}

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
