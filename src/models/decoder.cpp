// Shared decoder pieces: phases, cached self-attention, gated MLP, model ends.

#include <spool/models/decoder.hpp>

#include <spool/support/error.hpp>

#include <cmath>

namespace spool::models {

void Phase::validate(std::string_view model) const {
  if (seq < 1) fail("{}: seq must be positive, got {}", model, seq);
  if (context < 0) fail("{}: context must not be negative, got {}", model, context);
}

Tensor model_weight(Graph& graph, DType dtype, const std::string& name, const Shape& shape) {
  return weight(graph, name, dtype, shape);
}

interp::Env next_cache(const std::map<std::string, interp::HostTensor>& outputs, int64_t seq) {
  interp::Env cache;
  for (const auto& [name, value] : outputs) {
    if (name.rfind("cache_", 0) != 0) continue;
    Shape shape = value.shape();
    shape.at(0) += seq;
    interp::HostTensor grown(value.dtype(), shape);  // token-major: the old rows come first
    for (int64_t i = 0; i < value.size(); ++i) grown.set(i, value.get(i));
    cache.emplace(name, std::move(grown));
  }
  return cache;
}

DType model_dtype(const std::string& name, std::string_view what) {
  if (name == "f32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  fail("{}: unknown dtype '{}' (expected bf16 or f32)", what, name);
}

DecoderStart start_decoder(Graph& graph, const Phase& phase, int64_t head_dim, double rope_theta,
                           const nn::RopeScaling& rope_scaling) {
  const Tensor tokens = input(graph, "tokens", DType::I64, {phase.seq});
  return {tokens, nn::rope_tables(graph, phase.seq, head_dim, rope_theta, phase.context, rope_scaling)};
}

Tensor self_attention(const AttentionShape& a, const Tensor& h, const nn::RopeTables& rope, const Phase& phase,
                      const std::string& prefix, std::optional<int64_t> cache_layer) {
  Graph& g = h.graph();
  const int64_t seq = h.dim(0), d = a.head_dim;
  auto w = [&](const std::string& name, const Shape& shape) { return model_weight(g, h.dtype(), prefix + name, shape); };
  // [seq, heads*D] -> [seq, heads, D]; heads move first after the per-head norm.
  Tensor q = nn::linear(h, w("q_proj.weight", {a.heads * d, a.hidden})).reshape({seq, a.heads, d});
  Tensor k = nn::linear(h, w("k_proj.weight", {a.kv_heads * d, a.hidden})).reshape({seq, a.kv_heads, d});
  const Tensor v = nn::linear(h, w("v_proj.weight", {a.kv_heads * d, a.hidden})).reshape({seq, a.kv_heads, d});
  if (a.qk_norm_eps) {
    q = nn::rms_norm(q, w("q_norm.weight", {d}), *a.qk_norm_eps);
    k = nn::rms_norm(k, w("k_norm.weight", {d}), *a.qk_norm_eps);
  }
  q = nn::rope(q.transpose(0, 1), rope.cos, rope.sin);
  k = nn::rope(k.transpose(0, 1), rope.cos, rope.sin);
  const Tensor v_heads = v.transpose(0, 1);
  Tensor keys = k, values = v_heads;
  if (cache_layer) {
    const int64_t layer = *cache_layer;
    const std::string key_name = fmt::format("cache_key.{}", layer), value_name = fmt::format("cache_value.{}", layer);
    // The cache is token-major, [tokens, kv_heads, head_dim]: a call's new
    // rows are its projections' rows as they are ([seq, kv_heads * D]), one
    // contiguous store per token.
    Tensor key_rows = k.transpose(0, 1), value_rows = v;
    if (phase.has_cache()) {
      // The preallocated cache holds `context` rows and room for this call's
      // `seq`: its first rows, then the new ones, is the cache afterwards
      // (the lowering writes the new rows into the input's buffer in place).
      const Shape cache_shape = {phase.context + seq, a.kv_heads, d};
      const Tensor key_cache = input(g, key_name, k.dtype(), cache_shape);
      const Tensor value_cache = input(g, value_name, v.dtype(), cache_shape);
      key_rows = nn::concat({key_cache.slice(0, 0, phase.context), key_rows}, 0);
      value_rows = nn::concat({value_cache.slice(0, 0, phase.context), value_rows}, 0);
    }
    output(key_name, key_rows);
    output(value_name, value_rows);
    keys = key_rows.transpose(0, 1);
    values = value_rows.transpose(0, 1);
  } else {
    SPOOL_ASSERT(!phase.has_cache(), "self_attention: a phase with a KV cache needs a cache layer");
  }
  const Tensor attn = nn::attention(q, keys, values, /*causal=*/true);
  const Tensor merged = attn.transpose(0, 1).reshape({seq, a.heads * d});
  return nn::linear(merged, w("o_proj.weight", {a.hidden, a.heads * d}));
}

Tensor append_to_cache(const std::string& name, const Tensor& rows, const Phase& phase) {
  Tensor all = rows;
  if (phase.has_cache()) {
    // The preallocated cache holds `context` rows and room for this call's
    // `seq`: its first rows, then the new ones, is the cache afterwards
    // (the lowering writes the new rows into the input's buffer in place).
    Shape cache_shape = rows.shape();
    cache_shape.at(0) = phase.context + rows.dim(0);
    const Tensor cache = input(rows.graph(), name, rows.dtype(), cache_shape);
    all = nn::concat({cache.slice(0, 0, phase.context), rows}, 0);
  }
  output(name, all);
  return all;
}

Tensor residual_layer(const Tensor& x, const AttentionShape& attention, double rms_eps, const nn::RopeTables& rope,
                      const Phase& phase, const std::string& prefix, std::optional<int64_t> cache_layer,
                      const std::function<Tensor(const Tensor&)>& mlp) {
  Graph& g = x.graph();
  const Tensor h = nn::rms_norm(x, model_weight(g, x.dtype(), prefix + "input_layernorm.weight", {x.dim(1)}), rms_eps);
  const Tensor x1 = x + self_attention(attention, h, rope, phase, prefix + "self_attn.", cache_layer);
  const Tensor h2 =
      nn::rms_norm(x1, model_weight(g, x.dtype(), prefix + "post_attention_layernorm.weight", {x.dim(1)}), rms_eps);
  return x1 + mlp(h2);
}

Tensor gated_mlp(const Tensor& x, const std::string& prefix, int64_t ffn, Activation activation) {
  Graph& g = x.graph();
  const int64_t hidden = x.dim(-1);
  const Tensor gate = nn::linear(x, model_weight(g, x.dtype(), prefix + "gate_proj.weight", {ffn, hidden}));
  const Tensor up = nn::linear(x, model_weight(g, x.dtype(), prefix + "up_proj.weight", {ffn, hidden}));
  const Tensor act = activation == Activation::Silu ? nn::swiglu(gate, up) : nn::geglu(gate, up);
  return nn::linear(act, model_weight(g, x.dtype(), prefix + "down_proj.weight", {hidden, ffn}));
}

void finish_decoder(const Tensor& x, const Phase& phase, const Tensor& embedding_table, int64_t vocab, double rms_eps,
                    bool tied, bool norm_unit_offset) {
  Graph& g = x.graph();
  const int64_t hidden = x.dim(-1);
  // The norm is per row, so norming the last row alone gives that row's value.
  const Tensor rows = phase.last_token_logits ? x.slice(0, x.dim(0) - 1, x.dim(0)) : x;
  const Tensor normed =
      nn::rms_norm(rows, model_weight(g, x.dtype(), "model.norm.weight", {hidden}), rms_eps, norm_unit_offset);
  const Tensor head = tied ? embedding_table : model_weight(g, x.dtype(), "lm_head.weight", {vocab, hidden});
  output("logits", nn::linear(normed, head));
}

}  // namespace spool::models
