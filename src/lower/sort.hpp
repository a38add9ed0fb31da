#pragma once
// Internal to the lower stage: a TopK that keeps every element of its rows
// (k = the row length, a sort), as a bitonic sorting network (sort.cpp),
// for integer values. k rounds of select-the-max cost k passes over the
// row; the network costs log2(N) (log2(N) + 1) / 2 passes for N = k rounded
// up to a power of two (78 instead of 4096 for a MoE layer's 4096 routed
// pairs).

#include "builder.hpp"

namespace spool::lower::detail {

// Rows shorter than this keep the rounds of select-the-max.
constexpr int64_t kMinSortedRow = 64;

// Whether emit_sort lowers this TopK: k is the whole last axis (at least
// kMinSortedRow) of integer values, the indices are i64, and the row's four
// tiles fit the budget.
bool sorts_as_network(const Access& in, const Access& out, int64_t k, int64_t budget);

// out [..., n] (i64): the indices of each row of in [..., n] by descending
// value, equal values by ascending index (TopK with k = n).
void emit_sort(Emitter& em, const std::string& name, const Access& in, const Access& out);

}  // namespace spool::lower::detail
