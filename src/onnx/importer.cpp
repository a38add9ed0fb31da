// The ONNX model reader: protobuf in (the onnx library's own classes),
// graph inputs, initializers and nodes into an HLIR graph.

#include "importer.hpp"

#include <spool/interp/interp.hpp>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace spool::onnx {
namespace detail {

std::optional<DType> to_dtype(int onnx_type) {
  switch (onnx_type) {
    case ::onnx::TensorProto_DataType_FLOAT: return DType::F32;
    case ::onnx::TensorProto_DataType_FLOAT16: return DType::F16;
    case ::onnx::TensorProto_DataType_BFLOAT16: return DType::BF16;
    case ::onnx::TensorProto_DataType_INT32: return DType::I32;
    case ::onnx::TensorProto_DataType_INT64: return DType::I64;
    case ::onnx::TensorProto_DataType_BOOL: return DType::Bool;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int onnx_type) {
  if (!::onnx::TensorProto_DataType_IsValid(onnx_type)) return fmt::format("data type {}", onnx_type);
  std::string name = ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(onnx_type));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name;
}

namespace {

std::string read_bytes(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open {}", what, path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The bytes of an external-data tensor: location, offset and length keys.
std::string external_bytes(const ::onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      else if (entry.key() == "offset") offset = std::stoll(entry.value());
      else if (entry.key() == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      fail("{}: external data key '{}' has the value '{}', not a number", what, entry.key(), entry.value());
    }
  }
  if (location.empty()) fail("{}: external data without a location", what);
  const std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    fail("{}: external data location '{}' must be a relative path inside the model's folder", what, location);
  const std::string path = (std::filesystem::path(base_dir) / rel).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the external data file {}", what, path);
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (offset < 0 || offset > size) fail("{}: external data offset {} is outside {} ({} bytes)", what, offset, path, size);
  if (length < 0) length = size - offset;
  if (length > size - offset)
    fail("{}: external data of {} bytes at offset {} runs past the end of {} ({} bytes)", what, length, offset, path,
         size);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) fail("{}: cannot read {} bytes of {}", what, length, path);
  return bytes;
}

template <typename T>
T load(const std::string& raw, int64_t i) {
  T v;
  std::memcpy(&v, raw.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

interp::HostTensor tensor_value(const ::onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
  const int type = proto.data_type();
  const std::optional<DType> dtype = to_dtype(type);
  if (!dtype)
    throw Unsupported(fmt::format("{}: not supported: dtype {} (Spool has f32, f16, bf16, i32, i64 and bool)", what,
                                  onnx_type_name(type)),
                      "dtype " + onnx_type_name(type));
  Shape shape;
  for (const int64_t d : proto.dims()) {
    if (d < 0) fail("{}: negative dimension {}", what, d);
    shape.push_back(d);
  }
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) fail("{}: {} elements overflow", what, shape_str(shape));
    n *= d;
  }
  if (proto.has_segment()) throw Unsupported(fmt::format("{}: not supported: segmented tensors", what), "segment");
  const bool external = proto.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL;
  if (external || proto.has_raw_data()) {
    const std::string raw = external ? external_bytes(proto, base_dir, what) : proto.raw_data();
    const int64_t width = *dtype == DType::Bool ? 1 : dtype_bytes(*dtype);
    if (n > static_cast<int64_t>(raw.size()) || static_cast<int64_t>(raw.size()) != n * width)
      fail("{}: {} bytes of data for {} {} elements ({} bytes)", what, raw.size(), shape_str(shape),
           onnx_type_name(type), n * width);
    interp::HostTensor value(*dtype, shape);
    for (int64_t i = 0; i < n; ++i) {
      switch (*dtype) {
        case DType::F32: value.set(i, load<float>(raw, i)); break;
        case DType::F16: value.set(i, f16_bits_to_float(load<uint16_t>(raw, i))); break;
        case DType::BF16: value.set(i, bf16_bits_to_float(load<uint16_t>(raw, i))); break;
        case DType::I32: value.set_int(i, load<int32_t>(raw, i)); break;
        case DType::I64: value.set_int(i, load<int64_t>(raw, i)); break;
        case DType::Bool: value.set_int(i, load<uint8_t>(raw, i) != 0); break;
      }
    }
    return value;
  }
  auto expect = [&](int64_t count, const char* field) {
    if (count != n)
      fail("{}: {} holds {} values for {} ({} elements)", what, field, count, shape_str(shape), n);
  };
  const int64_t stored = *dtype == DType::F32 ? proto.float_data_size()
                         : *dtype == DType::I64 ? proto.int64_data_size()
                                                : proto.int32_data_size();
  expect(stored, *dtype == DType::F32 ? "float_data" : *dtype == DType::I64 ? "int64_data" : "int32_data");
  interp::HostTensor value(*dtype, shape);
  switch (*dtype) {
    case DType::F32:
      expect(proto.float_data_size(), "float_data");
      for (int64_t i = 0; i < n; ++i) value.set(i, proto.float_data(static_cast<int>(i)));
      break;
    case DType::F16:
    case DType::BF16:
      expect(proto.int32_data_size(), "int32_data");
      for (int64_t i = 0; i < n; ++i) {
        const auto bits = static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
        value.set(i, *dtype == DType::F16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits));
      }
      break;
    case DType::I32:
    case DType::Bool:
      expect(proto.int32_data_size(), "int32_data");
      for (int64_t i = 0; i < n; ++i)
        value.set_int(i, *dtype == DType::Bool ? proto.int32_data(static_cast<int>(i)) != 0
                                               : proto.int32_data(static_cast<int>(i)));
      break;
    case DType::I64:
      expect(proto.int64_data_size(), "int64_data");
      for (int64_t i = 0; i < n; ++i) value.set_int(i, proto.int64_data(static_cast<int>(i)));
      break;
  }
  return value;
}

// ---- NodeCtx -----------------------------------------------------------------

NodeCtx::NodeCtx(Builder& builder, const ::onnx::NodeProto& node, int index, std::vector<Value*> inputs)
    : builder_(builder), node_(node), index_(index), inputs_(std::move(inputs)) {
  outputs_.resize(static_cast<size_t>(node.output_size()));
}

int64_t NodeCtx::opset() const { return builder_.opset(); }
Graph& NodeCtx::graph() { return builder_.graph(); }
const std::string& NodeCtx::base_dir() const { return builder_.base_dir(); }

std::string NodeCtx::where() const {
  return fmt::format("{}: node {}{} ({})", builder_.what(), index_,
                     node_.name().empty() ? "" : " '" + node_.name() + "'", node_.op_type());
}

const Value& NodeCtx::value(size_t i) const {
  if (!has_input(i)) error("input {} is missing", i);
  return *inputs_[i];
}

Tensor NodeCtx::in(size_t i) {
  if (!has_input(i)) error("input {} is missing", i);
  return builder_.materialise(*inputs_[i]);
}

bool NodeCtx::is_constant(size_t i) const {
  return has_input(i) && (inputs_[i]->constant.has_value() || inputs_[i]->known.has_value());
}

const interp::HostTensor& NodeCtx::constant(size_t i, std::string_view role) {
  if (!has_input(i)) error("input {} ({}) is missing", i, role);
  const Value& v = *inputs_[i];
  if (v.constant) return *v.constant;
  if (v.known) return *v.known;
  throw Unsupported(where() + fmt::format(": not supported: input {} '{}' ({}) is computed at run time; Spool's shapes "
                                          "are static, so it must be a constant, an initializer or a value derived "
                                          "from shapes",
                                          i, node_.input(static_cast<int>(i)), role),
                    op() + ": run-time " + std::string(role));
}

std::vector<int64_t> NodeCtx::ints(size_t i, std::string_view role) {
  const interp::HostTensor& t = constant(i, role);
  if (!is_integer(t.dtype())) error("input {} ({}) must be an integer tensor, not {}", i, role, dtype_name(t.dtype()));
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t.size(); ++k) out.push_back(t.get_int(k));
  return out;
}

namespace {
const ::onnx::AttributeProto* find_attr(const ::onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
}  // namespace

bool NodeCtx::has_attr(const std::string& name) const { return find_attr(node_, name) != nullptr; }

int64_t NodeCtx::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = find_attr(node_, name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto_AttributeType_INT) error("attribute '{}' must be an int", name);
  return a->i();
}
double NodeCtx::attr_float(const std::string& name, double fallback) const {
  const auto* a = find_attr(node_, name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto_AttributeType_FLOAT) error("attribute '{}' must be a float", name);
  return a->f();
}
std::string NodeCtx::attr_string(const std::string& name, const std::string& fallback) const {
  const auto* a = find_attr(node_, name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto_AttributeType_STRING) error("attribute '{}' must be a string", name);
  return a->s();
}
std::vector<int64_t> NodeCtx::attr_ints(const std::string& name) const {
  const auto* a = find_attr(node_, name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto_AttributeType_INTS) error("attribute '{}' must be a list of ints", name);
  return {a->ints().begin(), a->ints().end()};
}
std::vector<double> NodeCtx::attr_floats(const std::string& name) const {
  const auto* a = find_attr(node_, name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto_AttributeType_FLOATS) error("attribute '{}' must be a list of floats", name);
  return {a->floats().begin(), a->floats().end()};
}
const ::onnx::TensorProto* NodeCtx::attr_tensor(const std::string& name) const {
  const auto* a = find_attr(node_, name);
  if (!a) return nullptr;
  if (a->type() != ::onnx::AttributeProto_AttributeType_TENSOR) error("attribute '{}' must be a tensor", name);
  return &a->t();
}

void NodeCtx::out(size_t i, const Tensor& t) {
  if (i >= outputs_.size()) error("has {} outputs, the op gives output {}", outputs_.size(), i);
  outputs_[i] = Value{t.dtype(), t.shape(), t, std::nullopt, {}, std::nullopt, {}};
}

void NodeCtx::out_constant(size_t i, interp::HostTensor value) {
  if (i >= outputs_.size()) error("has {} outputs, the op gives output {}", outputs_.size(), i);
  const DType dtype = value.dtype();
  const Shape shape = value.shape();
  outputs_[i] = Value{dtype, shape, Tensor(), std::move(value), {}, std::nullopt, node_.output(static_cast<int>(i))};
}

void NodeCtx::expect_float(const Tensor& x, std::string_view role) const {
  if (!is_float(x.dtype())) unsupported("{} of dtype {} (only floating dtypes)", role, dtype_name(x.dtype()));
}

// ---- Builder -------------------------------------------------------------------

Tensor Builder::constant_tensor(Value& value) {
  const interp::HostTensor& c = *value.constant;
  bool splat = c.size() > 0;
  for (int64_t i = 1; i < c.size() && splat; ++i) {
    if (is_float(c.dtype())) {
      const double a = c.get(0), b = c.get(i);
      splat = (a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b));
    } else {
      splat = c.get_int(0) == c.get_int(i);
    }
  }
  if (splat) return spool::constant(graph_, is_float(c.dtype()) ? c.get(0) : static_cast<double>(c.get_int(0)),
                                    c.dtype(), c.shape());
  std::string name = value.weight_name.empty() ? fmt::format("constant.{}", next_constant_++) : value.weight_name;
  while (weights_.contains(name)) name = fmt::format("{}.{}", value.weight_name, next_constant_++);
  weights_.emplace(name, c);
  return spool::weight(graph_, name, c.dtype(), c.shape());
}

Tensor Builder::materialise(Value& value) {
  if (!value.tensor.is_null()) return value.tensor;
  if (value.constant) value.tensor = constant_tensor(value);
  else if (!value.input.empty()) value.tensor = spool::input(graph_, value.input, value.dtype, value.shape);
  SPOOL_ASSERT(!value.tensor.is_null(), "a value with no tensor, constant or input");
  return value.tensor;
}

namespace {
// A node is folded only when its constant inputs hold at most this many
// elements: every supported op depends on its inputs alone, but folding a
// large value would copy it into a weight.
constexpr int64_t kFoldElements = 1 << 16;
}  // namespace

bool Builder::fold(const ::onnx::NodeProto& node, int index, std::vector<Value*>& inputs) {
  int64_t elements = 0;
  bool any = false;
  for (const Value* v : inputs) {
    if (!v) continue;
    if (!v->constant) return false;
    elements += v->constant->size();
    any = true;
  }
  if (!any || elements > kFoldElements) return false;
  // The node alone in a scratch graph whose sources are its constant inputs,
  // run on the interpreter.
  Graph scratch("fold");
  interp::Env scratch_weights;
  Builder sub(scratch, scratch_weights, what_, base_dir_, opset_);
  std::vector<Value*> sub_inputs;
  std::vector<Value> copies;
  copies.reserve(inputs.size());
  for (const Value* v : inputs) {
    if (!v) {
      sub_inputs.push_back(nullptr);
      continue;
    }
    copies.push_back(Value{v->dtype, v->shape, Tensor(), v->constant, {}, std::nullopt, "folded"});
    sub_inputs.push_back(&copies.back());
  }
  NodeCtx ctx(sub, node, index, sub_inputs);
  handlers().at(node.op_type())(ctx);
  std::vector<size_t> computed;
  for (size_t i = 0; i < ctx.outputs().size(); ++i) {
    Value& v = ctx.outputs()[i];
    if (v.constant || node.output(static_cast<int>(i)).empty()) continue;
    if (v.tensor.is_null()) return false;
    spool::output(fmt::format("out{}", i), v.tensor);
    computed.push_back(i);
  }
  std::map<std::string, interp::HostTensor> results;
  if (!computed.empty()) results = interp::run(scratch, scratch_weights);
  for (size_t i = 0; i < ctx.outputs().size(); ++i) {
    const std::string& name = node.output(static_cast<int>(i));
    if (name.empty()) continue;
    Value& v = ctx.outputs()[i];
    interp::HostTensor value = v.constant ? *v.constant : results.at(fmt::format("out{}", i));
    values_[name] = Value{value.dtype(), value.shape(), Tensor(), value, {}, std::nullopt, name};
  }
  return true;
}

void Builder::convert(const ::onnx::NodeProto& node, int index) {
  std::vector<Value*> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = values_.find(name);
    if (it == values_.end())
      fail("{}: node {}{} ({}): input {} '{}' is not a graph input, an initializer or an earlier node's output", what_,
           index, node.name().empty() ? "" : " '" + node.name() + "'", node.op_type(), i, name);
    inputs.push_back(&it->second);
  }
  NodeCtx ctx(*this, node, index, inputs);
  try {
    if (fold(node, index, inputs)) return;
    handlers().at(node.op_type())(ctx);
  } catch (const Unsupported&) {
    throw;
  } catch (const Error& e) {
    // The graph API's own errors (shapes that do not fit an op) get the node.
    const std::string message = e.what();
    if (message.starts_with(what_ + ":")) throw;
    throw Error(ctx.where() + ": " + message);
  }
  for (size_t i = 0; i < ctx.outputs().size(); ++i) {
    const std::string& name = node.output(static_cast<int>(i));
    if (name.empty()) continue;
    Value& v = ctx.outputs()[i];
    if (v.tensor.is_null() && !v.constant) ctx.error("output {} '{}' is not produced by Spool's import of the op", i, name);
    if (values_.contains(name)) ctx.error("output '{}' is already defined (a graph must assign each name once)", name);
    values_[name] = std::move(v);
  }
}

}  // namespace detail

using detail::Builder;
using detail::Value;

namespace {

// Shape of a graph input or output from its type; symbolic dims from `dims`.
std::pair<DType, Shape> value_type(const ::onnx::ValueInfoProto& info, const std::string& what, const char* kind,
                                   const ImportOptions& options) {
  const std::string where = fmt::format("{}: graph {} '{}'", what, kind, info.name());
  if (!info.has_type() || !info.type().has_tensor_type())
    throw Unsupported(where + ": not supported: only tensor types (not sequences, maps or optionals)", "non-tensor type");
  const auto& tt = info.type().tensor_type();
  const std::optional<DType> dtype = detail::to_dtype(tt.elem_type());
  if (!dtype)
    throw Unsupported(fmt::format("{}: not supported: dtype {} (Spool has f32, f16, bf16, i32, i64 and bool)", where,
                                  detail::onnx_type_name(tt.elem_type())),
                      "dtype " + detail::onnx_type_name(tt.elem_type()));
  if (!tt.has_shape()) fail("{}: has no shape (Spool's shapes are static)", where);
  Shape shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) fail("{}: dimension {} is negative ({})", where, i, d.dim_value());
      shape.push_back(d.dim_value());
    } else if (d.has_dim_param()) {
      auto it = options.dims.find(d.dim_param());
      if (it == options.dims.end())
        fail("{}: dimension {} is the symbol '{}': Spool's shapes are static, bind it with --dim {}=VALUE", where, i,
             d.dim_param(), d.dim_param());
      shape.push_back(it->second);
    } else {
      fail("{}: dimension {} has no value (a dynamic dimension; Spool's shapes are static)", where, i);
    }
  }
  return {*dtype, shape};
}

}  // namespace

Imported import_bytes(const std::string& bytes, const std::string& what, const std::string& base_dir,
                      const ImportOptions& options) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    fail("{}: {} bytes: a model of 2 GiB or more keeps its weights in external data files", what, bytes.size());
  {
    google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
    google::protobuf::io::CodedInputStream coded(&stream);
    coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
    if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
      fail("{}: not an ONNX model (the protobuf does not parse as onnx.ModelProto: truncated or another format)", what);
  }
  if (!model.has_graph()) fail("{}: not an ONNX model (no graph; truncated or another format)", what);
  if (model.ir_version() < 3)
    fail("{}: IR version {} is not supported (ONNX IR 3 and later, with opset imports)", what, model.ir_version());

  Imported imported;
  imported.graph = Graph(model.graph().name().empty() ? "onnx" : model.graph().name());
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0) {
    for (const auto& node : model.graph().node())
      if (!node.domain().empty() && node.domain() != "ai.onnx")
        throw Unsupported(fmt::format("{}: not supported: op domain '{}' (only the default domain, ai.onnx)", what,
                                      node.domain()),
                          node.domain() + "." + node.op_type());
    fail("{}: imports no opset of the default domain (ai.onnx)", what);
  }
  if (opset > kMaxOpset)
    fail("{}: opset {} is newer than Spool's importer reads (ai.onnx opsets {} to {})", what, opset, kMinOpset,
         kMaxOpset);
  if (opset < kMinOpset)
    throw Unsupported(fmt::format("{}: not supported: opset {} is older than Spool's importer reads (opsets {} to {})",
                                  what, opset, kMinOpset, kMaxOpset),
                      "opset " + std::to_string(opset));
  imported.opset = opset;

  Builder builder(imported.graph, imported.weights, what, base_dir, opset);
  auto& values = builder.values();
  const ::onnx::GraphProto& graph = model.graph();

  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) fail("{}: an initializer has no name", what);
    interp::HostTensor v = detail::tensor_value(init, base_dir, fmt::format("{}: initializer '{}'", what, init.name()));
    values[init.name()] = Value{v.dtype(), v.shape(), Tensor(), std::move(v), {}, std::nullopt, init.name()};
  }
  if (graph.sparse_initializer_size() > 0)
    throw Unsupported(what + ": not supported: sparse initializers", "sparse initializer");

  size_t position = 0;
  std::vector<bool> used(options.input_values.size(), false);
  for (const auto& info : graph.input()) {
    if (values.contains(info.name())) continue;  // an initializer listed as an input (IR < 4)
    auto [dtype, shape] = value_type(info, what, "input", options);
    Value v{dtype, shape, Tensor(), std::nullopt, info.name(), std::nullopt, {}};
    for (size_t k = 0; k < options.input_values.size(); ++k) {
      const NamedTensor& given = options.input_values[k];
      if (used[k] || !(given.name == info.name() || (given.name.empty() && k == position))) continue;
      if (given.value.dtype() != dtype || given.value.shape() != shape)
        fail("{}: graph input '{}' is {}{} but its value is {}{}", what, info.name(), dtype_name(dtype),
             shape_str(shape), dtype_name(given.value.dtype()), shape_str(given.value.shape()));
      v.known = given.value;
      imported.input_values[info.name()] = given.value;
      used[k] = true;
      break;
    }
    values[info.name()] = std::move(v);
    imported.inputs.push_back(info.name());
    ++position;
  }
  for (size_t k = 0; k < used.size(); ++k)
    if (!used[k])
      fail("{}: an input value{} matches no graph input (the model has {})", what,
           options.input_values[k].name.empty() ? fmt::format(" at position {}", k)
                                                : " named '" + options.input_values[k].name + "'",
           imported.inputs.size());

  for (int i = 0; i < graph.node_size(); ++i) {
    const ::onnx::NodeProto& node = graph.node(i);
    const std::string node_where =
        fmt::format("{}: node {}{} ({})", what, i, node.name().empty() ? "" : " '" + node.name() + "'", node.op_type());
    imported.ops.insert(node.op_type());
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      throw Unsupported(fmt::format("{}: not supported: op domain '{}' (only the default domain, ai.onnx)", node_where,
                                    node.domain()),
                        node.domain() + "." + node.op_type());
    for (const auto& attr : node.attribute())
      if (attr.name() == "broadcast" || attr.name() == "consumed_inputs" || attr.name() == "is_test")
        throw Unsupported(fmt::format("{}: not supported: the legacy attribute '{}' (opsets before 7)", node_where,
                                      attr.name()),
                          node.op_type() + ": legacy attribute " + attr.name());
    if (!detail::handlers().contains(node.op_type()))
      throw Unsupported(node_where + ": not supported: Spool's importer has no mapping for this op", node.op_type());
    builder.convert(node, i);
  }

  for (const auto& info : graph.output()) {
    auto it = values.find(info.name());
    if (it == values.end())
      fail("{}: graph output '{}' is not produced by any node, input or initializer", what, info.name());
    Value& v = it->second;
    if (info.has_type() && info.type().has_tensor_type()) {
      const auto& tt = info.type().tensor_type();
      const std::optional<DType> declared = detail::to_dtype(tt.elem_type());
      if (tt.elem_type() != 0 && declared && *declared != v.dtype)
        fail("{}: graph output '{}' is declared {} but computes {}", what, info.name(),
             detail::onnx_type_name(tt.elem_type()), dtype_name(v.dtype));
      if (tt.has_shape()) {
        bool ok = tt.shape().dim_size() == static_cast<int>(v.shape.size());
        for (int d = 0; ok && d < tt.shape().dim_size(); ++d) {
          const auto& dim = tt.shape().dim(d);
          if (dim.has_dim_value()) ok = dim.dim_value() == v.shape[static_cast<size_t>(d)];
          else if (dim.has_dim_param() && options.dims.contains(dim.dim_param()))
            ok = options.dims.at(dim.dim_param()) == v.shape[static_cast<size_t>(d)];
        }
        if (!ok) {
          std::string declared_shape = "[";
          for (int d = 0; d < tt.shape().dim_size(); ++d) {
            const auto& dim = tt.shape().dim(d);
            declared_shape += (d ? "," : "") + (dim.has_dim_value() ? std::to_string(dim.dim_value())
                                                                    : dim.has_dim_param() ? dim.dim_param() : "?");
          }
          fail("{}: graph output '{}' is declared {} but computes {} (a shape mismatch)", what, info.name(),
               declared_shape + "]", shape_str(v.shape));
        }
      }
    }
    if (num_elements(v.shape) == 0)
      throw Unsupported(fmt::format("{}: not supported: graph output '{}' is empty ({})", what, info.name(),
                                    shape_str(v.shape)),
                        "empty tensor");
    spool::output(info.name(), builder.materialise(v));
    imported.outputs.push_back(info.name());
  }
  if (imported.outputs.empty()) fail("{}: the graph has no outputs", what);
  return imported;
}

Imported import_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("{}: no such file", path);
  const std::string bytes = detail::read_bytes(path, path);
  return import_bytes(bytes, path, std::filesystem::path(path).parent_path().string(), options);
}

NamedTensor read_tensor_file(const std::string& path) {
  const std::string bytes = detail::read_bytes(path, path);
  ::onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) fail("{}: not a serialized onnx.TensorProto", path);
  return {proto.name(),
          detail::tensor_value(proto, std::filesystem::path(path).parent_path().string(), path)};
}

std::vector<NamedTensor> read_inputs_dir(const std::string& dir) {
  std::vector<NamedTensor> inputs;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) fail("{}: no such folder", dir);
  for (int i = 0;; ++i) {
    const std::string path = (std::filesystem::path(dir) / fmt::format("input_{}.pb", i)).string();
    if (!std::filesystem::exists(path, ec)) break;
    inputs.push_back(read_tensor_file(path));
  }
  return inputs;
}

interp::Env run_inputs(const Imported& imported, uint64_t seed) {
  interp::Env env = interp::random_inputs(imported.graph, seed, /*integer_bound=*/2);
  for (const auto& [name, value] : imported.input_values)
    if (env.contains(name)) env[name] = value;
  for (const auto& [name, value] : imported.weights)
    if (env.contains(name)) env[name] = value;
  return env;
}

}  // namespace spool::onnx
