#pragma once
// Qwen3-MoE decoder: qwen3 attention (q/k RMSNorm) and, in sparse layers, a
// softmax top-k router renormalised over the chosen experts (norm_topk_prob)
// feeding SwiGLU experts computed as batched GEMMs over the routed
// (token, expert) pairs sorted by expert (moe.hpp: exact, no token dropping).
//
// Parameter names are Hugging Face's except that the experts of a layer are
// stacked: `model.layers.L.mlp.experts.gate_proj.weight` is [experts, moe_ffn,
// hidden] (Hugging Face stores `mlp.experts.E.gate_proj.weight` per expert;
// hf_weights stacks them). The router is `mlp.gate.weight` [experts, hidden].

#include <spool/models/decoder.hpp>

#include <string>
#include <vector>

namespace spool::models {

struct Qwen3MoeConfig {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t ffn = 128;      // intermediate_size: the MLP of dense layers
  int64_t moe_ffn = 32;   // moe_intermediate_size: each expert
  int64_t experts = 8;
  int64_t top_k = 2;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  int64_t vocab = 256;
  double rms_eps = 1e-6;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 1000000.0;
  nn::RopeScaling rope_scaling;  // Hugging Face's rope_scaling (none by default)
  bool tie_word_embeddings = false;

  static Qwen3MoeConfig tiny();
  static Qwen3MoeConfig qwen3_30b_a3b();  // 48 layers, hidden 2048, 32 heads, 4 KV heads, 128 experts, top 8, expert FFN 768
  void validate() const;
  bool is_sparse(int64_t layer) const;  // as Hugging Face decides it
  AttentionShape attention() const;
  std::string describe() const;
};

// The sparse block on x [T, hidden]: router, routed experts, combine.
Tensor qwen3_moe_block(const Qwen3MoeConfig& config, const Tensor& x, const std::string& prefix);

Graph build_qwen3_moe(const Qwen3MoeConfig& config, const Phase& phase);

}  // namespace spool::models
