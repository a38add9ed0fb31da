#pragma once
// Llama-4 (Scout shapes) text decoder: every `moe_layer_step`-th layer is a
// MoE (top-1 sigmoid router whose score scales the expert's input, as Hugging
// Face's Llama4TextMoe does, plus a shared expert); the other layers use a
// dense SwiGLU MLP of FFN `ffn_dense`. Experts use the fused layout and the
// chunked SwiGLU: gate_up = x·W_gu (W_gu [experts, hidden, 2·ffn]) →
// chunk(2) → silu(gate) * up → ·W_down ([experts, ffn, hidden]).
//
// Simplified attention: grouped-query attention with rotate-half RoPE on
// every layer. Llama-4's NoPE layers, L2 q/k norm, chunked (local) attention
// and attention temperature tuning are not modelled.
//
// Parameter names follow Hugging Face's Llama4ForCausalLM text model:
// `model.layers.L.feed_forward.router.weight`, `feed_forward.experts.gate_up_proj`,
// `feed_forward.experts.down_proj`, `feed_forward.shared_expert.{gate,up,down}_proj.weight`,
// and `feed_forward.{gate,up,down}_proj.weight` in dense layers.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct Llama4Config {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t ffn = 64;         // intermediate_size: each routed expert and the shared expert
  int64_t ffn_dense = 128;  // intermediate_size_mlp: dense layers
  int64_t experts = 4;
  int64_t top_k = 1;
  int64_t moe_layer_step = 2;  // interleave_moe_layer_step: layer L is MoE when (L+1) % step == 0
  int64_t vocab = 256;
  double rms_eps = 1e-5;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 500000.0;

  static Llama4Config tiny();
  // 48 layers, hidden 5120, 40 heads, 8 KV heads, head dim 128, 16 experts top-1 of FFN 8192
  // plus a shared expert, dense FFN 16384, MoE every second layer, vocab 202048. The MoE
  // interleave follows our spec (issue 9); Hugging Face's Scout config has
  // interleave_moe_layer_step 1 (every layer MoE, 109 B parameters instead of 62 B here).
  static Llama4Config scout();
  void validate() const;
  bool is_moe(int64_t layer) const { return (layer + 1) % moe_layer_step == 0; }
  AttentionShape attention() const;
  std::string describe() const;
};

Tensor llama4_moe_block(const Llama4Config& config, const Tensor& x, const std::string& prefix);

Graph build_llama4(const Llama4Config& config, const Phase& phase);

}  // namespace spool::models
