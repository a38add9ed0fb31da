// The BERT encoder block of issue 6, written operation by operation.

#include <spool/models/bert.hpp>

#include <spool/models/config_checks.hpp>

#include <cmath>

namespace spool::models {
namespace {

BertConfig real(const char* variant, int64_t hidden, int64_t heads) {
  BertConfig c;
  c.variant = variant;
  c.layers = 1;
  c.hidden = hidden;
  c.heads = heads;
  c.ffn = 4 * hidden;
  c.seq = 512;
  return c;
}

}  // namespace

BertConfig BertConfig::tiny() { return BertConfig{}; }
BertConfig BertConfig::base() { return real("base", 768, 12); }
BertConfig BertConfig::large() { return real("large", 1024, 16); }
BertConfig BertConfig::xlarge() { return real("xlarge", 2048, 32); }

BertConfig BertConfig::variant_named(const std::string& name) {
  if (name == "base") return base();
  if (name == "large") return large();
  if (name == "xlarge") return xlarge();
  fail("bert: unknown variant '{}' (expected base, large or xlarge)", name);
}

void BertConfig::validate() const {
  check_positive("bert", {{"layers", layers}, {"hidden", hidden}, {"heads", heads}, {"ffn", ffn}, {"seq", seq}});
  if (hidden % heads != 0) fail("bert config: hidden ({}) must be a multiple of heads ({})", hidden, heads);
}

std::string BertConfig::describe() const {
  return fmt::format("{}{} block{}, hidden {}, {} heads, FFN {}, seq {}", variant == "tiny" ? "" : variant + ": ",
                     layers, layers == 1 ? "" : "s", hidden, heads, ffn, seq);
}

Graph build_bert(const BertConfig& c, const Phase& phase) {
  c.validate();
  phase.validate("bert");
  if (phase.has_cache()) fail("bert: an encoder has no KV cache, so there is no decode phase (use --phase prefill)");
  Graph g("bert");
  const int64_t s = phase.seq, heads = c.heads, d = c.hidden / c.heads;
  Tensor x = input(g, "x", c.dtype, {s, c.hidden});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = fmt::format("encoder.layer.{}.", i);
    auto w = [&](const std::string& name, const Shape& shape) { return model_weight(g, c.dtype, prefix + name, shape); };
    auto projection = [&](const std::string& name, int64_t out, const Tensor& in) {
      return nn::linear(in, w(name + ".weight", {out, in.dim(-1)}), w(name + ".bias", {out}));
    };
    // W·aᵀ + b, transposed back: [S, in] -> [S, out].
    auto transposed_projection = [&](const std::string& name, int64_t out, const Tensor& in) {
      const Tensor y = nn::matmul(w(name + ".weight", {out, in.dim(-1)}), in.transpose(0, 1)) +
                       w(name + ".bias", {out}).unsqueeze(1);
      return y.transpose(0, 1);
    };
    auto layer_norm = [&](const std::string& name, const Tensor& in) {
      return nn::layer_norm(in, w(name + ".weight", {c.hidden}), w(name + ".bias", {c.hidden}), c.eps);
    };
    const Tensor q = projection("attention.self.query", c.hidden, x).reshape({heads, s, d});
    const Tensor k = projection("attention.self.key", c.hidden, x).reshape({heads, s, d});
    const Tensor v = projection("attention.self.value", c.hidden, x).reshape({heads, s, d});
    const Tensor scores = nn::matmul(k, q.transpose(1, 2)) * (1.0 / std::sqrt(static_cast<double>(d)));
    const Tensor probs = nn::softmax(scores, -2);
    const Tensor attn = nn::matmul(v.transpose(1, 2), probs).reshape({s, c.hidden});  // [H, D, S] row-major
    const Tensor y1 =
        layer_norm("attention.output.LayerNorm", transposed_projection("attention.output.dense", c.hidden, attn) + x);
    const Tensor h = nn::relu(projection("intermediate.dense", c.ffn, y1));
    x = layer_norm("output.LayerNorm", transposed_projection("output.dense", c.hidden, h) + y1);
  }
  output("y", x);
  return g;
}

}  // namespace spool::models
