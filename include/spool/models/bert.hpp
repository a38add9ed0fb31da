#pragma once
// BERT encoder block exactly as issue 6 defines the `bert:base|large|xlarge`
// simulator workloads (after PyTorchSim's validation set), f32, batch 1:
//   q, k, v = Linear(x) with bias, each [S, hidden] read row-major as [H, S, D] (no transpose)
//   scores  = k·qᵀ / √D                       [H, S, S]
//   probs   = softmax(scores, dim −2)
//   out     = vᵀ·probs                         [H, D, S], read row-major as [S, hidden] (no transpose)
//   y1      = LayerNorm((W_o·outᵀ + b_o)ᵀ + x)  (no separate output-projection "attention" step)
//   h       = ReLU(Linear(y1)) with 4·hidden features
//   y       = LayerNorm((W_2·hᵀ + b_2)ᵀ + y1)
// Input "x" f32 [S, hidden], output "y". LayerNorm eps 1e-5 (PyTorch's default).
// An encoder has no KV cache, so BERT has no decode phase.
// Parameter names follow Hugging Face's BertModel (`encoder.layer.0.attention.self.query.weight`, ...).

#include <spool/models/decoder.hpp>

#include <string>

namespace spool::models {

struct BertConfig {
  std::string variant = "tiny";
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t ffn = 256;
  int64_t seq = 8;  // the default sequence length (issue 6: 512 for the real variants)
  double eps = 1e-5;
  DType dtype = DType::F32;  // weights and activations

  static BertConfig tiny();
  static BertConfig base();    // hidden 768, 12 heads
  static BertConfig large();   // hidden 1024, 16 heads
  static BertConfig xlarge();  // hidden 2048, 32 heads
  static BertConfig variant_named(const std::string& name);  // base, large or xlarge
  void validate() const;
  std::string describe() const;
};

Graph build_bert(const BertConfig& config, const Phase& phase);

}  // namespace spool::models
