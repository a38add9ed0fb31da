#pragma once
// Element types and shapes of HLIR values.

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spool {

enum class DType : uint8_t { F32, BF16, F16, I32, I64, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::BF16, DType::F16,
                                       DType::I32, DType::I64,  DType::Bool};

std::string_view dtype_name(DType dtype);                    // "f32", "bf16", ...
std::optional<DType> parse_dtype(std::string_view name);
int dtype_bytes(DType dtype);
bool is_float(DType dtype);    // f32, bf16, f16
bool is_integer(DType dtype);  // i32, i64
inline bool is_numeric(DType dtype) { return dtype != DType::Bool; }

// Rounds a double to the nearest value representable in a floating dtype
// (round to nearest, ties to even; overflow goes to infinity, NaN stays NaN).
double round_to_float(DType dtype, double value);
// bf16 and f16 bit patterns (round to nearest even) and back.
uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_f16_bits(float value);
float f16_bits_to_float(uint16_t bits);
// Wraps an integer to the range of an integer dtype (two's complement), or to
// 0/1 for bool.
int64_t wrap_to_int(DType dtype, int64_t value);

using Shape = boost::container::small_vector<int64_t, 6>;

int64_t num_elements(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2,64]", "[]" for a scalar
// Appends the decimal digits of `value` (no format call: the text forms of
// views and attributes are built as often as e-graph nodes are interned).
void append_int(std::string& out, int64_t value);

// Row-major strides of a dense tensor of this shape.
Shape dense_strides(const Shape& shape);

}  // namespace spool
