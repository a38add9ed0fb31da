#pragma once
// Gemma (1) decoder: embeddings scaled by sqrt(hidden), RMSNorm with a `1 + w`
// weight, multi-query attention (one KV head) with head_dim 256 on the real
// shapes, GeGLU feed-forward (tanh GELU), LM head tied to the embeddings.
// Hugging Face parameter names; graph interface in decoder.hpp.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct GemmaConfig {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 1;
  int64_t head_dim = 32;
  int64_t ffn = 128;
  int64_t vocab = 256;
  double rms_eps = 1e-6;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 10000.0;
  nn::RopeScaling rope_scaling;  // Hugging Face's rope_scaling (none by default)

  static GemmaConfig tiny();
  static GemmaConfig gemma_2b();  // 18 layers, hidden 2048, 8 heads, 1 KV head, head dim 256, FFN 16384, vocab 256000
  void validate() const;
  AttentionShape attention() const;
  std::string describe() const;
};

Graph build_gemma(const GemmaConfig& config, const Phase& phase);

}  // namespace spool::models
