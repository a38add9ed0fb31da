#pragma once
// Typing of the kernel-level ops (LLIR): their programs and operands.

#include <spool/ir/graph.hpp>

#include <span>
#include <string_view>
#include <vector>

namespace spool {

// The dtype of every value of `program` (the inputs first, then one per
// instruction) when its inputs have `inputs` dtypes and the kernel's output
// has `rank` axes. Throws spool::Error naming `op` on an ill-formed program
// (an argument that is not an earlier value, an op that is not elementwise,
// an ill-typed instruction, an iota axis out of range).
std::vector<DType> program_types(const ProgramAttr& program, std::span<const DType> inputs, size_t rank,
                                 std::string_view op);
// The dtype of the program's result.
DType program_result(const ProgramAttr& program, std::span<const DType> inputs, size_t rank, std::string_view op);

// Whether the program only adds its `inputs` up (add, or max: a logical or
// of bools), each input used once: with zero-padded inputs, a concat.
bool is_sum_program(const ProgramAttr& program, size_t inputs);
// Whether a node adds its inputs up, as the lowering takes a concat of
// zero-padded parts: an add of non-bool values, a max (logical or) of bools,
// or a fused kernel whose program is a sum of its inputs.
bool is_sum_of_parts(Op op, DType dtype, const Attr& attr, size_t inputs);

// Type inference of the kernel ops (OpClass::Kernel).
TensorType infer_kernel_type(Op op, const std::vector<TensorType>& inputs, const Attr& attr);

}  // namespace spool
