#pragma once
// Built-in simulator workloads (`spool sim`), defined like PyTorchSim's
// validation set (f32, batch 1) so results compare with published
// measurements. Each is built as an LLIR graph (kernel nodes) and lowered by
// lower::to_npu, so the workloads measure the compiler's kernels:
//
//   gemm:MxKxN         input M x K times weight K x N
//   layernorm:RxC      LayerNorm over the last dim (affine weight and bias, eps 1e-5)
//   softmax:RxC        softmax along dim 1
//   attention:HxSxD    q, k, v: H x S x D; scores = k q^T / sqrt(D) (H x S x S),
//                      softmax along dim -2, out = v^T scores (H x D x S); computed as
//                      P = softmax_last(q k^T / sqrt(D)) (the transposed scores) and
//                      out = v^T P^T, the same values
//   bert:base|large|xlarge  one encoder block at sequence 512 (hidden 768/1024/2048,
//                      heads 12/16/32): q/k/v = Linear(x) viewed as H x S x D,
//                      attention as above, its output reshaped row-major to S x hidden (a),
//                      y1 = LayerNorm(a W_o^T + b_o + a), h = ReLU(y1 W_1^T + b_1) (4x hidden),
//                      y2 = LayerNorm(h W_2^T + b_2 + y1)
//   llama3_8b:LAYERS   llama-3-8B prefill (bf16, sequence 512, vocab 128256), LAYERS
//                      decoder layers unrolled (GQA attention, SwiGLU FFN with the
//                      chunk prologue fused into the down projection)

#include <spool/ir/graph.hpp>
#include <spool/lower/lower.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace spool::lower {

struct Workload {
  std::string name;
  Graph graph;                       // the LLIR
  npu::Program program;              // lowered for the config
  LowerReport report;
  std::vector<std::string> inputs;   // input and weight buffers, in the order of the definition
  std::vector<std::string> outputs;  // output buffers
};

// Throws spool::Error for an unknown or malformed spec, or a shape that
// cannot be tiled into the config's scratchpad.
Workload make_workload(std::string_view spec, const sim::NpuConfig& config, const LowerOptions& options = {});

// The LLIR graph of a workload spec (kernel nodes named in `kernel_names`,
// by node id, for the program's kernel names).
Graph workload_graph(std::string_view spec, std::vector<std::pair<NodeId, std::string>>* kernel_names = nullptr);

// One line per workload form, for help texts.
std::vector<std::string> workload_forms();

}  // namespace spool::lower
