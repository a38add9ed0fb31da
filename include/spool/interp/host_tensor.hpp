#pragma once
// A dense, row-major tensor in host memory, of any Spool dtype.
//
// Floating values are held as doubles already rounded to the dtype (every
// f32, bf16 and f16 value is exact in a double); i32, i64 and bool as int64.

#include <spool/ir/dtype.hpp>
#include <spool/support/npy.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace spool::interp {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);  // zero-filled

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t size() const { return size_; }

  // Element access by flat row-major index. get() returns integers as double;
  // set() rounds (floats) or wraps (integers) to the dtype.
  double get(int64_t index) const;
  int64_t get_int(int64_t index) const;  // integer and bool dtypes only
  void set(int64_t index, double value);
  void set_int(int64_t index, int64_t value);

  static HostTensor from_f32(Shape shape, std::span<const float> values);
  static HostTensor from_i64(Shape shape, std::span<const int64_t> values);
  std::vector<float> to_f32() const;

  // .npy interchange: f32/f16/i32/i64/bool map to numpy dtypes; bf16 is
  // stored as f32 (numpy has no bf16).
  static HostTensor from_npy(const NpyArray& array, const std::string& what);
  NpyArray to_npy() const;

  bool operator==(const HostTensor& other) const = default;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t size_ = 0;
  std::vector<double> real_;     // floating dtypes
  std::vector<int64_t> integer_; // integer and bool dtypes
};

// Largest |a - b| over all elements, and that divided by max(|b|) (the
// reference's scale). Throws spool::Error if the shapes differ.
// Where both hold NaN, or the same infinity, the elements count as equal
// (max_abs ignores them); `non_finite` counts the elements where either is
// NaN or infinite, so that a check can refuse to pass on values it cannot
// measure.
// The error a check allows an output of `dtype`, relative to its scale:
// `tolerance`, and for bf16 and f16 at least 8 ulps of the dtype (2^-5 and
// 2^-8). The simulator accumulates GEMMs in f32, as the arrays do, and the
// interpreter in double, so a half-precision result can round the other way
// by one ulp, and every layer after it carries that on.
double check_tolerance(double tolerance, DType dtype);

struct Difference {
  double max_abs = 0.0;
  double max_rel_to_scale = 0.0;
  int64_t non_finite = 0;
};
Difference compare(const HostTensor& actual, const HostTensor& expected);

}  // namespace spool::interp
