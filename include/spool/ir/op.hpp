#pragma once
// The HLIR op enum and its static properties, generated from ops.def.

#include <cstdint>
#include <optional>
#include <string_view>

namespace spool {

enum class Op : uint8_t {
#define SPOOL_OP(name, text, arity, attr, cls, doc) name,
#include <spool/ir/ops.def>
#undef SPOOL_OP
};

// What attribute an op carries.
enum class AttrKind : uint8_t { None, Name, Scalar, Axis, DType, TopK, Loop, Program, Gemm, Reduce, Norm };

// The family that drives shape and dtype inference.
enum class OpClass : uint8_t {
  Source, Unary, Cast, Binary, Compare, Select, Reduce, Gather, Scatter, TopK, Grouped, Kernel, LoopMarker
};

// The arity of an op that takes any positive number of inputs.
inline constexpr int kVariadic = -1;

inline constexpr Op kAllOps[] = {
#define SPOOL_OP(name, text, arity, attr, cls, doc) Op::name,
#include <spool/ir/ops.def>
#undef SPOOL_OP
};
inline constexpr int kNumOps = sizeof(kAllOps) / sizeof(kAllOps[0]);

struct OpInfo {
  std::string_view name;  // text spelling
  int arity;  // kVariadic: one or more
  AttrKind attr;
  OpClass cls;
  std::string_view doc;
};

inline constexpr OpInfo kOpInfo[] = {
#define SPOOL_OP(name, text, arity, attr, cls, doc) {text, arity, AttrKind::attr, OpClass::cls, doc},
#include <spool/ir/ops.def>
#undef SPOOL_OP
};

inline const OpInfo& op_info(Op op) { return kOpInfo[static_cast<int>(op)]; }
inline std::string_view op_name(Op op) { return op_info(op).name; }
inline bool is_loop_marker(Op op) { return op_info(op).cls == OpClass::LoopMarker; }
inline bool is_source(Op op) { return op_info(op).cls == OpClass::Source; }
std::optional<Op> parse_op(std::string_view name);

}  // namespace spool
