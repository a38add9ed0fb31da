// The options that choose an example model's shape and phase, shared by the
// commands that build one (run, compile, fuzz).

#include "commands.hpp"

#include "models.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>

namespace spool::cli {

CLI::Validator count(int64_t max, int64_t min) {
  return CLI::Validator(
      [max, min](std::string& text) -> std::string {
        int64_t value = -1;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || ptr != text.data() + text.size() || value < min || value > max)
          return fmt::format("'{}' is not a whole number from {} to {}", text, min, max);
        return {};
      },
      fmt::format("INT in [{}, {}]", min, max));
}

CLI::Validator non_negative_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t used = 0;
        double value = -1;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value) || value < 0)
          return fmt::format("'{}' is not a finite number >= 0", text);
        return {};
      },
      "REAL >= 0");
}

void add_model_options(CLI::App* cmd, examples::ModelOptions& options) {
  cmd->add_option("--size", options.size, "tiny or real")->check(CLI::IsMember({"tiny", "real"}))->capture_default_str();
  // Bounds far above any released model, so that a typo fails at once
  // instead of building a graph for minutes.
  cmd->add_option("--layers", options.layers, "Number of layers (default: the size's own)")
      ->check(count(4096, 1));
  cmd->add_option("--phase", options.phase, "prefill, or decode (one token after a KV cache)")
      ->check(CLI::IsMember({"prefill", "decode"}))
      ->capture_default_str();
  cmd->add_option("--seq", options.seq, "Prefill tokens (default: 8 tiny, 512 real)")
      ->check(count(131072, 1));
  cmd->add_option("--context", options.context, "Decode: KV cache length (default: 8 tiny, 512 real)")
      ->check(count(1048576, 1));
  cmd->add_option("--dtype", options.dtype,
                  "Weights, activations and KV cache: bf16 or f32 (default: bf16 real, as served; f32 tiny)")
      ->check(CLI::IsMember({"bf16", "f32"}));
}

}  // namespace spool::cli
