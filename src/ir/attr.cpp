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

bool ProgramInstr::operator==(const ProgramInstr& other) const {
  return op == other.op && args == other.args && value == other.value && dtype == other.dtype && axis == other.axis;
}

bool NormAttr::operator==(const NormAttr& other) const {
  return std::bit_cast<uint64_t>(eps) == std::bit_cast<uint64_t>(other.eps) && unit_offset == other.unit_offset;
}

namespace {
void hash_program(size_t& seed, const ProgramAttr& program) {
  for (const ProgramInstr& instr : program.instrs) {
    boost::hash_combine(seed, static_cast<int>(instr.op));
    boost::hash_range(seed, instr.args.begin(), instr.args.end());
    boost::hash_combine(seed, std::bit_cast<uint64_t>(instr.value.f));
    boost::hash_combine(seed, instr.value.i);
    boost::hash_combine(seed, static_cast<int>(instr.dtype));
    boost::hash_combine(seed, instr.axis);
  }
  boost::hash_combine(seed, program.instrs.size());
}
}  // namespace

// Built by hand, not through format calls: attributes are printed to be
// interned (src/egraph/hlir_analysis.cpp) as often as e-graph nodes are made.
void append_program(std::string& out, const ProgramAttr& program) {
  out += '[';
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const ProgramInstr& instr = program.instrs[i];
    if (i) out += "; ";
    out += op_name(instr.op);
    if (instr.op == Op::Constant) {
      out += '[';
      out += scalar_str(instr.value);
      out += ':';
      out += dtype_name(instr.value.dtype);
      out += ']';
      continue;
    }
    if (instr.op == Op::Iota) {
      out += '[';
      append_int(out, instr.axis);
      out += ':';
      out += dtype_name(instr.dtype);
      out += ']';
      continue;
    }
    if (instr.op == Op::Cast) {
      out += '[';
      out += dtype_name(instr.dtype);
      out += ']';
    }
    out += '(';
    for (int a = 0; a < op_info(instr.op).arity; ++a) {
      if (a) out += ',';
      out += '$';
      append_int(out, instr.args[static_cast<size_t>(a)]);
    }
    out += ')';
  }
  out += ']';
}

std::string program_str(const ProgramAttr& program) {
  std::string out;
  out.reserve(2 + 12 * program.instrs.size());
  append_program(out, program);
  return out;
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
        } else if constexpr (std::is_same_v<T, ProgramAttr>) {
          hash_program(seed, a);
        } else if constexpr (std::is_same_v<T, GemmAttr>) {
          hash_program(seed, a.a);
          hash_program(seed, a.b);
          hash_program(seed, a.epilogue);
          boost::hash_combine(seed, a.a_inputs);
          boost::hash_combine(seed, a.b_inputs);
        } else if constexpr (std::is_same_v<T, ReduceAttr>) {
          boost::hash_combine(seed, static_cast<int>(a.kind));
          boost::hash_combine(seed, a.axis);
          hash_program(seed, a.prologue);
          hash_program(seed, a.epilogue);
        } else if constexpr (std::is_same_v<T, NormAttr>) {
          boost::hash_combine(seed, std::bit_cast<uint64_t>(a.eps));
          boost::hash_combine(seed, a.unit_offset);
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

void append_attr_fields(std::string& out, const Attr& attr) {
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, NoAttr>) {
          return;
        } else if constexpr (std::is_same_v<T, NameAttr>) {
          out += "name=\"";
          for (const char c : a.name) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
          }
          out += '"';
        } else if constexpr (std::is_same_v<T, ScalarAttr>) {
          out += "value=";
          out += scalar_str(a.value);
        } else if constexpr (std::is_same_v<T, AxisAttr>) {
          out += "axis=";
          append_int(out, a.axis);
        } else if constexpr (std::is_same_v<T, DTypeAttr>) {
          out += "to=";
          out += dtype_name(a.to);
        } else if constexpr (std::is_same_v<T, TopKAttr>) {
          out += "k=";
          append_int(out, a.k);
        } else if constexpr (std::is_same_v<T, LoopAttr>) {
          out += fmt::format("loop={}, trips={}, index={}", a.loop, a.trips, a.index);
        } else if constexpr (std::is_same_v<T, ProgramAttr>) {
          out += "program=";
          append_program(out, a);
        } else if constexpr (std::is_same_v<T, GemmAttr>) {
          out += "a=";
          append_program(out, a.a);
          out += ", b=";
          append_program(out, a.b);
          out += ", epilogue=";
          append_program(out, a.epilogue);
          out += ", a_inputs=";
          append_int(out, a.a_inputs);
          out += ", b_inputs=";
          append_int(out, a.b_inputs);
        } else if constexpr (std::is_same_v<T, ReduceAttr>) {
          out += "kind=";
          out += op_name(a.kind);
          out += ", axis=";
          append_int(out, a.axis);
          out += ", prologue=";
          append_program(out, a.prologue);
          out += ", epilogue=";
          append_program(out, a.epilogue);
        } else {
          static_assert(std::is_same_v<T, NormAttr>);
          out += fmt::format("eps={}, unit_offset={}", scalar_str(Scalar{DType::F32, a.eps, 0}),
                             a.unit_offset ? "true" : "false");
        }
      },
      attr);
}

std::string attr_str(const Attr& attr) {
  if (std::holds_alternative<NoAttr>(attr)) return "";
  std::string out = "{";
  append_attr_fields(out, attr);
  out += '}';
  return out;
}

}  // namespace spool
