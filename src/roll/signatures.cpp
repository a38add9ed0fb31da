// Step 2 of auto_roll (see auto_roll.cpp): structural signatures of a
// context's nodes, and the runs of equal adjacent windows of them that mark
// candidate repeats for the exact check (check.cpp).
//
// A signature hashes what a node is but not which nodes it reads, so that
// the same node of two occurrences signs alike even where one reads the
// model input and the other the previous layer.

#include "roller.hpp"

#include <algorithm>
#include <bit>

namespace spool::roll::detail {
namespace {

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

// The maximal runs of equal adjacent windows of one period.
//
// Window i equals window i + period only if sig[j] == sig[j + period] for
// every j in [i, i + period) (equal windows with a different signature would
// be a 64-bit hash collision). So a start is tested from the back of its
// window: a mismatch at j rules out every start up to j, and the scan jumps
// past it, O(n / period) probes where matches are rare instead of one per
// position.
void runs_of_period(const std::vector<size_t>& sig, const Windows& window, size_t period, std::vector<Run>& runs) {
  const size_t n = sig.size();
  size_t i = 0;
  size_t known_lo = 1, known_hi = 0;  // [known_lo, known_hi]: positions already seen to match (none yet)
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

}  // namespace

Windows::Windows(const std::vector<size_t>& sig) {
  const uint64_t base = 0x100000001b3ULL;
  const size_t n = sig.size();
  prefix_.reserve(n + 1);
  power_.reserve(n + 1);
  prefix_.push_back(0);
  power_.push_back(1);
  for (size_t i = 0; i < n; ++i) {
    prefix_.push_back(prefix_[i] * base + sig[i]);
    power_.push_back(power_[i] * base);
  }
}

std::vector<Run> repeat_runs(const std::vector<size_t>& sig, const Windows& window) {
  std::vector<Run> runs;
  for (const size_t period : candidate_periods(sig)) runs_of_period(sig, window, period, runs);
  return runs;
}

size_t Roller::signature(NodeId id) const {
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

std::vector<size_t> Roller::signatures(const std::vector<NodeId>& order) const {
  const size_t n = order.size();
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
  return sig;
}

}  // namespace spool::roll::detail
