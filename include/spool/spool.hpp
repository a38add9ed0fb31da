#pragma once
// The public entry point: include this to build and run models with Spool.

#include <spool/interp/interp.hpp>
#include <spool/ir/graph.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/nn/nn.hpp>

#include <string_view>

namespace spool {
std::string_view version();
}  // namespace spool
