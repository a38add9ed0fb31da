#pragma once
// Llama-4 text decoder as Hugging Face's Llama4ForCausalLM (Llama4TextModel)
// computes it.
//
// Layers. Layer L is MoE when it is in `moe_layers` (by default every
// interleave_moe_layer_step-th layer: L % step == step - 1; Scout: step 1,
// every layer; Maverick: step 2); a MoE layer runs the top-k sigmoid router
// (whose score scales the expert's input, as Llama4TextMoe does), the routed
// experts and a shared expert of FFN `ffn`; the other layers a dense SwiGLU
// MLP of FFN `ffn_dense` (intermediate_size_mlp). Experts use the fused
// layout and the chunked SwiGLU: gate_up = x·W_gu (W_gu [experts, hidden,
// 2·ffn]) → chunk(2) → silu(gate) * up → ·W_down ([experts, ffn, hidden]).
//
// Attention (Llama4TextAttention), grouped-query, per layer type:
// - RoPE layers (no_rope_layers[L] = 1; by default all but every
//   no_rope_layer_interval-th): q and k rotated as interleaved complex pairs
//   (computed in f32), then, with use_qk_norm, L2-normed (an RMS norm
//   without weight, eps rms_norm_eps); attention is chunked: a token sees
//   only the tokens of its own attention_chunk_size-token chunk.
// - NoPE layers: no rotation and no q/k norm; full causal attention; with
//   attn_temperature_tuning, the queries at position p are scaled by
//   log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1.
// The softmax scale is head_dim^-0.5 on every layer. The KV cache holds each
// layer's keys as the attention reads them (after RoPE: a RoPE layer's key
// pairs stored first members then second members, the permutation
// rope_interleaved gives q and k alike; nn.hpp).
//
// Parameter names follow Hugging Face's Llama4ForCausalLM text model:
// `model.layers.L.self_attn.{q,k,v,o}_proj.weight`,
// `model.layers.L.feed_forward.router.weight`, `feed_forward.experts.gate_up_proj`,
// `feed_forward.experts.down_proj`, `feed_forward.shared_expert.{gate,up,down}_proj.weight`,
// and `feed_forward.{gate,up,down}_proj.weight` in dense layers.

#include <spool/models/decoder.hpp>

#include <string>
#include <vector>

namespace spool::models {

struct Llama4Config {
  int64_t layers = 4;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t ffn = 64;         // intermediate_size: each routed expert and the shared expert
  int64_t ffn_dense = 128;  // intermediate_size_mlp: dense layers
  int64_t experts = 4;      // num_local_experts
  int64_t top_k = 1;        // num_experts_per_tok
  int64_t moe_layer_step = 1;           // interleave_moe_layer_step (when moe_layers is empty)
  std::vector<int64_t> moe_layers;      // the MoE layers' indices; empty: from moe_layer_step
  std::vector<int64_t> no_rope_layers;  // 1: RoPE layer, 0: NoPE layer; empty: from the interval
  int64_t no_rope_layer_interval = 4;
  bool use_qk_norm = true;
  int64_t attention_chunk_size = 4;  // 0: RoPE layers attend to the whole context
  bool attn_temperature_tuning = true;
  double floor_scale = 4.0;
  double attn_scale = 0.1;
  int64_t vocab = 256;
  double rms_eps = 1e-5;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 500000.0;
  nn::RopeScaling rope_scaling;
  bool tie_word_embeddings = false;

  // Tiny Scout layout: 4 layers (layer 3 NoPE), every layer MoE with 4
  // experts, chunks of 4 tokens and a temperature floor of 4 positions, so
  // that an 8-token prompt meets chunking and temperature tuning.
  static Llama4Config tiny();
  // Tiny Maverick layout: MoE every second layer (8 experts), dense layers
  // with their own FFN, no q/k norm.
  static Llama4Config tiny_maverick();
  // meta-llama/Llama-4-Scout-17B-16E's text config (src/models/shapes/llama-4-scout.json):
  // 48 layers, every one MoE with 16 experts top-1 + shared expert.
  static Llama4Config scout();
  // meta-llama/Llama-4-Maverick-17B-128E's (llama-4-maverick.json): 128 experts,
  // MoE every second layer, dense FFN 16384 between, no q/k norm.
  static Llama4Config maverick();
  void validate() const;
  bool is_moe(int64_t layer) const;
  bool uses_rope(int64_t layer) const;
  int64_t parameters() const;         // every weight
  int64_t active_parameters() const;  // those one token uses (top_k of the routed experts)
  std::string describe() const;
};

Tensor llama4_moe_block(const Llama4Config& config, const Tensor& x, const std::string& prefix);

// Llama4TextAttention of layer `layer` on the normed hidden states h [seq,
// hidden], weights under `prefix`; reads and writes the layer's KV cache.
Tensor llama4_attention(const Llama4Config& config, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                        const std::string& prefix, int64_t layer);

Graph build_llama4(const Llama4Config& config, const Phase& phase);

}  // namespace spool::models
