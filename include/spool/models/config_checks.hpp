#pragma once
// Validation shared by the example model configs: every error names the
// model and the field.

#include <spool/support/error.hpp>

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace spool::models {

inline void check_positive(std::string_view model, std::initializer_list<std::pair<std::string_view, int64_t>> fields) {
  for (const auto& [name, value] : fields)
    if (value < 1) fail("{} config: {} must be positive, got {}", model, name, value);
}

// The common decoder fields plus the attention heads.
inline void check_decoder_dims(std::string_view model,
                               std::initializer_list<std::pair<std::string_view, int64_t>> fields, int64_t heads,
                               int64_t kv_heads, int64_t head_dim) {
  check_positive(model, fields);
  check_positive(model, {{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}});
  if (heads % kv_heads != 0) fail("{} config: heads ({}) must be a multiple of kv_heads ({})", model, heads, kv_heads);
  if (head_dim % 2 != 0) fail("{} config: head_dim must be even for RoPE, got {}", model, head_dim);
}

// A parameter count computed in double (a config of absurd sizes must
// describe itself, not overflow), as an integer: an error naming the model
// when it does not fit in 64 bits.
inline int64_t checked_parameter_count(std::string_view model, double n) {
  if (!(n < 9.2e18)) fail("{} config: the parameter count {:.3g} does not fit in 64 bits", model, n);
  return static_cast<int64_t>(n);
}

}  // namespace spool::models
