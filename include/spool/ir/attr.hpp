#pragma once
// Op attributes. Each op carries exactly the attribute kind ops.def names;
// attributes compare and hash by value (floats by bit pattern, so -0.0 and
// 0.0 differ and a NaN equals itself: what matters is which program it is).

#include <spool/ir/dtype.hpp>
#include <spool/ir/op.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace spool {

// A scalar of some dtype: floats are held as double (every f32/bf16/f16 value
// is exact in a double), integers and bool as int64.
struct Scalar {
  DType dtype = DType::F32;
  double f = 0.0;
  int64_t i = 0;

  static Scalar of(DType dtype, double value);  // rounds/wraps to the dtype
  double as_double() const { return is_float(dtype) ? f : static_cast<double>(i); }
  bool operator==(const Scalar& other) const;
};

struct NoAttr {
  bool operator==(const NoAttr&) const = default;
};
struct NameAttr {
  std::string name;
  bool operator==(const NameAttr&) const = default;
};
struct ScalarAttr {
  Scalar value;
  bool operator==(const ScalarAttr&) const = default;
};
struct AxisAttr {
  int64_t axis = 0;
  bool operator==(const AxisAttr&) const = default;
};
struct DTypeAttr {
  DType to = DType::F32;
  bool operator==(const DTypeAttr&) const = default;
};
struct TopKAttr {
  int64_t k = 1;
  bool operator==(const TopKAttr&) const = default;
};

// Loop markers: which loop, its trip count, and the slot (loop_start,
// loop_end) or iteration (loop_output); 0 for loop_input(_static).
struct LoopAttr {
  int64_t loop = 0;
  int64_t trips = 0;
  int64_t index = 0;
  bool operator==(const LoopAttr&) const = default;
};

// An elementwise program (the body of a fused kernel, a prologue or an
// epilogue). Values are numbered: the k inputs first, then one per
// instruction; the last instruction is the result (no instructions: input 0).
// An instruction is an elementwise HLIR op (unary, cast, binary, compare,
// where) over earlier values, or a constant or an iota (index along an axis
// of the kernel's output) of its own.
struct ProgramInstr {
  Op op = Op::Add;
  std::array<uint16_t, 3> args{};  // value numbers, by arity
  Scalar value;                    // constant
  DType dtype = DType::F32;        // cast: the target; iota: the result dtype
  int64_t axis = 0;                // iota
  bool operator==(const ProgramInstr& other) const;
};

struct ProgramAttr {
  std::vector<ProgramInstr> instrs;
  bool operator==(const ProgramAttr&) const = default;
};

// gemm: inputs [0, a_inputs) feed the A prologue, the next b_inputs the B
// prologue, the rest the epilogue (whose value 0 is the product).
struct GemmAttr {
  ProgramAttr a, b, epilogue;
  int64_t a_inputs = 1, b_inputs = 1;
  bool operator==(const GemmAttr&) const = default;
};

// reduce: every input feeds the prologue; the epilogue sees the reduced value only.
struct ReduceAttr {
  Op kind = Op::SumReduce;  // SumReduce or MaxReduce
  int64_t axis = 0;
  ProgramAttr prologue, epilogue;
  bool operator==(const ReduceAttr&) const = default;
};

struct NormAttr {
  double eps = 1e-6;
  bool unit_offset = false;  // rms_norm: scale by (1 + w), as gemma
  bool operator==(const NormAttr& other) const;
};

// The alternatives are in AttrKind order.
using Attr = std::variant<NoAttr, NameAttr, ScalarAttr, AxisAttr, DTypeAttr, TopKAttr, LoopAttr, ProgramAttr, GemmAttr,
                          ReduceAttr, NormAttr>;

inline AttrKind attr_kind(const Attr& attr) { return static_cast<AttrKind>(attr.index()); }
size_t hash_attr(const Attr& attr);
// The attribute as written in the text form, e.g. `{axis=1}`; "" for NoAttr.
std::string attr_str(const Attr& attr);
// attr_str without its braces (`axis=1`), appended to `out`.
void append_attr_fields(std::string& out, const Attr& attr);
// Shortest text that reads back to exactly the same value ("inf", "-0", "nan").
std::string scalar_str(const Scalar& value);
// `[mul($0,$1); constant[0.5:f32]; add($2,$3)]`
std::string program_str(const ProgramAttr& program);
void append_program(std::string& out, const ProgramAttr& program);

// Whether attr_str prints `a` and `b` alike, without printing them: the
// fields it prints are compared as it prints them (every NaN of a scalar
// alike, a scalar's dtype only as float, bool or integer), the fields it
// leaves out (a program instruction's unused arguments) not at all. An
// attribute interned by its text (src/hlir/language.cpp) is found
// with these.
bool same_text(const Attr& a, const Attr& b);
// A hash of what attr_str prints: equal for attributes same_text relates.
uint64_t text_hash(const Attr& attr);

}  // namespace spool
