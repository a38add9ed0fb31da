// View steps: validation, composition into one canonical view, text form.

#include <spool/ir/view.hpp>
#include <spool/support/error.hpp>
#include <spool/support/hash.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <boost/container/small_vector.hpp>
#include <boost/container_hash/hash.hpp>
#include <string_view>

namespace spool {
namespace {

std::string list_str(const Shape& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

// With its length: a step's shape is checked naming its kind, and a switch
// of plain strings becomes a table of pointers and a strlen per call.
std::string_view kind_name(ViewKind kind) {
  using namespace std::string_view_literals;
  switch (kind) {
    case ViewKind::Permute: return "permute"sv;
    case ViewKind::Reshape: return "reshape"sv;
    case ViewKind::Slice: return "slice"sv;
    case ViewKind::Pad: return "pad"sv;
    case ViewKind::Expand: return "expand"sv;
  }
  SPOOL_ASSERT(false, "bad view kind");
}

bool is_identity_step(const ViewStep& step, const Shape& in) {
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
  SPOOL_ASSERT(false, "bad view kind");
}

// Whether `next` (which reads the output of `prev`) folds into `prev`.
bool can_merge(const ViewStep& prev, const ViewStep& next) {
  if (prev.kind != next.kind) return false;
  return next.kind != ViewKind::Pad || std::bit_cast<uint64_t>(prev.value) == std::bit_cast<uint64_t>(next.value);
}

// Folds `next` into `prev`; can_merge(prev, next) holds.
void merge_steps(ViewStep& prev, const ViewStep& next) {
  switch (next.kind) {
    case ViewKind::Permute: {
      // out axis i reads next.a[i] of prev's output, which reads prev.a[next.a[i]].
      Shape perm(next.a.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = prev.a[static_cast<size_t>(next.a[i])];
      prev.a = perm;
      return;
    }
    case ViewKind::Reshape:
    case ViewKind::Expand:
      prev.a = next.a;
      return;
    case ViewKind::Slice:
      // Index j of the second slice reads start2 + j*step2 of the first, which
      // reads start1 + (start2 + j*step2)*step1 of the source.
      for (size_t i = 0; i < prev.a.size(); ++i) {
        const int64_t count = next.b[i] > next.a[i] ? (next.b[i] - next.a[i] + next.c[i] - 1) / next.c[i] : 0;
        const int64_t start = prev.a[i] + next.a[i] * prev.c[i];
        const int64_t step = prev.c[i] * next.c[i];
        prev.a[i] = start;
        prev.c[i] = step;
        prev.b[i] = count == 0 ? start : start + (count - 1) * step + 1;
      }
      return;
    case ViewKind::Pad:
      for (size_t i = 0; i < prev.a.size(); ++i) {
        prev.a[i] += next.a[i];
        prev.b[i] += next.b[i];
      }
      return;
  }
  SPOOL_ASSERT(false, "bad view kind");
}

// Whether `perm` is a permutation of `rank` axes; without allocating for the
// ranks tensors have.
bool is_permutation(const Shape& perm, size_t rank) {
  if (perm.size() != rank) return false;
  if (rank <= 64) {
    uint64_t seen = 0;
    for (int64_t axis : perm) {
      if (axis < 0 || axis >= static_cast<int64_t>(rank) || (seen >> axis & 1)) return false;
      seen |= uint64_t{1} << axis;
    }
    return true;
  }
  std::vector<bool> seen(rank, false);
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(axis)]) return false;
    seen[static_cast<size_t>(axis)] = true;
  }
  return true;
}

// num_elements, inline: a reshape is validated on every view applied.
int64_t elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The shapes a chain of steps reads: shapes[i] is the input of step i and
// shapes.back() what the chain produces. Each shape is written in place.
using ShapeChain = boost::container::small_vector<Shape, 4>;

void step_shape(const ViewStep& step, const Shape& in, Shape& out, std::string_view op);

ShapeChain shape_chain(const std::vector<ViewStep>& steps, const Shape& source) {
  ShapeChain shapes;
  shapes.reserve(steps.size() + 1);
  shapes.push_back(source);
  for (const ViewStep& step : steps) {
    shapes.emplace_back();
    step_shape(step, shapes[shapes.size() - 2], shapes.back(), kind_name(step.kind));
  }
  return shapes;
}

// Appends `step` to `steps` whose shapes are `shapes`, as View::append does,
// keeping `shapes` in step. `merged` says whether the last step was merged by
// the previous call: View::append validates every step again, and a slice of
// an empty slice merges into one that starts past the end of its axis, which
// the next append rejects.
void append_step(std::vector<ViewStep>& steps, ShapeChain& shapes, bool& merged, const ViewStep& step,
                 std::string_view op) {
  if (merged) {
    Shape unused;
    step_shape(steps.back(), shapes[shapes.size() - 2], unused, kind_name(steps.back().kind));
  }
  merged = false;
  // The step's output, written where it stays if the step is kept: shapes
  // are now [..., input of the last step, current, out].
  shapes.emplace_back();
  step_shape(step, shapes[shapes.size() - 2], shapes.back(), op);  // validates, throws on a bad step
  if (is_identity_step(step, shapes[shapes.size() - 2])) {
    shapes.pop_back();
    return;
  }
  if (!steps.empty() && can_merge(steps.back(), step)) {
    merge_steps(steps.back(), step);
    // A merged step can cancel out (a permute and its inverse, a reshape back).
    if (is_identity_step(steps.back(), shapes[shapes.size() - 3])) {
      steps.pop_back();
      shapes.pop_back();
      shapes.pop_back();
    } else {
      shapes[shapes.size() - 2] = std::move(shapes.back());
      shapes.pop_back();
      merged = true;
    }
    return;
  }
  steps.push_back(step);
}

}  // namespace

bool ViewStep::operator==(const ViewStep& other) const {
  return kind == other.kind && a == other.a && b == other.b && c == other.c &&
         std::bit_cast<uint64_t>(value) == std::bit_cast<uint64_t>(other.value);
}

ViewStep permute_step(Shape perm) { return {ViewKind::Permute, std::move(perm), {}, {}, 0.0}; }
ViewStep reshape_step(Shape shape) { return {ViewKind::Reshape, std::move(shape), {}, {}, 0.0}; }
ViewStep slice_step(Shape start, Shape stop, Shape step) {
  return {ViewKind::Slice, std::move(start), std::move(stop), std::move(step), 0.0};
}
ViewStep pad_step(Shape before, Shape after, double value) {
  return {ViewKind::Pad, std::move(before), std::move(after), {}, value};
}
ViewStep expand_step(Shape shape) { return {ViewKind::Expand, std::move(shape), {}, {}, 0.0}; }

namespace {

// view_step_shape, writing the shape to `out` (which is not `in`): View::apply
// reads and writes two buffers in turn instead of a new Shape per step.
void step_shape(const ViewStep& step, const Shape& in, Shape& out, std::string_view op) {
  const size_t rank = in.size();
  switch (step.kind) {
    case ViewKind::Permute: {
      if (!is_permutation(step.a, rank))
        fail("{}: ({}) is not a permutation of the {} axes of {}", op, list_str(step.a), rank, shape_str(in));
      out.resize(rank);
      for (size_t i = 0; i < rank; ++i) out[i] = in[static_cast<size_t>(step.a[i])];
      return;
    }
    case ViewKind::Reshape: {
      for (int64_t d : step.a)
        if (d < 0) fail("{}: negative size in target shape {}", op, shape_str(step.a));
      if (elements(step.a) != elements(in))
        fail("{}: cannot view {} ({} elements) as {} ({} elements)", op, shape_str(in), num_elements(in),
             shape_str(step.a), num_elements(step.a));
      out = step.a;
      return;
    }
    case ViewKind::Slice: {
      if (step.a.size() != rank || step.b.size() != rank || step.c.size() != rank)
        fail("{}: slice of rank {} applied to {}", op, step.a.size(), shape_str(in));
      out.resize(rank);
      for (size_t i = 0; i < rank; ++i) {
        if (step.c[i] < 1) fail("{}: step {} on axis {} must be at least 1", op, step.c[i], i);
        if (step.a[i] < 0 || step.a[i] > step.b[i] || step.b[i] > in[i])
          fail("{}: range {}:{} on axis {} is out of bounds for {}", op, step.a[i], step.b[i], i, shape_str(in));
        out[i] = (step.b[i] - step.a[i] + step.c[i] - 1) / step.c[i];
      }
      return;
    }
    case ViewKind::Pad: {
      if (step.a.size() != rank || step.b.size() != rank)
        fail("{}: padding of rank {} applied to {}", op, step.a.size(), shape_str(in));
      out.resize(rank);
      for (size_t i = 0; i < rank; ++i) {
        if (step.a[i] < 0 || step.b[i] < 0)
          fail("{}: negative padding ({}, {}) on axis {}", op, step.a[i], step.b[i], i);
        out[i] = in[i] + step.a[i] + step.b[i];
      }
      return;
    }
    case ViewKind::Expand: {
      if (step.a.size() != rank) fail("{}: cannot expand {} to {}: ranks differ", op, shape_str(in), shape_str(step.a));
      for (size_t i = 0; i < rank; ++i)
        if (in[i] != step.a[i] && (in[i] != 1 || step.a[i] < 0))
          fail("{}: cannot expand {} to {}: axis {} has size {}, not 1", op, shape_str(in), shape_str(step.a), i,
               in[i]);
      out = step.a;
      return;
    }
  }
  SPOOL_ASSERT(false, "bad view kind");
}

}  // namespace

Shape view_step_shape(const ViewStep& step, const Shape& in, std::string_view op) {
  Shape out;
  step_shape(step, in, out, op);
  return out;
}

const std::vector<ViewStep> View::no_steps_;

std::vector<ViewStep>& View::own_steps() {
  // A count of 1 is this View's own reference: no other View can gain one
  // while this one is being changed. The fence orders this View's writes
  // after a former sharer's last reads (its release of the count).
  if (steps_.use_count() != 1) steps_ = std::make_shared<std::vector<ViewStep>>(*steps_);
  std::atomic_thread_fence(std::memory_order_acquire);
  return *steps_;
}

Shape View::apply(const Shape& source) const { return apply(source, SIZE_MAX); }

Shape View::apply(const Shape& source, size_t count) const {
  const size_t n = std::min(count, steps().size());
  if (n == 0) return source;
  Shape buffers[2];
  const Shape* in = &source;
  for (size_t i = 0; i < n; ++i) {
    const ViewStep& step = (*steps_)[i];
    step_shape(step, *in, buffers[i % 2], kind_name(step.kind));
    in = &buffers[i % 2];
  }
  return std::move(buffers[(n - 1) % 2]);
}

void View::append(const ViewStep& step, const Shape& source, std::string_view op) {
  // `current` is what the view reads now, `in` the input of its last step;
  // the shapes are written to two buffers in turn.
  Shape buffers[2];
  const Shape* in = nullptr;
  const Shape* current = &source;
  const std::vector<ViewStep>& existing = steps();
  for (size_t i = 0; i < existing.size(); ++i) {
    step_shape(existing[i], *current, buffers[i % 2], kind_name(existing[i].kind));
    in = current;
    current = &buffers[i % 2];
  }
  Shape out;
  step_shape(step, *current, out, op);  // validates, throws on a bad step
  if (is_identity_step(step, *current)) return;
  if (!steps_) {
    // Room for a second step: views are mostly built a step or two at a time.
    steps_ = std::make_shared<std::vector<ViewStep>>();
    steps_->reserve(2);
    steps_->push_back(step);
    return;
  }
  if (can_merge(steps_->back(), step)) {
    std::vector<ViewStep>& steps = own_steps();
    merge_steps(steps.back(), step);
    // A merged step can cancel out (a permute and its inverse, a reshape back).
    if (is_identity_step(steps.back(), *in)) {
      steps.pop_back();
      if (steps.empty()) steps_.reset();
    }
    return;
  }
  if (steps_.use_count() != 1) {  // shared: a copy with room for the step
    auto steps = std::make_shared<std::vector<ViewStep>>();
    steps->reserve(steps_->size() + 1);
    steps->insert(steps->end(), steps_->begin(), steps_->end());
    steps->push_back(step);
    steps_ = std::move(steps);
    return;
  }
  own_steps().push_back(step);
}

View compose_views(const View& inner, const View& outer, const Shape& source) {
  if (outer.is_identity()) return inner;
  if (inner.is_identity()) {
    // The usual case: `outer` was made for this source, so every step fits,
    // none is the identity and none folds into the one before it; appending
    // its steps one by one would copy them unchanged.
    const std::vector<ViewStep>& steps = outer.steps();
    Shape current = source;
    bool unchanged = true;
    for (size_t i = 0; i < steps.size() && unchanged; ++i) {
      Shape out = view_step_shape(steps[i], current, "view");
      unchanged = !is_identity_step(steps[i], current) && (i == 0 || !can_merge(steps[i - 1], steps[i]));
      current = std::move(out);
    }
    if (unchanged) return outer;
  }
  ShapeChain shapes = shape_chain(inner.steps(), source);
  std::vector<ViewStep> steps;
  steps.reserve(inner.steps().size() + outer.steps().size());
  steps = inner.steps();
  bool merged = false;
  for (const ViewStep& step : outer.steps()) append_step(steps, shapes, merged, step, "view");
  View result;
  if (!steps.empty()) result.steps_ = std::make_shared<std::vector<ViewStep>>(std::move(steps));
  return result;
}

size_t View::hash() const {
  size_t seed = 0;
  for (const ViewStep& step : steps()) {
    boost::hash_combine(seed, static_cast<int>(step.kind));
    for (const Shape* values : {&step.a, &step.b, &step.c})
      boost::hash_range(seed, values->begin(), values->end());
    boost::hash_combine(seed, std::bit_cast<uint64_t>(step.value));
  }
  return seed;
}

namespace {

// What str() prints of a step: its kind and `a`, then for each axis of `a`
// that axis of `b` for a slice or pad and of `c` for a slice, and the value
// for a pad.
bool prints_b(ViewKind kind) { return kind == ViewKind::Slice || kind == ViewKind::Pad; }

bool same_prefix(const Shape& x, const Shape& y, size_t n) {
  return std::equal(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n), y.begin());
}

bool same_pad_value(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y) && std::signbit(x) == std::signbit(y);
  return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
}

}  // namespace

bool View::same_text(const View& other) const {
  const std::vector<ViewStep>& mine = steps();
  const std::vector<ViewStep>& theirs = other.steps();
  if (mine.size() != theirs.size()) return false;
  for (size_t i = 0; i < mine.size(); ++i) {
    const ViewStep& x = mine[i];
    const ViewStep& y = theirs[i];
    if (x.kind != y.kind || x.a != y.a) return false;
    const size_t n = x.a.size();
    if (prints_b(x.kind) && !same_prefix(x.b, y.b, n)) return false;
    if (x.kind == ViewKind::Slice && !same_prefix(x.c, y.c, n)) return false;
    if (x.kind == ViewKind::Pad && !same_pad_value(x.value, y.value)) return false;
  }
  return true;
}

uint64_t View::text_hash() const {
  WordHash h;
  auto add_axes = [&](const Shape& shape, size_t n) {
    for (size_t i = 0; i < n; ++i) h.add(static_cast<uint64_t>(shape[i]));
  };
  for (const ViewStep& step : steps()) {
    const size_t n = step.a.size();
    h.add(static_cast<uint64_t>(step.kind));
    h.add(n);
    add_axes(step.a, n);
    if (prints_b(step.kind)) add_axes(step.b, n);
    if (step.kind == ViewKind::Slice) add_axes(step.c, n);
    if (step.kind == ViewKind::Pad)
      h.add(std::isnan(step.value) ? 0x7ff8000000000000ull ^ std::signbit(step.value)
                                   : std::bit_cast<uint64_t>(step.value));
  }
  return h.h;
}

// Built by hand, not through format calls per axis: views are printed to be
// interned (src/hlir/language.cpp) as often as e-graph nodes are made.
std::string View::str() const {
  std::string out;
  out.reserve(24 * steps().size());
  for (const ViewStep& step : steps()) {
    if (!out.empty()) out += ' ';
    out += kind_name(step.kind);
    out += '(';
    for (size_t i = 0; i < step.a.size(); ++i) {
      if (i) out += ',';
      append_int(out, step.a[i]);
      if (step.kind == ViewKind::Slice || step.kind == ViewKind::Pad) {
        out += ':';
        append_int(out, step.b[i]);
      }
      if (step.kind == ViewKind::Slice) {
        out += ':';
        append_int(out, step.c[i]);
      }
    }
    if (step.kind == ViewKind::Pad) out += fmt::format(";{}", step.value);
    out += ')';
  }
  return out;
}

}  // namespace spool
