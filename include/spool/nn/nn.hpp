#pragma once
// spool::nn: the layers of transformer models, built from HLIR primitives.
//
// Nothing here is a primitive: matmul is broadcast-multiply + sum-reduce,
// softmax is max-subtracted exp2 / sum, norms and activations are elementwise
// chains, attention composes them, and rewrite rules rediscover each of them
// as kernels. Conventions follow PyTorch: linear weights are [out, in], axes
// may be negative, and every function checks its operands and throws
// spool::Error naming itself and the offending shapes.
//
// Half precision (bf16, f16) follows PyTorch's inference kernels: matmul
// multiplies the stored operands and rounds the sum once; the functions that
// PyTorch computes in f32 "opmath" (exp, log, cos, tanh, sigmoid, silu,
// gelu_tanh, softmax, layer_norm, rms_norm) cast a half input to f32, compute
// there and round the result to the input's dtype once (a norm's weight and
// bias join in f32, as torch.nn.functional.rms_norm and layer_norm do);
// elementwise arithmetic, rope and the residual stream round after every op.

#include <spool/ir/tensor.hpp>

#include <string>

#include <optional>
#include <vector>

namespace spool::nn {

// [..., M, K] x [..., K, N] -> [..., M, N]; batch axes broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, M, K] x [B, K, N] -> [B, M, N] with equal batch sizes.
Tensor bmm(const Tensor& a, const Tensor& b);
// x [..., in] times weight [out, in] transposed, plus bias [out].
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

Tensor exp(const Tensor& x);  // exp2(x * log2(e))
Tensor log(const Tensor& x);  // log2(x) * ln(2)
Tensor cos(const Tensor& x);  // sin(x + pi/2)
Tensor tanh(const Tensor& x); // 1 - 2 / (exp(2x) + 1): exact limits at +-inf
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);  // the tanh approximation (GELU "tanh" in PyTorch)
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up
Tensor geglu(const Tensor& gate, const Tensor& up);   // gelu_tanh(gate) * up

Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * w, or * (1 + w) with unit_offset (gemma).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6, bool unit_offset = false);
// x / sqrt(mean(x^2) + eps) over the last axis, without a weight (Llama 4's
// L2 norm of q and k); half precision computes in f32 and rounds once.
Tensor l2_norm(const Tensor& x, double eps = 1e-6);

// RoPE scaling as Hugging Face's `rope_scaling` defines it (its rope_type),
// for a context longer than the one a model was pretrained on:
// - linear: every frequency divided by `factor`;
// - llama3 (Llama 3.1 and later): frequencies whose wavelength exceeds
//   original_max_position_embeddings / low_freq_factor divided by
//   `factor`, those under original_max_position_embeddings /
//   high_freq_factor kept, and a linear blend of the two between;
// - yarn (DeepSeek-V3, Qwen at long context): dimension i's frequency is
//   interpolated (divided by `factor`) or kept along a ramp over the
//   dimensions between the ones that make beta_fast and beta_slow
//   rotations over the original context, and cos and sin are multiplied by
//   `attention_factor`.
struct RopeScaling {
  enum class Kind { None, Linear, Llama3, Yarn };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;           // llama3 and yarn
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn
  bool truncate = true;                                   // yarn: the ramp's ends rounded to whole dimensions
  double attention_factor = 1.0;                          // yarn
  void validate() const;  // throws spool::Error naming the bad field
};
// yarn's default attention factor: get_mscale(factor, mscale) /
// get_mscale(factor, mscale_all_dim) when both are given (non-zero), else
// get_mscale(factor), with get_mscale(s, m) = 0.1 m ln(s) + 1 (1 for s <= 1).
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim);
// ", llama3 RoPE scaling x8 of 8192 positions" and the like; empty for none.
std::string describe(const RopeScaling& scaling);

// RoPE tables as in llama: cos and sin of [seq, head_dim], for positions
// offset .. offset+seq-1, frequencies theta^(-2i/head_dim) (scaled) repeated twice.
struct RopeTables {
  Tensor cos, sin;
};
RopeTables rope_tables(Graph& graph, int64_t seq, int64_t head_dim, double theta, int64_t position_offset = 0,
                       const RopeScaling& scaling = {});
// Rotate-half RoPE: x * cos + rotate_half(x) * sin; x is [..., seq, head_dim],
// built half by half (x1 c1 + (-x2) s1, x2 c2 + x1 s2: the same ops per element).
// Tables of another dtype are cast to x's first (Hugging Face's
// `cos.to(x.dtype)`), so a bf16 x rotates in bf16.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin);
// Interleaved-pair RoPE: pair i is (x[2i], x[2i+1]), rotated by angle i as
// a complex number (x[2i] + j x[2i+1]) * (cos + j sin); the tables are
// rope_tables' (the angles of the first half are used). The result holds the
// rotated pairs' first members, then their second members: rotate-half's
// layout. That is the layout Hugging Face's DeepSeek-V3 produces
// (apply_rotary_pos_emb_interleave de-interleaves, then rotates halves);
// Llama 4's view_as_complex keeps the pairs interleaved, and this layout is
// the same per-head permutation of q and k, which q . k does not see.
// `in_f32`: a half x computes in f32 and rounds once (Llama 4 multiplies in
// complex float32); otherwise x's dtype as in rope.
Tensor rope_interleaved(const Tensor& x, const Tensor& cos, const Tensor& sin, bool in_f32 = false);

// Scaled dot-product attention with grouped KV heads: q [Hq, S, D],
// k [Hkv, T, D] and v [Hkv, T, Dv] with Hq a multiple of Hkv; each KV head
// serves Hq/Hkv query heads through a broadcast view (no copy). Causal
// masking aligns the S queries with the last S of the T keys (key j at
// position j, query i at T - S + i). A `chunk` > 0 makes the attention
// local (Llama 4's chunked attention): a query sees only the keys of its own
// chunk of `chunk` positions (floor(position / chunk) equal) up to itself;
// keys before the first query's chunk are not read at all (a decode step
// reads its chunk's keys only). Returns [Hq, S, Dv].
// Half precision as Hugging Face's eager attention: the scores matmul rounds
// to q's dtype, the scale multiplies in f32 and rounds, the softmax runs in
// f32 and its probabilities round to q's dtype before the values matmul.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, std::optional<double> scale = {},
                 int64_t chunk = 0);

// ids (integer, any shape) into table [vocab, dim] -> [ids..., dim].
Tensor embedding(const Tensor& ids, const Tensor& table);

struct TopK {
  Tensor values, indices;
};
TopK topk(const Tensor& x, int64_t k);  // along the last axis, descending

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType to);
// Concatenation along an axis: each input padded to the full extent and the
// padded views summed. The padding is -0.0, the identity of float addition
// (x + -0.0 == x for every x, including -0.0), and 0 for integers; bool
// inputs are combined with logical or.
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis);

}  // namespace spool::nn
