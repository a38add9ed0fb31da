#pragma once
// The semantics of every elementwise op on one element, shared by the
// interpreter's node-at-a-time evaluation and by kernel programs, so that a
// fused kernel computes exactly what the ops it replaces compute.

#include <spool/interp/host_tensor.hpp>
#include <spool/ir/attr.hpp>

#include <span>

namespace spool::interp::detail {

Scalar load(const HostTensor& tensor, int64_t index);
void store(HostTensor& tensor, int64_t index, const Scalar& value);

// One elementwise op (unary, cast, binary, compare, where) on scalars, with
// the result rounded or wrapped to its dtype. `cast_to` is Cast's target.
Scalar apply(Op op, std::span<const Scalar> args, DType cast_to);

}  // namespace spool::interp::detail
