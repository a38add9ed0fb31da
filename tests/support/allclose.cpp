#include "support/allclose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace spool::test {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// "[1,7]" for flat index 15 of a [2,8] tensor; "[]" for a scalar.
std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> digits(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    digits[d] = shape[d] > 0 ? flat % shape[d] : 0;
    flat = shape[d] > 0 ? flat / shape[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(digits, ","));
}

std::string tolerance_str(const Tolerance& t) {
  return fmt::format("atol {}, rtol {}, stol {}, equal NaNs {}", t.atol, t.rtol, t.stol,
                     t.equal_nan ? "allowed" : "not allowed");
}

AllClose mismatch(std::string message) {
  AllClose r;
  r.ok = false;
  r.message = std::move(message);
  return r;
}

// Compares n elements, actual_at(i) against expected_at(i). `scaled`: stol
// applies (floating values).
template <typename Actual, typename Expected>
AllClose compare(int64_t n, const Shape& shape, const Tolerance& tolerance, bool scaled, const Actual& actual_at,
                 const Expected& expected_at) {
  AllClose r;
  r.elements = n;
  for (int64_t i = 0; i < n; ++i)
    if (const double e = expected_at(i); std::isfinite(e)) r.scale = std::max(r.scale, std::fabs(e));
  const double base = tolerance.atol + (scaled ? tolerance.stol * r.scale : 0.0);
  std::string why;
  for (int64_t i = 0; i < n; ++i) {
    const double a = actual_at(i), e = expected_at(i);
    double diff = 0.0, allowed = 0.0;
    bool match = false;
    if (std::isnan(a) || std::isnan(e)) {
      match = std::isnan(a) && std::isnan(e) && tolerance.equal_nan;
      diff = match ? 0.0 : kInf;
    } else if (a == e) {  // equal infinities, and -0 against +0
      match = true;
    } else if (std::isinf(a) || std::isinf(e)) {
      diff = kInf;
    } else {
      diff = std::fabs(a - e);
      allowed = base + tolerance.rtol * std::fabs(e);
      match = diff <= allowed;
    }
    r.worst = std::max(r.worst, diff);
    if (match || r.mismatches++ > 0) continue;
    r.index = i;
    r.actual = a;
    r.expected = e;
    if (std::isnan(a) && std::isnan(e))
      why = "NaN on both sides, and equal NaNs are not allowed";
    else if (std::isnan(a) || std::isnan(e))
      why = "a NaN matches no number";
    else if (std::isinf(a) || std::isinf(e))
      why = "an infinity matches only the same infinity";
    else
      why = fmt::format("|actual - expected| = {} > {} allowed", diff, allowed);
  }
  r.ok = r.mismatches == 0;
  r.worst_to_scale = r.scale > 0.0 ? r.worst / r.scale : r.worst;
  if (r.ok)
    r.message = fmt::format("{} elements match; worst |actual - expected| {}, {} of the scale {}", n, r.worst,
                            r.worst_to_scale, r.scale);
  else
    r.message = fmt::format(
        "{} of {} elements differ; first at {}: actual {}, expected {} ({}); worst |actual - expected| {}, scale {}; "
        "{}",
        r.mismatches, n, index_str(r.index, shape), r.actual, r.expected, why, r.worst, r.scale,
        tolerance_str(tolerance));
  return r;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const AllClose& result) {
  return os << (result.what.empty() ? "" : result.what + ": ") << result.message;
}

AllClose allclose(std::span<const double> actual, std::span<const double> expected, const Tolerance& tolerance,
                  const Shape& shape) {
  const int64_t n = static_cast<int64_t>(expected.size());
  if (actual.size() != expected.size())
    return mismatch(fmt::format("lengths differ: actual {}, expected {}", actual.size(), expected.size()));
  if (!shape.empty() && num_elements(shape) != n)
    return mismatch(fmt::format("the shape {} does not hold {} elements", shape_str(shape), n));
  return compare(
      n, shape.empty() ? Shape{n} : shape, tolerance, /*scaled=*/true,
      [&](int64_t i) { return actual[static_cast<size_t>(i)]; },
      [&](int64_t i) { return expected[static_cast<size_t>(i)]; });
}

AllClose allclose(const interp::HostTensor& actual, const interp::HostTensor& expected, const Tolerance& tolerance) {
  std::vector<std::string> differ;
  if (actual.shape() != expected.shape())
    differ.push_back(
        fmt::format("shapes differ: actual {}, expected {}", shape_str(actual.shape()), shape_str(expected.shape())));
  if (actual.dtype() != expected.dtype())
    differ.push_back(
        fmt::format("dtypes differ: actual {}, expected {}", dtype_name(actual.dtype()), dtype_name(expected.dtype())));
  if (!differ.empty()) return mismatch(fmt::format("{}", fmt::join(differ, "; ")));
  return compare(
      expected.size(), expected.shape(), tolerance, is_float(expected.dtype()),
      [&](int64_t i) { return actual.get(i); }, [&](int64_t i) { return expected.get(i); });
}

AllClose allclose(const std::map<std::string, interp::HostTensor>& actual,
                  const std::map<std::string, interp::HostTensor>& expected, const Tolerance& tolerance) {
  AllClose all;
  int values = 0, differing = 0;
  auto record = [&](AllClose one) {
    ++values;
    all.elements += one.elements;
    all.mismatches += one.mismatches;
    all.worst = std::max(all.worst, one.worst);
    all.scale = std::max(all.scale, one.scale);
    all.worst_to_scale = std::max(all.worst_to_scale, one.worst_to_scale);
    if (one.ok || differing++ > 0) return;
    all.ok = false;
    all.what = one.what;
    all.index = one.index;
    all.actual = one.actual;
    all.expected = one.expected;
    all.message = one.message;
  };
  for (const auto& [name, value] : expected) {
    const auto it = actual.find(name);
    AllClose one = it == actual.end() ? mismatch("expected, but missing from the actual values")
                                      : allclose(it->second, value, tolerance);
    one.what = name;
    record(std::move(one));
  }
  for (const auto& [name, value] : actual) {
    if (expected.contains(name)) continue;
    AllClose one = mismatch("not expected, but among the actual values");
    one.what = name;
    record(std::move(one));
  }
  if (all.ok)
    all.message = fmt::format("{} values, {} elements match; worst |actual - expected| {}, {} relative to scale",
                              values, all.elements, all.worst, all.worst_to_scale);
  else if (differing > 1)
    all.message += fmt::format(" (and {} more of the {} values differ)", differing - 1, values);
  return all;
}

}  // namespace spool::test
