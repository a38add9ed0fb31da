#pragma once
// The search tests' e-graphs: two identical MLP layers (different weights)
// whose kernels repeat, saturated with the shipped rules.

#include <spool/compile/compile.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>

#include <string>

namespace spool::search::test {

// x [rows, width] through two RMSNorm + SiLU MLPs of width -> 2*width -> width.
inline Graph two_layer_mlp(int64_t rows, int64_t width) {
  Graph g("mlp2");
  Tensor x = input(g, "x", DType::F32, {rows, width});
  for (int l = 0; l < 2; ++l) {
    const Tensor n = weight(g, "n" + std::to_string(l), DType::F32, {width});
    const Tensor w1 = weight(g, "w1." + std::to_string(l), DType::F32, {2 * width, width});
    const Tensor w2 = weight(g, "w2." + std::to_string(l), DType::F32, {width, 2 * width});
    x = x + nn::linear(nn::silu(nn::linear(nn::rms_norm(x, n), w1)), w2);
  }
  output("y", x);
  return g;
}

inline compile::Options shipped_rules() {
  compile::Options o;
  o.roll = false;
  o.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  return o;
}

}  // namespace spool::search::test
