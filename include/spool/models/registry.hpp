#pragma once
// The example models the `spool` tool knows by name.

#include <spool/ir/graph.hpp>

#include <spool/models/decoder.hpp>

#include <functional>
#include <string>
#include <vector>

namespace spool::models {

struct ModelOptions {
  std::string size = "tiny";        // "tiny" or "real"
  std::string variant;              // a model's named variant (bert: base, large, xlarge); empty: its default
  int64_t layers = 0;               // 0: the size's own layer count
  std::string phase = "prefill";    // "prefill" or "decode"
  int64_t seq = 0;                  // prefill tokens; 0: the default (8 tiny, 512 real)
  int64_t context = 0;              // decode: KV cache length; 0: the default (8 tiny, 512 real)
  std::string dtype;                // "bf16" or "f32"; empty: bf16 real (as served), f32 tiny
  std::string logits;               // prefill: "last" or "all" tokens' logits; empty: last real (as served), all tiny
};

// The dtype `options` asks for, with the default filled in.
DType resolve_dtype(const ModelOptions& options);

// The phase that `options` asks for, with the defaults filled in. Fails on a
// decode with --seq other than 1 or a prefill with a context.
Phase resolve_phase(const ModelOptions& options);

struct ModelEntry {
  std::string name;
  std::string description;
  std::string tiny_shape;  // one line: layers, hidden, heads, ...
  std::string real_shape;
  // Named real variants (name, one-line shape); the first is the default.
  std::vector<std::pair<std::string, std::string>> variants;
  std::function<Graph(const ModelOptions&)> build;
  bool reads_hf_weights = false;  // --weights DIR works (hf_weights.hpp)
};

const std::vector<ModelEntry>& registry();

// The shape line of `entry` at `size` ("tiny" or "real") and `variant` (may be empty).
std::string shape_of(const ModelEntry& entry, const std::string& size, const std::string& variant);

// `spec` is NAME or NAME:VARIANT (e.g. bert:large). Fails listing the known
// names, or the model's variants.
struct ModelRef {
  const ModelEntry* entry = nullptr;
  std::string variant;
};
ModelRef find_model(const std::string& spec);

}  // namespace spool::models
