#pragma once
// Reference execution of the kernel ops (LLIR).

#include <spool/interp/host_tensor.hpp>
#include <spool/ir/graph.hpp>

#include <vector>

namespace spool::interp::detail {

// Runs one kernel node on its inputs (already read through their views).
HostTensor eval_kernel(const Node& node, const std::vector<HostTensor>& inputs);

// The reductions of interp.cpp, shared with the reduce kernel.
HostTensor eval_reduce(Op op, const HostTensor& x, int64_t axis, const Shape& out_shape);

}  // namespace spool::interp::detail
