#pragma once
// allclose: the one comparison of numeric results in the tests.
//
// A hand-written `err = std::max(err, std::fabs(a - b))` drops a NaN (a NaN
// never raises a maximum), so a program that computes NaN passes it. Here
// actual[i] matches expected[i] when
//
//   |actual - expected| <= atol + rtol * |expected| + stol * scale
//
// where scale is the largest finite |expected| of the whole tensor (stol is
// a tolerance relative to the tensor's scale, as "max error relative to
// scale" is measured elsewhere in Spool). Besides:
//   - a NaN on either side is a mismatch, unless both are NaN and the caller
//     allows equal NaNs;
//   - +Inf matches only +Inf and -Inf only -Inf, whatever the tolerance;
//   - -0 matches +0;
//   - shapes (lengths) and, for HostTensors, dtypes must be equal;
//   - integer and bool tensors ignore stol: they do not round, so no error
//     grows with their magnitude.
//
// The result converts to bool and prints (doctest shows it when a CHECK
// fails): CHECK(test::allclose(actual, expected, {.stol = 1e-5})).

#include <spool/interp/host_tensor.hpp>

#include <cstdint>
#include <map>
#include <ostream>
#include <span>
#include <string>

namespace spool::test {

// Zero everywhere (the default): exact equality, -0 == +0, NaN never equal.
struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
  double stol = 0.0;
  bool equal_nan = false;
};

struct AllClose {
  bool ok = true;
  std::string what;      // the name of the compared value, when compared by name
  int64_t elements = 0;  // compared
  int64_t mismatches = 0;
  int64_t index = -1;   // flat row-major index of the first mismatch; -1 if none
  double actual = 0.0;  // the values at `index`
  double expected = 0.0;
  // Largest |actual - expected| over the elements (infinite where a NaN or an
  // infinity mismatches, 0 where equal NaNs are allowed or infinities agree);
  // the largest finite |expected| (stol's scale); worst / scale (worst when
  // the scale is 0), the error relative to scale.
  double worst = 0.0;
  double scale = 0.0;
  double worst_to_scale = 0.0;
  std::string message;  // why it failed, or a summary when it matched

  explicit operator bool() const { return ok; }
};

std::ostream& operator<<(std::ostream& os, const AllClose& result);

// Element by element; lengths must be equal. `shape`, when given, must hold
// as many elements and prints the mismatch's index as [i,j,...].
AllClose allclose(std::span<const double> actual, std::span<const double> expected, const Tolerance& tolerance = {},
                  const Shape& shape = {});
// Shapes and dtypes must be equal.
AllClose allclose(const interp::HostTensor& actual, const interp::HostTensor& expected,
                  const Tolerance& tolerance = {});
// Named values (a graph's outputs): the same names on both sides, each value
// against its namesake; the first value that differs, with its name.
// `worst`, `scale` and `worst_to_scale` are each the largest over the values.
AllClose allclose(const std::map<std::string, interp::HostTensor>& actual,
                  const std::map<std::string, interp::HostTensor>& expected, const Tolerance& tolerance = {});

}  // namespace spool::test
