#pragma once
// Views: how a consumer reads a buffer.
//
// Movement ops (permute, reshape, slice, pad, expand/broadcast, and chunk /
// split / squeeze / unsqueeze / concat's inputs, which are spelled with them)
// are never nodes. They are steps on the edge from a producer to a consumer,
// and successive steps compose into one canonical View per edge (two permutes
// become one, a slice of a slice is one slice, an identity step vanishes).
// Whether a view can be read strided or needs a copy is decided at lowering,
// on the final kernels.

#include <spool/ir/dtype.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spool {

enum class ViewKind : uint8_t { Permute, Reshape, Slice, Pad, Expand };

// One movement step. The meaning of the three per-axis vectors depends on
// the kind:
//   Permute  a = the permutation (output axis i reads input axis a[i])
//   Reshape  a = the new shape (same element count, row-major order)
//   Slice    a = start, b = stop, c = step (0 <= start <= stop <= dim, step >= 1)
//   Pad      a = before, b = after (>= 0); value = the padding value
//   Expand   a = the new shape (only size-1 axes change, to any size)
struct ViewStep {
  ViewKind kind = ViewKind::Reshape;
  Shape a, b, c;
  double value = 0.0;

  bool operator==(const ViewStep& other) const;
};

// A View is a value; its steps are shared between copies and copied only
// when a View that shares them is appended to (copy-on-write), so copying an
// edge costs a reference count, not a copy of every step's three shapes.
class View {
 public:
  View() = default;

  bool is_identity() const { return steps_ == nullptr; }
  const std::vector<ViewStep>& steps() const { return steps_ ? *steps_ : no_steps_; }

  // The shape a consumer sees when this view reads a buffer of `source` shape.
  Shape apply(const Shape& source) const;
  // The shape after the first `count` steps (at most all of them).
  Shape apply(const Shape& source, size_t count) const;

  // Appends a step that reads this view's output (the view reading a buffer
  // of `source` shape), merging it into the previous step where possible.
  // Throws spool::Error if the step does not fit; `op` names the calling
  // operation in the message.
  void append(const ViewStep& step, const Shape& source, std::string_view op);

  bool operator==(const View& other) const {
    return steps_ == other.steps_ || (steps_ && other.steps_ && *steps_ == *other.steps_);
  }
  size_t hash() const;

  // Text form: `permute(1,0) slice(0:4:1,0:8:2)`; "" for the identity.
  std::string str() const;
  // Whether str() prints this view and `other` alike, without printing them
  // (a pad value as fmt prints it: every NaN of one sign alike), and a hash
  // equal for views it relates.
  bool same_text(const View& other) const;
  uint64_t text_hash() const;

 private:
  friend View compose_views(const View& inner, const View& outer, const Shape& source);

  // The steps, to be changed in place: copied first if another View shares them.
  std::vector<ViewStep>& own_steps();

  static const std::vector<ViewStep> no_steps_;
  // Never empty: the identity holds no vector at all.
  std::shared_ptr<std::vector<ViewStep>> steps_;
};

// `outer` read through `inner`: the view that applies `inner` to a buffer of
// `source` shape and then `outer` to the result.
View compose_views(const View& inner, const View& outer, const Shape& source);

// The shape a single step produces from `in`, or spool::Error naming `op`.
Shape view_step_shape(const ViewStep& step, const Shape& in, std::string_view op);

// Step constructors.
ViewStep permute_step(Shape perm);
ViewStep reshape_step(Shape shape);
ViewStep slice_step(Shape start, Shape stop, Shape step);
ViewStep pad_step(Shape before, Shape after, double value);
ViewStep expand_step(Shape shape);

}  // namespace spool
