#pragma once
// Internal to the lower stage: the GEMM/BMM kernel generator with its
// prologues and epilogue, and its tile selection.

#include "builder.hpp"

#include <optional>

namespace spool::lower::detail {

enum class FusedSoftmax : uint8_t { None, Rows, Columns };

struct GemmJob {
  KernelInfo info;
  DType dtype = DType::F32;           // the operands' dtype (after the prologues)
  std::vector<Access> a, b, epilogue;  // A inputs [.., M, K], B inputs [.., K, N], epilogue inputs [.., M, N]
  ProgramAttr a_program, b_program, epilogue_program;
  Access out;                          // [.., M, N]
  // A softmax of the epilogue's result in the kernel (the consumer softmax
  // fused into the epilogue): along each row (needs a tile spanning N) or
  // down each column (needs a tile spanning M).
  FusedSoftmax softmax = FusedSoftmax::None;
  // What the caller chose for this node (LowerOptions::choice); the default
  // is the tuner's tile, operand slots, loop order and placement.
  KernelChoice choice;
};

// Emits the GEMM kernel(s) with prologues and epilogue placed inside. Returns
// a reason (and emits nothing) when they cannot be placed: a program with
// iota instructions, or no tile whose footprint fits the budget.
std::optional<std::string> emit_gemm(Emitter& em, const GemmJob& job);

}  // namespace spool::lower::detail
