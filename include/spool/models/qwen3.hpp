#pragma once
// Qwen3 dense decoder: the llama structure plus an RMSNorm over each head's
// queries and keys before RoPE (`self_attn.q_norm.weight`, `k_norm`, [head_dim]),
// head_dim independent of hidden/heads, and (for the small models) tied
// embeddings. Hugging Face parameter names; graph interface in decoder.hpp.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct Qwen3Config {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 32;
  int64_t ffn = 128;
  int64_t vocab = 256;
  double rms_eps = 1e-6;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 1000000.0;
  nn::RopeScaling rope_scaling;  // Hugging Face's rope_scaling (none by default)
  bool tie_word_embeddings = true;

  static Qwen3Config tiny();
  static Qwen3Config qwen3_4b();  // 36 layers, hidden 2560, 32 heads, 8 KV heads, head dim 128, FFN 9728, vocab 151936
  void validate() const;
  AttentionShape attention() const;
  std::string describe() const;
};

Graph build_qwen3(const Qwen3Config& config, const Phase& phase);

}  // namespace spool::models
