#pragma once
// The NPU program verifier: run on every program before it is simulated.
//
// Checks buffers (aliases inside their root, same dtype), kernel dependencies
// (earlier kernels only, and a kernel that reads or writes a window of a DRAM
// buffer that an earlier kernel writes, or writes a window it reads, depends
// on that kernel; disjoint windows need no order), loop variables in scope, scratchpad buffers
// inside the scratchpad and not overlapping another live buffer, every
// scratchpad access inside its buffer, every DMA inside its DRAM buffer, and
// vector bodies well typed (no implicit conversions: comparing an `index`
// with an `i64` needs an explicit cast). Messages name the kernel, then the
// value or buffer, then the op.

#include <spool/npu/kernel.hpp>

#include <string>
#include <vector>

namespace spool::npu {

// Every violation, in program order; empty when the program is valid.
std::vector<std::string> verify(const Program& program);

// Throws spool::Error with the first violation.
void verify_or_throw(const Program& program);

}  // namespace spool::npu
