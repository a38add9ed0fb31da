// Attributes: construction, hashing and their text spelling.

#include <spool/ir/attr.hpp>
#include <spool/support/error.hpp>

#include <bit>
#include <boost/container_hash/hash.hpp>
#include <cmath>

namespace spool {

std::optional<Op> parse_op(std::string_view name) {
  for (Op op : kAllOps)
    if (op_name(op) == name) return op;
  return std::nullopt;
}

Scalar Scalar::of(DType dtype, double value) {
  Scalar s;
  s.dtype = dtype;
  if (is_float(dtype)) {
    s.f = round_to_float(dtype, value);
  } else if (dtype == DType::Bool) {
    s.i = value != 0.0;
  } else {
    if (!std::isfinite(value) || value != std::trunc(value))
      fail("constant: {} is not an integer and cannot be a {} value", value, dtype_name(dtype));
    s.i = wrap_to_int(dtype, static_cast<int64_t>(value));
  }
  return s;
}

bool Scalar::operator==(const Scalar& other) const {
  return dtype == other.dtype && std::bit_cast<uint64_t>(f) == std::bit_cast<uint64_t>(other.f) && i == other.i;
}

size_t hash_attr(const Attr& attr) {
  size_t seed = attr.index();
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, NameAttr>) {
          boost::hash_combine(seed, a.name);
        } else if constexpr (std::is_same_v<T, ScalarAttr>) {
          boost::hash_combine(seed, static_cast<int>(a.value.dtype));
          boost::hash_combine(seed, std::bit_cast<uint64_t>(a.value.f));
          boost::hash_combine(seed, a.value.i);
        } else if constexpr (std::is_same_v<T, AxisAttr>) {
          boost::hash_combine(seed, a.axis);
        } else if constexpr (std::is_same_v<T, DTypeAttr>) {
          boost::hash_combine(seed, static_cast<int>(a.to));
        } else if constexpr (std::is_same_v<T, TopKAttr>) {
          boost::hash_combine(seed, a.k);
        } else if constexpr (std::is_same_v<T, LoopAttr>) {
          boost::hash_combine(seed, a.loop);
          boost::hash_combine(seed, a.trips);
          boost::hash_combine(seed, a.index);
        }
      },
      attr);
  return seed;
}

std::string scalar_str(const Scalar& value) {
  if (!is_float(value.dtype)) {
    if (value.dtype == DType::Bool) return value.i ? "true" : "false";
    return std::to_string(value.i);
  }
  if (std::isnan(value.f)) return "nan";
  if (std::isinf(value.f)) return value.f > 0 ? "inf" : "-inf";
  // fmt prints the shortest decimal that reads back to the same double.
  std::string text = fmt::format("{}", value.f);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";  // keep it visibly a float
  return text;
}

std::string attr_str(const Attr& attr) {
  return std::visit(
      [](const auto& a) -> std::string {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, NoAttr>) {
          return "";
        } else if constexpr (std::is_same_v<T, NameAttr>) {
          std::string quoted = "\"";
          for (char c : a.name) {
            if (c == '"' || c == '\\') quoted += '\\';
            quoted += c;
          }
          return "{name=" + quoted + "\"}";
        } else if constexpr (std::is_same_v<T, ScalarAttr>) {
          return "{value=" + scalar_str(a.value) + "}";
        } else if constexpr (std::is_same_v<T, AxisAttr>) {
          return fmt::format("{{axis={}}}", a.axis);
        } else if constexpr (std::is_same_v<T, DTypeAttr>) {
          return fmt::format("{{to={}}}", dtype_name(a.to));
        } else if constexpr (std::is_same_v<T, TopKAttr>) {
          return fmt::format("{{k={}}}", a.k);
        } else {
          static_assert(std::is_same_v<T, LoopAttr>);
          return fmt::format("{{loop={}, trips={}, index={}}}", a.loop, a.trips, a.index);
        }
      },
      attr);
}

}  // namespace spool
