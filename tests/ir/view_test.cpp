// Views: View::append and compose_views against the general algorithm they
// started as (every shape recomputed on each append, steps copied one by one),
// on many random views, and copies that share their steps.

#include <spool/ir/view.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <random>

using namespace spool;

namespace {

// The reference: View::append as first written, on a plain step list.
bool ref_is_identity(const ViewStep& step, const Shape& in) {
  switch (step.kind) {
    case ViewKind::Permute:
      for (size_t i = 0; i < step.a.size(); ++i)
        if (step.a[i] != static_cast<int64_t>(i)) return false;
      return true;
    case ViewKind::Reshape:
    case ViewKind::Expand: return step.a == in;
    case ViewKind::Slice:
      for (size_t i = 0; i < in.size(); ++i)
        if (step.a[i] != 0 || step.b[i] != in[i] || step.c[i] != 1) return false;
      return true;
    case ViewKind::Pad:
      for (size_t i = 0; i < in.size(); ++i)
        if (step.a[i] != 0 || step.b[i] != 0) return false;
      return true;
  }
  return false;
}

bool ref_merge(ViewStep& prev, const ViewStep& next) {
  if (prev.kind != next.kind) return false;
  switch (next.kind) {
    case ViewKind::Permute: {
      Shape perm(next.a.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = prev.a[static_cast<size_t>(next.a[i])];
      prev.a = perm;
      return true;
    }
    case ViewKind::Reshape:
    case ViewKind::Expand: prev.a = next.a; return true;
    case ViewKind::Slice:
      for (size_t i = 0; i < prev.a.size(); ++i) {
        const int64_t count = next.b[i] > next.a[i] ? (next.b[i] - next.a[i] + next.c[i] - 1) / next.c[i] : 0;
        const int64_t start = prev.a[i] + next.a[i] * prev.c[i];
        const int64_t step = prev.c[i] * next.c[i];
        prev.a[i] = start;
        prev.c[i] = step;
        prev.b[i] = count == 0 ? start : start + (count - 1) * step + 1;
      }
      return true;
    case ViewKind::Pad:
      if (std::bit_cast<uint64_t>(prev.value) != std::bit_cast<uint64_t>(next.value)) return false;
      for (size_t i = 0; i < prev.a.size(); ++i) {
        prev.a[i] += next.a[i];
        prev.b[i] += next.b[i];
      }
      return true;
  }
  return false;
}

const char* ref_kind_name(ViewKind kind) {
  switch (kind) {
    case ViewKind::Permute: return "permute";
    case ViewKind::Reshape: return "reshape";
    case ViewKind::Slice: return "slice";
    case ViewKind::Pad: return "pad";
    case ViewKind::Expand: return "expand";
  }
  return "";
}

void ref_append(std::vector<ViewStep>& steps, const ViewStep& step, const Shape& source, std::string_view op) {
  std::vector<Shape> shapes{source};
  for (const ViewStep& existing : steps)
    shapes.push_back(view_step_shape(existing, shapes.back(), ref_kind_name(existing.kind)));
  const Shape& current = shapes.back();
  view_step_shape(step, current, op);
  if (ref_is_identity(step, current)) return;
  if (!steps.empty() && ref_merge(steps.back(), step)) {
    if (ref_is_identity(steps.back(), shapes[shapes.size() - 2])) steps.pop_back();
    return;
  }
  steps.push_back(step);
}

// The message `f` throws, or nullopt.
template <typename F>
std::optional<std::string> error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Random steps that often fit, often fold into the step before, sometimes
// cancel it and sometimes do not fit at all.
struct StepMaker {
  std::mt19937_64 rng;

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng); }

  Shape shape() {
    Shape s(static_cast<size_t>(pick(0, 4)));
    for (int64_t& d : s) d = pick(1, 4);
    return s;
  }

  // `chain`: the shapes the view reads so far (chain.back() is its output);
  // `last`: its last step, if any.
  ViewStep step(const std::vector<Shape>& chain, const ViewStep* last) {
    const Shape& in = chain.back();
    const size_t rank = in.size();
    const auto kind = last && coin(0.5) ? last->kind : static_cast<ViewKind>(pick(0, 4));
    const bool bad = coin(0.05);
    switch (kind) {
      case ViewKind::Permute: {
        if (last && last->kind == ViewKind::Permute && last->a.size() == rank && coin(0.3)) {
          Shape inverse(rank);  // cancels the last permute
          for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(last->a[i])] = static_cast<int64_t>(i);
          return permute_step(inverse);
        }
        Shape perm(rank);
        for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
        if (!coin(0.2)) std::shuffle(perm.begin(), perm.end(), rng);
        if (bad && rank > 1) perm[0] = perm[1];
        return permute_step(perm);
      }
      case ViewKind::Reshape: {
        // Back to what the last step read (cancelling a reshape), or to the source.
        if (chain.size() >= 2 && coin(0.3)) return reshape_step(coin(0.5) ? chain[chain.size() - 2] : chain[0]);
        if (coin(0.2)) return reshape_step(in);
        // A random factorisation of the element count.
        int64_t n = num_elements(in);
        Shape out;
        for (int64_t d : {2, 3, 2, 3})
          if (n % d == 0 && coin(0.5)) {
            out.push_back(d);
            n /= d;
          }
        out.push_back(n);
        if (coin(0.3)) out.insert(out.begin() + pick(0, static_cast<int64_t>(out.size())), 1);
        std::shuffle(out.begin(), out.end(), rng);
        if (bad) out.back() += 1;
        return reshape_step(out);
      }
      case ViewKind::Slice: {
        Shape start(rank), stop(rank), step(rank);
        const bool full = coin(0.2);
        for (size_t i = 0; i < rank; ++i) {
          start[i] = full ? 0 : pick(0, in[i]);
          stop[i] = full ? in[i] : pick(start[i], in[i]);
          step[i] = full ? 1 : pick(1, 3);
        }
        if (bad && rank > 0) {
          if (coin(0.5))
            stop[0] = in[0] + 1;
          else
            step[0] = 0;
        }
        return slice_step(start, stop, step);
      }
      case ViewKind::Pad: {
        Shape before(rank), after(rank);
        const bool none = coin(0.2);
        for (size_t i = 0; i < rank; ++i) {
          before[i] = none ? 0 : pick(0, 2);
          after[i] = none ? 0 : pick(0, 2);
        }
        if (bad && rank > 0) before[0] = -1;
        const double values[] = {0.0, -0.0, 1.0};
        const double value = last && last->kind == ViewKind::Pad && coin(0.6) ? last->value : values[pick(0, 2)];
        return pad_step(before, after, value);
      }
      case ViewKind::Expand: {
        Shape out = in;
        for (int64_t& d : out)
          if (d == 1) d = pick(1, 3);
        if (bad && rank > 0) out[0] += 1;
        return expand_step(out);
      }
    }
    return reshape_step(in);
  }

  // A random view reading `source`, built by append and checked step by step
  // against the reference.
  View view(const Shape& source, size_t max_steps) {
    View v;
    std::vector<ViewStep> ref;
    std::vector<Shape> chain{source};
    const size_t n = static_cast<size_t>(pick(0, static_cast<int64_t>(max_steps)));
    for (size_t i = 0; i < n; ++i) {
      const ViewStep s = step(chain, ref.empty() ? nullptr : &ref.back());
      const std::optional<std::string> expected = error_of([&] { ref_append(ref, s, source, "test"); });
      const View before = v;
      const std::optional<std::string> got = error_of([&] { v.append(s, source, "test"); });
      REQUIRE(got == expected);
      REQUIRE(v.steps() == ref);
      REQUIRE(v.is_identity() == ref.empty());
      if (got) REQUIRE(v == before);
      // A slice of an empty slice merges into one that starts past the end
      // of its axis: no step fits after it.
      chain.clear();
      chain.push_back(source);
      if (error_of([&] {
            for (const ViewStep& r : ref) chain.push_back(view_step_shape(r, chain.back(), "test"));
          }))
        break;
    }
    return v;
  }
};

}  // namespace

TEST_CASE("View::append matches the general algorithm on random views") {
  StepMaker maker{std::mt19937_64{42}};
  for (int i = 0; i < 3000; ++i) {
    const Shape source = maker.shape();
    const View v = maker.view(source, 6);
    Shape expected = source;
    const std::optional<std::string> error = error_of([&] {
      for (const ViewStep& step : v.steps()) expected = view_step_shape(step, expected, ref_kind_name(step.kind));
    });
    Shape got;
    CHECK(error_of([&] { got = v.apply(source); }) == error);
    if (!error) CHECK(got == expected);
  }
}

TEST_CASE("compose_views matches appending the outer steps one by one") {
  StepMaker maker{std::mt19937_64{7}};
  int fast = 0, general = 0, errors = 0;
  for (int i = 0; i < 6000; ++i) {
    const Shape source = maker.shape();
    const View inner = maker.coin(0.3) ? View{} : maker.view(source, 4);
    // Usually the outer view reads what the inner one produces; sometimes it
    // was made for another shape (of the same element count, or not).
    Shape middle;
    if (error_of([&] { middle = inner.apply(source); })) continue;
    if (maker.coin(0.1)) middle = maker.coin(0.5) ? Shape{num_elements(middle)} : maker.shape();
    const View outer = maker.view(middle, 4);
    std::vector<ViewStep> ref = inner.steps();
    const std::optional<std::string> expected = error_of([&] {
      for (const ViewStep& step : outer.steps()) ref_append(ref, step, source, "view");
    });
    View composed;
    const std::optional<std::string> got = error_of([&] { composed = compose_views(inner, outer, source); });
    INFO(got.value_or("no error"), " / ", expected.value_or("no error"), " inner ", inner.str(), " outer ", outer.str(),
         " source ", shape_str(source));
    REQUIRE(got == expected);
    if (got) {
      ++errors;
      continue;
    }
    REQUIRE(composed.steps() == ref);
    REQUIRE(composed.is_identity() == ref.empty());
    (inner.is_identity() && composed == outer ? fast : general) += 1;
  }
  // Every path was taken.
  CHECK(fast > 100);
  CHECK(general > 100);
  CHECK(errors > 10);
}

TEST_CASE("copies of a view share its steps until one of them is appended to") {
  const Shape source{2, 3, 4};
  View a;
  a.append(permute_step({1, 2, 0}), source, "test");
  a.append(slice_step({0, 0, 0}, {3, 4, 1}, {1, 2, 1}), source, "test");
  const View b = a;
  CHECK(&a.steps() == &b.steps());
  View c = a;
  c.append(permute_step({2, 1, 0}), source, "test");  // a new step: c gets its own steps
  CHECK(c.steps().size() == 3);
  CHECK(a.steps().size() == 2);
  CHECK(a == b);
  View d = a;
  d.append(slice_step({0, 0, 0}, {3, 1, 1}, {1, 1, 1}), source, "test");  // merges into d's own copy
  REQUIRE(d.steps().size() == 2);
  CHECK(d.steps()[1].b == Shape{3, 1, 1});
  CHECK(a.steps()[1].b == Shape{3, 4, 1});
  CHECK(a.str() == "permute(1,2,0) slice(0:3:1,0:4:2,0:1:1)");
  View e = b;
  e.append(slice_step({0, 0, 0}, {2, 2, 1}, {1, 1, 1}), source, "test");
  e.append(permute_step({2, 0, 1}), source, "test");  // does not fold into the slice
  CHECK(e.steps().size() == 3);
  // A view appended back to the identity equals a default one.
  View f;
  f.append(reshape_step({6, 4}), source, "test");
  const View g = f;
  f.append(reshape_step({2, 3, 4}), source, "test");
  CHECK(f.is_identity());
  CHECK(f == View{});
  CHECK(f.hash() == View{}.hash());
  CHECK(g.steps().size() == 1);
  // Views built apart compare and hash by their steps.
  View h;
  h.append(reshape_step({6, 4}), source, "test");
  CHECK(h == g);
  CHECK(h.hash() == g.hash());
  // compose_views with the identity on either side shares the other view.
  CHECK(&compose_views(g, View{}, source).steps() == &g.steps());
  CHECK(&compose_views(View{}, g, source).steps() == &g.steps());
}

TEST_CASE("views compare as View::str prints them, without printing them") {
  StepMaker maker{std::mt19937_64{7}};
  std::vector<View> views;
  for (int i = 0; i < 400; ++i) {
    const Shape source = maker.shape();
    views.push_back(maker.view(source, 3));
  }
  // Pad values that print alike (every NaN of one sign) or not (-0 and 0).
  for (const double value : {0.0, -0.0, std::nan(""), -std::nan(""),
                             std::bit_cast<double>(uint64_t{0x7ff8000000000001}), 1.5}) {
    View v;
    v.append(pad_step({1, 0}, {0, 2}, value), {3, 4}, "test");
    views.push_back(v);
  }
  size_t alike = 0;
  for (const View& a : views) {
    const std::string text = a.str();
    for (const View& b : views) {
      const bool same = b.str() == text;
      REQUIRE(a.same_text(b) == same);
      if (!same) continue;
      CHECK(a.text_hash() == b.text_hash());
      ++alike;
    }
  }
  CHECK(alike > views.size());  // equal views drawn twice, and the NaNs
}
