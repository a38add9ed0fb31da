#pragma once
// Fitness of a program for the extraction search: simulated cycles of the
// lowered program in timing mode.
//
// Two measures, on purpose kept apart:
//  - whole(program): lower::to_npu of the whole program and sim::run in
//    timing mode: the figure a compile reports.
//  - kernels(program) (and operator()): every kernel node of the LLIR
//    lowered and simulated alone, in a program holding only that node (its
//    producers become DRAM inputs of their type, read through the same
//    views; its value the one output), and the cycles summed. Each one-node
//    program is memoised by its text form, so a kernel repeated across
//    layers and genomes is simulated once. It leaves out what happens
//    between kernels: one kernel's launch overlapping the previous one's
//    tail, and DRAM row and channel state carried from one kernel into the
//    next. The search ranks every candidate by this one measure.

#include <spool/ir/graph.hpp>
#include <spool/lower/lower.hpp>
#include <spool/target/npu.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace spool::search {

class SimulatedCycles {
 public:
  explicit SimulatedCycles(target::NpuConfig config, lower::LowerOptions options = {});
  SimulatedCycles(const SimulatedCycles&) = delete;
  SimulatedCycles& operator=(const SimulatedCycles&) = delete;

  // kernels(program): thread-safe. Throws spool::Error if a kernel cannot be
  // lowered or simulated.
  int64_t operator()(const Graph& program) const { return kernels(program); }
  // With lowering choices (a genome's lowering genes), keyed as kernel_key
  // keys them (search/space.hpp); a kernel's memo entry is its text and its
  // choice.
  int64_t kernels(const Graph& program,
                  const std::map<std::string, lower::KernelChoice, std::less<>>& choices = {}) const;
  int64_t whole(const Graph& program,
                const std::map<std::string, lower::KernelChoice, std::less<>>& choices = {}) const;

  // The one-node program of node `id` of `program` (the memo's key is its text).
  static Graph kernel_alone(const Graph& program, NodeId id);

  size_t memo_size() const;
  size_t memo_hits() const { return hits_.load(); }
  size_t simulations() const { return simulations_.load(); }

 private:
  target::NpuConfig config_;
  lower::LowerOptions options_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, int64_t, std::less<>> memo_;  // looked up, never iterated into a result
  mutable std::atomic<size_t> hits_{0}, simulations_{0};
};

}  // namespace spool::search
