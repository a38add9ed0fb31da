#pragma once
// A file of GEMM tiles tuned by earlier runs (LowerOptions::tuned), so that
// a one-shot `spool run` of a model run before times no tile candidates.
//
// One file per context: this build (its GNU build ID: any change to the
// code is another build), the NPU config (target::to_json) and the
// lowering options that decide tiles. Within it, tiles are found by tuning
// key, which holds everything the tile timer reads; so a tile read back is
// the one the timer would choose again, and the cycles are the same with
// the cache, without it, or with it half full (tests/lower/tile_cache_test).
// The file is JSON; one that cannot be read, is malformed or is of another
// context counts as empty (with a warning), and an entry the lowering cannot
// take (not one of the GEMM's candidate tiles, or over the budget) is tuned
// again (lower.hpp). An entry edited to another of the GEMM's candidates is
// taken as given: a valid program, possibly slower than the timer's pick.

#include <spool/lower/lower.hpp>
#include <spool/target/npu.hpp>

#include <filesystem>
#include <string>

namespace spool::lower {

class TileCache {
 public:
  // The cache in `dir` for this config and these options; reads its file
  // if there is one. Without a build ID (build_id()) it is not usable:
  // nothing is read or written.
  TileCache(std::filesystem::path dir, const target::NpuConfig& config, const LowerOptions& options);

  bool usable() const { return !file_.empty(); }
  const std::filesystem::path& file() const { return file_; }
  const TunedTiles& tiles() const { return tiles_; }

  // Adds `tuned` to the tiles and writes the file if that adds any (to a
  // temporary renamed over it, so a reader never sees half a file); false,
  // with a warning, when it cannot be written. Keeps the directory's 32
  // most recent cache files.
  bool save(const TunedTiles& tuned);

  // The directory a user's runs share: $SPOOL_CACHE_DIR, else
  // $XDG_CACHE_HOME/spool, else $HOME/.cache/spool; empty if none is set.
  static std::filesystem::path default_dir();

 private:
  std::filesystem::path file_;
  std::string context_;
  TunedTiles tiles_;
};

}  // namespace spool::lower
