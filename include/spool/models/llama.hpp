#pragma once
// Llama-family decoder built with spool::nn: RMSNorm, grouped-query attention
// with rotate-half RoPE, SwiGLU feed-forward, untied LM head. Parameter names
// follow Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, ...).
// Graph interface (prefill and decode with a KV cache): see decoder.hpp.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct LlamaConfig {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t ffn = 128;
  int64_t vocab = 256;
  double rms_eps = 1e-5;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 10000.0;
  nn::RopeScaling rope_scaling;  // Hugging Face's rope_scaling (none by default)
  bool tie_word_embeddings = false;

  static LlamaConfig tiny();
  static LlamaConfig llama3_8b();  // hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256, 32 layers
  void validate() const;           // throws spool::Error naming the bad field
  AttentionShape attention() const;
  std::string describe() const;    // one line: layers, hidden, heads, ...
};

// One decoder layer on x [seq, hidden] without a KV cache; `prefix` names
// its weights ("model.layers.0."). `cos`/`sin` are the RoPE tables [seq, head_dim].
Tensor llama_layer(const LlamaConfig& config, const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const std::string& prefix);

// The whole model for one call (prefill or decode): input "tokens", output
// "logits" and the KV cache (decoder.hpp).
Graph build_llama(const LlamaConfig& config, const Phase& phase);

}  // namespace spool::models
