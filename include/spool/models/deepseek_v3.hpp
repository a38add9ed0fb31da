#pragma once
// DeepSeek-V3 decoder, with one simplification: standard multi-head
// attention (q/k/v/o projections, RoPE over the whole head) stands in for
// multi-head latent attention (MLA). The MoE is DeepSeek's: sigmoid router
// scores, `e_score_correction_bias` added for expert selection only,
// group-limited top-k (n_group groups scored by their two best experts,
// topk_group groups kept, the rest masked with masked_fill), weights
// renormalised and scaled by routed_scaling_factor, plus shared experts; the
// first `first_k_dense_replace` layers use a dense MLP instead.
//
// Parameter names follow Hugging Face's DeepseekV3ForCausalLM, with the routed
// experts of a layer stacked: `model.layers.L.mlp.experts.gate_proj.weight`
// [experts, moe_ffn, hidden]. Router: `mlp.gate.weight` [experts, hidden] and
// `mlp.gate.e_score_correction_bias` [experts]; shared experts:
// `mlp.shared_experts.{gate,up,down}_proj.weight` with FFN moe_ffn * shared_experts.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct DeepseekV3Config {
  int64_t layers = 3;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t head_dim = 16;
  int64_t ffn = 128;     // intermediate_size: the dense layers' MLP
  int64_t moe_ffn = 32;  // moe_intermediate_size: each routed and shared expert
  int64_t experts = 16;  // n_routed_experts
  int64_t shared_experts = 1;
  int64_t top_k = 4;     // num_experts_per_tok
  int64_t n_group = 4;
  int64_t topk_group = 2;
  int64_t first_k_dense_replace = 1;
  double routed_scaling_factor = 2.5;
  bool norm_topk_prob = true;
  int64_t vocab = 256;
  double rms_eps = 1e-6;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 10000.0;

  static DeepseekV3Config tiny();
  // 61 layers (3 dense), hidden 7168, 128 heads of 128 (MHA in place of MLA), dense FFN 18432,
  // 256 routed experts of FFN 2048 in 8 groups (top-4 groups), top 8, 1 shared expert, vocab 129280.
  static DeepseekV3Config deepseek_v3();
  void validate() const;
  AttentionShape attention() const;
  std::string describe() const;
};

Tensor deepseek_v3_moe_block(const DeepseekV3Config& config, const Tensor& x, const std::string& prefix);

Graph build_deepseek_v3(const DeepseekV3Config& config, const Phase& phase);

}  // namespace spool::models
