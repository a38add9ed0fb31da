#pragma once
// DeepSeek-V3 decoder as Hugging Face's DeepseekV3ForCausalLM computes it.
//
// Attention is multi-head latent attention (MLA). Per layer and token:
//   q      = q_b_proj(rms_norm(q_a_proj(h)))             [heads, qk_nope + qk_rope]
//            (or q_proj(h) when q_lora_rank is 0, as DeepSeek-V2-Lite)
//   kv_a   = kv_a_proj_with_mqa(h)                        [kv_lora_rank + qk_rope]
//   latent = rms_norm(kv_a[:kv_lora_rank])                the compressed key and value
//   k_rope = RoPE(kv_a[kv_lora_rank:])                    one RoPE key shared by the heads
//   kv_b_proj [heads * (qk_nope + v_head), kv_lora_rank]  the latent up to each head's
//                                                         nope key and value
// The RoPE part of q and k rotates interleaved pairs (rope_interleave, as
// apply_rotary_pos_emb_interleave: de-interleaved, then rotate-half), with
// yarn scaling; the softmax scale is (qk_nope + qk_rope)^-0.5 times yarn's
// mscale(factor, mscale_all_dim) squared. The latent norms use eps 1e-6
// (DeepseekV3RMSNorm's default: Hugging Face does not pass rms_norm_eps).
//
// The KV cache is the compressed one, per layer:
//   cache_latent.L  DT [context + seq, kv_lora_rank]     the normed latents
//   cache_key.L     DT [context + seq, qk_rope_head_dim] the rotated RoPE keys
// (576 values per token and layer at the real shapes). Two forms compute
// the attention from it, equal in exact arithmetic:
// - expanded: kv_b_proj applied to every cached latent, giving per-head
//   keys [nope | rope] and values; ordinary multi-head attention.
// - absorbed: kv_b_proj folded into the query and the output: each head's
//   q_nope times its key block of kv_b_proj gives a query in latent space,
//   scored against the cached latents (plus q_rope against the RoPE keys);
//   the probabilities sum the latents, and each head's value block of
//   kv_b_proj maps that sum to its output. The cache is never expanded per
//   head: a decode step reads 576 values per cached token and layer.
// By default (MlaForm::Auto) a call with a cache (decode) runs absorbed and a
// prefill expanded.
//
// The MoE is DeepSeek's: sigmoid router scores, `e_score_correction_bias`
// added for expert selection only, group-limited top-k (n_group groups
// scored by their two best experts, topk_group groups kept, the rest masked
// with masked_fill), weights renormalised and scaled by
// routed_scaling_factor, plus shared experts. Layer L is MoE when L >=
// first_k_dense_replace and L % moe_layer_freq == 0 (DeepSeek's own modeling
// code; Hugging Face's port has moe_layer_freq 1), else a dense MLP.
//
// Parameter names follow Hugging Face's DeepseekV3ForCausalLM, with the routed
// experts of a layer stacked: `model.layers.L.mlp.experts.gate_proj.weight`
// [experts, moe_ffn, hidden] (read from a folder's per-expert tensors).
// Router: `mlp.gate.weight` [experts, hidden] and
// `mlp.gate.e_score_correction_bias` [experts]; shared experts:
// `mlp.shared_experts.{gate,up,down}_proj.weight` with FFN moe_ffn * shared_experts.

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

enum class MlaForm { Auto, Expanded, Absorbed };

struct DeepseekV3Config {
  int64_t layers = 3;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t q_lora_rank = 48;  // 0: no low-rank query path (q_proj)
  int64_t kv_lora_rank = 32;
  int64_t qk_nope_head_dim = 16;
  int64_t qk_rope_head_dim = 8;
  int64_t v_head_dim = 24;
  int64_t ffn = 128;     // intermediate_size: the dense layers' MLP
  int64_t moe_ffn = 32;  // moe_intermediate_size: each routed and shared expert
  int64_t experts = 16;  // n_routed_experts
  int64_t shared_experts = 1;
  int64_t top_k = 4;     // num_experts_per_tok
  int64_t n_group = 4;
  int64_t topk_group = 2;
  int64_t first_k_dense_replace = 1;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 2.5;
  bool norm_topk_prob = true;
  int64_t vocab = 256;
  double rms_eps = 1e-6;
  DType dtype = DType::F32;  // weights, activations and KV cache (bf16 as served)
  double rope_theta = 10000.0;
  nn::RopeScaling rope_scaling;  // yarn for the real model
  double mscale_all_dim = 0.0;   // rope_scaling's mscale_all_dim: the softmax scale's mscale (0: none)
  bool rope_interleave = true;   // RoPE pairs (x[2i], x[2i+1]); false: rotate-half pairs
  MlaForm mla_form = MlaForm::Auto;

  static DeepseekV3Config tiny();
  // deepseek-ai/DeepSeek-V3's config.json (src/models/shapes/deepseek-v3.json):
  // 61 layers (3 dense), hidden 7168, 128 heads, q rank 1536, kv rank 512,
  // nope/rope/v head dims 128/64/128, dense FFN 18432, 256 routed experts of
  // FFN 2048 in 8 groups (top-4 groups), top 8, 1 shared, vocab 129280, yarn x40.
  static DeepseekV3Config deepseek_v3();
  void validate() const;
  bool is_moe(int64_t layer) const { return layer >= first_k_dense_replace && layer % moe_layer_freq == 0; }
  // The softmax scale: (qk_nope + qk_rope)^-0.5, times mscale^2 under yarn.
  double softmax_scale() const;
  int64_t parameters() const;         // every weight
  int64_t active_parameters() const;  // those one token uses (top_k of the routed experts)
  std::string describe() const;
};

Tensor deepseek_v3_moe_block(const DeepseekV3Config& config, const Tensor& x, const std::string& prefix);

// MLA on the normed hidden states h [seq, hidden] of layer `layer`, weights
// under `prefix` ("model.layers.3.self_attn."); reads and writes the layer's
// compressed cache. Returns o_proj's output [seq, hidden].
Tensor mla_attention(const DeepseekV3Config& config, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                     const std::string& prefix, int64_t layer);

Graph build_deepseek_v3(const DeepseekV3Config& config, const Phase& phase);

}  // namespace spool::models
