// The GEMM tile cache (lower/tile_cache.hpp): a run that reads its tiles
// from the cache times no candidates and lowers the same program to the
// same cycles as one that times them, whichever program filled the cache;
// a damaged cache or entry only costs the time of tuning again.

#include <doctest/doctest.h>

#include <spool/lower/tile_cache.hpp>
#include <spool/npu/text.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/support/build_id.hpp>

#include <spool/models/registry.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

using namespace spool;
namespace fs = std::filesystem;

namespace {

const std::string kRules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";

Graph llama(int64_t layers, const std::string& logits = "all") {
  models::ModelOptions options;
  options.layers = layers;
  options.logits = logits;
  return models::find_model("llama").entry->build(options);
}

// A fresh, empty cache directory for one test case.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("spool_tile_cache_test_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  return dir;
}

pipeline::Report run(const Graph& graph, const fs::path& cache, const std::string& npu = "tpuv3") {
  pipeline::Options options;
  options.compile.rule_files = {kRules};
  options.tile_cache_dir = cache.string();
  return pipeline::run(graph, target::load_config(npu), options);
}

std::string program_text(const pipeline::Report& r) { return npu::print(r.lowered->program); }

}  // namespace

TEST_CASE("tile cache: this build has an ID to key it on") { CHECK(build_id().size() >= 16); }

TEST_CASE("tile cache: a second run takes every tile from it, with the same program and cycles") {
  const Graph graph = llama(2);
  const fs::path dir = fresh_dir("second");
  const pipeline::Report none = run(graph, "");
  CHECK(none.tile_cache_file.empty());
  REQUIRE(none.lowering.gemm_tiles_timed > 0);

  const pipeline::Report first = run(graph, dir);
  CHECK(first.lowering.gemm_tiles_timed == none.lowering.gemm_tiles_timed);
  CHECK(first.lowering.gemm_tiles_known == 0);
  CHECK(first.tile_cache_saved);
  REQUIRE(fs::exists(first.tile_cache_file));

  const pipeline::Report second = run(graph, dir);
  CHECK(second.lowering.gemm_tiles_timed == 0);
  CHECK(second.lowering.gemm_tiles_known == none.lowering.gemm_tiles_timed);
  CHECK(second.tile_cache_file == first.tile_cache_file);
  CHECK(second.sim.cycles == none.sim.cycles);
  CHECK(first.sim.cycles == none.sim.cycles);
  CHECK(program_text(second) == program_text(none));
  fs::remove_all(dir);
}

TEST_CASE("tile cache: tiles another program tuned give the cycles tuning would") {
  // The last token's logits after all tokens': the GEMMs on buffers laid
  // out alike in both programs take the cached tiles, the others are tuned.
  const fs::path dir = fresh_dir("other");
  run(llama(2), dir);
  const Graph last = llama(2, "last");
  const pipeline::Report cached = run(last, dir);
  const pipeline::Report tuned = run(last, "");
  CHECK(cached.lowering.gemm_tiles_known > 0);
  CHECK(cached.lowering.gemm_tiles_known + cached.lowering.gemm_tiles_timed == tuned.lowering.gemm_tiles_timed);
  CHECK(cached.sim.cycles == tuned.sim.cycles);
  CHECK(program_text(cached) == program_text(tuned));
  // Another config is another file.
  const pipeline::Report toy = run(llama(2), dir, "toy");
  CHECK(toy.tile_cache_file != cached.tile_cache_file);
  CHECK(toy.lowering.gemm_tiles_known == 0);
  fs::remove_all(dir);
}

TEST_CASE("tile cache: a damaged file or entry is tuned again, to the same cycles") {
  const Graph graph = llama(2);
  const fs::path dir = fresh_dir("damaged");
  const pipeline::Report clean = run(graph, dir);
  const std::string file = clean.tile_cache_file;

  SUBCASE("entries the GEMMs cannot take") {
    std::ifstream in(file);
    nlohmann::json j = nlohmann::json::parse(in);
    in.close();
    REQUIRE(j["tiles"].size() >= 2);
    j["tiles"][0][1] = 7;  // rows no candidate has
    j["tiles"][1][4] = 1;  // single buffering: never the tuner's
    std::ofstream(file) << j.dump();
    const pipeline::Report r = run(graph, dir);
    CHECK(r.lowering.gemm_tiles_timed == 2);
    CHECK(r.sim.cycles == clean.sim.cycles);
    CHECK(program_text(r) == program_text(clean));
  }
  SUBCASE("not JSON, or of another context") {
    for (const std::string& text :
         {std::string("{\"tiles\": [[1, 2"), std::string("{\"context\": \"x\", \"tiles\": []}"),
          std::string("{\"context\": 3}")}) {
      std::ofstream(file) << text;
      const pipeline::Report r = run(graph, dir);
      CHECK(r.lowering.gemm_tiles_known == 0);
      CHECK(r.sim.cycles == clean.sim.cycles);
      CHECK(r.tile_cache_saved);  // rewritten whole
    }
  }
  fs::remove_all(dir);
}

// The file without its "source" notes.
nlohmann::json without_sources(nlohmann::json j) {
  if (!j.is_object()) return j;
  j.erase("source");
  for (auto& [key, value] : j.items()) value = without_sources(value);
  return j;
}

TEST_CASE("tile cache: the config's JSON is the config file's, and reads back to the same config") {
  for (const char* name : {"tpuv3", "tpuv4", "toy"}) {
    const target::NpuConfig c = target::load_config(name);
    const std::string text = target::to_json(c);
    std::ifstream file(std::string(SPOOL_SOURCE_DIR) + "/configs/" + name + ".json");
    CHECK_MESSAGE(nlohmann::json::parse(text) == without_sources(nlohmann::json::parse(file)), name);
    CHECK_MESSAGE(target::to_json(target::parse_config(text, name)) == text, name);
  }
}
