// Attributes: construction, hashing and their text spelling.

#include <spool/ir/attr.hpp>
#include <spool/support/error.hpp>
#include <spool/support/hash.hpp>

#include <algorithm>
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
    // Outside [-2^63, 2^63) the conversion to int64 is undefined.
    if (!(value >= -0x1p63 && value < 0x1p63))
      fail("constant: {} is outside the range of a {} value", value, dtype_name(dtype));
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
// interned (src/hlir/language.cpp) as often as e-graph nodes are made.
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

// ---- text equality ----------------------------------------------------------------
// Each function below mirrors a printer above field for field.

namespace {

// scalar_str: a float as its shortest decimal (which reads back to its
// bits; "nan" for every NaN), a bool as true/false, an integer in decimal.
// The three spellings never meet, so the dtype counts only as which of them.
enum class ScalarSpelling : uint8_t { Float, Bool, Int };
ScalarSpelling spelling(DType dtype) {
  if (is_float(dtype)) return ScalarSpelling::Float;
  return dtype == DType::Bool ? ScalarSpelling::Bool : ScalarSpelling::Int;
}

bool same_scalar_text(const Scalar& a, const Scalar& b) {
  const ScalarSpelling s = spelling(a.dtype);
  if (s != spelling(b.dtype)) return false;
  switch (s) {
    case ScalarSpelling::Float:
      if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
      return std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f);
    case ScalarSpelling::Bool: return (a.i != 0) == (b.i != 0);
    case ScalarSpelling::Int: return a.i == b.i;
  }
  return false;
}

void add_scalar_text(WordHash& h, const Scalar& v) {
  const ScalarSpelling s = spelling(v.dtype);
  h.add(static_cast<uint64_t>(s));
  switch (s) {
    case ScalarSpelling::Float: h.add(std::isnan(v.f) ? 0x7ff8000000000000ull : std::bit_cast<uint64_t>(v.f)); break;
    case ScalarSpelling::Bool: h.add(v.i != 0); break;
    case ScalarSpelling::Int: h.add(static_cast<uint64_t>(v.i)); break;
  }
}

// The arguments append_program prints: as many as the op's arity.
size_t printed_args(Op op) { return static_cast<size_t>(std::clamp(op_info(op).arity, 0, 3)); }

bool same_instr_text(const ProgramInstr& a, const ProgramInstr& b) {
  if (a.op != b.op) return false;
  if (a.op == Op::Constant) return same_scalar_text(a.value, b.value) && a.value.dtype == b.value.dtype;
  if (a.op == Op::Iota) return a.axis == b.axis && a.dtype == b.dtype;
  if (a.op == Op::Cast && a.dtype != b.dtype) return false;
  for (size_t k = 0; k < printed_args(a.op); ++k)
    if (a.args[k] != b.args[k]) return false;
  return true;
}

bool same_program_text(const ProgramAttr& a, const ProgramAttr& b) {
  if (a.instrs.size() != b.instrs.size()) return false;
  for (size_t i = 0; i < a.instrs.size(); ++i)
    if (!same_instr_text(a.instrs[i], b.instrs[i])) return false;
  return true;
}

void add_program_text(WordHash& h, const ProgramAttr& program) {
  h.add(program.instrs.size());
  for (const ProgramInstr& instr : program.instrs) {
    h.add(static_cast<uint64_t>(instr.op));
    if (instr.op == Op::Constant) {
      add_scalar_text(h, instr.value);
      h.add(static_cast<uint64_t>(instr.value.dtype));
      continue;
    }
    if (instr.op == Op::Iota) {
      h.add(static_cast<uint64_t>(instr.axis));
      h.add(static_cast<uint64_t>(instr.dtype));
      continue;
    }
    if (instr.op == Op::Cast) h.add(static_cast<uint64_t>(instr.dtype));
    for (size_t k = 0; k < printed_args(instr.op); ++k) h.add(instr.args[k]);
  }
}

}  // namespace

// Different alternatives never print alike: each starts with its own field
// name (`name=`, `value=`, `axis=`, ...) and NoAttr prints nothing.
bool same_text(const Attr& a, const Attr& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, ScalarAttr>) {
          return same_scalar_text(x.value, y.value);
        } else if constexpr (std::is_same_v<T, ProgramAttr>) {
          return same_program_text(x, y);
        } else if constexpr (std::is_same_v<T, GemmAttr>) {
          return x.a_inputs == y.a_inputs && x.b_inputs == y.b_inputs && same_program_text(x.a, y.a) &&
                 same_program_text(x.b, y.b) && same_program_text(x.epilogue, y.epilogue);
        } else if constexpr (std::is_same_v<T, ReduceAttr>) {
          return x.kind == y.kind && x.axis == y.axis && same_program_text(x.prologue, y.prologue) &&
                 same_program_text(x.epilogue, y.epilogue);
        } else if constexpr (std::is_same_v<T, NormAttr>) {
          return x.unit_offset == y.unit_offset &&
                 same_scalar_text(Scalar{DType::F32, x.eps, 0}, Scalar{DType::F32, y.eps, 0});
        } else {
          return x == y;  // every field printed exactly (names escaped, integers in decimal)
        }
      },
      a);
}

uint64_t text_hash(const Attr& attr) {
  WordHash h;
  h.add(attr.index());
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, NameAttr>) {
          h.add(std::hash<std::string>{}(a.name));
        } else if constexpr (std::is_same_v<T, ScalarAttr>) {
          add_scalar_text(h, a.value);
        } else if constexpr (std::is_same_v<T, AxisAttr>) {
          h.add(static_cast<uint64_t>(a.axis));
        } else if constexpr (std::is_same_v<T, DTypeAttr>) {
          h.add(static_cast<uint64_t>(a.to));
        } else if constexpr (std::is_same_v<T, TopKAttr>) {
          h.add(static_cast<uint64_t>(a.k));
        } else if constexpr (std::is_same_v<T, LoopAttr>) {
          h.add(static_cast<uint64_t>(a.loop));
          h.add(static_cast<uint64_t>(a.trips));
          h.add(static_cast<uint64_t>(a.index));
        } else if constexpr (std::is_same_v<T, ProgramAttr>) {
          add_program_text(h, a);
        } else if constexpr (std::is_same_v<T, GemmAttr>) {
          add_program_text(h, a.a);
          add_program_text(h, a.b);
          add_program_text(h, a.epilogue);
          h.add(static_cast<uint64_t>(a.a_inputs));
          h.add(static_cast<uint64_t>(a.b_inputs));
        } else if constexpr (std::is_same_v<T, ReduceAttr>) {
          h.add(static_cast<uint64_t>(a.kind));
          h.add(static_cast<uint64_t>(a.axis));
          add_program_text(h, a.prologue);
          add_program_text(h, a.epilogue);
        } else if constexpr (std::is_same_v<T, NormAttr>) {
          add_scalar_text(h, Scalar{DType::F32, a.eps, 0});
          h.add(a.unit_offset);
        }
      },
      attr);
  return h.h;
}

std::string attr_str(const Attr& attr) {
  if (std::holds_alternative<NoAttr>(attr)) return "";
  std::string out = "{";
  append_attr_fields(out, attr);
  out += '}';
  return out;
}

}  // namespace spool
