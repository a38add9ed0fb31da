#pragma once
// The reference interpreter: executes any HLIR graph on the CPU, every op and
// every dtype, exactly as ops.def defines it. It is the oracle for every
// correctness check in Spool, so it favours being obviously right over being
// fast: views are materialised step by step, floats are computed in double and
// rounded to the node's dtype on every store.

#include <spool/interp/host_tensor.hpp>
#include <spool/ir/graph.hpp>

#include <map>
#include <string>

namespace spool::interp {

// Values for the graph's Input and Weight nodes, by name.
using Env = std::map<std::string, HostTensor>;

// Runs the graph and returns its outputs by name. Throws spool::Error if a
// source is missing from `inputs` or has the wrong dtype or shape, or on a
// runtime error (an index out of range, an integer mod by zero).
std::map<std::string, HostTensor> run(const Graph& graph, const Env& inputs);

// The values run() computes for `graph`: the elements of every node it
// evaluates, each of which it computes and stores once (a matmul spelled as
// a broadcast product and a sum counts its whole M x K x N product). Its
// time grows with this count; a tool refuses a run whose count is above a
// budget before starting it. Saturates at INT64_MAX.
int64_t work_estimate(const Graph& graph);

// Seeded random values for every Input and Weight of the graph: floats
// uniform in [-1, 1) scaled by 1/sqrt(fan-in) for 2-D-or-more weights, integer
// inputs uniform in [0, integer_bound), bools fair coins. Deterministic.
Env random_inputs(const Graph& graph, uint64_t seed, int64_t integer_bound = 2);

}  // namespace spool::interp
