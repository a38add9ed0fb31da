// The tile cache's file: {"context": "...", "tiles": [[key, tm, tn, tk,
// slots, split], ...]}.

#include <spool/lower/tile_cache.hpp>
#include <spool/support/build_id.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <system_error>
#include <vector>

namespace spool::lower {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kKeptFiles = 32;

// Everything a tuned tile depends on besides its key.
std::string context_of(const target::NpuConfig& config, const LowerOptions& o) {
  return fmt::format("spool tile cache 1\nbuild {}\nlower fuse={} multi_core={} spad_budget={} candidates={}\n{}",
                     build_id(), o.fuse, o.multi_core, o.spad_budget, o.gemm_simulated_candidates,
                     target::to_json(config));
}

// The tiles of a file's JSON text; throws json::exception on a wrong shape.
TunedTiles parse_tiles(const json& tiles) {
  TunedTiles out;
  for (const json& e : tiles.at("tiles")) {
    if (!e.is_array() || e.size() != 6) throw std::runtime_error("an entry is not [key, tm, tn, tk, slots, split]");
    TunedTile t;
    t.tm = e.at(1).get<int64_t>();
    t.tn = e.at(2).get<int64_t>();
    t.tk = e.at(3).get<int64_t>();
    t.slots = e.at(4).get<int64_t>();
    t.split = e.at(5).get<bool>();
    out[e.at(0).get<std::string>()] = t;
  }
  return out;
}

// Removes the oldest cache files beyond kKeptFiles (errors ignored: another
// process may be pruning too).
void prune(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("tiles-") || e.path().extension() != ".json") continue;
    const fs::file_time_type t = fs::last_write_time(e.path(), ec);
    if (!ec) files.emplace_back(t, e.path());
  }
  if (files.size() <= kKeptFiles) return;
  std::sort(files.begin(), files.end(), std::greater<>());
  for (size_t i = kKeptFiles; i < files.size(); ++i) fs::remove(files[i].second, ec);
}

}  // namespace

TileCache::TileCache(fs::path dir, const target::NpuConfig& config, const LowerOptions& options) {
  if (build_id().empty() || dir.empty()) return;
  context_ = context_of(config, options);
  file_ = dir / fmt::format("tiles-{:016x}.json", std::hash<std::string>{}(context_));
  std::ifstream in(file_);
  if (!in) return;  // not written yet
  try {
    const json j = json::parse(in);
    if (j.at("context").get<std::string>() != context_) {
      spdlog::warn("tile cache {}: written for another build or config; not used", file_.string());
      return;
    }
    tiles_ = parse_tiles(j);
  } catch (const std::exception& e) {
    spdlog::warn("tile cache {}: unreadable ({}); not used", file_.string(), e.what());
    tiles_.clear();
  }
}

bool TileCache::save(const TunedTiles& tuned) {
  if (!usable()) return false;
  bool changed = false;
  for (const auto& [key, tile] : tuned) {
    const auto [it, added] = tiles_.emplace(key, tile);
    if (added || it->second != tile) {
      it->second = tile;
      changed = true;
    }
  }
  if (!changed) return true;
  json j;
  j["context"] = context_;
  j["tiles"] = json::array();
  for (const auto& [key, t] : tiles_) j["tiles"].push_back(json::array({key, t.tm, t.tn, t.tk, t.slots, t.split}));
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  if (ec) {
    spdlog::warn("tile cache {}: cannot create its directory: {}", file_.string(), ec.message());
    return false;
  }
  const fs::path tmp = file_.string() + fmt::format(".{}.tmp", ::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump() << '\n';
    if (!out.flush()) {
      spdlog::warn("tile cache {}: cannot write {}", file_.string(), tmp.string());
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, file_, ec);
  if (ec) {
    spdlog::warn("tile cache {}: cannot write it: {}", file_.string(), ec.message());
    fs::remove(tmp, ec);
    return false;
  }
  prune(file_.parent_path());
  return true;
}

fs::path TileCache::default_dir() {
  if (const char* d = std::getenv("SPOOL_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "spool";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "spool";
  return {};
}

}  // namespace spool::lower
