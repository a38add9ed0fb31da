#pragma once
// The example models the `spool` tool knows by name.

#include <spool/ir/graph.hpp>

#include <functional>
#include <string>
#include <vector>

namespace spool::examples {

struct ModelOptions {
  std::string size = "tiny";  // "tiny" or "real"
  int64_t layers = 0;         // 0: the size's own layer count
  int64_t seq = 8;            // prefill tokens
};

struct ModelEntry {
  std::string name;
  std::string description;
  std::string tiny_shape;  // one line: layers, hidden, heads, ...
  std::string real_shape;
  std::function<Graph(const ModelOptions&)> build;
};

const std::vector<ModelEntry>& models();
// The entry named `name`, or spool::Error listing the known names.
const ModelEntry& find_model(const std::string& name);

}  // namespace spool::examples
