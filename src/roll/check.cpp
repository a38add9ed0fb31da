// Step 3 of auto_roll (see auto_roll.cpp): the exact check of a candidate.
//
// Equal signatures only say that windows look alike; the check proves that
// the occurrences are one body run once per iteration, wired the same way
// each time, and prices the markers that rolling them would add. It runs
// once per candidate phase and count: the cheap node-for-node comparison,
// which rejects most candidates, comes first.

#include "roller.hpp"

#include <algorithm>
#include <atomic>
#include <bit>

namespace spool::roll::detail {
namespace {

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

// One slot position can be carried into several inputs; each position
// carried is one loop_start/loop_end pair. A slot's inits must agree.
bool inits_agree(const Candidate& cand) {
  std::vector<NodeId> init_of(cand.period);
  for (size_t j = 0; j < cand.period; ++j)
    for (const InputPlan& p : cand.plans[j])
      if (p.kind == InputPlan::Carried) {
        NodeId& init = init_of[p.position];
        if (!init.valid())
          init = p.sources.front();
        else if (init != p.sources.front())
          return false;
      }
  return true;
}

}  // namespace

std::optional<Candidate> Roller::check(const std::vector<NodeId>& order, size_t start, size_t period,
                                       size_t count) const {
  const Occurrences occ{order, start, period, count};
  if (!occurrences_equal(occ)) return std::nullopt;

  // node -> (occurrence, position): the search's scratch map, marked for
  // this check and cleared on every way out (one check per candidate
  // phase and count, so a map per check would cost more than the check).
  Where& where = where_;
  for (size_t k = 0; k < count; ++k)
    for (size_t j = 0; j < period; ++j) where[occ.at(k, j).value] = {k, j};
  struct Unmark {
    Where& where;
    const NodeId* first;
    size_t size;
    ~Unmark() {
      for (size_t i = 0; i < size; ++i) where[first[i].value] = {kNowhere, 0};
    }
  } unmark{where, order.data() + start, count * period};

  // Computed nodes read from outside the occurrences; checked below for
  // reading an occurrence themselves (sources read nothing).
  std::vector<NodeId> outside_reads;

  Candidate cand{start, period, count, 0, {}, {}, 0, {}, {}};
  cand.plans.resize(period);
  std::vector<uint8_t> is_slot(period, 0);  // positions whose value is carried
  size_t slots = 0;
  for (size_t j = 0; j < period; ++j) {
    const size_t inputs = node(occ.at(0, j)).inputs.size();
    for (size_t i = 0; i < inputs; ++i) {
      std::optional<InputPlan> plan = plan_input(occ, j, i, outside_reads);
      if (!plan) return std::nullopt;
      if (plan->kind == InputPlan::Carried) {
        slots += !is_slot[plan->position];
        is_slot[plan->position] = 1;
      }
      cand.plans[j].push_back(std::move(*plan));
    }
  }
  if (slots == 0) return std::nullopt;  // no loop-carried state: independent repeats, not a loop
  if (reads_downstream(occ, outside_reads)) return std::nullopt;  // would form a cycle
  for (size_t j = 0; j < period; ++j)
    if (is_slot[j]) cand.slot_positions.push_back(j);
  if (!inits_agree(cand)) return std::nullopt;

  // Cost of the markers: two per slot, one per distinct entry, one per
  // (position, iteration) read outside.
  const size_t entries = distinct_entries(cand);
  find_outside_uses(occ, cand);
  const int64_t outputs = count_loop_outputs(occ, cand, is_slot);
  const int64_t removed = static_cast<int64_t>((count - 1) * period);
  const int64_t added = static_cast<int64_t>(2 * slots + entries) + outputs;
  cand.saving = removed - added;
  cand.markers = static_cast<size_t>(added);
  if (cand.saving <= 0) return std::nullopt;
  return cand;
}

// Node-for-node equality first: it is cheap, and it is what rejects most
// candidates (windows whose hashes agree but whose nodes differ). A
// model's layers (a thousand nodes or more) are compared on two threads,
// each taking half of the occurrences.
bool Roller::occurrences_equal(const Occurrences& occ) const {
  auto equal_to_first = [&](size_t k_lo, size_t k_hi) {
    for (size_t j = 0; j < occ.period; ++j) {
      const Node& first = node(occ.at(0, j));
      for (size_t k = k_lo; k < k_hi; ++k) {
        const Node& other = node(occ.at(k, j));
        if (other.op != first.op || other.dtype != first.dtype || !same_shape(other.shape, first.shape) ||
            other.inputs.size() != first.inputs.size() || other.attr != first.attr)
          return false;
        for (size_t i = 0; i < first.inputs.size(); ++i)
          if (!same_view(other.inputs[i].view, first.inputs[i].view)) return false;
      }
    }
    return true;
  };
  if (occ.period * occ.count >= kParallelNodes && occ.count >= 3) {
    std::atomic<bool> differ{false};
    in_two_halves(1, occ.count, [&](size_t lo, size_t hi) {
      if (!equal_to_first(lo, hi)) differ = true;
    });
    return !differ;
  }
  return equal_to_first(1, occ.count);
}

// How input `i` of position `j` is wired, the same in every occurrence;
// nullopt where the occurrences disagree, or one reads an occurrence other
// than its own or the previous one (not a loop). Outside inputs that are
// computed nodes go to `outside_reads`.
std::optional<InputPlan> Roller::plan_input(const Occurrences& occ, size_t j, size_t i,
                                            std::vector<NodeId>& outside_reads) const {
  InputPlan plan;
  for (size_t k = 0; k < occ.count; ++k) {
    const Edge& e = node(occ.at(k, j)).inputs[i];
    const auto it = &where_[e.src.value];
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
      if (plan.sources.empty()) plan.sources.reserve(occ.count);
      plan.sources.push_back(canonical(e.src));
    }
  }
  if (plan.kind == InputPlan::Carried) {
    // The init (occurrence 0's outside input) must have the state's type.
    const NodeId init = plan.sources.front();
    const Node& state = node(occ.at(0, plan.position));
    if (node(init).dtype != state.dtype || node(init).shape != state.shape) return std::nullopt;
  } else if (plan.kind == InputPlan::PerIteration) {
    bool all_same = true;
    for (const NodeId s : plan.sources) all_same &= same_source(s, plan.sources.front());
    if (all_same) {
      plan.kind = InputPlan::Static;
      plan.sources.resize(1);
    }
  }
  return plan;
}

// Whether an outside input is downstream of an occurrence: it would close a
// cycle once the occurrences merge. Such a node comes after the first
// occurrence's first node in topological order, so outside inputs that all
// come before it need no walk (the state's init and the values a model
// computes once before its layers).
bool Roller::reads_downstream(const Occurrences& occ, const std::vector<NodeId>& outside_reads) const {
  const uint32_t first_position = topo_position_[occ.at(0, 0).value];
  const bool all_before = std::all_of(outside_reads.begin(), outside_reads.end(),
                                      [&](NodeId id) { return topo_position_[id.value] < first_position; });
  if (all_before) return false;
  // Nodes downstream of any occurrence, the occurrences excluded.
  std::vector<bool> downstream(g_->id_bound(), false);
  std::vector<NodeId> stack;
  for (size_t k = 0; k < occ.count; ++k)
    for (size_t j = 0; j < occ.period; ++j) stack.push_back(occ.at(k, j));
  while (!stack.empty()) {
    const NodeId cur = stack.back();
    stack.pop_back();
    for (const NodeId u : users(cur))
      if (where_[u.value].first == kNowhere && !downstream[u.value]) {
        downstream[u.value] = true;
        stack.push_back(u);
      }
  }
  for (const NodeId id : outside_reads)
    if (downstream[id.value]) return true;
  return false;
}

// The entry markers the rewrite adds: one per distinct (kind, sources) of
// the static and per-iteration inputs (sources compared by value).
size_t Roller::distinct_entries(const Candidate& cand) const {
  std::vector<std::vector<size_t>> entries;  // distinct (kind, sources by key)
  for (size_t j = 0; j < cand.period; ++j)
    for (const InputPlan& p : cand.plans[j])
      if (p.kind == InputPlan::Static || p.kind == InputPlan::PerIteration) {
        std::vector<size_t>& key = entries.emplace_back();
        key.reserve(p.sources.size() + 1);
        key.push_back(static_cast<size_t>(p.kind));
        for (const NodeId s : p.sources) key.push_back(source_key(*g_, s));
      }
  std::sort(entries.begin(), entries.end());
  return static_cast<size_t>(std::unique(entries.begin(), entries.end()) - entries.begin());
}

// The occurrence nodes read outside the occurrences by a node (one after
// the first occurrence's first node in topological order, as every reader
// of an occurrence is), and those reading edges, by position.
void Roller::find_outside_uses(const Occurrences& occ, Candidate& cand) const {
  const uint32_t first_position = topo_position_[occ.at(0, 0).value];
  cand.read_outside.assign(occ.count * occ.period, 0);
  for (size_t p = first_position; p < topo_.size(); ++p) {
    const NodeId u = topo_[p];
    if (where_[u.value].first != kNowhere) continue;
    const Node& user = node(u);
    for (size_t i = 0; i < user.inputs.size(); ++i) {
      const auto& [k, j] = where_[user.inputs[i].src.value];
      if (k == kNowhere) continue;
      cand.read_outside[k * occ.period + j] = 1;
      cand.outside_uses.push_back({static_cast<uint32_t>(k * occ.period + j), u, static_cast<uint32_t>(i)});
    }
  }
  std::stable_sort(cand.outside_uses.begin(), cand.outside_uses.end(),
                   [](const OutsideUse& a, const OutsideUse& b) { return a.position < b.position; });
}

// The loop_output markers the rewrite adds: one per occurrence node read
// outside (now counting graph outputs too), but for a slot's last value,
// which its loop_end carries out.
int64_t Roller::count_loop_outputs(const Occurrences& occ, Candidate& cand, const std::vector<uint8_t>& is_slot) const {
  int64_t outputs = 0;
  for (size_t k = 0; k < occ.count; ++k)
    for (size_t j = 0; j < occ.period; ++j) {
      uint8_t& outside = cand.read_outside[k * occ.period + j];
      outside |= static_cast<uint8_t>(is_output_[occ.at(k, j).value]);
      if (outside && !(k + 1 == occ.count && is_slot[j])) ++outputs;
    }
  return outputs;
}

}  // namespace spool::roll::detail
