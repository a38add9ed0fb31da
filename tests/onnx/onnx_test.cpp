// The ONNX importer: models built here with the onnx library's protobuf
// classes, imported, run on the interpreter and through the pipeline; and
// malformed or unsupported models, each refused with an error that names
// the node, its op and the reason.

#include <spool/onnx/onnx.hpp>
#include <spool/compile/compile.hpp>
#include <spool/pipeline/pipeline.hpp>

#include <onnx/onnx_pb.h>

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <set>
#include <variant>

namespace {

namespace fs = std::filesystem;
using Dim = std::variant<int64_t, std::string, std::monostate>;

struct Model {
  ::onnx::ModelProto proto;
  explicit Model(int64_t opset = 13) {
    proto.set_ir_version(8);
    auto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    proto.mutable_graph()->set_name("test");
  }
  ::onnx::GraphProto& g() { return *proto.mutable_graph(); }
  static void type(::onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<Dim>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (const Dim& d : dims) {
      auto* dim = shape->add_dim();
      if (const auto* n = std::get_if<int64_t>(&d)) dim->set_dim_value(*n);
      else if (const auto* s = std::get_if<std::string>(&d)) dim->set_dim_param(*s);
    }
  }
  Model& input(const std::string& name, std::vector<Dim> dims, int elem = ::onnx::TensorProto_DataType_FLOAT) {
    type(g().add_input(), name, elem, dims);
    return *this;
  }
  Model& output(const std::string& name, std::vector<Dim> dims, int elem = ::onnx::TensorProto_DataType_FLOAT) {
    type(g().add_output(), name, elem, dims);
    return *this;
  }
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                          const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return *n;
  }
  ::onnx::TensorProto& initializer(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
    for (const int64_t d : dims) t->add_dims(d);
    for (const float v : values) t->add_float_data(v);
    return *t;
  }
  ::onnx::TensorProto& initializer_i64(const std::string& name, std::vector<int64_t> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto_DataType_INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (const int64_t v : values) t->add_int64_data(v);
    return *t;
  }
  std::string bytes() const { return proto.SerializeAsString(); }
};

void set_int(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto_AttributeType_INT);
  a->set_i(v);
}

fs::path temp_dir() {
  const fs::path dir = fs::path(SPOOL_BINARY_DIR) / "onnx_test_files";
  fs::create_directories(dir);
  return dir;
}

std::string write(const std::string& name, const std::string& bytes) {
  const fs::path path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

// The import's error message, or "" if it succeeds.
std::string import_error(const std::string& bytes, const spool::onnx::ImportOptions& options = {},
                         bool* unsupported = nullptr) {
  try {
    spool::onnx::import_bytes(bytes, "m.onnx", temp_dir().string(), options);
  } catch (const spool::onnx::Unsupported& e) {
    if (unsupported) *unsupported = true;
    return e.what();
  } catch (const spool::Error& e) {
    if (unsupported) *unsupported = false;
    return e.what();
  }
  return "";
}

// x [2,4] -> MatMul W [4,3] -> Add b -> Relu -> y [2,3]
Model mlp() {
  Model m;
  m.input("x", {int64_t{2}, int64_t{4}}).output("y", {int64_t{2}, int64_t{3}});
  std::vector<float> w;
  for (int i = 0; i < 12; ++i) w.push_back(0.1f * static_cast<float>(i) - 0.5f);
  m.initializer("W", {4, 3}, w);
  m.initializer("b", {3}, {0.25f, -0.5f, 0.0f});
  m.node("MatMul", {"x", "W"}, {"h"}, "mm");
  m.node("Add", {"h", "b"}, {"a"}, "bias");
  m.node("Relu", {"a"}, {"y"}, "act");
  return m;
}

}  // namespace

TEST_CASE("a small MLP imports, runs on the interpreter as numpy would, and through the pipeline") {
  const spool::onnx::Imported imported = spool::onnx::import_bytes(mlp().bytes(), "mlp.onnx", ".");
  CHECK(imported.inputs == std::vector<std::string>{"x"});
  CHECK(imported.outputs == std::vector<std::string>{"y"});
  CHECK(imported.weights.size() == 2);
  CHECK(imported.ops == std::set<std::string>{"Add", "MatMul", "Relu"});
  spool::interp::Env env = spool::onnx::run_inputs(imported, 3);
  const auto out = spool::interp::run(imported.graph, env);
  const auto& x = env.at("x");
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += x.get(r * 4 + k) * (0.1 * (k * 3 + c) - 0.5);
      acc += std::vector<double>{0.25, -0.5, 0.0}[static_cast<size_t>(c)];
      CHECK(out.at("y").get(r * 3 + c) == doctest::Approx(std::max(acc, 0.0)).epsilon(1e-5));
    }
  spool::pipeline::Options options;
  options.compile.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  options.inputs = env;
  const auto report = spool::pipeline::run(imported.graph, spool::target::load_config("tpuv3"), options);
  REQUIRE(report.check);
  CHECK(report.check->ok);
}

TEST_CASE("a symbolic dimension is bound with ImportOptions::dims") {
  Model m;
  m.input("x", {std::string("batch"), int64_t{4}}).output("y", {std::string("batch"), int64_t{4}});
  m.node("Relu", {"x"}, {"y"});
  spool::onnx::ImportOptions options;
  options.dims["batch"] = 5;
  const auto imported = spool::onnx::import_bytes(m.bytes(), "m.onnx", ".", options);
  CHECK(imported.graph.outputs().size() == 1);
  CHECK(import_error(m.bytes()).find("dimension 0 is the symbol 'batch'") != std::string::npos);
  CHECK(import_error(m.bytes()).find("--dim batch=VALUE") != std::string::npos);
}

TEST_CASE("an initializer's external data is read from the model's folder") {
  Model m = mlp();
  auto* w = m.g().mutable_initializer(0);
  std::string raw;
  for (const float v : w->float_data()) raw.append(reinterpret_cast<const char*>(&v), sizeof v);
  w->clear_float_data();
  w->set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
  const std::string padded = "1234" + raw;  // at offset 4
  write("weights.bin", padded);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights.bin");
  add("offset", "4");
  add("length", std::to_string(raw.size()));
  const auto path = write("external.onnx", m.bytes());
  const auto imported = spool::onnx::import_file(path);
  CHECK(imported.weights.at("W").get(0) == doctest::Approx(-0.5));
  CHECK(imported.weights.at("W").get(11) == doctest::Approx(0.6));

  // A missing data file is an error naming the initializer and the file.
  w->mutable_external_data(0)->set_value("missing.bin");
  CHECK(import_error(m.bytes()).find("initializer 'W': cannot open the external data file") != std::string::npos);
}

TEST_CASE("a constant shape computed from Shape feeds Reshape") {
  Model m;
  m.input("x", {int64_t{2}, int64_t{3}, int64_t{4}}).output("y", {int64_t{6}, int64_t{4}});
  m.node("Shape", {"x"}, {"s"});
  m.initializer_i64("starts", {1});
  m.initializer_i64("ends", {3});
  m.node("Slice", {"s", "starts", "ends"}, {"tail"});          // [3, 4]
  m.initializer_i64("minus1", {-1});
  m.node("Slice", {"tail", "minus1", "ends"}, {"last"});       // [4]
  m.node("Concat", {"minus1", "last"}, {"shape"}).add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(::onnx::AttributeProto_AttributeType_INT);
    a.set_i(0);
    return a;
  }());
  m.node("Reshape", {"x", "shape"}, {"y"});
  const auto imported = spool::onnx::import_bytes(m.bytes(), "m.onnx", ".");
  const spool::Output& out = imported.graph.outputs().at(0);
  CHECK(imported.graph.edge_type(out.edge).shape == spool::Shape{6, 4});
}

// ---- malformed and unsupported models ----------------------------------------

TEST_CASE("malformed: a truncated file") {
  const std::string bytes = mlp().bytes();
  const std::string message = import_error(bytes.substr(0, bytes.size() / 2));
  CHECK(message.find("m.onnx: not an ONNX model") != std::string::npos);
  CHECK(message.find("truncated") != std::string::npos);
}

TEST_CASE("malformed: a file that is not ONNX") {
  const std::string message = import_error("graph mlp {\n  %0 = input {name=\"x\"} : f32[2]\n}\n");
  CHECK(message.find("not an ONNX model") != std::string::npos);
  const std::string missing = (temp_dir() / "nowhere.onnx").string();
  CHECK_THROWS_WITH_AS(spool::onnx::import_file(missing), doctest::Contains("nowhere.onnx: no such file"),
                       spool::Error);
  CHECK(import_error("").find("no graph") != std::string::npos);
}

TEST_CASE("unsupported: an unknown op names the node and the op") {
  Model m;
  m.input("x", {int64_t{2}}).output("y", {int64_t{2}});
  m.node("Relu", {"x"}, {"r"}, "first");
  m.node("FrobnicateV2", {"r"}, {"y"}, "second");
  bool unsupported = false;
  const std::string message = import_error(m.bytes(), {}, &unsupported);
  CHECK(unsupported);
  CHECK(message == "m.onnx: node 1 'second' (FrobnicateV2): not supported: Spool's importer has no mapping for this op");
}

TEST_CASE("malformed: a dynamic dimension") {
  Model m;
  m.input("x", {int64_t{2}, std::monostate{}}).output("y", {int64_t{2}, int64_t{2}});
  m.node("Relu", {"x"}, {"y"});
  CHECK(import_error(m.bytes()) ==
        "m.onnx: graph input 'x': dimension 1 has no value (a dynamic dimension; Spool's shapes are static)");
}

TEST_CASE("malformed: an opset newer than the importer reads") {
  Model m(21);
  m.input("x", {int64_t{2}}).output("y", {int64_t{2}});
  m.node("Relu", {"x"}, {"y"});
  CHECK(import_error(m.bytes()).find("opset 21 is newer than Spool's importer reads (ai.onnx opsets 1 to 17)") !=
        std::string::npos);
}

TEST_CASE("malformed: a missing initializer") {
  Model m = mlp();
  m.g().mutable_initializer()->RemoveLast();  // b
  CHECK(import_error(m.bytes()) ==
        "m.onnx: node 1 'bias' (Add): input 1 'b' is not a graph input, an initializer or an earlier node's output");
}

TEST_CASE("malformed: a declared output shape that the graph does not compute") {
  Model m;
  m.input("x", {int64_t{2}, int64_t{4}}).output("y", {int64_t{4}, int64_t{2}});
  m.node("Relu", {"x"}, {"y"});
  CHECK(import_error(m.bytes()) ==
        "m.onnx: graph output 'y' is declared [4,2] but computes [2,4] (a shape mismatch)");
}

TEST_CASE("malformed: operands whose shapes do not fit the op") {
  Model m;
  m.input("a", {int64_t{2}, int64_t{3}}).input("b", {int64_t{4}, int64_t{5}}).output("y", {int64_t{2}, int64_t{5}});
  m.node("MatMul", {"a", "b"}, {"y"}, "proj");
  const std::string message = import_error(m.bytes());
  CHECK(message.find("node 0 'proj' (MatMul)") != std::string::npos);
  CHECK(message.find("inner dimensions differ") != std::string::npos);
}

TEST_CASE("unsupported: a shape computed at run time") {
  Model m;
  m.input("x", {int64_t{6}}).input("shape", {int64_t{2}}, ::onnx::TensorProto_DataType_INT64).output("y", {int64_t{2}, int64_t{3}});
  m.node("Reshape", {"x", "shape"}, {"y"}, "r");
  bool unsupported = false;
  const std::string message = import_error(m.bytes(), {}, &unsupported);
  CHECK(unsupported);
  CHECK(message.find("node 0 'r' (Reshape): not supported: input 1 'shape' (shape) is computed at run time") !=
        std::string::npos);
  // Given the input's value, the shape is known.
  spool::onnx::ImportOptions options;
  options.input_values.push_back({"shape", spool::interp::HostTensor::from_i64({2}, std::vector<int64_t>{2, 3})});
  CHECK(import_error(m.bytes(), options).empty());
}

TEST_CASE("unsupported: a dtype Spool does not have") {
  Model m;
  m.input("x", {int64_t{2}}, ::onnx::TensorProto_DataType_DOUBLE).output("y", {int64_t{2}}, ::onnx::TensorProto_DataType_DOUBLE);
  m.node("Relu", {"x"}, {"y"});
  bool unsupported = false;
  CHECK(import_error(m.bytes(), {}, &unsupported).find("graph input 'x': not supported: dtype double") !=
        std::string::npos);
  CHECK(unsupported);
}

TEST_CASE("malformed: an initializer whose data does not fill its shape") {
  Model m = mlp();
  m.g().mutable_initializer(1)->add_float_data(1.0f);  // b: 4 values for [3]
  CHECK(import_error(m.bytes()) == "m.onnx: initializer 'b': float_data holds 4 values for [3] (3 elements)");
  m.g().mutable_initializer(1)->clear_float_data();
  m.g().mutable_initializer(1)->set_raw_data(std::string(7, '\0'));
  CHECK(import_error(m.bytes()) == "m.onnx: initializer 'b': 7 bytes of data for [3] float elements (12 bytes)");
}

TEST_CASE("malformed: an attribute of the wrong type, an axis out of range, a name assigned twice") {
  {
    Model m;
    m.input("x", {int64_t{2}, int64_t{3}}).output("y", {int64_t{2}, int64_t{3}});
    auto& n = m.node("Softmax", {"x"}, {"y"}, "sm");
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(::onnx::AttributeProto_AttributeType_STRING);
    a->set_s("last");
    CHECK(import_error(m.bytes()) == "m.onnx: node 0 'sm' (Softmax): attribute 'axis' must be an int");
  }
  {
    Model m;
    m.input("x", {int64_t{2}, int64_t{3}}).output("y", {int64_t{2}, int64_t{3}});
    set_int(m.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 2);
    CHECK(import_error(m.bytes()) == "m.onnx: node 0 'sm' (Softmax): axis 2 is out of range for rank 2");
  }
  {
    Model m;
    m.input("x", {int64_t{2}}).output("y", {int64_t{2}});
    m.node("Relu", {"x"}, {"y"}, "one");
    m.node("Neg", {"x"}, {"y"}, "two");
    CHECK(import_error(m.bytes()).find("node 1 'two' (Neg): output 'y' is already defined") != std::string::npos);
  }
}

TEST_CASE("malformed: input values that do not match the graph's inputs") {
  spool::onnx::ImportOptions options;
  options.input_values.push_back({"", spool::interp::HostTensor(spool::DType::F32, {3, 4})});
  CHECK(import_error(mlp().bytes(), options) == "m.onnx: graph input 'x' is f32[2,4] but its value is f32[3,4]");
  options.input_values = {{"nope", spool::interp::HostTensor(spool::DType::F32, {2, 4})}};
  CHECK(import_error(mlp().bytes(), options) ==
        "m.onnx: an input value named 'nope' matches no graph input (the model has 1)");
}

// ---- foreign spellings ---------------------------------------------------------

#ifdef SPOOL_ONNX_NODE_TESTS
namespace {

// The ops of the kernel-level program the default rules compile the test's model to.
std::multiset<spool::Op> compiled_ops(const std::string& test, const std::vector<std::string>& rule_files) {
  const std::string dir = std::string(SPOOL_ONNX_NODE_TESTS) + "/" + test;
  spool::onnx::ImportOptions options;
  options.input_values = spool::onnx::read_inputs_dir(dir + "/test_data_set_0");
  const auto imported = spool::onnx::import_file(dir + "/model.onnx", options);
  spool::compile::Options compile_options;
  compile_options.rule_files = rule_files;
  const spool::Graph program = spool::compile::run(imported.graph, compile_options).program;
  std::multiset<spool::Op> ops;
  for (const spool::NodeId id : program.live_ids()) ops.insert(program.node(id).op);
  return ops;
}

const std::string kDefaultRules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";

}  // namespace

TEST_CASE("ONNX's expanded softmax compiles to the softmax kernel") {
  for (const char* test : {"test_softmax_axis_1_expanded", "test_softmax_default_axis_expanded",
                           "test_softmax_example_expanded", "test_softmax_large_number_expanded",
                           "test_softmax_axis_0_expanded"}) {
    INFO(test);
    const auto ops = compiled_ops(test, {kDefaultRules});
    CHECK(ops.count(spool::Op::Softmax) == 1);
    CHECK(ops.count(spool::Op::Reduce) == 0);
  }
}

TEST_CASE("ONNX's expanded layer normalization (one-pass variance) compiles to the layer_norm kernel") {
  for (const char* test : {"test_layer_normalization_default_axis_expanded", "test_layer_normalization_2d_axis1_expanded",
                           "test_layer_normalization_3d_axis2_epsilon_expanded",
                           "test_layer_normalization_4d_axis_negative_1_expanded"}) {
    INFO(test);
    CHECK(compiled_ops(test, {kDefaultRules}).count(spool::Op::LayerNorm) == 1);
  }
  // Without the canonicalising rule, the one-pass variance is not the
  // composite the layer-norm rule knows: the same schedule minus `canon`.
  const std::string rules_dir = std::string(SPOOL_SOURCE_DIR) + "/rules/";
  const std::string without = write("without_canon.rules",
                                    "(include \"" + rules_dir + "loops.rules\")\n(include \"" + rules_dir +
                                        "kernels.rules\")\n(include \"" + rules_dir + "norms.rules\")\n"
                                        "(schedule (seq (saturate (run loops)) (run norms 1) (run half 1) "
                                        "(run kernels 2) (run fusion 4) (run prologue 2) (run fusion 2)))\n");
  CHECK(compiled_ops("test_layer_normalization_default_axis_expanded", {without}).count(spool::Op::LayerNorm) == 0);
}
#endif

// ---- Einsum (ONNX's backend tests for it are in double, which Spool lacks) ------

namespace {

// Einsum of a [2,3] (or [4,2,3] with a batch) and b, imported, run on the
// interpreter; returns the inputs and the output.
struct EinsumRun {
  spool::interp::Env env;
  spool::interp::HostTensor out;
};
EinsumRun einsum(const std::string& equation, std::vector<Dim> a, std::vector<Dim> b, std::vector<Dim> out) {
  Model m(12);
  m.input("a", a);
  if (!b.empty()) m.input("b", b);
  m.output("y", out);
  auto& n = m.node("Einsum", b.empty() ? std::vector<std::string>{"a"} : std::vector<std::string>{"a", "b"}, {"y"});
  auto* attr = n.add_attribute();
  attr->set_name("equation");
  attr->set_type(::onnx::AttributeProto_AttributeType_STRING);
  attr->set_s(equation);
  const auto imported = spool::onnx::import_bytes(m.bytes(), "einsum.onnx", ".");
  EinsumRun run;
  run.env = spool::onnx::run_inputs(imported, 5);
  run.out = spool::interp::run(imported.graph, run.env).at("y");
  return run;
}

}  // namespace

TEST_CASE("Einsum in its matmul-shaped forms computes what the equation says") {
  {
    const auto r = einsum("ij,jk->ik", {int64_t{2}, int64_t{3}}, {int64_t{3}, int64_t{4}}, {int64_t{2}, int64_t{4}});
    const auto &a = r.env.at("a"), &b = r.env.at("b");
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) {
        double acc = 0;
        for (int j = 0; j < 3; ++j) acc += a.get(i * 3 + j) * b.get(j * 4 + k);
        CHECK(r.out.get(i * 4 + k) == doctest::Approx(acc).epsilon(1e-6));
      }
  }
  {
    // B transposed, batch axes from an ellipsis.
    const auto r = einsum("...ik,...jk->...ij", {int64_t{4}, int64_t{2}, int64_t{3}},
                          {int64_t{4}, int64_t{5}, int64_t{3}}, {int64_t{4}, int64_t{2}, int64_t{5}});
    const auto &a = r.env.at("a"), &b = r.env.at("b");
    REQUIRE(r.out.shape() == spool::Shape{4, 2, 5});
    for (int p = 0; p < 4; ++p)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 5; ++j) {
          double acc = 0;
          for (int k = 0; k < 3; ++k) acc += a.get(p * 6 + i * 3 + k) * b.get(p * 15 + j * 3 + k);
          CHECK(r.out.get(p * 10 + i * 5 + j) == doctest::Approx(acc).epsilon(1e-6));
        }
  }
  {
    // Inner product (implicit output: no free index), a sum and a transpose.
    const auto inner = einsum("i,i", {int64_t{3}}, {int64_t{3}}, {});
    double acc = 0;
    for (int i = 0; i < 3; ++i) acc += inner.env.at("a").get(i) * inner.env.at("b").get(i);
    CHECK(inner.out.get(0) == doctest::Approx(acc).epsilon(1e-6));
    const auto sum = einsum("ij->i", {int64_t{2}, int64_t{3}}, {}, {int64_t{2}});
    CHECK(sum.out.get(1) == doctest::Approx(sum.env.at("a").get(3) + sum.env.at("a").get(4) + sum.env.at("a").get(5)).epsilon(1e-6));
    const auto t = einsum("ij->ji", {int64_t{2}, int64_t{3}}, {}, {int64_t{3}, int64_t{2}});
    CHECK(t.out.get(1) == t.env.at("a").get(3));  // out[0][1] = a[1][0]
  }
  bool unsupported = false;
  Model m(12);
  m.input("a", {int64_t{3}, int64_t{3}}).output("y", {int64_t{3}});
  auto& n = m.node("Einsum", {"a"}, {"y"}, "diag");
  auto* attr = n.add_attribute();
  attr->set_name("equation");
  attr->set_type(::onnx::AttributeProto_AttributeType_STRING);
  attr->set_s("ii->i");
  CHECK(import_error(m.bytes(), {}, &unsupported) ==
        "m.onnx: node 0 'diag' (Einsum): not supported: equation 'ii->i': an index repeated in one operand (a diagonal)");
  CHECK(unsupported);
}
