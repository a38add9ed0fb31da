#pragma once
// The C++ appliers that the shipped HLIR rule files call by name.
//
// Each applier reads the matched classes (their nodes, types and known
// constants) and builds a kernel node (LLIR: gemm, fused, reduce, softmax,
// rms_norm, layer_norm) that computes bit for bit what the matched HLIR
// computes under the reference semantics (src/interp/kernels.cpp), or
// returns nullopt when the match does not have the shape it needs. Views are
// `view` nodes; an applier that reads through one composes it into a single
// view of the underlying buffer. rules/README.md lists them for rule authors.

#include <spool/hlir/language.hpp>
#include <spool/egraph/rule.hpp>

#include <cstddef>

namespace spool::hlir {

// Size caps that keep fusion bounded: a fused program, prologue or epilogue
// never grows past these, so saturation adds a bounded number of kernels
// per class.
inline constexpr size_t kMaxProgramInstrs = 32;
inline constexpr size_t kMaxKernelInputs = 6;

// The appliers and guards of the shipped rules (rules/README.md lists them).
// They run on e-graphs made by make_egraph and read the HLIR
// language through the graph's analysis, so rules compiled with this
// registry in one language run on any copy of it.
const egraph::Registry& registry();

}  // namespace spool::hlir
