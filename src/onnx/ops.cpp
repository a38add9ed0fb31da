// The ONNX ops, each mapped onto HLIR primitives or spool::nn composites.
// Semantics follow the operator documentation of the ONNX specification
// (https://onnx.ai/onnx/operators/), opset by opset where they changed.

#include "importer.hpp"

#include <spool/nn/nn.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace spool::onnx::detail {
namespace {

using interp::HostTensor;

int64_t norm_axis(NodeCtx& c, int64_t axis, int64_t rank, std::string_view what = "axis") {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    c.error("{} {} is out of range for rank {}", what, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

// v < x, a scalar on the left.
Tensor less_than(double v, const Tensor& x) { return spool::less_than(constant(x.graph(), v, x.dtype(), x.shape()), x); }

Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

HostTensor i64_tensor(const std::vector<int64_t>& values, Shape shape) {
  return HostTensor::from_i64(std::move(shape), values);
}

// ---- elementwise ------------------------------------------------------------

Tensor minimum(const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::Bool) return logical_and(a, b);
  return -maximum(-a, -b);
}

Tensor absolute(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x;
  return maximum(x, -x);
}

// erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7).
Tensor erf(const Tensor& x) {
  const Tensor ax = absolute(x);
  const Tensor t = recip(ax * 0.3275911 + 1.0);
  Tensor poly = t * 1.061405429 + -1.453152027;
  poly = poly * t + 1.421413741;
  poly = poly * t + -0.284496736;
  poly = poly * t + 0.254829592;
  poly = poly * t;
  const Tensor y = 1.0 - poly * nn::exp(-(ax * ax));
  return where(less_than(x, 0.0), -y, y);
}

// x^y for floats: exp2(y log2|x|), with the sign of an odd integer power of
// a negative base, NaN for a non-integer power of one, and x^0 = 1.
Tensor power(const Tensor& x, const Tensor& y) {
  const Shape shape = broadcast_shapes(x.shape(), y.shape(), "Pow");
  const Tensor xb = x.broadcast_to(shape), yb = y.broadcast_to(shape);
  const Tensor magnitude = exp2(yb * log2(absolute(xb)));
  const Tensor is_int = equal(yb % 1.0, 0.0);
  const Tensor odd = equal(absolute(yb % 2.0), 1.0);
  Graph& g = x.graph();
  const Tensor nan = constant(g, std::nan(""), x.dtype(), shape);
  const Tensor negative = where(is_int, where(odd, -magnitude, magnitude), nan);
  return where(equal(yb, 0.0), constant(g, 1.0, x.dtype(), shape), where(less_than(xb, 0.0), negative, magnitude));
}

// floor for floats: truncation through i64, corrected for negative values;
// values of at least 2^23 in magnitude are integers already (and NaN stays).
Tensor floor_of(const Tensor& x) {
  const Tensor t = x.cast(DType::I64).cast(x.dtype());
  const Tensor floored = where(less_than(x, t), t - 1.0, t);
  return where(less_than(absolute(x), 8388608.0), floored, x);
}

template <typename F>
Handler unary_float(F f) {
  return [f](NodeCtx& c) {
    const Tensor x = c.in(0);
    c.expect_float(x, "input");
    c.out(0, f(c, x));
  };
}

Tensor relu(const Tensor& x) { return is_float(x.dtype()) ? nn::relu(x) : maximum(x, 0.0); }

void variadic(NodeCtx& c, const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
  if (c.num_inputs() == 0) c.error("needs at least one input");
  Tensor acc = c.in(0);
  for (size_t i = 1; i < c.num_inputs(); ++i) acc = f(acc, c.in(i));
  c.out(0, acc);
}

Tensor binary_arith(NodeCtx& c, const Tensor& a, const Tensor& b, char op) {
  if (a.dtype() != b.dtype()) c.error("inputs differ in dtype: {} and {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  if (a.dtype() == DType::Bool) c.unsupported("arithmetic on bool");
  switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default:
      if (!is_float(a.dtype())) c.unsupported("integer division");
      return a / b;
  }
}

Tensor check_same(NodeCtx& c, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) c.error("inputs differ in dtype: {} and {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  return a;
}

DType cast_target(NodeCtx& c, int onnx_type) {
  const std::optional<DType> to = to_dtype(onnx_type);
  if (!to) c.unsupported("cast to {}", onnx_type_name(onnx_type));
  return *to;
}

// ---- shapes -----------------------------------------------------------------

std::vector<int64_t> axes_of(NodeCtx& c, size_t input, int64_t rank, bool* given = nullptr) {
  std::vector<int64_t> axes;
  bool present = false;
  if (c.has_input(input)) {
    axes = c.ints(input, "axes");
    present = true;
  } else if (c.has_attr("axes")) {
    axes = c.attr_ints("axes");
    present = true;
  }
  for (int64_t& a : axes) a = norm_axis(c, a, rank, "axis");
  std::set<int64_t> unique(axes.begin(), axes.end());
  if (unique.size() != axes.size()) c.error("axes repeat an axis");
  if (given) *given = present;
  return axes;
}

enum class ReduceKind { Sum, Mean, Max, Min, L1, L2, SumSquare, LogSum, LogSumExp };

void reduce(NodeCtx& c, ReduceKind kind) {
  Tensor x = c.in(0);
  const bool axes_input = c.op() == "ReduceSum" ? c.opset() >= 13 : c.opset() >= 18;
  bool given = false;
  std::vector<int64_t> axes = axes_of(c, axes_input ? 1 : 99, x.rank(), &given);
  if (!axes_input && c.has_input(1)) c.error("takes axes as an attribute in opset {}", c.opset());
  const bool keep = c.attr_int("keepdims", 1) != 0;
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0) != 0) {
      c.out(0, x);
      return;
    }
    axes.resize(static_cast<size_t>(x.rank()));
    std::iota(axes.begin(), axes.end(), 0);
  }
  std::sort(axes.begin(), axes.end());
  for (const int64_t a : axes)
    if (x.dim(a) == 0) c.unsupported("a reduction over an empty axis");
  const bool fl = is_float(x.dtype());
  if (!fl && kind != ReduceKind::Sum && kind != ReduceKind::Max && kind != ReduceKind::Min)
    c.unsupported("{} of dtype {}", c.op(), dtype_name(x.dtype()));
  if (x.dtype() == DType::Bool) c.unsupported("{} of bool", c.op());
  switch (kind) {
    case ReduceKind::Min: x = -x; break;
    case ReduceKind::L1: x = absolute(x); break;
    case ReduceKind::L2:
    case ReduceKind::SumSquare: x = x * x; break;
    case ReduceKind::LogSumExp: x = nn::exp(x); break;
    default: break;
  }
  int64_t count = 1;
  for (const int64_t a : axes) count *= x.dim(a);
  const bool is_max = kind == ReduceKind::Max || kind == ReduceKind::Min;
  if (kind == ReduceKind::Mean && axes.size() == 1) {
    x = x.mean(axes[0], true);
  } else {
    for (const int64_t a : axes) x = is_max ? x.max(a, true) : x.sum(a, true);
    if (kind == ReduceKind::Mean) x = x * (1.0 / static_cast<double>(count));
  }
  switch (kind) {
    case ReduceKind::Min: x = -x; break;
    case ReduceKind::L2: x = sqrt(x); break;
    case ReduceKind::LogSum:
    case ReduceKind::LogSumExp: x = nn::log(x); break;
    default: break;
  }
  if (!keep)
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = x.squeeze(*it);
  c.out(0, x);
}

// x with `axis` moved last, and the permutation that moves it back.
std::pair<Tensor, Shape> axis_last(const Tensor& x, int64_t axis) {
  Shape perm, back(static_cast<size_t>(x.rank()));
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {axis == x.rank() - 1 ? x : x.permute(perm), back};
}

Tensor take(const Tensor& data, Tensor idx, int64_t axis);

// The index of the largest (smallest) element along the axis, the first of
// equal ones, or with `last` the last: top-k of the axis read backwards.
Tensor arg_extreme(NodeCtx& c, const Tensor& x, int64_t axis, bool largest, bool last = false) {
  if (x.dtype() == DType::Bool) c.unsupported("{} of bool", c.op());
  const int64_t n = x.dim(axis);
  const Tensor reversed_at = iota(c.graph(), {n}, 0, DType::I64) * -1.0 + static_cast<double>(n - 1);
  const Tensor source = last ? take(x, reversed_at, axis) : x;
  auto [moved, back] = axis_last(source, axis);
  Tensor idx = topk_indices(largest ? moved : -moved, 1);
  if (last) idx = idx * -1.0 + static_cast<double>(n - 1);
  return axis == x.rank() - 1 ? idx : idx.permute(back);
}

// Mean over several axes, kept as size 1.
Tensor mean_over(const Tensor& x, const std::vector<int64_t>& axes) {
  Tensor y = x;
  int64_t count = 1;
  for (const int64_t a : axes) {
    y = y.sum(a, true);
    count *= x.dim(a);
  }
  return y * (1.0 / static_cast<double>(count));
}

// Softmax-family ops: opsets before 13 coerce the input to 2-D at `axis`.
void softmax_like(NodeCtx& c, const std::function<Tensor(const Tensor&, int64_t)>& f) {
  const Tensor x = c.in(0);
  c.expect_float(x, "input");
  if (c.opset() >= 13) {
    c.out(0, f(x, norm_axis(c, c.attr_int("axis", -1), x.rank())));
    return;
  }
  const int64_t axis = norm_axis(c, c.attr_int("axis", 1), x.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) *= x.dim(i);
  c.out(0, f(x.reshape({outer, inner}), 1).reshape(x.shape()));
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  const Tensor shifted = x - x.max(axis, true);
  return shifted - nn::log(nn::exp(shifted).sum(axis, true));
}

// np.take along `axis`: out[pre, idx..., post] = data[pre, idx[...], post].
Tensor take(const Tensor& data, Tensor idx, int64_t axis) {
  const int64_t k = data.dim(axis);
  idx = where(less_than(idx, 0.0), idx + static_cast<double>(k), idx);
  Shape out_shape, data_view, idx_view, full;
  for (int64_t i = 0; i < axis; ++i) out_shape.push_back(data.dim(i));
  for (const int64_t d : idx.shape()) out_shape.push_back(d);
  for (int64_t i = axis + 1; i < data.rank(); ++i) out_shape.push_back(data.dim(i));
  // data as [pre, 1.., K, post] expanded to [pre, s.., K, post]; idx as
  // [1.., s.., 1, 1..] expanded likewise; gather along K, then drop it.
  Tensor d = data;
  for (int64_t i = 0; i < idx.rank(); ++i) d = d.unsqueeze(axis);
  Tensor ix = idx;
  for (int64_t i = 0; i < axis; ++i) ix = ix.unsqueeze(0);
  for (int64_t i = axis + 1; i <= data.rank(); ++i) ix = ix.unsqueeze(-1);
  Shape gshape;
  for (int64_t i = 0; i < axis; ++i) gshape.push_back(data.dim(i));
  for (const int64_t s : idx.shape()) gshape.push_back(s);
  gshape.push_back(k);
  for (int64_t i = axis + 1; i < data.rank(); ++i) gshape.push_back(data.dim(i));
  Shape ishape = gshape;
  ishape[static_cast<size_t>(axis + idx.rank())] = 1;
  const Tensor out = gather(d.expand(gshape), ix.expand(ishape), axis + idx.rank());
  return out.squeeze(axis + idx.rank());
}

Tensor pad_to(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  Tensor y = x;
  const int64_t r = x.rank();
  for (int64_t a = 0; a < r; ++a) {
    int64_t before = pads[static_cast<size_t>(a)], after = pads[static_cast<size_t>(a + r)];
    if (before < 0) {
      y = y.slice(a, -before, y.dim(a));
      before = 0;
    }
    if (after < 0) {
      y = y.slice(a, 0, y.dim(a) + after);
      after = 0;
    }
    if (before || after) y = y.pad(a, before, after, value);
  }
  return y;
}

// Einsum of one or two operands in the forms without a repeated index in
// one operand: transposes, sums, inner, outer and (batched) matrix products.
void einsum(NodeCtx& c) {
  std::string eq;
  for (const char ch : c.attr_string("equation", "")) if (ch != ' ') eq += ch;
  if (c.num_inputs() < 1 || c.num_inputs() > 2) c.unsupported("einsum of {} operands (one or two)", c.num_inputs());
  std::vector<Tensor> ops;
  for (size_t i = 0; i < c.num_inputs(); ++i) ops.push_back(c.in(i));
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::optional<std::string> rhs;
  if (arrow != std::string::npos) rhs = eq.substr(arrow + 2);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ops.size()) c.error("equation '{}' has {} operands, the node {}", eq, terms.size(), ops.size());
  // An ellipsis stands for the leading axes not named: letters 'A'.. for them.
  int64_t ell_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    const int64_t named = static_cast<int64_t>(terms[i].size()) - 3;
    ell_rank = std::max(ell_rank, ops[i].rank() - named);
  }
  auto expand_ell = [&](std::string term, int64_t rank) {
    const size_t at = term.find("...");
    if (at == std::string::npos) return term;
    const int64_t n = rank - (static_cast<int64_t>(term.size()) - 3);
    std::string letters;
    for (int64_t k = ell_rank - n; k < ell_rank; ++k) letters += static_cast<char>('A' + k);
    return term.substr(0, at) + letters + term.substr(at + 3);
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    terms[i] = expand_ell(terms[i], ops[i].rank());
    if (static_cast<int64_t>(terms[i].size()) != ops[i].rank())
      c.error("equation term '{}' does not match operand {} of rank {}", terms[i], i, ops[i].rank());
    if (std::set<char>(terms[i].begin(), terms[i].end()).size() != terms[i].size())
      c.unsupported("equation '{}': an index repeated in one operand (a diagonal)", eq);
  }
  std::string out;
  if (rhs) {
    std::string ell;
    for (int64_t k = 0; k < ell_rank; ++k) ell += static_cast<char>('A' + k);
    const size_t at = rhs->find("...");
    out = at == std::string::npos ? *rhs : rhs->substr(0, at) + ell + rhs->substr(at + 3);
  } else {
    std::map<char, int> counts;
    for (const auto& t : terms) for (const char ch : t) counts[ch]++;
    for (int64_t k = 0; k < ell_rank; ++k) out += static_cast<char>('A' + k);
    for (const auto& [ch, n] : counts) if (n == 1 && !(ch >= 'A' && ch <= 'Z')) out += ch;
  }
  auto in_term = [](const std::string& t, char ch) { return t.find(ch) != std::string::npos; };
  // Sum away what only one operand names and the output does not.
  for (size_t i = 0; i < ops.size(); ++i) {
    for (int64_t a = static_cast<int64_t>(terms[i].size()) - 1; a >= 0; --a) {
      const char ch = terms[i][static_cast<size_t>(a)];
      bool elsewhere = in_term(out, ch);
      for (size_t j = 0; j < ops.size(); ++j) if (j != i && in_term(terms[j], ch)) elsewhere = true;
      if (!elsewhere) {
        ops[i] = ops[i].sum(a);
        terms[i].erase(static_cast<size_t>(a), 1);
      }
    }
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t a = 0; a < terms[i].size(); ++a) {
      const int64_t d = ops[i].dim(static_cast<int64_t>(a));
      auto [it, fresh] = size.emplace(terms[i][a], d);
      if (!fresh && it->second != d) {
        if (it->second == 1) it->second = d;
        else if (d != 1) c.error("index '{}' has sizes {} and {}", terms[i][a], it->second, d);
      }
    }
  for (const char ch : out) if (!size.contains(ch)) c.error("output index '{}' names no operand axis", ch);
  auto permuted = [&](const Tensor& t, const std::string& from, const std::string& to) {
    Shape perm;
    for (const char ch : to) perm.push_back(static_cast<int64_t>(from.find(ch)));
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int64_t>(k);
    return identity ? t : t.permute(perm);
  };
  if (ops.size() == 1) {
    c.out(0, permuted(ops[0], terms[0], out));
    return;
  }
  std::string batch, free_a, free_b, contract;
  for (const char ch : terms[0]) {
    if (in_term(terms[1], ch)) (in_term(out, ch) ? batch : contract) += ch;
    else free_a += ch;
  }
  for (const char ch : terms[1]) if (!in_term(terms[0], ch)) free_b += ch;
  auto prod = [&](const std::string& s) {
    int64_t p = 1;
    for (const char ch : s) p *= size.at(ch);
    return p;
  };
  Shape bshape;
  for (const char ch : batch) bshape.push_back(size.at(ch));
  auto arrange = [&](const Tensor& t, const std::string& term, const std::string& rows, const std::string& cols) {
    Tensor p = permuted(t, term, batch + rows + cols);
    Shape full = bshape;
    for (const char ch : rows + cols) full.push_back(size.at(ch));
    Shape mat = bshape;
    mat.push_back(prod(rows));
    mat.push_back(prod(cols));
    return p.broadcast_to(full).reshape(mat);
  };
  const Tensor a = arrange(ops[0], terms[0], free_a, contract);
  const Tensor b = arrange(ops[1], terms[1], contract, free_b);
  Tensor r = nn::matmul(a, b);
  Shape rshape = bshape;
  for (const char ch : free_a + free_b) rshape.push_back(size.at(ch));
  r = r.reshape(rshape);
  c.out(0, permuted(r, batch + free_a + free_b, out));
}

void layer_normalization(NodeCtx& c) {
  const Tensor x = c.in(0);
  c.expect_float(x, "X");
  const int64_t axis = norm_axis(c, c.attr_int("axis", -1), x.rank());
  const double eps = c.attr_float("epsilon", 1e-5);
  Shape norm_shape, outer_shape;
  for (int64_t i = 0; i < x.rank(); ++i) (i < axis ? outer_shape : norm_shape).push_back(x.dim(i));
  const int64_t n = num_elements(norm_shape);
  Shape flat = outer_shape;
  flat.push_back(n);
  auto param = [&](size_t i) -> std::optional<Tensor> {
    if (!c.has_input(i)) return std::nullopt;
    Tensor p = c.in(i);
    if (p.dtype() != x.dtype()) c.error("input {} is {}, X is {}", i, dtype_name(p.dtype()), dtype_name(x.dtype()));
    p = p.broadcast_to(norm_shape);
    return p.rank() == 1 ? p : p.reshape({n});
  };
  const std::optional<Tensor> scale = param(1), bias = param(2);
  const Tensor xf = x.rank() - axis == 1 ? x : x.reshape(flat);
  c.out(0, nn::layer_norm(xf, scale, bias, eps).reshape(x.shape()));
  if (c.wants_output(1) || c.wants_output(2)) {
    Shape stat = outer_shape;
    for (size_t i = 0; i < norm_shape.size(); ++i) stat.push_back(1);
    const Tensor mean = xf.mean(-1, true);
    const Tensor centered = xf - mean;
    const Tensor inv = recip(sqrt((centered * centered).mean(-1, true) + eps));
    if (c.wants_output(1)) c.out(1, mean.reshape(stat));
    if (c.wants_output(2)) c.out(2, inv.reshape(stat));
  }
}

void gemm(NodeCtx& c) {
  Tensor a = c.in(0), b = c.in(1);
  if (c.attr_int("transA", 0)) a = a.transpose(0, 1);
  if (c.attr_int("transB", 0)) b = b.transpose(0, 1);
  if (a.rank() != 2 || b.rank() != 2) c.error("A and B must be 2-D, got {} and {}", shape_str(a.shape()), shape_str(b.shape()));
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  Tensor y = nn::matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (c.has_input(2) && beta != 0.0) {
    Tensor bias = c.in(2);
    if (beta != 1.0) bias = bias * beta;
    y = y + bias;
  }
  c.out(0, y);
}

Tensor matmul(NodeCtx& c, Tensor a, Tensor b) {
  if (a.rank() == 0 || b.rank() == 0) c.error("MatMul of a scalar");
  if (a.dtype() == DType::Bool) c.unsupported("MatMul of bool");
  const bool vec_a = a.rank() == 1, vec_b = b.rank() == 1;
  if (vec_a) a = a.unsqueeze(0);
  if (vec_b) b = b.unsqueeze(-1);
  Tensor y = nn::matmul(a, b);
  if (vec_b) y = y.squeeze(-1);
  if (vec_a) y = y.squeeze(vec_b ? -1 : -2);
  return y;
}

// A slice of a 1-D constant (shape arithmetic), computed here: it may be empty.
bool slice_constant_1d(NodeCtx& c, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                       const std::vector<int64_t>& steps) {
  if (!c.value(0).constant || c.value(0).shape.size() != 1 || starts.size() != 1 || !is_integer(c.value(0).dtype))
    return false;
  const HostTensor& x = *c.value(0).constant;
  const int64_t dim = x.size(), step = steps.empty() ? 1 : steps[0];
  if (step != 1) return false;
  const int64_t s = std::clamp(starts[0] < 0 ? starts[0] + dim : starts[0], int64_t{0}, dim);
  const int64_t e = std::clamp(ends[0] < 0 ? ends[0] + dim : ends[0], int64_t{0}, dim);
  std::vector<int64_t> out;
  for (int64_t i = s; i < e; ++i) out.push_back(x.get_int(i));
  HostTensor v(x.dtype(), {static_cast<int64_t>(out.size())});
  for (size_t i = 0; i < out.size(); ++i) v.set_int(static_cast<int64_t>(i), out[i]);
  c.out_constant(0, v);
  return true;
}

void slice(NodeCtx& c) {
  if (c.opset() >= 10 && c.is_constant(1) && c.is_constant(2) && !c.has_input(3) &&
      slice_constant_1d(c, c.ints(1, "starts"), c.ints(2, "ends"), c.has_input(4) ? c.ints(4, "steps") : std::vector<int64_t>{}))
    return;
  Tensor x = c.in(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    starts = c.ints(1, "starts");
    ends = c.ints(2, "ends");
    if (c.has_input(3)) axes = c.ints(3, "axes");
    if (c.has_input(4)) steps = c.ints(4, "steps");
  }
  if (starts.size() != ends.size()) c.error("starts and ends differ in length ({} and {})", starts.size(), ends.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    c.error("starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t axis = norm_axis(c, axes[i], x.rank());
    const int64_t dim = x.dim(axis);
    if (steps[i] == 0) c.error("step 0 on axis {}", axis);
    // A step longer than the axis takes at most one element, as the axis' length + 1 does.
    const int64_t step = std::clamp(steps[i], -(dim + 1), dim + 1);
    auto clampi = [](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(hi, v)); };
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (ends[i] <= std::numeric_limits<int64_t>::min() / 2) e = -1;
    if (step > 0) {
      s = clampi(s, 0, dim);
      e = clampi(e, 0, dim);
    } else {
      s = clampi(s, -1, dim - 1);
      e = clampi(e, -1, dim - 1);
    }
    const int64_t count = step > 0 ? (e > s ? (e - s + step - 1) / step : 0) : (s > e ? (s - e + (-step) - 1) / (-step) : 0);
    if (count == 0) c.unsupported("an empty slice (axis {}, {}:{}:{})", axis, starts[i], ends[i], step);
    if (step > 0) {
      x = x.slice(axis, s, s + (count - 1) * step + 1, step);
    } else {
      // A negative step reads s, s + step, ...: a gather of those indices.
      x = take(x, iota(c.graph(), {count}, 0, DType::I64) * static_cast<double>(step) + static_cast<double>(s), axis);
    }
  }
  c.out(0, x);
}

void split(NodeCtx& c) {
  const Tensor x = c.in(0);
  const int64_t axis = norm_axis(c, c.attr_int("axis", 0), x.rank());
  std::vector<int64_t> sizes;
  if (c.opset() >= 13 && c.has_input(1)) sizes = c.ints(1, "split");
  else if (c.opset() < 13) sizes = c.attr_ints("split");
  const int64_t n = static_cast<int64_t>(c.num_outputs());
  if (sizes.empty()) {
    const int64_t dim = x.dim(axis);
    const int64_t parts = c.has_attr("num_outputs") ? c.attr_int("num_outputs", n) : n;
    const int64_t each = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::min(each, dim - i * each));
  }
  if (static_cast<int64_t>(sizes.size()) != n) c.error("splits into {} parts but has {} outputs", sizes.size(), n);
  int64_t total = 0;
  for (const int64_t s : sizes) {
    if (s <= 0) c.unsupported("an empty or negative part ({})", s);
    if (s > x.dim(axis)) c.error("a part of {} is longer than axis {} ({})", s, axis, x.dim(axis));
    total += s;
  }
  if (total != x.dim(axis)) c.error("parts sum to {} but axis {} has {}", total, axis, x.dim(axis));
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    c.out(static_cast<size_t>(i), x.slice(axis, at, at + sizes[static_cast<size_t>(i)]));
    at += sizes[static_cast<size_t>(i)];
  }
}

void reshape(NodeCtx& c) {
  const Tensor x = c.in(0);
  std::vector<int64_t> shape = c.ints(1, "shape");
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (static_cast<int64_t>(i) >= x.rank()) c.error("shape entry {} is 0 but the input has rank {}", i, x.rank());
      shape[i] = x.dim(static_cast<int64_t>(i));
    }
    if (shape[i] == -1) {
      if (infer >= 0) c.error("shape has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      c.error("shape entry {} is {}", i, shape[i]);
    } else {
      if (shape[i] > 0 && known > std::numeric_limits<int64_t>::max() / shape[i])
        c.error("cannot reshape {} to [{}]", shape_str(x.shape()), fmt::format("{}", fmt::join(shape, ",")));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      c.error("cannot infer the -1 of {} for {} elements", fmt::format("{}", fmt::join(shape, ",")), x.numel());
    shape[static_cast<size_t>(infer)] = x.numel() / known;
  }
  if (num_elements(to_shape(shape)) != x.numel())
    c.error("cannot reshape {} to [{}]", shape_str(x.shape()), fmt::format("{}", fmt::join(shape, ",")));
  c.out(0, x.reshape(to_shape(shape)));
}

void topk(NodeCtx& c) {
  const Tensor x = c.in(0);
  const int64_t k = c.opset() < 10 ? c.attr_int("k", -1) : [&] {
    const auto v = c.ints(1, "k");
    if (v.size() != 1) c.error("K must hold one value, it holds {}", v.size());
    return v[0];
  }();
  const int64_t axis = norm_axis(c, c.attr_int("axis", -1), x.rank());
  if (k <= 0 || k > x.dim(axis)) c.unsupported("k = {} for an axis of {}", k, x.dim(axis));
  if (c.attr_int("sorted", 1) == 0) c.unsupported("sorted = 0");
  if (x.dtype() == DType::Bool) c.unsupported("TopK of bool");
  const bool largest = c.attr_int("largest", 1) != 0;
  auto [last, back] = axis_last(x, axis);
  const Tensor idx = topk_indices(largest ? last : -last, k);
  const Tensor values = gather(last, idx, -1);
  const bool moved = axis != x.rank() - 1;
  c.out(0, moved ? values.permute(back) : values);
  if (c.wants_output(1)) c.out(1, moved ? idx.permute(back) : idx);
}

Tensor fix_negative(const Tensor& idx, int64_t dim) {
  return where(less_than(idx, 0.0), idx + static_cast<double>(dim), idx);
}

void scatter_elements(NodeCtx& c) {
  const Tensor data = c.in(0), updates = c.in(2);
  const int64_t axis = norm_axis(c, c.attr_int("axis", 0), data.rank());
  const Tensor idx = fix_negative(c.in(1), data.dim(axis));
  const std::string reduction = c.attr_string("reduction", "none");
  if (data.dtype() == DType::Bool) c.unsupported("scatter into bool");
  if (reduction == "add") {
    c.out(0, scatter_add(data, idx, updates, axis));
  } else if (reduction == "none") {
    // Replace: where any update lands, the sum of the updates there (one,
    // as the op requires distinct indices); elsewhere the data.
    const Tensor zeros = constant(c.graph(), 0.0, data.dtype(), data.shape());
    const Tensor hits = scatter_add(constant(c.graph(), 0.0, DType::I32, data.shape()), idx,
                                    constant(c.graph(), 1.0, DType::I32, updates.shape()), axis);
    c.out(0, where(less_than(0.0, hits), scatter_add(zeros, idx, updates, axis), data));
  } else {
    c.unsupported("reduction '{}'", reduction);
  }
}

void tile(NodeCtx& c) {
  const Tensor x = c.in(0);
  const std::vector<int64_t> reps = c.ints(1, "repeats");
  if (static_cast<int64_t>(reps.size()) != x.rank()) c.error("repeats has {} entries for rank {}", reps.size(), x.rank());
  Shape view, expanded, final;
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t r = reps[static_cast<size_t>(i)];
    if (r <= 0 || r > (1 << 24)) c.unsupported("repeat count {}", r);
    view.push_back(1);
    view.push_back(x.dim(i));
    expanded.push_back(r);
    expanded.push_back(x.dim(i));
    final.push_back(r * x.dim(i));
  }
  c.out(0, x.reshape(view).expand(expanded).reshape(final));
}

void constant_node(NodeCtx& c) {
  if (const auto* t = c.attr_tensor("value")) {
    c.out_constant(0, tensor_value(*t, c.base_dir(), c.where() + ": attribute 'value'"));
  } else if (c.has_attr("value_float")) {
    HostTensor v(DType::F32, {});
    v.set(0, c.attr_float("value_float", 0));
    c.out_constant(0, v);
  } else if (c.has_attr("value_floats")) {
    const auto f = c.attr_floats("value_floats");
    HostTensor v(DType::F32, {static_cast<int64_t>(f.size())});
    for (size_t i = 0; i < f.size(); ++i) v.set(static_cast<int64_t>(i), f[i]);
    c.out_constant(0, v);
  } else if (c.has_attr("value_int")) {
    c.out_constant(0, i64_tensor({c.attr_int("value_int", 0)}, {}));
  } else if (c.has_attr("value_ints")) {
    const auto v = c.attr_ints("value_ints");
    c.out_constant(0, i64_tensor(v, {static_cast<int64_t>(v.size())}));
  } else if (c.has_attr("sparse_value")) {
    c.unsupported("a sparse constant");
  } else {
    c.unsupported("a Constant without a tensor, float or int value");
  }
}

void constant_of_shape(NodeCtx& c) {
  const std::vector<int64_t> dims = c.ints(0, "shape");
  HostTensor fill(DType::F32, {1});
  if (const auto* t = c.attr_tensor("value")) fill = tensor_value(*t, c.base_dir(), c.where() + ": attribute 'value'");
  if (fill.size() != 1) c.error("attribute 'value' must hold one element");
  int64_t elements = 1;
  for (const int64_t d : dims) {
    if (d < 0) c.error("negative dimension {}", d);
    if (d > (1 << 24) || (d > 0 && elements > (int64_t{1} << 24) / d))
      c.unsupported("a constant of more than 2^24 elements ({})", fmt::format("{}", fmt::join(dims, ",")));
    elements *= d;
  }
  const Shape shape = to_shape(dims);
  if (num_elements(shape) == 0) c.unsupported("an empty tensor ({})", shape_str(shape));
  HostTensor v(fill.dtype(), shape);
  for (int64_t i = 0; i < v.size(); ++i) {
    if (is_float(fill.dtype())) v.set(i, fill.get(0));
    else v.set_int(i, fill.get_int(0));
  }
  c.out_constant(0, v);
}

void range(NodeCtx& c) {
  const HostTensor& s = c.constant(0, "start");
  const HostTensor& l = c.constant(1, "limit");
  const HostTensor& d = c.constant(2, "delta");
  if (s.size() != 1 || l.size() != 1 || d.size() != 1) c.error("start, limit and delta must be scalars");
  const DType dtype = s.dtype();
  const double start = s.get(0), limit = l.get(0), delta = d.get(0);
  if (delta == 0) c.error("delta is 0");
  const double count = std::ceil((limit - start) / delta);
  if (!(count <= static_cast<double>(1 << 24))) c.unsupported("a range of {} elements", count);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  if (n == 0) c.unsupported("an empty range");
  HostTensor v(dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (is_float(dtype)) v.set(i, start + static_cast<double>(i) * delta);
    else v.set_int(i, s.get_int(0) + i * d.get_int(0));
  }
  c.out_constant(0, v);
}

void where_op(NodeCtx& c) {
  const Tensor cond = c.in(0), a = c.in(1), b = c.in(2);
  check_same(c, a, b);
  if (cond.dtype() != DType::Bool) c.error("condition must be bool, got {}", dtype_name(cond.dtype()));
  c.out(0, where(cond, a, b));
}

void clip(NodeCtx& c) {
  Tensor x = c.in(0);
  if (x.dtype() == DType::Bool) c.unsupported("Clip of bool");
  if (c.opset() < 11) {
    if (c.has_attr("min")) x = maximum(x, c.attr_float("min", 0));
    if (c.has_attr("max")) x = minimum(x, constant(c.graph(), c.attr_float("max", 0), x.dtype(), x.shape()));
  } else {
    if (c.has_input(1)) x = maximum(x, c.in(1).broadcast_to(x.shape()));
    if (c.has_input(2)) x = minimum(x, c.in(2).broadcast_to(x.shape()));
  }
  c.out(0, x);
}

void batch_norm(NodeCtx& c) {
  const Tensor x = c.in(0);
  c.expect_float(x, "X");
  if (c.attr_int("training_mode", 0) != 0) c.unsupported("training_mode");
  if (x.rank() < 2) c.error("X must have a channel axis, got {}", shape_str(x.shape()));
  const double eps = c.attr_float("epsilon", 1e-5);
  Shape view{x.dim(1)};
  for (int64_t i = 2; i < x.rank(); ++i) view.push_back(1);
  auto param = [&](size_t i) { return c.in(i).reshape(view); };
  const Tensor y = (x - param(3)) * recip(sqrt(param(4) + eps)) * param(1) + param(2);
  c.out(0, y);
}

void one_hot(NodeCtx& c) {
  Tensor idx = c.in(0);
  const HostTensor& depth_t = c.constant(1, "depth");
  if (depth_t.size() != 1) c.error("depth must hold one value");
  const double depth_value = is_float(depth_t.dtype()) ? depth_t.get(0) : static_cast<double>(depth_t.get_int(0));
  if (!(depth_value >= 1 && depth_value <= static_cast<double>(1 << 24))) c.unsupported("depth {}", depth_value);
  const int64_t depth = static_cast<int64_t>(depth_value);
  const Tensor vals = c.in(2);
  if (vals.numel() != 2) c.error("values must hold [off, on]");
  if (!is_integer(idx.dtype())) {
    if (!is_float(idx.dtype())) c.unsupported("indices of dtype {}", dtype_name(idx.dtype()));
    idx = idx.cast(DType::I64);
  }
  const int64_t r = idx.rank() + 1;
  const int64_t axis = norm_axis(c, c.attr_int("axis", -1), r);
  idx = fix_negative(idx, depth).unsqueeze(axis);
  Shape shape = idx.shape();
  shape[static_cast<size_t>(axis)] = depth;
  const Tensor pos = iota(c.graph(), shape, axis, idx.dtype());
  const Tensor hit = equal(pos, idx.broadcast_to(shape));
  const Tensor flat = vals.reshape({2});
  c.out(0, where(hit, flat.slice(0, 1, 2).reshape({}).broadcast_to(shape), flat.slice(0, 0, 1).reshape({}).broadcast_to(shape)));
}

void trilu(NodeCtx& c) {
  const Tensor x = c.in(0);
  if (x.rank() < 2) c.error("input must be at least 2-D");
  int64_t k = 0;
  if (c.has_input(1)) k = c.ints(1, "k").at(0);
  const bool upper = c.attr_int("upper", 1) != 0;
  const Tensor row = iota(c.graph(), x.shape(), x.rank() - 2, DType::I64);
  const Tensor col = iota(c.graph(), x.shape(), x.rank() - 1, DType::I64);
  // upper keeps j - i >= k, lower keeps j - i <= k.
  const Tensor diff = col - row;
  const Tensor keep = upper ? logical_not(less_than(diff, static_cast<double>(k)))
                            : logical_not(less_than(static_cast<double>(k), diff));
  const Tensor zero = constant(c.graph(), 0.0, x.dtype(), x.shape());
  c.out(0, where(keep, x, zero));
}

void cumsum(NodeCtx& c) {
  const Tensor x = c.in(0);
  c.expect_float(x, "x");
  const auto axis_v = c.ints(1, "axis");
  if (axis_v.size() != 1) c.error("axis must hold one value");
  const int64_t axis = norm_axis(c, axis_v[0], x.rank());
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  const int64_t n = x.dim(axis);
  // out[j] = sum_i x[i] * m[i, j], m[i, j] = (i <= j) (or its variants).
  const Tensor i = iota(c.graph(), {n, n}, 0, DType::I64), j = iota(c.graph(), {n, n}, 1, DType::I64);
  Tensor take_ij;
  if (!reverse) take_ij = exclusive ? less_than(i, j) : logical_not(less_than(j, i));
  else take_ij = exclusive ? less_than(j, i) : logical_not(less_than(i, j));
  const Tensor m = take_ij.cast(x.dtype());
  auto [last, back] = axis_last(x, axis);
  Tensor y = nn::matmul(last, m);
  c.out(0, axis == x.rank() - 1 ? y : y.permute(back));
}

// Output 0 is input 0: a constant stays one.
void pass_through(NodeCtx& c) {
  if (c.value(0).constant) c.out_constant(0, *c.value(0).constant);
  else c.out(0, c.in(0));
}

// NegativeLogLikelihoodLoss of log-probabilities x [N, C, d...] at
// target [N, d...], weighted by weight[target] (input `w`, optional),
// targets equal to ignore_index count as weight 0; reduced by `reduction`.
Tensor nll_loss(NodeCtx& c, const Tensor& x, const Tensor& target, size_t weight_input) {
  c.expect_float(x, "input");
  if (!is_integer(target.dtype())) c.error("target must be i32 or i64");
  if (x.rank() < 2 || target.rank() != x.rank() - 1) c.error("input {} and target {} do not fit", shape_str(x.shape()), shape_str(target.shape()));
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") c.error("reduction '{}'", reduction);
  Tensor t = target;
  std::optional<Tensor> ignored;
  if (c.has_attr("ignore_index")) {
    ignored = equal(t, static_cast<double>(c.attr_int("ignore_index", 0)));
    t = where(*ignored, constant(c.graph(), 0.0, t.dtype(), t.shape()), t);
  }
  const Tensor picked = gather(x, t.unsqueeze(1), 1).squeeze(1);
  std::optional<Tensor> w;
  if (c.has_input(weight_input)) w = take(c.in(weight_input), t, 0);
  if (ignored) {
    const Tensor base = w ? *w : constant(c.graph(), 1.0, x.dtype(), t.shape());
    w = where(*ignored, constant(c.graph(), 0.0, x.dtype(), t.shape()), base);
  }
  const Tensor loss = w ? -(picked * *w) : -picked;
  if (reduction == "none") return loss;
  auto total = [](Tensor v) {
    while (v.rank() > 0) v = v.sum(0);
    return v;
  };
  if (reduction == "sum") return total(loss);
  if (w) return total(loss) / total(*w);
  return total(loss) * (1.0 / static_cast<double>(loss.numel()));
}

std::map<std::string, Handler> make_handlers() {
  std::map<std::string, Handler> h;
  auto binary = [](char op) {
    return [op](NodeCtx& c) { c.out(0, binary_arith(c, c.in(0), c.in(1), op)); };
  };
  h["Add"] = binary('+');
  h["Sub"] = binary('-');
  h["Mul"] = binary('*');
  h["Div"] = binary('/');
  h["Pow"] = [](NodeCtx& c) {
    Tensor x = c.in(0), y = c.in(1);
    c.expect_float(x, "base");
    if (y.dtype() != x.dtype()) y = y.cast(x.dtype());
    if (c.is_constant(1) && c.constant(1, "exponent").size() == 1) {
      const double e = c.constant(1, "exponent").get(0);
      const Shape s = broadcast_shapes(x.shape(), y.shape(), "Pow");
      if (e == 2.0) return c.out(0, (x * x).broadcast_to(s));
      if (e == 1.0) return c.out(0, x.broadcast_to(s));
      if (e == 0.5) return c.out(0, sqrt(x).broadcast_to(s));
    }
    c.out(0, power(x, y));
  };
  h["Mod"] = [](NodeCtx& c) {
    const Tensor a = c.in(0), b = c.in(1);
    check_same(c, a, b);
    if (c.attr_int("fmod", 0) != 0 || !is_integer(a.dtype())) c.unsupported("fmod = 1 or floating Mod (C fmod)");
    c.out(0, a % b);
  };
  h["Sqrt"] = unary_float([](NodeCtx&, const Tensor& x) { return sqrt(x); });
  h["Reciprocal"] = unary_float([](NodeCtx&, const Tensor& x) { return recip(x); });
  h["Exp"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::exp(x); });
  h["Log"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::log(x); });
  h["Tanh"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::tanh(x); });
  h["Sigmoid"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::sigmoid(x); });
  h["Sin"] = unary_float([](NodeCtx&, const Tensor& x) { return sin(x); });
  h["Cos"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::cos(x); });
  h["Tan"] = unary_float([](NodeCtx&, const Tensor& x) { return sin(x) / nn::cos(x); });
  h["Sinh"] = unary_float([](NodeCtx&, const Tensor& x) { return (nn::exp(x) - nn::exp(-x)) * 0.5; });
  h["Cosh"] = unary_float([](NodeCtx&, const Tensor& x) { return (nn::exp(x) + nn::exp(-x)) * 0.5; });
  h["Asinh"] = unary_float([](NodeCtx&, const Tensor& x) {
    // Odd: log(|x| + sqrt(x^2 + 1)) with x's sign, free of cancellation for x < 0.
    const Tensor ax = absolute(x);
    const Tensor y = nn::log(ax + sqrt(ax * ax + 1.0));
    return where(less_than(x, 0.0), -y, y);
  });
  h["Acosh"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::log(x + sqrt(x * x - 1.0)); });
  h["Atanh"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::log((1.0 + x) / (1.0 - x)) * 0.5; });
  h["Erf"] = unary_float([](NodeCtx&, const Tensor& x) { return erf(x); });
  h["Round"] = unary_float([](NodeCtx&, const Tensor& x) {
    // Halves to even.
    const Tensor f = floor_of(x), d = x - f;
    const Tensor up = f + 1.0;
    return where(less_than(d, 0.5), f, where(less_than(0.5, d), up, where(equal(f % 2.0, 0.0), f, up)));
  });
  h["Floor"] = unary_float([](NodeCtx&, const Tensor& x) { return floor_of(x); });
  h["Ceil"] = unary_float([](NodeCtx&, const Tensor& x) { return -floor_of(-x); });
  h["Softplus"] = unary_float([](NodeCtx&, const Tensor& x) { return nn::log(nn::exp(x) + 1.0); });
  h["Softsign"] = unary_float([](NodeCtx&, const Tensor& x) { return x / (absolute(x) + 1.0); });
  h["Mish"] = unary_float([](NodeCtx&, const Tensor& x) { return x * nn::tanh(nn::log(nn::exp(x) + 1.0)); });
  h["Elu"] = unary_float([](NodeCtx& c, const Tensor& x) {
    return where(less_than(x, 0.0), (nn::exp(x) - 1.0) * c.attr_float("alpha", 1.0), x);
  });
  h["Celu"] = unary_float([](NodeCtx& c, const Tensor& x) {
    const double alpha = c.attr_float("alpha", 1.0);
    return maximum(x, 0.0) + minimum(constant(x.graph(), 0.0, x.dtype(), x.shape()), (nn::exp(x / alpha) - 1.0) * alpha);
  });
  h["Selu"] = unary_float([](NodeCtx& c, const Tensor& x) {
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625);
    const double gamma = c.attr_float("gamma", 1.05070102214813232421875);
    return where(less_than(0.0, x), x * gamma, (nn::exp(x) * alpha - alpha) * gamma);
  });
  h["LeakyRelu"] = unary_float([](NodeCtx& c, const Tensor& x) {
    return where(less_than(x, 0.0), x * c.attr_float("alpha", 0.01), x);
  });
  h["ThresholdedRelu"] = unary_float([](NodeCtx& c, const Tensor& x) {
    return where(less_than(c.attr_float("alpha", 1.0), x), x, constant(x.graph(), 0.0, x.dtype(), x.shape()));
  });
  h["HardSigmoid"] = unary_float([](NodeCtx& c, const Tensor& x) {
    const Tensor y = maximum(x * c.attr_float("alpha", 0.2) + c.attr_float("beta", 0.5), 0.0);
    return minimum(y, constant(x.graph(), 1.0, x.dtype(), x.shape()));
  });
  h["HardSwish"] = unary_float([](NodeCtx&, const Tensor& x) {
    const Tensor y = maximum(x * (1.0 / 6.0) + 0.5, 0.0);
    return x * minimum(y, constant(x.graph(), 1.0, x.dtype(), x.shape()));
  });
  h["Shrink"] = unary_float([](NodeCtx& c, const Tensor& x) {
    const double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
    const Tensor zero = constant(x.graph(), 0.0, x.dtype(), x.shape());
    return where(less_than(x, -lambd), x + bias, where(less_than(lambd, x), x - bias, zero));
  });
  h["PRelu"] = [](NodeCtx& c) {
    const Tensor x = c.in(0), slope = c.in(1);
    c.expect_float(x, "X");
    c.out(0, where(less_than(x, 0.0), x * slope, x.broadcast_to(broadcast_shapes(x.shape(), slope.shape(), "PRelu"))));
  };
  h["Relu"] = [](NodeCtx& c) { c.out(0, relu(c.in(0))); };
  h["Neg"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    if (x.dtype() == DType::Bool) c.unsupported("Neg of bool");
    c.out(0, -x);
  };
  h["Abs"] = [](NodeCtx& c) { c.out(0, absolute(c.in(0))); };
  h["Sign"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    if (x.dtype() == DType::Bool) c.unsupported("Sign of bool");
    const Tensor zero = constant(x.graph(), 0.0, x.dtype(), x.shape());
    const Tensor one = constant(x.graph(), 1.0, x.dtype(), x.shape());
    c.out(0, where(less_than(0.0, x), one, where(less_than(x, 0.0), -one, zero)));
  };
  h["IsNaN"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    c.expect_float(x, "X");
    c.out(0, logical_not(equal(x, x)));
  };
  h["IsInf"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    c.expect_float(x, "X");
    const Tensor pos = equal(x, INFINITY), neg = equal(x, -INFINITY);
    const bool p = c.attr_int("detect_positive", 1) != 0, n = c.attr_int("detect_negative", 1) != 0;
    if (p && n) return c.out(0, logical_or(pos, neg));
    if (p) return c.out(0, pos);
    if (n) return c.out(0, neg);
    c.out(0, logical_and(pos, neg));
  };
  h["Max"] = [](NodeCtx& c) { variadic(c, [&](const Tensor& a, const Tensor& b) { return maximum(check_same(c, a, b), b); }); };
  h["Min"] = [](NodeCtx& c) { variadic(c, [&](const Tensor& a, const Tensor& b) { return minimum(check_same(c, a, b), b); }); };
  h["Sum"] = [](NodeCtx& c) { variadic(c, [&](const Tensor& a, const Tensor& b) { return binary_arith(c, a, b, '+'); }); };
  h["Mean"] = [](NodeCtx& c) {
    variadic(c, [&](const Tensor& a, const Tensor& b) { return binary_arith(c, a, b, '+'); });
    Value& v = c.outputs()[0];
    c.expect_float(v.tensor, "inputs");
    c.out(0, v.tensor / static_cast<double>(c.num_inputs()));
  };
  h["Where"] = where_op;
  h["Equal"] = [](NodeCtx& c) { const Tensor a = c.in(0), b = c.in(1); c.out(0, equal(check_same(c, a, b), b)); };
  h["Less"] = [](NodeCtx& c) { const Tensor a = c.in(0), b = c.in(1); c.out(0, less_than(check_same(c, a, b), b)); };
  h["Greater"] = [](NodeCtx& c) { const Tensor a = c.in(0), b = c.in(1); c.out(0, less_than(b, check_same(c, a, b))); };
  h["LessOrEqual"] = [](NodeCtx& c) {
    const Tensor a = c.in(0), b = c.in(1);
    check_same(c, a, b);
    c.out(0, logical_or(less_than(a, b), equal(a, b)));
  };
  h["GreaterOrEqual"] = [](NodeCtx& c) {
    const Tensor a = c.in(0), b = c.in(1);
    check_same(c, a, b);
    c.out(0, logical_or(less_than(b, a), equal(a, b)));
  };
  auto logical = [](const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
    return [f](NodeCtx& c) {
      const Tensor a = c.in(0), b = c.in(1);
      if (a.dtype() != DType::Bool || b.dtype() != DType::Bool) c.error("inputs must be bool");
      c.out(0, f(a, b));
    };
  };
  h["And"] = logical([](const Tensor& a, const Tensor& b) { return logical_and(a, b); });
  h["Or"] = logical([](const Tensor& a, const Tensor& b) { return logical_or(a, b); });
  h["Xor"] = logical([](const Tensor& a, const Tensor& b) { return logical_not(equal(a, b)); });
  h["Not"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    if (x.dtype() != DType::Bool) c.error("input must be bool");
    c.out(0, logical_not(x));
  };
  h["Cast"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const DType to = cast_target(c, static_cast<int>(c.attr_int("to", 0)));
    c.out(0, to == x.dtype() ? x : x.cast(to));
  };
  h["CastLike"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const DType to = c.value(1).dtype;
    c.out(0, to == x.dtype() ? x : x.cast(to));
  };
  h["MatMul"] = [](NodeCtx& c) { c.out(0, matmul(c, c.in(0), c.in(1))); };
  h["Gemm"] = gemm;
  h["Einsum"] = einsum;
  h["Softmax"] = [](NodeCtx& c) { softmax_like(c, [](const Tensor& x, int64_t a) { return nn::softmax(x, a); }); };
  h["LogSoftmax"] = [](NodeCtx& c) { softmax_like(c, log_softmax); };
  h["Hardmax"] = [](NodeCtx& c) {
    softmax_like(c, [&c](const Tensor& x, int64_t a) {
      const Tensor idx = arg_extreme(c, x, a, true);
      const Tensor pos = iota(x.graph(), x.shape(), a, DType::I64);
      const Tensor zero = constant(x.graph(), 0.0, x.dtype(), x.shape());
      return where(equal(pos, idx.broadcast_to(x.shape())), constant(x.graph(), 1.0, x.dtype(), x.shape()), zero);
    });
  };
  h["LayerNormalization"] = layer_normalization;
  h["NegativeLogLikelihoodLoss"] = [](NodeCtx& c) { c.out(0, nll_loss(c, c.in(0), c.in(1), 2)); };
  h["SoftmaxCrossEntropyLoss"] = [](NodeCtx& c) {
    const Tensor scores = c.in(0);
    c.expect_float(scores, "scores");
    if (scores.rank() < 2) c.error("scores must be [N, C, ...], got {}", shape_str(scores.shape()));
    const Tensor log_prob = log_softmax(scores, 1);
    c.out(0, nll_loss(c, log_prob, c.in(1), 2));
    if (c.wants_output(1)) c.out(1, log_prob);
  };
  auto global_pool = [](bool max) {
    return [max](NodeCtx& c) {
      Tensor x = c.in(0);
      c.expect_float(x, "X");
      if (x.rank() < 3) c.error("X must be [N, C, spatial...], got {}", shape_str(x.shape()));
      std::vector<int64_t> axes;
      for (int64_t a = 2; a < x.rank(); ++a) axes.push_back(a);
      if (max) {
        for (const int64_t a : axes) x = x.max(a, true);
        c.out(0, x);
      } else {
        c.out(0, mean_over(x, axes));
      }
    };
  };
  h["GlobalAveragePool"] = global_pool(false);
  h["GlobalMaxPool"] = global_pool(true);
  h["InstanceNormalization"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    c.expect_float(x, "input");
    if (x.rank() < 3) c.error("input must be [N, C, spatial...], got {}", shape_str(x.shape()));
    std::vector<int64_t> axes;
    Shape view{x.dim(1)};
    for (int64_t a = 2; a < x.rank(); ++a) {
      axes.push_back(a);
      view.push_back(1);
    }
    const Tensor centered = x - mean_over(x, axes);
    const Tensor variance = mean_over(centered * centered, axes);
    const Tensor y = centered * recip(sqrt(variance + c.attr_float("epsilon", 1e-5)));
    c.out(0, y * c.in(1).reshape(view) + c.in(2).reshape(view));
  };
  h["MeanVarianceNormalization"] = [](NodeCtx& c) {
    // The op's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
    const Tensor x = c.in(0);
    c.expect_float(x, "X");
    std::vector<int64_t> axes = c.has_attr("axes") ? c.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
    for (int64_t& a : axes) a = norm_axis(c, a, x.rank());
    const Tensor mean = mean_over(x, axes);
    const Tensor variance = mean_over(x * x, axes) - mean * mean;
    c.out(0, (x - mean) / (sqrt(variance) + 1e-9));
  };
  h["EyeLike"] = [](NodeCtx& c) {
    const Value& v = c.value(0);
    if (v.shape.size() != 2) c.error("input must be 2-D, got {}", shape_str(v.shape));
    const DType dtype = c.has_attr("dtype") ? cast_target(c, static_cast<int>(c.attr_int("dtype", 1))) : v.dtype;
    const int64_t k = c.attr_int("k", 0);
    HostTensor eye(dtype, v.shape);
    for (int64_t i = 0; i < v.shape[0]; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < v.shape[1]) eye.set(i * v.shape[1] + j, 1.0);
    }
    c.out_constant(0, eye);
  };
  h["DepthToSpace"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const int64_t b = c.attr_int("blocksize", 0);
    if (x.rank() != 4) c.error("input must be [N, C, H, W], got {}", shape_str(x.shape()));
    const int64_t n = x.dim(0), ch = x.dim(1), h = x.dim(2), w = x.dim(3);
    if (b <= 0 || ch % (b * b) != 0) c.error("blocksize {} does not divide {} channels in squares", b, ch);
    const std::string mode = c.attr_string("mode", "DCR");
    Tensor y;
    if (mode == "DCR") y = x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
    else if (mode == "CRD") y = x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
    else c.error("mode '{}' (DCR or CRD)", mode);
    c.out(0, y.reshape({n, ch / (b * b), h * b, w * b}));
  };
  h["SpaceToDepth"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const int64_t b = c.attr_int("blocksize", 0);
    if (x.rank() != 4) c.error("input must be [N, C, H, W], got {}", shape_str(x.shape()));
    const int64_t n = x.dim(0), ch = x.dim(1), h = x.dim(2), w = x.dim(3);
    if (b <= 0 || h % b != 0 || w % b != 0) c.error("blocksize {} does not divide {}x{}", b, h, w);
    c.out(0, x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, ch * b * b, h / b, w / b}));
  };
  h["BatchNormalization"] = batch_norm;
  h["ReduceSum"] = [](NodeCtx& c) { reduce(c, ReduceKind::Sum); };
  h["ReduceMean"] = [](NodeCtx& c) { reduce(c, ReduceKind::Mean); };
  h["ReduceMax"] = [](NodeCtx& c) { reduce(c, ReduceKind::Max); };
  h["ReduceMin"] = [](NodeCtx& c) { reduce(c, ReduceKind::Min); };
  h["ReduceL1"] = [](NodeCtx& c) { reduce(c, ReduceKind::L1); };
  h["ReduceL2"] = [](NodeCtx& c) { reduce(c, ReduceKind::L2); };
  h["ReduceSumSquare"] = [](NodeCtx& c) { reduce(c, ReduceKind::SumSquare); };
  h["ReduceLogSum"] = [](NodeCtx& c) { reduce(c, ReduceKind::LogSum); };
  h["ReduceLogSumExp"] = [](NodeCtx& c) { reduce(c, ReduceKind::LogSumExp); };
  auto arg = [](bool largest) {
    return [largest](NodeCtx& c) {
      const Tensor x = c.in(0);
      const int64_t axis = norm_axis(c, c.attr_int("axis", 0), x.rank());
      Tensor idx = arg_extreme(c, x, axis, largest, c.attr_int("select_last_index", 0) != 0);
      if (c.attr_int("keepdims", 1) == 0) idx = idx.squeeze(axis);
      c.out(0, idx);
    };
  };
  h["ArgMax"] = arg(true);
  h["ArgMin"] = arg(false);
  h["Transpose"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    std::vector<int64_t> perm = c.attr_ints("perm");
    if (perm.empty())
      for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != x.rank()) c.error("perm has {} entries for rank {}", perm.size(), x.rank());
    c.out(0, x.permute(to_shape(perm)));
  };
  h["Reshape"] = reshape;
  h["Flatten"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const int64_t axis = c.attr_int("axis", 1);
    const int64_t a = axis < 0 ? axis + x.rank() : axis;
    if (a < 0 || a > x.rank()) c.error("axis {} is out of range for rank {}", axis, x.rank());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < x.rank(); ++i) (i < a ? outer : inner) *= x.dim(i);
    c.out(0, x.reshape({outer, inner}));
  };
  h["Squeeze"] = [](NodeCtx& c) {
    Tensor x = c.in(0);
    std::vector<int64_t> axes = axes_of(c, c.opset() >= 13 ? 1 : 99, x.rank());
    if (axes.empty())
      for (int64_t i = 0; i < x.rank(); ++i)
        if (x.dim(i) == 1) axes.push_back(i);
    std::sort(axes.rbegin(), axes.rend());
    for (const int64_t a : axes) {
      if (x.dim(a) != 1) c.error("axis {} has size {}, not 1", a, x.dim(a));
      x = x.squeeze(a);
    }
    c.out(0, x);
  };
  h["Unsqueeze"] = [](NodeCtx& c) {
    Tensor x = c.in(0);
    std::vector<int64_t> axes =
        c.opset() >= 13 ? c.ints(1, "axes") : c.attr_ints("axes");
    const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
    for (int64_t& a : axes) a = norm_axis(c, a, r);
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.error("axes repeat an axis");
    for (const int64_t a : axes) x = x.unsqueeze(a);
    c.out(0, x);
  };
  h["Concat"] = [](NodeCtx& c) {
    // 1-D integer constants (shape arithmetic), some maybe empty: joined here.
    bool shape_values = c.num_inputs() > 0;
    for (size_t i = 0; i < c.num_inputs(); ++i)
      shape_values = shape_values && c.has_input(i) && c.value(i).constant && c.value(i).shape.size() == 1 &&
                     c.value(i).dtype == c.value(0).dtype && is_integer(c.value(i).dtype);
    if (shape_values) {
      std::vector<int64_t> joined;
      for (size_t i = 0; i < c.num_inputs(); ++i)
        for (int64_t k = 0; k < c.value(i).constant->size(); ++k) joined.push_back(c.value(i).constant->get_int(k));
      HostTensor v(c.value(0).dtype, {static_cast<int64_t>(joined.size())});
      for (size_t k = 0; k < joined.size(); ++k) v.set_int(static_cast<int64_t>(k), joined[k]);
      return c.out_constant(0, v);
    }
    std::vector<Tensor> parts;
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (num_elements(c.value(i).shape) > 0) parts.push_back(c.in(i));
    if (parts.empty()) c.unsupported("a concat of empty tensors");
    const int64_t axis = norm_axis(c, c.attr_int("axis", 0), parts[0].rank());
    c.out(0, nn::concat(parts, axis));
  };
  h["Split"] = split;
  h["Slice"] = slice;
  h["Gather"] = [](NodeCtx& c) {
    const Tensor data = c.in(0), idx = c.in(1);
    if (!is_integer(idx.dtype())) c.error("indices must be i32 or i64");
    const int64_t axis = norm_axis(c, c.attr_int("axis", 0), data.rank());
    c.out(0, take(data, idx, axis));
  };
  h["GatherElements"] = [](NodeCtx& c) {
    const Tensor data = c.in(0);
    const int64_t axis = norm_axis(c, c.attr_int("axis", 0), data.rank());
    c.out(0, gather(data, fix_negative(c.in(1), data.dim(axis)), axis));
  };
  h["ScatterElements"] = scatter_elements;
  h["Scatter"] = scatter_elements;
  h["Expand"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const Shape target = to_shape(c.ints(1, "shape"));
    for (const int64_t d : target)
      if (d < 0 || d > (1 << 24)) c.unsupported("a target dimension of {}", d);
    c.out(0, x.broadcast_to(broadcast_shapes(x.shape(), target, "Expand")));
  };
  h["Tile"] = tile;
  h["Identity"] = pass_through;
  h["Dropout"] = [](NodeCtx& c) {
    if (c.has_input(2) && (!c.is_constant(2) || c.constant(2, "training_mode").get_int(0) != 0))
      c.unsupported("training mode");
    pass_through(c);
    if (c.wants_output(1)) {
      HostTensor mask(DType::Bool, c.value(0).shape);
      for (int64_t i = 0; i < mask.size(); ++i) mask.set_int(i, 1);
      c.out_constant(1, mask);
    }
  };
  h["Constant"] = constant_node;
  h["ConstantOfShape"] = constant_of_shape;
  h["Shape"] = [](NodeCtx& c) {
    const Shape& s = c.value(0).shape;
    const int64_t r = static_cast<int64_t>(s.size());
    auto clampi = [r](int64_t v) { return std::max<int64_t>(0, std::min(r, v < 0 ? v + r : v)); };
    const int64_t start = clampi(c.attr_int("start", 0)), end = clampi(c.attr_int("end", r));
    std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
    if (dims.empty()) c.unsupported("an empty shape slice");
    c.out_constant(0, i64_tensor(dims, {static_cast<int64_t>(dims.size())}));
  };
  h["Size"] = [](NodeCtx& c) { c.out_constant(0, i64_tensor({num_elements(c.value(0).shape)}, {})); };
  h["Range"] = range;
  h["TopK"] = topk;
  h["Clip"] = clip;
  h["Pad"] = [](NodeCtx& c) {
    const Tensor x = c.in(0);
    const std::string mode = c.attr_string("mode", "constant");
    if (mode != "constant") c.unsupported("mode '{}'", mode);
    std::vector<int64_t> pads = c.opset() < 11 ? c.attr_ints("pads") : c.ints(1, "pads");
    double value = c.opset() < 11 ? c.attr_float("value", 0.0) : 0.0;
    if (c.opset() >= 11 && c.has_input(2)) value = c.constant(2, "constant_value").get(0);
    const int64_t r = x.rank();
    for (const int64_t p : pads)
      if (p < -(1 << 24) || p > (1 << 24)) c.unsupported("a pad of {}", p);
    std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
    if (c.has_input(3)) {
      const auto axes = c.ints(3, "axes");
      if (pads.size() != 2 * axes.size()) c.error("pads has {} entries for {} axes", pads.size(), axes.size());
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = norm_axis(c, axes[i], r);
        full[static_cast<size_t>(a)] = pads[i];
        full[static_cast<size_t>(a + r)] = pads[i + axes.size()];
      }
    } else {
      if (static_cast<int64_t>(pads.size()) != 2 * r) c.error("pads has {} entries for rank {}", pads.size(), r);
      full = pads;
    }
    c.out(0, pad_to(x, full, value));
  };
  h["OneHot"] = one_hot;
  h["Trilu"] = trilu;
  h["CumSum"] = cumsum;
  return h;
}

}  // namespace

const std::map<std::string, Handler>& handlers() {
  static const std::map<std::string, Handler> table = make_handlers();
  return table;
}

}  // namespace spool::onnx::detail
