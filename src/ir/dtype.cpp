// Element types: names, sizes and exact rounding between formats.

#include <spool/ir/dtype.hpp>

#include <charconv>
#include <spool/support/error.hpp>

#include <bit>
#include <cmath>
#include <limits>

namespace spool {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
  }
  SPOOL_ASSERT(false, "bad dtype {}", static_cast<int>(dtype));
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType dtype : kAllDTypes)
    if (dtype_name(dtype) == name) return dtype;
  return std::nullopt;
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
  }
  SPOOL_ASSERT(false, "bad dtype {}", static_cast<int>(dtype));
}

bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16; }
bool is_integer(DType dtype) { return dtype == DType::I32 || dtype == DType::I64; }

uint16_t float_to_bf16_bits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a quiet NaN
  // Round to nearest even on the 16 bits that are dropped.
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

uint16_t float_to_f16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds to >= 65520: infinity
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: keep 10 mantissa bits, round the 13 dropped ones to nearest even.
    uint32_t mantissa = abs & 0x7fffff;
    uint32_t half = (uint32_t(exponent + 15) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
    return static_cast<uint16_t>(sign | half);
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: value = m * 2^-24 with m < 1024.
  const uint32_t mantissa = (abs & 0x7fffff) | 0x800000;  // implicit 1
  const int shift = -exponent - 1;                        // 14..24 for exponents -15..-25
  const uint32_t shifted = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  uint32_t half = shifted;
  if (rest > halfway || (rest == halfway && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float f16_bits_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

double round_to_float(DType dtype, double value) {
  // double -> float is correctly rounded by the hardware. Going on from that
  // float to bf16/f16 could round twice; instead the float is taken with
  // round-to-odd (if inexact, the odd one of the two neighbours), which makes
  // the second rounding exact because float keeps more than two extra bits.
  switch (dtype) {
    case DType::F32: return static_cast<double>(static_cast<float>(value));
    case DType::BF16:
    case DType::F16: {
      if (std::isnan(value)) return value;
      const float f = static_cast<float>(value);
      float sticky = f;
      if (static_cast<double>(f) != value && std::isfinite(f)) {
        const uint32_t bits = std::bit_cast<uint32_t>(f);
        if ((bits & 1) == 0) {
          sticky = std::nextafter(f, static_cast<double>(f) < value ? std::numeric_limits<float>::infinity()
                                                                     : -std::numeric_limits<float>::infinity());
        }
      }
      if (dtype == DType::BF16) return bf16_bits_to_float(float_to_bf16_bits(sticky));
      return f16_bits_to_float(float_to_f16_bits(sticky));
    }
    case DType::I32:
    case DType::I64:
    case DType::Bool: break;
  }
  SPOOL_ASSERT(false, "round_to_float on non-float dtype {}", dtype_name(dtype));
}

int64_t wrap_to_int(DType dtype, int64_t value) {
  switch (dtype) {
    case DType::I32: return static_cast<int32_t>(static_cast<uint32_t>(value));
    case DType::I64: return value;
    case DType::Bool: return value != 0;
    case DType::F32:
    case DType::BF16:
    case DType::F16: break;
  }
  SPOOL_ASSERT(false, "wrap_to_int on non-integer dtype {}", dtype_name(dtype));
}

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void append_int(std::string& out, int64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

Shape dense_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace spool
