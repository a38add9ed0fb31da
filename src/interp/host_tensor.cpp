// HostTensor: dense host storage for every dtype, and .npy interchange.

#include <spool/interp/host_tensor.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spool::interp {

HostTensor::HostTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) fail("tensor: negative dimension in {}", shape_str(shape_));
  size_ = num_elements(shape_);
  if (is_float(dtype_))
    real_.assign(static_cast<size_t>(size_), 0.0);
  else
    integer_.assign(static_cast<size_t>(size_), 0);
}

double HostTensor::get(int64_t index) const {
  SPOOL_ASSERT(index >= 0 && index < size_, "index {} out of range {}", index, size_);
  return is_float(dtype_) ? real_[static_cast<size_t>(index)] : static_cast<double>(integer_[static_cast<size_t>(index)]);
}

int64_t HostTensor::get_int(int64_t index) const {
  SPOOL_ASSERT(index >= 0 && index < size_, "index {} out of range {}", index, size_);
  SPOOL_ASSERT(!is_float(dtype_), "get_int on a {} tensor", dtype_name(dtype_));
  return integer_[static_cast<size_t>(index)];
}

void HostTensor::set(int64_t index, double value) {
  SPOOL_ASSERT(index >= 0 && index < size_, "index {} out of range {}", index, size_);
  if (is_float(dtype_)) {
    real_[static_cast<size_t>(index)] = round_to_float(dtype_, value);
  } else if (dtype_ == DType::Bool) {
    integer_[static_cast<size_t>(index)] = value != 0.0;
  } else {
    // Float to integer: truncate toward zero, saturate out of range, NaN -> 0.
    double clamped = std::isnan(value) ? 0.0 : std::trunc(value);
    const double lo = dtype_ == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
    const double hi = dtype_ == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
    if (clamped <= lo)
      integer_[static_cast<size_t>(index)] = dtype_ == DType::I32 ? INT32_MIN : INT64_MIN;
    else if (clamped >= hi)
      integer_[static_cast<size_t>(index)] = dtype_ == DType::I32 ? INT32_MAX : INT64_MAX;
    else
      integer_[static_cast<size_t>(index)] = static_cast<int64_t>(clamped);
  }
}

void HostTensor::set_int(int64_t index, int64_t value) {
  SPOOL_ASSERT(index >= 0 && index < size_, "index {} out of range {}", index, size_);
  if (is_float(dtype_))
    real_[static_cast<size_t>(index)] = round_to_float(dtype_, static_cast<double>(value));
  else
    integer_[static_cast<size_t>(index)] = wrap_to_int(dtype_, value);
}

HostTensor HostTensor::from_f32(Shape shape, std::span<const float> values) {
  HostTensor t(DType::F32, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.size_)
    fail("tensor: {} values for shape {}", values.size(), shape_str(t.shape_));
  for (size_t i = 0; i < values.size(); ++i) t.real_[i] = values[i];
  return t;
}

HostTensor HostTensor::from_i64(Shape shape, std::span<const int64_t> values) {
  HostTensor t(DType::I64, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.size_)
    fail("tensor: {} values for shape {}", values.size(), shape_str(t.shape_));
  std::copy(values.begin(), values.end(), t.integer_.begin());
  return t;
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> out(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) out[static_cast<size_t>(i)] = static_cast<float>(get(i));
  return out;
}

namespace {
template <typename T>
T load(const std::byte* data, size_t index) {
  T value;
  std::memcpy(&value, data + index * sizeof(T), sizeof(T));
  return value;
}
template <typename T>
void store(std::vector<std::byte>& data, size_t index, T value) {
  std::memcpy(data.data() + index * sizeof(T), &value, sizeof(T));
}
}  // namespace

HostTensor HostTensor::from_npy(const NpyArray& array, const std::string& what) {
  Shape shape(array.shape.begin(), array.shape.end());
  const std::string kind = array.descr.substr(1);
  DType dtype;
  if (kind == "f4") dtype = DType::F32;
  else if (kind == "f2") dtype = DType::F16;
  else if (kind == "i4") dtype = DType::I32;
  else if (kind == "i8") dtype = DType::I64;
  else if (kind == "b1") dtype = DType::Bool;
  else fail("{}: unsupported npy dtype '{}'", what, array.descr);
  HostTensor t(dtype, shape);
  const std::byte* data = array.data.data();
  for (int64_t i = 0; i < t.size_; ++i) {
    const size_t k = static_cast<size_t>(i);
    switch (dtype) {
      case DType::F32: t.real_[k] = load<float>(data, k); break;
      case DType::F16: t.real_[k] = f16_bits_to_float(load<uint16_t>(data, k)); break;
      case DType::I32: t.integer_[k] = load<int32_t>(data, k); break;
      case DType::I64: t.integer_[k] = load<int64_t>(data, k); break;
      case DType::Bool: t.integer_[k] = load<uint8_t>(data, k) != 0; break;
      case DType::BF16: break;
    }
  }
  return t;
}

NpyArray HostTensor::to_npy() const {
  NpyArray array;
  array.shape.assign(shape_.begin(), shape_.end());
  const size_t n = static_cast<size_t>(size_);
  switch (dtype_) {
    case DType::F32:
    case DType::BF16:
      array.descr = "<f4";
      array.data.resize(n * 4);
      for (size_t k = 0; k < n; ++k) store<float>(array.data, k, static_cast<float>(real_[k]));
      break;
    case DType::F16:
      array.descr = "<f2";
      array.data.resize(n * 2);
      for (size_t k = 0; k < n; ++k) store<uint16_t>(array.data, k, float_to_f16_bits(static_cast<float>(real_[k])));
      break;
    case DType::I32:
      array.descr = "<i4";
      array.data.resize(n * 4);
      for (size_t k = 0; k < n; ++k) store<int32_t>(array.data, k, static_cast<int32_t>(integer_[k]));
      break;
    case DType::I64:
      array.descr = "<i8";
      array.data.resize(n * 8);
      for (size_t k = 0; k < n; ++k) store<int64_t>(array.data, k, integer_[k]);
      break;
    case DType::Bool:
      array.descr = "|b1";
      array.data.resize(n);
      for (size_t k = 0; k < n; ++k) store<uint8_t>(array.data, k, static_cast<uint8_t>(integer_[k]));
      break;
  }
  return array;
}

double check_tolerance(double tolerance, DType dtype) {
  if (dtype == DType::BF16) return std::max(tolerance, std::ldexp(1.0, -8 + 3));
  if (dtype == DType::F16) return std::max(tolerance, std::ldexp(1.0, -11 + 3));
  return tolerance;
}

Difference compare(const HostTensor& actual, const HostTensor& expected) {
  if (actual.shape() != expected.shape())
    fail("compare: shapes differ: actual {} vs expected {}", shape_str(actual.shape()), shape_str(expected.shape()));
  Difference diff;
  double scale = 0.0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double a = actual.get(i), e = expected.get(i);
    if (!std::isfinite(a) || !std::isfinite(e)) ++diff.non_finite;
    if (std::isfinite(e)) scale = std::max(scale, std::abs(e));
    if (a == e) continue;  // also equal infinities
    const double d = std::isnan(a) != std::isnan(e) || std::isinf(a) || std::isinf(e) ? INFINITY : std::abs(a - e);
    if (!(std::isnan(a) && std::isnan(e))) diff.max_abs = std::max(diff.max_abs, d);
  }
  diff.max_rel_to_scale = scale > 0.0 ? diff.max_abs / scale : diff.max_abs;
  return diff;
}

}  // namespace spool::interp
