// libFuzzer target for ONNX models (spool::onnx::import_bytes): any bytes
// are read as a serialized ModelProto (external data relative to a scratch
// folder that holds none); a spool::Error (an onnx::Unsupported included) is
// the answer to a malformed or unsupported model. A model that imports has
// a graph that verifies, and its weights have the shapes of the graph's
// weight nodes. Anything else is a finding.

#include <spool/onnx/onnx.hpp>
#include <spool/support/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string base = (std::filesystem::temp_directory_path() / "spool_onnx_fuzz_base").string();
  static const bool made = std::filesystem::create_directories(base) || true;
  (void)made;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  spool::onnx::Imported imported;
  try {
    imported = spool::onnx::import_bytes(bytes, "input.onnx", base);
  } catch (const spool::Error&) {
    return 0;
  }
  try {
    imported.graph.verify();
  } catch (const spool::Error& e) {
    std::fprintf(stderr, "an imported graph does not verify: %s\n", e.what());
    std::abort();
  }
  for (const spool::NodeId id : imported.graph.live_ids()) {
    const spool::Node& node = imported.graph.node(id);
    if (node.op != spool::Op::Weight) continue;
    const auto& name = std::get<spool::NameAttr>(node.attr).name;
    const auto value = imported.weights.find(name);
    if (value == imported.weights.end() || value->second.shape() != node.shape) {
      std::fprintf(stderr, "weight '%s' has no value of its node's shape\n", name.c_str());
      std::abort();
    }
  }
  return 0;
}
