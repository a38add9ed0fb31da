// Built-in workloads as LLIR graphs (see workloads.hpp), lowered by
// lower::to_npu. Linear layers are GEMM kernels with their bias, residual and
// ReLU as the epilogue; attention is a scores GEMM with the 1/sqrt(D) scale
// as its epilogue, a softmax kernel and an output GEMM reading both operands
// through transposing views.

#include <spool/lower/workloads.hpp>

#include <spool/ir/tensor.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace spool::lower {
namespace {

std::vector<int64_t> parse_dims(std::string_view spec, std::string_view text, size_t count) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    int64_t value = 0;
    const std::string_view part = text.substr(pos, end - pos);
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || value <= 0)
      fail("workload '{}': '{}' is not a positive integer", spec, part);
    dims.push_back(value);
    pos = end + 1;
  }
  if (dims.size() != count) fail("workload '{}': expected {} dimensions separated by 'x'", spec, count);
  return dims;
}

ProgramInstr instr(Op op, uint16_t a = 0, uint16_t b = 0) {
  ProgramInstr in;
  in.op = op;
  in.args = {a, b, 0};
  return in;
}
ProgramInstr constant(double v) {
  ProgramInstr in;
  in.op = Op::Constant;
  in.value = Scalar::of(DType::F32, v);
  return in;
}

class Builder {
 public:
  Builder(std::string name, std::vector<std::pair<NodeId, std::string>>* names) : g(std::move(name)), names_(names) {}

  Tensor kernel(const std::string& name, Op op, std::vector<Edge> inputs, Attr attr) {
    const NodeId id = g.add(op, std::move(inputs), std::move(attr));
    if (names_) names_->push_back({id, name});
    return Tensor(&g, id);
  }

  // x [S, K] times a Linear weight [N, K] (read transposed), + bias (+ residual) (ReLU).
  Tensor linear(const std::string& name, const Tensor& x, const Tensor& w, const Tensor& b,
                const std::optional<Tensor>& residual, bool relu) {
    const Shape out{x.dim(0), w.dim(0)};
    GemmAttr attr;
    attr.epilogue.instrs = {instr(Op::Add, 0, 1)};
    std::vector<Edge> inputs{x.edge(), w.transpose(0, 1).edge(), b.broadcast_to(out).edge()};
    if (residual) {
      attr.epilogue.instrs.push_back(instr(Op::Add, 3, 2));
      inputs.push_back(residual->edge());
    }
    if (relu) {
      // Values: the product, the epilogue inputs, then one per instruction.
      const uint16_t last = static_cast<uint16_t>(inputs.size() - 2 + attr.epilogue.instrs.size());
      attr.epilogue.instrs.push_back(constant(0.0));
      attr.epilogue.instrs.push_back(instr(Op::Max, last, static_cast<uint16_t>(last + 1)));
    }
    return kernel(name, Op::Gemm, std::move(inputs), attr);
  }

  // q, k, v [H, S, D] -> out [H, D, S] = v^T softmax_dim1(k q^T / sqrt(D)).
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t D = q.dim(2);
    GemmAttr scaled;
    scaled.epilogue.instrs = {constant(1.0 / std::sqrt(static_cast<double>(D))), instr(Op::Mul, 0, 1)};
    const Tensor scores_t = kernel("scores", Op::Gemm, {q.edge(), k.transpose(1, 2).edge()}, scaled);
    const Tensor p = kernel("softmax", Op::Softmax, {scores_t.edge()}, AxisAttr{2});
    return kernel("attention_out", Op::Gemm, {v.transpose(1, 2).edge(), p.transpose(1, 2).edge()}, GemmAttr{});
  }

  Tensor layer_norm(const std::string& name, const Tensor& x, const Tensor& w, const Tensor& b) {
    return kernel(name, Op::LayerNorm, {x.edge(), w.edge(), b.edge()}, NormAttr{1e-5, false});
  }

  Graph g;

 private:
  std::vector<std::pair<NodeId, std::string>>* names_;
};

void bert(Builder& b, std::string_view spec, std::string_view size) {
  int64_t hidden = 0, heads = 0;
  if (size == "base") {
    hidden = 768;
    heads = 12;
  } else if (size == "large") {
    hidden = 1024;
    heads = 16;
  } else if (size == "xlarge") {
    hidden = 2048;
    heads = 32;
  } else {
    fail("workload '{}': bert size must be base, large or xlarge", spec);
  }
  const int64_t S = 512, D = hidden / heads, F = 4 * hidden;
  Graph& g = b.g;
  const Tensor x = input(g, "x", DType::F32, {S, hidden});
  auto w = [&](const char* n, Shape s) { return weight(g, n, DType::F32, s); };
  const Tensor wq = w("wq", {hidden, hidden}), bq = w("bq", {hidden});
  const Tensor wk = w("wk", {hidden, hidden}), bk = w("bk", {hidden});
  const Tensor wv = w("wv", {hidden, hidden}), bv = w("bv", {hidden});
  const Tensor wo = w("wo", {hidden, hidden}), bo = w("bo", {hidden});
  const Tensor ln1_w = w("ln1_w", {hidden}), ln1_b = w("ln1_b", {hidden});
  const Tensor w1 = w("w1", {F, hidden}), b1 = w("b1", {F});
  const Tensor w2 = w("w2", {hidden, F}), b2 = w("b2", {hidden});
  const Tensor ln2_w = w("ln2_w", {hidden}), ln2_b = w("ln2_b", {hidden});
  const Tensor q = b.linear("q_proj", x, wq, bq, std::nullopt, false);
  const Tensor k = b.linear("k_proj", x, wk, bk, std::nullopt, false);
  const Tensor v = b.linear("v_proj", x, wv, bv, std::nullopt, false);
  const Tensor att = b.attention(q.reshape({heads, S, D}), k.reshape({heads, S, D}), v.reshape({heads, S, D}));
  const Tensor a = att.reshape({S, hidden});
  const Tensor y1 = b.layer_norm("ln1", b.linear("out_proj", a, wo, bo, a, false), ln1_w, ln1_b);
  const Tensor h = b.linear("ffn_up", y1, w1, b1, std::nullopt, true);
  output("y", b.layer_norm("ln2", b.linear("ffn_down", h, w2, b2, y1, false), ln2_w, ln2_b));
}

// llama-3-8B prefill at sequence 512, `layers` decoder layers unrolled: per
// layer an RMSNorm, q/k/v projections, RoPE-style fused elementwise kernels
// on q and k, grouped-query attention (the kv heads read through expanding
// views, 4-D batched GEMMs, the softmax fused into the scores GEMM), the
// output projection with the residual as epilogue, an RMSNorm, the gate/up
// projection and the down projection with silu(gate) * up as its prologue
// over the two halves of gate_up and the residual as epilogue; then the final
// RMSNorm and the LM head over a 128256-entry vocabulary.
void llama3_8b(Builder& b, std::string_view spec, std::string_view args) {
  const auto d = parse_dims(spec, args, 1);
  const int64_t layers = d[0], S = 512, Hd = 4096, F = 14336, V = 128256, H = 32, KV = 8, D = 128;
  Graph& g = b.g;
  const DType T = DType::BF16;
  Tensor x = input(g, "x", T, {S, Hd});
  const Tensor cos = input(g, "cos", T, {S, Hd}), sin = input(g, "sin", T, {S, Hd});
  const Tensor cos_k = input(g, "cos_k", T, {S, KV * D}), sin_k = input(g, "sin_k", T, {S, KV * D});
  auto gemm = [&](const std::string& name, const Tensor& a, const Tensor& w, GemmAttr attr, std::vector<Edge> more) {
    std::vector<Edge> in{a.edge(), w.transpose(0, 1).edge()};
    for (Edge& e : more) in.push_back(std::move(e));
    return b.kernel(name, Op::Gemm, std::move(in), std::move(attr));
  };
  GemmAttr plain, residual;
  residual.epilogue.instrs = {instr(Op::Add, 0, 1)};
  // x * c + x * s (the RoPE arithmetic on a rotated copy is what the rules produce; here both read x).
  ProgramAttr rope;
  rope.instrs = {instr(Op::Mul, 0, 1), instr(Op::Mul, 0, 2), instr(Op::Add, 3, 4)};
  GemmAttr swiglu;
  swiglu.a_inputs = 2;
  swiglu.a.instrs = {constant(-1.4426950408889634), instr(Op::Mul, 0, 2), instr(Op::Exp2, 3), constant(1.0),
                     instr(Op::Add, 4, 5), instr(Op::Recip, 6), instr(Op::Mul, 0, 7), instr(Op::Mul, 8, 1)};
  for (auto& in : swiglu.a.instrs)
    if (in.op == Op::Constant) in.value = Scalar::of(T, in.value.as_double());
  swiglu.epilogue.instrs = {instr(Op::Add, 0, 1)};
  GemmAttr scaled;
  scaled.epilogue.instrs = {constant(1.0 / std::sqrt(static_cast<double>(D))), instr(Op::Mul, 0, 1)};
  scaled.epilogue.instrs[0].value = Scalar::of(T, scaled.epilogue.instrs[0].value.as_double());
  for (int64_t l = 0; l < layers; ++l) {
    auto w = [&](const std::string& n, Shape s) { return weight(g, fmt::format("layers.{}.{}", l, n), T, s); };
    const Tensor xn = b.kernel(fmt::format("l{}.attn_norm", l), Op::RmsNorm, {x.edge(), w("attn_norm", {Hd}).edge()},
                               NormAttr{1e-5, false});
    const Tensor q = gemm(fmt::format("l{}.q_proj", l), xn, w("wq", {Hd, Hd}), plain, {});
    const Tensor k = gemm(fmt::format("l{}.k_proj", l), xn, w("wk", {KV * D, Hd}), plain, {});
    const Tensor v = gemm(fmt::format("l{}.v_proj", l), xn, w("wv", {KV * D, Hd}), plain, {});
    const Tensor qr = b.kernel(fmt::format("l{}.rope_q", l), Op::Fused, {q.edge(), cos.edge(), sin.edge()}, rope);
    const Tensor kr = b.kernel(fmt::format("l{}.rope_k", l), Op::Fused, {k.edge(), cos_k.edge(), sin_k.edge()}, rope);
    // [S, KV*4*D] -> [KV, 4, S, D]; k, v: [S, KV*D] -> [KV, 1, S, D] expanded over the 4 query heads of a group.
    const Tensor q4 = qr.reshape({S, KV, H / KV, D}).permute({1, 2, 0, 3});
    const Shape grouped{KV, H / KV, S, D};
    const Tensor k4 = kr.reshape({S, KV, 1, D}).permute({1, 2, 0, 3}).expand(grouped);
    const Tensor v4 = v.reshape({S, KV, 1, D}).permute({1, 2, 0, 3}).expand(grouped);
    const Tensor scores = b.kernel(fmt::format("l{}.scores", l), Op::Gemm, {q4.edge(), k4.transpose(2, 3).edge()}, scaled);
    const Tensor p = b.kernel(fmt::format("l{}.softmax", l), Op::Softmax, {scores.edge()}, AxisAttr{3});
    const Tensor att = b.kernel(fmt::format("l{}.attention_out", l), Op::Gemm, {p.edge(), v4.edge()}, plain);
    const Tensor rows = att.permute({2, 0, 1, 3}).reshape({S, Hd});
    const Tensor h = gemm(fmt::format("l{}.o_proj", l), rows, w("wo", {Hd, Hd}), residual, {x.edge()});
    const Tensor hn = b.kernel(fmt::format("l{}.ffn_norm", l), Op::RmsNorm, {h.edge(), w("ffn_norm", {Hd}).edge()},
                               NormAttr{1e-5, false});
    const Tensor gate_up = gemm(fmt::format("l{}.gate_up", l), hn, w("w_gate_up", {2 * F, Hd}), plain, {});
    const std::vector<Tensor> halves = gate_up.chunk(2, 1);
    const Tensor wd = w("w_down", {Hd, F});
    x = b.kernel(fmt::format("l{}.down", l), Op::Gemm,
                 {halves[0].edge(), halves[1].edge(), wd.transpose(0, 1).edge(), h.edge()}, swiglu);
  }
  const Tensor xn = b.kernel("final_norm", Op::RmsNorm, {x.edge(), weight(g, "norm", T, {Hd}).edge()}, NormAttr{1e-5, false});
  output("logits", gemm("lm_head", xn, weight(g, "lm_head", T, {V, Hd}), plain, {}));
}

}  // namespace

std::vector<std::string> workload_forms() {
  return {"gemm:MxKxN", "layernorm:RxC", "softmax:RxC", "attention:HxSxD", "bert:base|large|xlarge", "llama3_8b:LAYERS"};
}

Graph workload_graph(std::string_view spec, std::vector<std::pair<NodeId, std::string>>* kernel_names) {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos)
    fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view args = spec.substr(colon + 1);
  Builder b{std::string(spec), kernel_names};
  Graph& g = b.g;
  if (kind == "gemm") {
    const auto d = parse_dims(spec, args, 3);
    const Tensor a = input(g, "a", DType::F32, {d[0], d[1]});
    const Tensor w = weight(g, "w", DType::F32, {d[1], d[2]});
    output("out", b.kernel("gemm", Op::Gemm, {a.edge(), w.edge()}, GemmAttr{}));
  } else if (kind == "softmax") {
    const auto d = parse_dims(spec, args, 2);
    output("out", b.kernel("softmax", Op::Softmax, {input(g, "x", DType::F32, {d[0], d[1]}).edge()}, AxisAttr{1}));
  } else if (kind == "layernorm") {
    const auto d = parse_dims(spec, args, 2);
    const Tensor x = input(g, "x", DType::F32, {d[0], d[1]});
    output("out", b.layer_norm("layernorm", x, weight(g, "weight", DType::F32, {d[1]}),
                               weight(g, "bias", DType::F32, {d[1]})));
  } else if (kind == "attention") {
    const auto d = parse_dims(spec, args, 3);
    const Tensor q = input(g, "q", DType::F32, {d[0], d[1], d[2]});
    const Tensor k = input(g, "k", DType::F32, {d[0], d[1], d[2]});
    const Tensor v = input(g, "v", DType::F32, {d[0], d[1], d[2]});
    output("out", b.attention(q, k, v));
  } else if (kind == "bert") {
    bert(b, spec, args);
  } else if (kind == "llama3_8b") {
    llama3_8b(b, spec, args);
  } else {
    fail("unknown workload '{}' (expected one of: {})", spec, fmt::join(workload_forms(), ", "));
  }
  return std::move(b.g);
}

Workload make_workload(std::string_view spec, const sim::NpuConfig& config, const LowerOptions& options) {
  std::vector<std::pair<NodeId, std::string>> names;
  Graph g = workload_graph(spec, &names);
  Lowered lowered = to_npu(g, config, options);
  // Kernels take the workload's names (q_proj, scores, ...) instead of op_id.
  for (const auto& [id, name] : names) {
    const std::string generated = fmt::format("{}_{}", op_name(g.node(id).op), id.value);
    for (npu::Kernel& k : lowered.program.kernels)
      if (k.name == generated || k.name.rfind(generated + ".", 0) == 0) k.name = name + k.name.substr(generated.size());
    for (KernelInfo& k : lowered.report.per_kernel)
      if (k.name == generated || k.name.rfind(generated + ".", 0) == 0) k.name = name + k.name.substr(generated.size());
  }
  Workload w;
  w.name = std::string(spec);
  w.program = std::move(lowered.program);
  w.program.name = w.name;
  w.report = std::move(lowered.report);
  for (const auto& [input, buffer] : lowered.inputs) w.inputs.push_back(buffer);
  for (const auto& [output, buffer] : lowered.outputs) w.outputs.push_back(buffer);
  w.graph = std::move(g);
  return w;
}

}  // namespace spool::lower
