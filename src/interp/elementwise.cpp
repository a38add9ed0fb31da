// Elementwise semantics, one element at a time. Floats are computed in
// double and rounded to the result dtype; integers wrap (two's complement);
// bool arithmetic is logical (mul = and, max = or).

#include "elementwise.hpp"

#include <spool/support/error.hpp>

#include <cmath>

namespace spool::interp::detail {
namespace {

Scalar float_scalar(DType dtype, double value) {
  Scalar s;
  s.dtype = dtype;
  s.f = round_to_float(dtype, value);
  return s;
}

Scalar int_scalar(DType dtype, int64_t value) {
  Scalar s;
  s.dtype = dtype;
  s.i = wrap_to_int(dtype, value);
  return s;
}

double float_unary(Op op, double x) {
  switch (op) {
    case Op::Exp2: return std::exp2(x);
    case Op::Log2: return std::log2(x);
    case Op::Sin: return std::sin(x);
    case Op::Sqrt: return std::sqrt(x);
    case Op::Recip: return 1.0 / x;
    case Op::Neg: return -x;
    default: SPOOL_ASSERT(false, "{} is not a float unary op", op_name(op));
  }
}

double float_binary(Op op, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Mul: return a * b;
    case Op::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Op::Mod: {
      // torch.remainder: the result has the sign of the divisor.
      double r = std::fmod(a, b);
      if (r != 0.0 && (r < 0.0) != (b < 0.0)) r += b;
      return r;
    }
    default: SPOOL_ASSERT(false, "{} is not a float binary op", op_name(op));
  }
}

int64_t int_binary(Op op, int64_t a, int64_t b) {
  // Computed in unsigned so that overflow wraps; the caller wraps to the dtype.
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Op::Add: return static_cast<int64_t>(ua + ub);
    case Op::Mul: return static_cast<int64_t>(ua * ub);
    case Op::Max: return std::max(a, b);
    case Op::Mod: {
      if (b == 0) fail("mod: integer division by zero");
      if (b == -1) return 0;  // avoids INT64_MIN % -1 overflow
      int64_t r = a % b;
      if (r != 0 && (r < 0) != (b < 0)) r += b;
      return r;
    }
    default: SPOOL_ASSERT(false, "{} is not an integer binary op", op_name(op));
  }
}

// Float to integer: truncate toward zero, saturate out of range, NaN -> 0.
int64_t float_to_int(DType to, double value) {
  if (std::isnan(value)) return 0;
  const double t = std::trunc(value);
  const double lo = to == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = to == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  if (t <= lo) return to == DType::I32 ? INT32_MIN : INT64_MIN;
  if (t >= hi) return to == DType::I32 ? INT32_MAX : INT64_MAX;
  return static_cast<int64_t>(t);
}

}  // namespace

Scalar load(const HostTensor& tensor, int64_t index) {
  Scalar s;
  s.dtype = tensor.dtype();
  if (is_float(s.dtype))
    s.f = tensor.get(index);
  else
    s.i = tensor.get_int(index);
  return s;
}

void store(HostTensor& tensor, int64_t index, const Scalar& value) {
  SPOOL_ASSERT(value.dtype == tensor.dtype(), "storing {} into {}", dtype_name(value.dtype), dtype_name(tensor.dtype()));
  if (is_float(value.dtype))
    tensor.set(index, value.f);
  else
    tensor.set_int(index, value.i);
}

Scalar apply(Op op, std::span<const Scalar> args, DType cast_to) {
  const Scalar& a = args[0];
  const bool floats = is_float(a.dtype);
  switch (op_info(op).cls) {
    case OpClass::Unary:
      if (op == Op::Not) return int_scalar(DType::Bool, !a.i);
      if (floats) return float_scalar(a.dtype, float_unary(op, a.f));
      return int_scalar(a.dtype, static_cast<int64_t>(0ULL - static_cast<uint64_t>(a.i)));  // Neg wraps
    case OpClass::Cast:
      if (cast_to == DType::Bool) return int_scalar(DType::Bool, floats ? a.f != 0.0 : a.i != 0);  // NaN: true
      if (is_float(cast_to)) return float_scalar(cast_to, floats ? a.f : static_cast<double>(a.i));
      return int_scalar(cast_to, floats ? float_to_int(cast_to, a.f) : a.i);
    case OpClass::Binary:
      if (floats) return float_scalar(a.dtype, float_binary(op, a.f, args[1].f));
      return int_scalar(a.dtype, int_binary(op, a.i, args[1].i));
    case OpClass::Compare: {
      const Scalar& b = args[1];
      const bool result = op == Op::LessThan ? (floats ? a.f < b.f : a.i < b.i) : (floats ? a.f == b.f : a.i == b.i);
      return int_scalar(DType::Bool, result);
    }
    case OpClass::Select: return a.i ? args[1] : args[2];
    case OpClass::Source:
    case OpClass::Reduce:
    case OpClass::Gather:
    case OpClass::Scatter:
    case OpClass::TopK:
    case OpClass::Grouped:
    case OpClass::Kernel:
    case OpClass::LoopMarker: break;
  }
  SPOOL_ASSERT(false, "{} is not elementwise", op_name(op));
}

}  // namespace spool::interp::detail
