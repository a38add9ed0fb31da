#pragma once
// spool::onnx: ONNX models in.
//
// import_file reads a model with the onnx library's own protobuf classes
// (onnx.proto, as Debian's libonnx-dev ships it) and builds an HLIR graph:
// graph inputs become Input nodes, initializers and Constant nodes become
// weights (their values in Imported::weights), and every node is mapped onto
// HLIR primitives or spool::nn composites, so that the rules rediscover the
// kernels however the model spells them. Shapes are static: a symbolic
// dimension must be bound with ImportOptions::dims, and the operands that
// fix a shape (Reshape's shape, Slice's starts, TopK's k, ...) must be
// constants at import time (initializers, Constant nodes, values computed
// from them or from Shape, or inputs whose values are given in
// ImportOptions::known_inputs).
//
// Every failure is a spool::Error that names the file, the node (its name,
// or its index when it has none), its op and the reason. A model that is
// well formed but uses what the importer does not support (an op, an
// attribute value, a dtype) throws onnx::Unsupported, which also names that
// feature, so that a conformance run can group such tests by it.

#include <spool/interp/host_tensor.hpp>
#include <spool/interp/interp.hpp>
#include <spool/ir/graph.hpp>
#include <spool/support/error.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace spool::onnx {

// The default-domain opsets the importer reads (ai.onnx).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 17;

// A well-formed model that uses something the importer does not support.
class Unsupported : public Error {
 public:
  Unsupported(const std::string& message, std::string feature) : Error(message), feature_(std::move(feature)) {}
  // What stopped the import: the op ("Conv"), or op and detail ("Cast: dtype double").
  const std::string& feature() const { return feature_; }

 private:
  std::string feature_;
};

// A serialized onnx.TensorProto (the test data's input_N.pb, output_N.pb).
struct NamedTensor {
  std::string name;  // empty when the file names none
  interp::HostTensor value;
};
NamedTensor read_tensor_file(const std::string& path);
// DIR/input_0.pb, input_1.pb, ... in order (none: an empty list).
std::vector<NamedTensor> read_inputs_dir(const std::string& dir);

struct ImportOptions {
  // Values of symbolic dimensions (dim_param), by name.
  std::map<std::string, int64_t> dims;
  // Values of graph inputs known at import time (the test data's): one with
  // a name binds the input of that name, one without the input at its
  // position. Where a node needs a constant operand (a shape, axes, k) and
  // reads such an input, this value is used; an input read as data stays a
  // graph input. Their dtypes and shapes must match the graph's.
  std::vector<NamedTensor> input_values;
};

struct Imported {
  Graph graph;
  // Values of the graph's weights (initializers and constants), by weight name.
  interp::Env weights;
  // The model's graph inputs (initializers excluded) and outputs, in order.
  std::vector<std::string> inputs, outputs;
  int64_t opset = 0;
  std::set<std::string> ops;  // the op types of the model's nodes
  // ImportOptions::input_values bound to the graph inputs, by input name.
  interp::Env input_values;
};

// Reads `path`; external-data files are found relative to its folder.
Imported import_file(const std::string& path, const ImportOptions& options = {});
// The same from the serialized bytes; `what` names them in errors and
// `base_dir` is where external data is read.
Imported import_bytes(const std::string& bytes, const std::string& what, const std::string& base_dir,
                      const ImportOptions& options = {});

// The values of every source of the imported graph for a run: the input
// values given at import, seeded random values (interp::random_inputs) for
// the other inputs, and the weights.
interp::Env run_inputs(const Imported& imported, uint64_t seed);

}  // namespace spool::onnx
