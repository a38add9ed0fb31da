// spool::nn composites: every layer is spelled with HLIR primitives and views.

#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace spool::nn {
namespace {

void expect_float(const Tensor& x, std::string_view op) {
  if (!is_float(x.dtype())) fail("{}: expects a floating dtype, got {}", op, dtype_name(x.dtype()));
}

void expect_rank_at_least(const Tensor& x, int64_t rank, std::string_view op, std::string_view what) {
  if (x.rank() < rank) fail("{}: {} must have at least {} axes, got {}", op, what, rank, shape_str(x.shape()));
}

void expect_last_dim(const Tensor& param, const Tensor& x, std::string_view op, std::string_view what) {
  if (param.rank() != 1 || param.dim(0) != x.dim(-1))
    fail("{}: {} must be [{}] to match input {}, got {}", op, what, x.dim(-1), shape_str(x.shape()),
         shape_str(param.shape()));
  if (param.dtype() != x.dtype())
    fail("{}: {} has dtype {} but the input is {}", op, what, dtype_name(param.dtype()), dtype_name(x.dtype()));
}

Shape concat_shapes(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  expect_rank_at_least(a, 2, "matmul", "lhs");
  expect_rank_at_least(b, 2, "matmul", "rhs");
  if (a.dim(-1) != b.dim(-2))
    fail("matmul: inner dimensions differ: lhs {} vs rhs {}", shape_str(a.shape()), shape_str(b.shape()));
  if (a.dtype() != b.dtype())
    fail("matmul: dtypes differ: lhs {} vs rhs {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  // [batch, M, K, 1] * [batch, 1, K, N] -> [batch, M, K, N], summed over K.
  const Shape full = concat_shapes(batch, {m, k, n});
  const Tensor lhs = a.broadcast_to(concat_shapes(batch, {m, k})).unsqueeze(-1).expand(full);
  const Tensor rhs = b.broadcast_to(concat_shapes(batch, {k, n})).unsqueeze(-3).expand(full);
  return (lhs * rhs).sum(-2);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (a.rank() != 3 || b.rank() != 3)
    fail("bmm: expects 3-D operands, got lhs {} and rhs {}", shape_str(a.shape()), shape_str(b.shape()));
  if (a.dim(0) != b.dim(0))
    fail("bmm: batch sizes differ: lhs {} vs rhs {}", shape_str(a.shape()), shape_str(b.shape()));
  return matmul(a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  expect_rank_at_least(x, 1, "linear", "input");
  if (weight.rank() != 2) fail("linear: weight must be [out, in], got {}", shape_str(weight.shape()));
  if (weight.dim(1) != x.dim(-1))
    fail("linear: input {} has {} features but weight {} expects {}", shape_str(x.shape()), x.dim(-1),
         shape_str(weight.shape()), weight.dim(1));
  const Tensor x2 = x.rank() == 1 ? x.unsqueeze(0) : x;
  Tensor y = matmul(x2, weight.transpose(0, 1));
  if (x.rank() == 1) y = y.squeeze(0);
  if (bias) {
    if (bias->rank() != 1 || bias->dim(0) != weight.dim(0))
      fail("linear: bias must be [{}], got {}", weight.dim(0), shape_str(bias->shape()));
    y = y + *bias;
  }
  return y;
}

namespace {

bool is_half(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// f(x) computed in f32 for a half x and rounded once to x's dtype (PyTorch's
// opmath); f(x) itself otherwise.
template <typename F>
Tensor in_opmath(const Tensor& x, F&& f) {
  if (!is_half(x.dtype())) return f(x);
  return f(x.cast(DType::F32)).cast(x.dtype());
}

}  // namespace

Tensor exp(const Tensor& x) {
  expect_float(x, "exp");
  return in_opmath(x, [](const Tensor& t) { return exp2(t * std::numbers::log2e); });
}

Tensor log(const Tensor& x) {
  expect_float(x, "log");
  return in_opmath(x, [](const Tensor& t) { return log2(t) * std::numbers::ln2; });
}

Tensor cos(const Tensor& x) {
  expect_float(x, "cos");
  return in_opmath(x, [](const Tensor& t) { return sin(t + std::numbers::pi / 2); });
}

Tensor tanh(const Tensor& x) {
  expect_float(x, "tanh");
  return in_opmath(x, [](const Tensor& t) { return 1.0 - 2.0 * recip(exp(t * 2.0) + 1.0); });
}

Tensor sigmoid(const Tensor& x) {
  expect_float(x, "sigmoid");
  return in_opmath(x, [](const Tensor& t) { return recip(exp(-t) + 1.0); });
}

Tensor relu(const Tensor& x) { return maximum(x, 0.0); }

Tensor silu(const Tensor& x) {
  expect_float(x, "silu");
  return in_opmath(x, [](const Tensor& t) { return t * sigmoid(t); });
}

Tensor gelu_tanh(const Tensor& x) {
  expect_float(x, "gelu");
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return in_opmath(x, [k](const Tensor& t) { return t * 0.5 * (tanh((t + t * t * t * 0.044715) * k) + 1.0); });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) { return silu(gate) * up; }
Tensor geglu(const Tensor& gate, const Tensor& up) { return gelu_tanh(gate) * up; }

Tensor softmax(const Tensor& x, int64_t axis) {
  expect_float(x, "softmax");
  const int64_t a = x.normalize_axis(axis, "softmax");
  return in_opmath(x, [a](const Tensor& t) {
    const Tensor e = exp(t - t.max(a, true));
    return e * recip(e.sum(a, true));
  });
}

Tensor layer_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps) {
  expect_float(x, "layer_norm");
  expect_rank_at_least(x, 1, "layer_norm", "input");
  if (weight) expect_last_dim(*weight, x, "layer_norm", "weight");
  if (bias) expect_last_dim(*bias, x, "layer_norm", "bias");
  const DType t = is_half(x.dtype()) ? DType::F32 : x.dtype();
  const Tensor xt = x.cast(t);
  const Tensor centered = xt - xt.mean(-1, true);
  const Tensor variance = (centered * centered).mean(-1, true);
  Tensor y = centered * recip(sqrt(variance + eps));
  if (weight) y = y * weight->cast(t);
  if (bias) y = y + bias->cast(t);
  return y.cast(x.dtype());
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, bool unit_offset) {
  expect_float(x, "rms_norm");
  expect_rank_at_least(x, 1, "rms_norm", "input");
  expect_last_dim(weight, x, "rms_norm", "weight");
  const DType t = is_half(x.dtype()) ? DType::F32 : x.dtype();
  const Tensor xt = x.cast(t), wt = weight.cast(t);
  const Tensor normalized = xt * recip(sqrt((xt * xt).mean(-1, true) + eps));
  return (normalized * (unit_offset ? wt + 1.0 : wt)).cast(x.dtype());
}

Tensor l2_norm(const Tensor& x, double eps) {
  expect_float(x, "l2_norm");
  expect_rank_at_least(x, 1, "l2_norm", "input");
  const DType t = is_half(x.dtype()) ? DType::F32 : x.dtype();
  const Tensor xt = x.cast(t);
  return (xt * recip(sqrt((xt * xt).mean(-1, true) + eps))).cast(x.dtype());
}

void RopeScaling::validate() const {
  if (kind == Kind::None) return;
  if (!(factor >= 1.0) || !std::isfinite(factor)) fail("rope scaling: factor must be at least 1, got {}", factor);
  if (kind == Kind::Linear) return;
  if (original_max_position_embeddings < 1)
    fail("rope scaling: original_max_position_embeddings must be positive, got {}", original_max_position_embeddings);
  if (kind == Kind::Llama3 && !(low_freq_factor > 0.0 && high_freq_factor > low_freq_factor))
    fail("rope scaling: llama3 needs 0 < low_freq_factor < high_freq_factor, got {} and {}", low_freq_factor,
         high_freq_factor);
  if (kind == Kind::Yarn) {
    if (!(beta_fast > 0.0 && beta_slow > 0.0 && std::isfinite(beta_fast) && std::isfinite(beta_slow)))
      fail("rope scaling: yarn's beta_fast and beta_slow must be positive, got {} and {}", beta_fast, beta_slow);
    if (!(attention_factor > 0.0) || !std::isfinite(attention_factor))
      fail("rope scaling: yarn's attention_factor must be positive, got {}", attention_factor);
  }
}

std::string describe(const RopeScaling& s) {
  switch (s.kind) {
    case RopeScaling::Kind::None: return "";
    case RopeScaling::Kind::Linear: return fmt::format(", linear RoPE scaling x{}", s.factor);
    case RopeScaling::Kind::Llama3:
      return fmt::format(", llama3 RoPE scaling x{} of {} positions", s.factor, s.original_max_position_embeddings);
    case RopeScaling::Kind::Yarn:
      return fmt::format(", yarn RoPE scaling x{} of {} positions (attention factor {:.4g})", s.factor,
                         s.original_max_position_embeddings, s.attention_factor);
  }
  return "";
}

double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  auto get_mscale = [&](double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  if (mscale != 0.0 && mscale_all_dim != 0.0) return get_mscale(mscale) / get_mscale(mscale_all_dim);
  return get_mscale(1.0);
}

namespace {

// clamp(x, 0, 1) = -max(-max(x, 0), -1).
Tensor unit_clamp(const Tensor& x) { return -maximum(-maximum(x, 0.0), -1.0); }

// The scaled inverse frequencies of `scaling` (see RopeScaling): each is
// inv_freq[i] * ((1 - w) / factor + w), w in [0, 1] the weight of the
// unscaled frequency.
Tensor scaled(const Tensor& inv_freq, int64_t head_dim, double theta, const RopeScaling& s) {
  using Kind = RopeScaling::Kind;
  if (s.kind == Kind::None || s.factor == 1.0) return inv_freq;
  if (s.kind == Kind::Linear) return inv_freq * (1.0 / s.factor);
  Tensor w;
  const double original = static_cast<double>(s.original_max_position_embeddings);
  if (s.kind == Kind::Llama3) {
    // original / wavelength = original * inv_freq / (2 pi): at most
    // low_freq_factor divides by factor (w = 0), at least high_freq_factor
    // keeps (w = 1), linear between.
    const double span = s.high_freq_factor - s.low_freq_factor;
    w = unit_clamp(inv_freq * (original / (2.0 * std::numbers::pi) / span) - s.low_freq_factor / span);
  } else {
    // Dimension pair i of head_dim / 2: kept (extrapolated) below the
    // ramp's low end, interpolated above its high end.
    const double d = static_cast<double>(head_dim);
    auto correction_dim = [&](double rotations) {
      return d * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
    };
    double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1.0);
    if (low == high) high += 0.001;  // as Hugging Face avoids a zero-width ramp
    const Tensor ramp = unit_clamp((iota(inv_freq.graph(), {head_dim / 2}, 0, DType::F32) - low) * (1.0 / (high - low)));
    w = 1.0 - ramp;
  }
  return inv_freq * ((1.0 - w) * (1.0 / s.factor) + w);
}

}  // namespace

RopeTables rope_tables(Graph& graph, int64_t seq, int64_t head_dim, double theta, int64_t position_offset,
                       const RopeScaling& scaling) {
  if (head_dim < 2 || head_dim % 2 != 0) fail("rope: head_dim must be even and positive, got {}", head_dim);
  if (seq < 1) fail("rope: seq must be positive, got {}", seq);
  if (!(theta > 1.0)) fail("rope: theta must be greater than 1, got {}", theta);
  scaling.validate();
  const int64_t half = head_dim / 2;
  // inv_freq[i] = theta^(-2i/head_dim) = 2^(i * (-2 log2(theta) / head_dim))
  const Tensor inv_freq = scaled(
      exp2(iota(graph, {half}, 0, DType::F32) * (-2.0 * std::log2(theta) / static_cast<double>(head_dim))), head_dim,
      theta, scaling);
  const Tensor positions = iota(graph, {seq}, 0, DType::F32) + static_cast<double>(position_offset);
  const Tensor freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // [seq, half]
  const Tensor angles = concat({freqs, freqs}, 1);                       // [seq, head_dim]
  if (scaling.kind == RopeScaling::Kind::Yarn && scaling.attention_factor != 1.0)
    return {cos(angles) * scaling.attention_factor, sin(angles) * scaling.attention_factor};
  return {cos(angles), sin(angles)};
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  expect_float(x, "rope");
  expect_rank_at_least(x, 2, "rope", "input");
  const int64_t seq = x.dim(-2), dim = x.dim(-1);
  if (dim % 2 != 0) fail("rope: head dimension {} of {} is odd", dim, shape_str(x.shape()));
  for (const Tensor* table : {&cos, &sin})
    if (table->rank() != 2 || table->dim(0) != seq || table->dim(1) != dim)
      fail("rope: tables must be [{},{}] for input {}, got {}", seq, dim, shape_str(x.shape()),
           shape_str(table->shape()));
  // x * cos + rotate_half(x) * sin, half by half (the same ops on every
  // element, so the same values): each half of the result is one
  // elementwise computation, stored straight into its half of the output,
  // where concatenating -x2 and x1 first would materialise rotate_half(x).
  const std::vector<Tensor> xs = x.chunk(2, -1);
  const std::vector<Tensor> cs = cos.cast(x.dtype()).chunk(2, -1), ss = sin.cast(x.dtype()).chunk(2, -1);
  return concat({xs[0] * cs[0] + (-xs[1]) * ss[0], xs[1] * cs[1] + xs[0] * ss[1]}, -1);
}

Tensor rope_interleaved(const Tensor& x, const Tensor& cos, const Tensor& sin, bool in_f32) {
  expect_float(x, "rope_interleaved");
  expect_rank_at_least(x, 2, "rope_interleaved", "input");
  const int64_t seq = x.dim(-2), dim = x.dim(-1);
  if (dim % 2 != 0) fail("rope_interleaved: head dimension {} of {} is odd", dim, shape_str(x.shape()));
  for (const Tensor* table : {&cos, &sin})
    if (table->rank() != 2 || table->dim(0) != seq || table->dim(1) != dim)
      fail("rope_interleaved: tables must be [{},{}] for input {}, got {}", seq, dim, shape_str(x.shape()),
           shape_str(table->shape()));
  const DType t = in_f32 && is_half(x.dtype()) ? DType::F32 : x.dtype();
  // The pairs' members as strided views (every second element), so that the
  // result is one elementwise computation per half, as in rope.
  const Tensor first = x.slice(-1, 0, dim, 2).cast(t), second = x.slice(-1, 1, dim, 2).cast(t);
  const Tensor c = cos.cast(t).slice(-1, 0, dim / 2), s = sin.cast(t).slice(-1, 0, dim / 2);
  return concat({first * c + (-second) * s, second * c + first * s}, -1).cast(x.dtype());
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, std::optional<double> scale,
                 int64_t chunk) {
  for (const Tensor* t : {&q, &k, &v})
    if (t->rank() != 3) fail("attention: q, k and v must be [heads, seq, head_dim], got {}", shape_str(t->shape()));
  const int64_t hq = q.dim(0), s = q.dim(1), d = q.dim(2);
  const int64_t hkv = k.dim(0), dv = v.dim(2);
  int64_t t = k.dim(1);
  if (k.dim(0) != v.dim(0) || k.dim(1) != v.dim(1))
    fail("attention: k {} and v {} must have the same heads and keys", shape_str(k.shape()), shape_str(v.shape()));
  if (chunk < 0) fail("attention: chunk must not be negative, got {}", chunk);
  if (chunk > 0 && !causal) fail("attention: chunked attention is causal");
  if (k.dim(2) != d) fail("attention: head dims differ: q {} vs k {}", shape_str(q.shape()), shape_str(k.shape()));
  if (hkv < 1 || hq % hkv != 0)
    fail("attention: {} query heads cannot be grouped over {} KV heads", hq, hkv);
  if (causal && t < s) fail("attention: causal attention needs at least as many keys ({}) as queries ({})", t, s);
  const int64_t group = hq / hkv;
  // Chunked: no query sees a key before the first query's chunk starts.
  const int64_t first_query = t - s;
  const int64_t skipped = chunk > 0 ? first_query - first_query % chunk : 0;
  t -= skipped;
  // Query heads grouped by the KV head they share: [Hkv, group, S, D]. K and
  // V are read as [Hkv, 1, T, D] and broadcast over the group by matmul.
  const Tensor q4 = q.reshape({hkv, group, s, d});
  const Tensor k4 = (skipped > 0 ? k.slice(1, skipped, skipped + t) : k).unsqueeze(1);
  const Tensor v4 = (skipped > 0 ? v.slice(1, skipped, skipped + t) : v).unsqueeze(1);
  const double factor = scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));
  Tensor scores = matmul(q4, k4.transpose(-1, -2));
  scores = is_half(scores.dtype()) ? (scores.cast(DType::F32) * factor).cast(scores.dtype()) : scores * factor;
  // One query sits at the last position and sees every key: its mask is
  // empty, and none is built (a decode step's scores stay unmasked).
  if (causal && s > 1) {
    // Query i sits at position i + (T - S); it may not see keys after it
    // (nor, chunked, keys before its chunk's start).
    Graph& g = q.graph();
    const Tensor query_pos = iota(g, {s, t}, 0, DType::I64) + static_cast<double>(first_query);
    Tensor key_pos = iota(g, {s, t}, 1, DType::I64);
    if (skipped > 0) key_pos = key_pos + static_cast<double>(skipped);
    Tensor hidden = less_than(query_pos, key_pos);
    if (chunk > 0) hidden = logical_or(hidden, less_than(key_pos, query_pos - query_pos % static_cast<double>(chunk)));
    scores = masked_fill(scores, hidden, -INFINITY);
  }
  return matmul(softmax(scores, -1), v4).reshape({hq, s, dv});
}

Tensor embedding(const Tensor& ids, const Tensor& table) {
  if (!is_integer(ids.dtype())) fail("embedding: ids must be i32 or i64, got {}", dtype_name(ids.dtype()));
  if (table.rank() != 2) fail("embedding: table must be [vocab, dim], got {}", shape_str(table.shape()));
  const int64_t dim = table.dim(1);
  const Tensor flat = ids.reshape({ids.numel(), 1}).expand({ids.numel(), dim});
  Shape out_shape = ids.shape();
  out_shape.push_back(dim);
  return gather(table, flat, 0).reshape(out_shape);
}

TopK topk(const Tensor& x, int64_t k) {
  const Tensor indices = topk_indices(x, k);
  return {gather(x, indices, -1), indices};
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { return spool::where(mask, value, x); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return spool::where(cond, a, b); }
Tensor cast(const Tensor& x, DType to) { return x.cast(to); }

Tensor concat(const std::vector<Tensor>& parts, int64_t axis) {
  if (parts.empty()) fail("concat: needs at least one input");
  const Tensor& first = parts.front();
  const int64_t a = first.normalize_axis(axis, "concat");
  int64_t total = 0;
  for (const Tensor& part : parts) {
    if (part.rank() != first.rank() || part.dtype() != first.dtype())
      fail("concat: input {}{} does not match {}{}", dtype_name(part.dtype()), shape_str(part.shape()),
           dtype_name(first.dtype()), shape_str(first.shape()));
    for (int64_t i = 0; i < first.rank(); ++i)
      if (i != a && part.dim(i) != first.dim(i))
        fail("concat: inputs {} and {} differ on axis {} (only axis {} may differ)", shape_str(first.shape()),
             shape_str(part.shape()), i, a);
    total += part.dim(a);
  }
  if (parts.size() == 1) return first;
  const double fill = is_float(first.dtype()) ? -0.0 : 0.0;
  Tensor result;
  int64_t offset = 0;
  for (const Tensor& part : parts) {
    const Tensor padded = part.pad(a, offset, total - offset - part.dim(a), fill);
    offset += part.dim(a);
    if (result.is_null())
      result = padded;
    else
      result = first.dtype() == DType::Bool ? logical_or(result, padded) : result + padded;
  }
  return result;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t axis) { return x.chunk(chunks, axis); }
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis) {
  return x.split(sizes, axis);
}

}  // namespace spool::nn
