#pragma once
// The importer's inside: the values a model's names stand for, the node
// being converted, and the op table (ops.cpp).

#include <spool/ir/tensor.hpp>
#include <spool/onnx/onnx.hpp>

#include <onnx/onnx_pb.h>

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spool::onnx::detail {

// What an ONNX name stands for: a tensor of the graph, a constant known at
// import time (materialised as a weight or a broadcast scalar when a node
// reads it as data), or a graph input not yet read (with its value when the
// caller gave one).
struct Value {
  DType dtype = DType::F32;
  Shape shape;
  Tensor tensor;                                // null until materialised
  std::optional<interp::HostTensor> constant;   // an initializer, a Constant, or folded
  std::string input;                            // a graph input's name
  std::optional<interp::HostTensor> known;      // a graph input's value given at import
  std::string weight_name;                      // the name a materialised constant takes
};

// The ONNX dtype as Spool's, or nullopt (double, uint8, string, ...).
std::optional<DType> to_dtype(int onnx_type);
std::string onnx_type_name(int onnx_type);
// A TensorProto's values; `base_dir` for external data, `what` names it in errors.
interp::HostTensor tensor_value(const ::onnx::TensorProto& proto, const std::string& base_dir, const std::string& what);

class Builder;

// One node being converted: its inputs, attributes and outputs.
class NodeCtx {
 public:
  NodeCtx(Builder& builder, const ::onnx::NodeProto& node, int index, std::vector<Value*> inputs);

  const std::string& op() const { return node_.op_type(); }
  int64_t opset() const;
  Graph& graph();

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return static_cast<size_t>(node_.output_size()); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  bool wants_output(size_t i) const { return i < num_outputs() && !node_.output(static_cast<int>(i)).empty(); }
  const Value& value(size_t i) const;
  // Input i as a tensor of the graph (fails naming the input if absent).
  Tensor in(size_t i);
  // Input i as a value known at import time (fails if it is computed at run time).
  const interp::HostTensor& constant(size_t i, std::string_view role);
  std::vector<int64_t> ints(size_t i, std::string_view role);
  bool is_constant(size_t i) const;

  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;
  std::vector<double> attr_floats(const std::string& name) const;
  const ::onnx::TensorProto* attr_tensor(const std::string& name) const;

  void out(size_t i, const Tensor& t);
  void out_constant(size_t i, interp::HostTensor value);

  // "model.onnx: node 3 'name' (Op)": the prefix of every error.
  std::string where() const;
  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(where() + ": " + fmt::format(format, std::forward<Args>(args)...));
  }
  // An unsupported attribute value, dtype or form of the op.
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> format, Args&&... args) const {
    const std::string detail = fmt::format(format, std::forward<Args>(args)...);
    throw Unsupported(where() + ": not supported: " + detail, op());
  }
  // Fails unless x has a floating dtype.
  void expect_float(const Tensor& x, std::string_view role) const;

  const ::onnx::NodeProto& node() const { return node_; }
  std::vector<Value>& outputs() { return outputs_; }
  const std::string& base_dir() const;

 private:
  Builder& builder_;
  const ::onnx::NodeProto& node_;
  int index_;
  std::vector<Value*> inputs_;
  std::vector<Value> outputs_;
};

using Handler = std::function<void(NodeCtx&)>;
// The supported ops by op_type.
const std::map<std::string, Handler>& handlers();

// Builds one graph: values by name, materialisation and folding.
class Builder {
 public:
  Builder(Graph& graph, interp::Env& weights, std::string what, std::string base_dir, int64_t opset)
      : graph_(graph), weights_(weights), what_(std::move(what)), base_dir_(std::move(base_dir)), opset_(opset) {}

  Graph& graph() { return graph_; }
  int64_t opset() const { return opset_; }
  const std::string& what() const { return what_; }
  const std::string& base_dir() const { return base_dir_; }

  std::map<std::string, Value>& values() { return values_; }
  // The tensor a value stands for, materialising a constant or an input.
  Tensor materialise(Value& value);
  // Converts a node (folding it when every input is a small constant).
  void convert(const ::onnx::NodeProto& node, int index);

 private:
  Tensor constant_tensor(Value& value);
  bool fold(const ::onnx::NodeProto& node, int index, std::vector<Value*>& inputs);

  Graph& graph_;
  interp::Env& weights_;
  std::string what_, base_dir_;
  int64_t opset_;
  std::map<std::string, Value> values_;
  int64_t next_constant_ = 0;
};

}  // namespace spool::onnx::detail
