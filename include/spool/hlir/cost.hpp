#pragma once
// The extraction cost of HLIR/LLIR e-graphs: an estimate of kernel time.
//
// Every node that computes is one kernel (each HLIR primitive is a
// single-op kernel): a launch overhead, plus its DRAM traffic (the bytes of
// every distinct input it reads and of the output it writes) at DRAM
// bandwidth, plus its compute (gemm FLOPs at systolic-array throughput,
// element-ops at vector throughput, each op weighed by its issue slots: a
// sin as 8 adds, an i64 value as 2 f32 ones). Views, sources and loop markers are
// nearly free. So a fused kernel wins exactly where it removes a DRAM round
// trip or a launch. The cost is monotone, as extraction requires: a node
// costs strictly more than each of its children.

#include <spool/egraph/extract.hpp>
#include <spool/hlir/language.hpp>
#include <spool/target/npu.hpp>

namespace spool::hlir {

// Machine figures, per core clock cycle (defaults: the tpuv3 config).
struct HlirCostConfig {
  double launch_cycles = 400;             // fixed cost of starting a kernel
  // 450.6 GB/s (16 channels x 32 B at 880 MHz) less refresh (308 of every
  // 3432 DRAM cycles) per 940 MHz cycle.
  double dram_bytes_per_cycle = 16 * 32 * 880.0 / 940 * (3432 - 308) / 3432;
  double matmul_flops_per_cycle = 65536;  // 2 arrays of 128x128 MACs
  double vector_ops_per_cycle = 1024;     // 128 lanes of 8 f32
  // Issue slots of a program instruction over f32, against an add's: the
  // vector unit's intervals (a 64-bit value takes twice the slots, a
  // narrower one fewer).
  double sin_slots = 8;   // sin
  double slow_slots = 4;  // exp2, log2, sqrt, recip, mod
  double free_node = 1e-3;                // views, sources, loop markers
};

class HlirCost : public egraph::CostFunction {
 public:
  explicit HlirCost(const HlirLanguage& lang, HlirCostConfig config = {}) : lang_(lang), config_(config) {}
  double cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const override;
  // The node's own cost (without its children), in cycles.
  double node_cost(const EGraph& graph, NodeId node) const;

 private:
  double program_slots(const spool::ProgramAttr& program, std::span<const spool::DType> inputs) const;
  double op_slots(spool::Op op, spool::DType dtype) const;

  const HlirLanguage& lang_;
  HlirCostConfig config_;
};

// The cost of a kernel-level program as HlirCost prices it, each distinct
// node counted once (the DAG cost of the program added to a fresh e-graph).
double program_cost(const spool::Graph& program);

// The extraction cost's machine figures from a target description: launch,
// peak DRAM bytes, array and vector throughput per core cycle (summed over
// cores, which the lowering spreads independent tiles over), and the issue
// slots of slow vector ops against an add's.
HlirCostConfig cost_config(const target::NpuConfig& npu);

}  // namespace spool::hlir
