#pragma once
// Internal to the lower stage: TopK along the last axis (topk.cpp), as k
// rounds of select-the-max over each row, or, for a TopK that keeps a whole
// row of integers (a sort: a MoE layer's routed pairs), as a bitonic
// sorting network: log2(N) (log2(N) + 1) / 2 passes over the row for N = k
// rounded up to a power of two (78 instead of 4096 rounds for 4096 pairs).

#include "builder.hpp"

namespace spool::lower::detail {

// out [..., k] (i64): the indices of the k largest elements of each row of
// in [..., n], by descending value, equal values by ascending index.
void emit_topk(Emitter& em, const std::string& name, const Access& in, const Access& out, int64_t k);

}  // namespace spool::lower::detail
