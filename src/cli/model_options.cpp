// The options that choose an example model's shape and phase, shared by the
// commands that build one (run, compile, fuzz).

#include "commands.hpp"

#include "models.hpp"

namespace spool::cli {

void add_model_options(CLI::App* cmd, examples::ModelOptions& options) {
  cmd->add_option("--size", options.size, "tiny or real")->check(CLI::IsMember({"tiny", "real"}))->capture_default_str();
  cmd->add_option("--layers", options.layers, "Number of layers (default: the size's own)")->check(CLI::PositiveNumber);
  cmd->add_option("--phase", options.phase, "prefill, or decode (one token after a KV cache)")
      ->check(CLI::IsMember({"prefill", "decode"}))
      ->capture_default_str();
  cmd->add_option("--seq", options.seq, "Prefill tokens (default: 8 tiny, 512 real)")->check(CLI::PositiveNumber);
  cmd->add_option("--context", options.context, "Decode: KV cache length (default: 8 tiny, 512 real)")
      ->check(CLI::PositiveNumber);
}

}  // namespace spool::cli
