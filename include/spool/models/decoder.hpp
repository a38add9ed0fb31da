#pragma once
// Pieces shared by the decoder-only example models: what one call of a model
// processes (a prefill, or a decode step with a KV cache), self-attention that
// reads and writes that cache, the gated feed-forward, and the two ends of the
// model (token embedding, final norm and LM head).
//
// The graph interface of every decoder built from these pieces:
//   input  tokens                      i64 [seq]
//   input  cache_key.L, cache_value.L  DT [context + seq, kv_heads, head_dim]  (only when context > 0)
//   output logits                      DT [seq, vocab]
//   output cache_key.L, cache_value.L  DT [context + seq, kv_heads, head_dim]
// DT is the model's dtype (its config's `dtype`: f32, or bf16 as served):
// every weight, activation and cache entry is stored in it (nn.hpp says where
// half precision computes in f32).
// The cache is preallocated: the input holds the keys (after RoPE) and values
// of the `context` tokens before this call in its first rows, and the output
// of the same name is the cache after it, those rows then the `seq` new ones.
// The output is the input updated in place: the lowering writes the new rows
// into the input's DRAM buffer and copies no cache (lower.hpp). A prefill
// (context 0) has no cache input; its output cache holds its `seq` rows.
// Token-major (a token's heads together) because the K and V projections
// produce [seq, kv_heads * head_dim]: the new rows are stored as they come
// (V straight from its GEMM, K from RoPE's kernel), where a head-major cache
// would scatter every token's columns over the heads.

#include <spool/interp/interp.hpp>
#include <spool/nn/nn.hpp>

#include <functional>
#include <map>

#include <optional>
#include <string>

namespace spool::models {

// Tokens processed by one call (`seq`) after `context` tokens already in the
// KV cache. Prefill: {S, 0}. Decode: {1, C}. Any seq >= 1 with any context
// >= 0 builds (a chunked prefill), and positions are context .. context+seq-1.
struct Phase {
  int64_t seq = 8;
  int64_t context = 0;
  // Logits of the last token only: a serving prefill needs nothing else to
  // sample the first new token (Hugging Face's generate passes
  // logits_to_keep=1, vLLM computes the rows it samples), so its LM head is
  // a [1, hidden] x [hidden, vocab] product rather than a [seq, ...] one.
  // A decode step has one token either way.
  bool last_token_logits = false;

  static Phase prefill(int64_t seq) { return {seq, 0}; }
  static Phase decode(int64_t context) { return {1, context}; }
  bool has_cache() const { return context > 0; }
  void validate(std::string_view model) const;  // throws spool::Error naming the model
};

// The attention of one decoder layer.
struct AttentionShape {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 10000.0;
  // qwen3: RMSNorm over each head's q and k before RoPE (weights q_norm/k_norm [head_dim]).
  std::optional<double> qk_norm_eps;
};

// A weight of the model's dtype.
Tensor model_weight(Graph& graph, DType dtype, const std::string& name, const Shape& shape);

// The cache inputs of the next call from a call's outputs: each cache_* output
// grown by `seq` zero rows (the room the next call writes its tokens into).
interp::Env next_cache(const std::map<std::string, interp::HostTensor>& outputs, int64_t seq);

// "f32" or "bf16" (the dtypes a model runs in); fails naming `what` otherwise.
DType model_dtype(const std::string& name, std::string_view what);

// Starts a decoder: input "tokens" i64 [seq] and the RoPE tables of positions
// context .. context+seq-1.
struct DecoderStart {
  Tensor tokens;
  nn::RopeTables rope;
};
DecoderStart start_decoder(Graph& graph, const Phase& phase, int64_t head_dim, double rope_theta,
                           const nn::RopeScaling& rope_scaling = {});

// Self-attention of layer `layer` on the normalised hidden states h [seq,
// hidden], weights under `prefix` ("model.layers.3.self_attn."): q/k/v/o
// projections without bias, rotate-half RoPE, causal grouped-query attention
// over the cached and new keys. With a `cache_layer` L it declares
// cache_key/value.L as inputs (when the phase has a cache) and outputs
// (always); without one it neither reads nor writes a cache.
// Returns o_proj's output [seq, hidden].
Tensor self_attention(const AttentionShape& shape, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                      const std::string& prefix, std::optional<int64_t> cache_layer);

// A cache of one call: the rows [seq, ...] this call adds to cache input
// `name` (declared when the phase has a cache: [context + seq, ...], the
// first `context` rows filled), output under the same name. Returns the
// whole cache after the call, [context + seq, ...]: the old rows, then the
// new (which the lowering writes into the input's buffer in place).
Tensor append_to_cache(const std::string& name, const Tensor& rows, const Phase& phase);

enum class Activation { Silu, GeluTanh };

// down(act(gate(x)) * up(x)) with weights prefix+"gate_proj.weight" [ffn,
// hidden], "up_proj.weight" [ffn, hidden], "down_proj.weight" [hidden, ffn].
Tensor gated_mlp(const Tensor& x, const std::string& prefix, int64_t ffn, Activation activation = Activation::Silu);

// One pre-norm decoder layer as the Llama family writes it:
//   x1 = x + self_attention(rms_norm(x)); return x1 + mlp(rms_norm(x1))
// with the norms' weights PREFIX"input_layernorm.weight" and
// PREFIX"post_attention_layernorm.weight" [hidden] and the attention's under
// PREFIX"self_attn.". `mlp` builds the feed-forward of its input.
Tensor residual_layer(const Tensor& x, const AttentionShape& attention, double rms_eps, const nn::RopeTables& rope,
                      const Phase& phase, const std::string& prefix, std::optional<int64_t> cache_layer,
                      const std::function<Tensor(const Tensor&)>& mlp);

// Final RMSNorm ("model.norm.weight") and the LM head: "lm_head.weight", or
// the embedding table itself when the embeddings are tied. Outputs "logits":
// [seq, vocab], or [1, vocab] for the last token when the phase asks so.
void finish_decoder(const Tensor& x, const Phase& phase, const Tensor& embedding_table, int64_t vocab, double rms_eps,
                    bool tied, bool norm_unit_offset = false);

}  // namespace spool::models
