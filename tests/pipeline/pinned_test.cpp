// Pinned behaviour: for every example model, tiny and real-shaped (two of
// its layers, or four for deepseek-v3 so that MoE layers follow its dense
// ones), in both phases, a hash of the lowered program's text (the NPU
// kernels the extracted program lowers to) and the simulated cycles,
// against tests/pipeline/pinned.txt. A refactor keeps
// them; a deliberate change of what Spool compiles or simulates updates the
// file in its own commit that says why:
//
//   SPOOL_UPDATE_PINNED=1 build/release/tests/pipeline/pinned_tests
//
// rewrites the file from the current build (and the test passes).

#include <doctest/doctest.h>

#include <spool/npu/text.hpp>
#include <spool/pipeline/pipeline.hpp>
#include <spool/support/hash.hpp>

#include <spool/models/registry.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace spool;

namespace {

const std::string kFile = std::string(SPOOL_SOURCE_DIR) + "/tests/pipeline/pinned.txt";

// FNV-1a over the text: stable across platforms and standard libraries.
uint64_t text_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Pin {
  std::string program_hash;
  int64_t cycles = 0;
  bool operator==(const Pin&) const = default;
};

std::map<std::string, Pin> read_pins() {
  std::map<std::string, Pin> pins;
  std::ifstream in(kFile);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key;
    Pin pin;
    fields >> key >> pin.program_hash >> pin.cycles;
    pins[key] = pin;
  }
  return pins;
}

}  // namespace

TEST_CASE("pinned: every example model compiles to the same program and simulates in the same cycles") {
  const target::NpuConfig config = target::load_config("tpuv3");
  std::map<std::string, Pin> now;
  for (const models::ModelEntry& entry : models::registry())
    for (const char* size : {"tiny", "real"})
      for (const char* phase : {"prefill", "decode"}) {
        if (entry.name == "bert" && std::string(phase) == "decode") continue;
        models::ModelOptions o;
        o.size = size;
        o.phase = phase;
        if (std::string(size) == "real") o.layers = entry.name == "deepseek_v3" ? 4 : 2;
        const Graph graph = entry.build(o);
        pipeline::Options options;
        options.compile.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
        options.ignore_capacity = true;
        const pipeline::Report report = pipeline::run(graph, config, options);
        const std::string program = npu::print(report.lowered->program);
        now[fmt::format("{}/{}/{}", entry.name, size, phase)] =
            Pin{fmt::format("{:016x}", text_hash(program)), report.sim.cycles};
      }
  if (std::getenv("SPOOL_UPDATE_PINNED")) {
    std::ofstream out(kFile);
    out << "# model/size/phase  hash of the lowered program's text  simulated cycles on tpuv3\n"
           "# (tests/pipeline/pinned_test.cpp; regenerate with SPOOL_UPDATE_PINNED=1)\n";
    for (const auto& [key, pin] : now) out << key << " " << pin.program_hash << " " << pin.cycles << "\n";
    REQUIRE(out.good());
    MESSAGE("rewrote " << kFile);
    return;
  }
  const std::map<std::string, Pin> pinned = read_pins();
  REQUIRE_MESSAGE(!pinned.empty(), "no pins in " << kFile);
  for (const auto& [key, pin] : now) {
    INFO(key);
    const auto it = pinned.find(key);
    REQUIRE_MESSAGE(it != pinned.end(), "not pinned");
    CHECK_MESSAGE(it->second.program_hash == pin.program_hash, "program changed: now " << pin.program_hash);
    CHECK_MESSAGE(it->second.cycles == pin.cycles, "cycles changed: now " << pin.cycles);
  }
  CHECK(pinned.size() == now.size());
}
