// allclose, the tests' comparison of numbers: NaN never passes unless both
// sides are NaN and the caller allows it, infinities match only themselves,
// -0 matches +0, shapes and dtypes must agree, and the tolerances hold at
// their boundaries. The values are powers of two apart, so every boundary is
// exact.

#include "support/allclose.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

using namespace spool;
using interp::HostTensor;
using test::allclose;
using test::AllClose;
using test::Tolerance;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const double kTiny = std::ldexp(1.0, -20);  // exact next to the small values below, in f32 too

AllClose close(const std::vector<double>& actual, const std::vector<double>& expected, const Tolerance& t = {}) {
  return allclose(actual, expected, t);
}

HostTensor tensor(DType dtype, Shape shape, const std::vector<double>& values) {
  HostTensor t(dtype, std::move(shape));
  REQUIRE(static_cast<int64_t>(values.size()) == t.size());
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

bool says(const AllClose& r, const std::string& text) { return r.message.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("allclose: equal values match, -0 matches +0") {
  const AllClose r = close({1.0, -2.5, 0.0}, {1.0, -2.5, -0.0});
  CHECK(r);
  CHECK(r.ok);
  CHECK(r.mismatches == 0);
  CHECK(r.index == -1);
  CHECK(r.worst == 0.0);
  CHECK(r.elements == 3);
  CHECK(close({-0.0}, {0.0}));
  CHECK(close({}, {}));
}

TEST_CASE("allclose: a NaN on one side never matches, whatever the tolerance") {
  for (const Tolerance& t : {Tolerance{}, Tolerance{.atol = kInf}, Tolerance{.rtol = 1e9, .equal_nan = true}}) {
    CAPTURE(t.atol);
    CAPTURE(t.equal_nan);
    const AllClose actual_nan = close({1.0, kNan, 3.0}, {1.0, 2.0, 3.0}, t);
    CHECK_FALSE(actual_nan);
    CHECK(actual_nan.index == 1);
    CHECK(std::isnan(actual_nan.actual));
    CHECK(actual_nan.expected == 2.0);
    CHECK(std::isinf(actual_nan.worst));
    CHECK_MESSAGE(says(actual_nan, "a NaN matches no number"), actual_nan);
    const AllClose expected_nan = close({1.0, 2.0}, {1.0, kNan}, t);
    CHECK_FALSE(expected_nan);
    CHECK(expected_nan.index == 1);
    CHECK(std::isnan(expected_nan.expected));
  }
}

TEST_CASE("allclose: NaN on both sides matches only when the caller allows equal NaNs") {
  const AllClose refused = close({kNan, 1.0}, {kNan, 1.0});
  CHECK_FALSE(refused);
  CHECK(refused.index == 0);
  CHECK(std::isinf(refused.worst));
  CHECK_MESSAGE(says(refused, "equal NaNs are not allowed"), refused);
  CHECK_FALSE(close({kNan}, {kNan}, {.atol = kInf}));  // a tolerance is no permission

  const AllClose allowed = close({kNan, 1.0}, {kNan, 1.0}, {.equal_nan = true});
  CHECK(allowed);
  CHECK(allowed.worst == 0.0);
  // Allowed equal NaNs leave every other element to the tolerance.
  CHECK_FALSE(close({kNan, 1.5}, {kNan, 1.0}, {.equal_nan = true}));
  CHECK(close({kNan, 1.5}, {kNan, 1.0}, {.atol = 0.5, .equal_nan = true}));
}

TEST_CASE("allclose: +Inf matches only +Inf, -Inf only -Inf") {
  CHECK(close({kInf, -kInf}, {kInf, -kInf}));
  for (const Tolerance& t : {Tolerance{}, Tolerance{.atol = kInf}, Tolerance{.rtol = kInf}}) {
    CAPTURE(t.atol);
    CAPTURE(t.rtol);
    const AllClose signs = close({kInf}, {-kInf}, t);
    CHECK_FALSE(signs);
    CHECK_MESSAGE(says(signs, "an infinity matches only the same infinity"), signs);
    CHECK_FALSE(close({-kInf}, {kInf}, t));
    CHECK_FALSE(close({kInf}, {1e308}, t));
    CHECK_FALSE(close({1e308}, {kInf}, t));
  }
  // Infinities are outside the scale stol multiplies.
  CHECK(close({kInf, 3.0}, {kInf, 4.0}, {.stol = 0.25}).scale == 4.0);
}

TEST_CASE("allclose: atol, rtol and stol hold at their boundaries") {
  // |1.25 - 1| = 0.25: within atol 0.25, not within anything smaller.
  CHECK(close({1.25}, {1.0}, {.atol = 0.25}));
  CHECK_FALSE(close({1.25 + kTiny}, {1.0}, {.atol = 0.25}));
  CHECK(close({0.75}, {1.0}, {.atol = 0.25}));
  CHECK_FALSE(close({1.25}, {1.0}));
  // rtol multiplies |expected|, not |actual|: |5 - 4| = 1 = 0.25 * 4.
  CHECK(close({5.0}, {4.0}, {.rtol = 0.25}));
  CHECK_FALSE(close({5.0 + kTiny}, {4.0}, {.rtol = 0.25}));
  CHECK(close({-5.0}, {-4.0}, {.rtol = 0.25}));
  // Both add: 0.5 + 0.25 * 4 = 1.5.
  CHECK(close({5.5}, {4.0}, {.atol = 0.5, .rtol = 0.25}));
  CHECK_FALSE(close({5.5 + kTiny}, {4.0}, {.atol = 0.5, .rtol = 0.25}));
  // stol multiplies the largest finite |expected|: 0.125 * 8 = 1 for every element.
  const AllClose scaled = close({2.0, -8.0}, {1.0, -8.0}, {.stol = 0.125});
  CHECK(scaled);
  CHECK(scaled.scale == 8.0);
  CHECK(scaled.worst == 1.0);
  CHECK(scaled.worst_to_scale == 0.125);
  CHECK_FALSE(close({2.0 + kTiny, -8.0}, {1.0, -8.0}, {.stol = 0.125}));
}

TEST_CASE("allclose: the first mismatch, the worst error and the message say where and why") {
  // [2,3]: element [1,0] is the first wrong one, [1,2] the worst.
  const HostTensor expected = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const HostTensor actual = tensor(DType::F32, {2, 3}, {1, 2, 3, 4.5, 5, 8});
  const AllClose r = allclose(actual, expected, {.atol = 0.25});
  CHECK_FALSE(r);
  CHECK(r.mismatches == 2);
  CHECK(r.elements == 6);
  CHECK(r.index == 3);
  CHECK(r.actual == 4.5);
  CHECK(r.expected == 4.0);
  CHECK(r.worst == 2.0);
  CHECK(r.scale == 6.0);
  std::ostringstream printed;
  printed << r;
  CHECK(printed.str() == r.message);
  CHECK(r.message ==
        "2 of 6 elements differ; first at [1,0]: actual 4.5, expected 4 (|actual - expected| = 0.5 > 0.25 allowed); "
        "worst |actual - expected| 2, scale 6; atol 0.25, rtol 0, stol 0, equal NaNs not allowed");
  // doctest prints the result when a CHECK on it fails.
  CHECK(std::string(doctest::toString(r).c_str()) == r.message);
}

TEST_CASE("allclose: shapes and dtypes must agree") {
  const HostTensor f32 = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(allclose(f32, f32));
  // The same values in bf16 are still another dtype.
  const AllClose dtypes = allclose(tensor(DType::BF16, {2, 3}, {1, 2, 3, 4, 5, 6}), f32, {.atol = 1});
  CHECK_FALSE(dtypes);
  CHECK(dtypes.message == "dtypes differ: actual bf16, expected f32");
  // The same elements in another shape.
  const AllClose shapes = allclose(tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6}), f32, {.atol = 1});
  CHECK_FALSE(shapes);
  CHECK(shapes.message == "shapes differ: actual [3,2], expected [2,3]");
  CHECK(allclose(tensor(DType::I64, {6}, {1, 2, 3, 4, 5, 6}), f32).message ==
        "shapes differ: actual [6], expected [2,3]; dtypes differ: actual i64, expected f32");
  // Spans: lengths, and a shape that names the index.
  CHECK(close({1, 2}, {1, 2, 3}).message == "lengths differ: actual 2, expected 3");
  const std::vector<double> six = {1, 2, 3, 4, 5, 6}, wrong = {1, 2, 3, 4, 5, 7};
  CHECK(says(allclose(wrong, six, {}, Shape{3, 2}), "first at [2,1]"));
  CHECK(says(allclose(wrong, six), "first at [5]"));
  CHECK_FALSE(allclose(six, six, {}, Shape{4, 2}));
}

TEST_CASE("allclose: integer and bool tensors ignore stol, which is for rounding") {
  const HostTensor want = tensor(DType::I64, {2}, {10, 1000});
  const HostTensor got = tensor(DType::I64, {2}, {11, 1000});
  CHECK_FALSE(allclose(got, want, {.stol = 0.5}));
  CHECK(allclose(got, want, {.atol = 1}));
  CHECK(allclose(got, want, {.rtol = 0.1}));
  CHECK_FALSE(allclose(tensor(DType::Bool, {2}, {1, 0}), tensor(DType::Bool, {2}, {1, 1}), {.stol = 1}));
  // A floating tensor of the same values takes stol.
  CHECK(allclose(tensor(DType::F32, {2}, {11, 1000}), tensor(DType::F32, {2}, {10, 1000}), {.stol = 0.001}));
}

TEST_CASE("allclose: named values, each against its namesake") {
  using Named = std::map<std::string, HostTensor>;
  const HostTensor one = tensor(DType::F32, {2}, {1, 2}), two = tensor(DType::F32, {2}, {3, 4});
  const Named want = {{"a", one}, {"b", two}};
  CHECK(allclose(want, want));
  // stol takes each value's own scale: 0.5 is within 0.125 * 4 for b, not 0.125 * 2 for a.
  const Named shifted = {{"a", tensor(DType::F32, {2}, {1.5, 2})}, {"b", tensor(DType::F32, {2}, {3.5, 4})}};
  const AllClose r = allclose(shifted, want, {.stol = 0.125});
  CHECK_FALSE(r);
  CHECK(r.what == "a");
  CHECK(r.index == 0);
  CHECK(r.mismatches == 1);
  CHECK(r.worst_to_scale == 0.25);
  std::ostringstream printed;
  printed << r;
  CHECK(printed.str().rfind("a: 1 of 2 elements differ; first at [0]", 0) == 0);
  // A NaN in the second value is reported after the first value's mismatch.
  const Named nan = {{"a", tensor(DType::F32, {2}, {1.5, 2})}, {"b", tensor(DType::F32, {2}, {kNan, 4})}};
  const AllClose both = allclose(nan, want);
  CHECK(both.what == "a");
  CHECK(std::isinf(both.worst));
  CHECK(says(both, "(and 1 more of the 2 values differ)"));
  // Missing and unexpected names.
  const AllClose missing = allclose(Named{{"a", one}}, want);
  CHECK_FALSE(missing);
  CHECK(missing.what == "b");
  CHECK(says(missing, "missing"));
  const AllClose extra = allclose(Named{{"a", one}, {"b", two}, {"c", one}}, want);
  CHECK_FALSE(extra);
  CHECK(extra.what == "c");
}
