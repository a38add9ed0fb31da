// The llama decoder, layer by layer, as Hugging Face's LlamaForCausalLM computes it.

#include "llama.hpp"

#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

namespace spool::examples {

LlamaConfig LlamaConfig::tiny() { return LlamaConfig{}; }

LlamaConfig LlamaConfig::llama3_8b() {
  LlamaConfig c;
  c.layers = 32;
  c.hidden = 4096;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 14336;
  c.vocab = 128256;
  c.rope_theta = 500000.0;
  return c;
}

void LlamaConfig::validate() const {
  auto positive = [](int64_t value, const char* name) {
    if (value < 1) fail("llama config: {} must be positive, got {}", name, value);
  };
  positive(layers, "layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(head_dim, "head_dim");
  positive(ffn, "ffn");
  positive(vocab, "vocab");
  if (heads % kv_heads != 0) fail("llama config: heads ({}) must be a multiple of kv_heads ({})", heads, kv_heads);
  if (head_dim % 2 != 0) fail("llama config: head_dim must be even for RoPE, got {}", head_dim);
}

Tensor llama_layer(const LlamaConfig& c, const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const std::string& prefix) {
  Graph& g = x.graph();
  const int64_t seq = x.dim(0);
  auto w = [&](const std::string& name, Shape shape) { return weight(g, prefix + name, DType::F32, shape); };

  // Attention block.
  const Tensor h = nn::rms_norm(x, w("input_layernorm.weight", {c.hidden}), c.rms_eps);
  auto heads_first = [&](const Tensor& t, int64_t heads) {  // [seq, heads*D] -> [heads, seq, D]
    return t.reshape({seq, heads, c.head_dim}).transpose(0, 1);
  };
  const Tensor q = heads_first(nn::linear(h, w("self_attn.q_proj.weight", {c.heads * c.head_dim, c.hidden})), c.heads);
  const Tensor k =
      heads_first(nn::linear(h, w("self_attn.k_proj.weight", {c.kv_heads * c.head_dim, c.hidden})), c.kv_heads);
  const Tensor v =
      heads_first(nn::linear(h, w("self_attn.v_proj.weight", {c.kv_heads * c.head_dim, c.hidden})), c.kv_heads);
  const Tensor attn = nn::attention(nn::rope(q, cos, sin), nn::rope(k, cos, sin), v, /*causal=*/true);
  const Tensor merged = attn.transpose(0, 1).reshape({seq, c.heads * c.head_dim});
  const Tensor x1 = x + nn::linear(merged, w("self_attn.o_proj.weight", {c.hidden, c.heads * c.head_dim}));

  // Feed-forward block.
  const Tensor h2 = nn::rms_norm(x1, w("post_attention_layernorm.weight", {c.hidden}), c.rms_eps);
  const Tensor gate = nn::linear(h2, w("mlp.gate_proj.weight", {c.ffn, c.hidden}));
  const Tensor up = nn::linear(h2, w("mlp.up_proj.weight", {c.ffn, c.hidden}));
  return x1 + nn::linear(nn::swiglu(gate, up), w("mlp.down_proj.weight", {c.hidden, c.ffn}));
}

Graph build_llama(const LlamaConfig& c, int64_t seq) {
  c.validate();
  if (seq < 1) fail("llama: seq must be positive, got {}", seq);
  Graph g("llama");
  const Tensor tokens = input(g, "tokens", DType::I64, {seq});
  Tensor x = nn::embedding(tokens, weight(g, "model.embed_tokens.weight", DType::F32, {c.vocab, c.hidden}));
  const nn::RopeTables rope = nn::rope_tables(g, seq, c.head_dim, c.rope_theta);
  for (int64_t layer = 0; layer < c.layers; ++layer)
    x = llama_layer(c, x, rope.cos, rope.sin, fmt::format("model.layers.{}.", layer));
  x = nn::rms_norm(x, weight(g, "model.norm.weight", DType::F32, {c.hidden}), c.rms_eps);
  output("logits", nn::linear(x, weight(g, "lm_head.weight", DType::F32, {c.vocab, c.hidden})));
  return g;
}

}  // namespace spool::examples
