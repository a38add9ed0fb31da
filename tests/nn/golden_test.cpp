// spool::nn against PyTorch: every composite and one tiny llama block,
// executed by the reference interpreter and compared with the reference data
// that tests/golden/make_goldens.py produced with PyTorch.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/nn/nn.hpp>
#include <spool/support/npy.hpp>

#include <spool/models/llama.hpp>

#include "support/allclose.hpp"

#include <filesystem>

using namespace spool;
using interp::HostTensor;

namespace {

// One case folder: every non-`out_` file is an input or weight, by name.
class Golden {
 public:
  explicit Golden(const std::string& name) : dir_(std::string(SPOOL_SOURCE_DIR) + "/tests/golden/nn/" + name) {
    REQUIRE_MESSAGE(std::filesystem::is_directory(dir_), "missing golden folder " << dir_);
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      const std::string stem = entry.path().stem().string();
      if (stem.rfind("out_", 0) != 0) env_[stem] = load(stem);
    }
  }

  HostTensor load(const std::string& name) const {
    const std::string path = dir_ + "/" + name + ".npy";
    return HostTensor::from_npy(read_npy(path), path);
  }

  Tensor input(Graph& g, const std::string& name) const {
    const HostTensor& value = env_.at(name);
    return spool::input(g, name, value.dtype(), value.shape());
  }

  // Runs the graph and compares every output `N` with `out_N.npy`
  // (test::allclose): floats within `tolerance` times the reference's largest
  // magnitude, exactly when the tolerance is 0.
  void check(const Graph& g, double tolerance = 1e-5) const {
    const auto outputs = interp::run(g, env_);
    REQUIRE(!outputs.empty());
    for (const auto& [name, actual] : outputs) {
      const HostTensor expected = expected_output(name, actual.dtype());
      INFO(dir_ << ": output " << name);
      const test::AllClose result = test::allclose(actual, expected, {.stol = tolerance});
      CHECK(result);
      MESSAGE(dir_.substr(dir_.rfind('/') + 1) << "/" << name << ": max abs error " << result.worst
                                              << ", relative to scale " << result.worst_to_scale);
    }
  }

 private:
  // `out_N.npy`. numpy has no bf16, so make_goldens.py saves a bf16 output
  // in f32; it is read back as bf16 (exactly, or the golden is not what it
  // claims) so that the dtypes compare too.
  HostTensor expected_output(const std::string& name, DType dtype) const {
    HostTensor expected = load("out_" + name);
    if (dtype != DType::BF16 || expected.dtype() != DType::F32) return expected;
    HostTensor bf16(DType::BF16, expected.shape()), widened(DType::F32, expected.shape());
    for (int64_t i = 0; i < expected.size(); ++i) {
      bf16.set(i, expected.get(i));
      widened.set(i, bf16.get(i));
    }
    REQUIRE(test::allclose(widened, expected));
    return bf16;
  }

  std::string dir_;
  interp::Env env_;
};

}  // namespace

TEST_CASE("matmul, bmm and linear match PyTorch") {
  for (const char* name : {"matmul", "bmm"}) {
    Golden golden(name);
    Graph g;
    const Tensor a = golden.input(g, "a"), b = golden.input(g, "b");
    output("y", std::string(name) == "bmm" ? nn::bmm(a, b) : nn::matmul(a, b));
    golden.check(g);
  }
  Golden golden("linear");
  Graph g;
  output("y", nn::linear(golden.input(g, "x"), golden.input(g, "w"), golden.input(g, "b")));
  golden.check(g);
}

TEST_CASE("activations match PyTorch") {
  Golden golden("activations");
  Graph g;
  const Tensor x = golden.input(g, "x");
  output("relu", nn::relu(x));
  output("silu", nn::silu(x));
  output("gelu_tanh", nn::gelu_tanh(x));
  output("sigmoid", nn::sigmoid(x));
  output("tanh", nn::tanh(x));
  output("exp", nn::exp(x));
  output("cos", nn::cos(x));
  golden.check(g);

  Golden log_golden("log");
  Graph g2;
  output("y", nn::log(log_golden.input(g2, "x")));
  log_golden.check(g2);

  Golden glu("glu");
  Graph g3;
  const Tensor gate = glu.input(g3, "gate"), up = glu.input(g3, "up");
  output("swiglu", nn::swiglu(gate, up));
  output("geglu", nn::geglu(gate, up));
  glu.check(g3);
}

TEST_CASE("softmax and norms match PyTorch") {
  {
    Golden golden("softmax");
    Graph g;
    output("y", nn::softmax(golden.input(g, "x")));
    golden.check(g);
  }
  {
    Golden golden("softmax_axis1");
    Graph g;
    output("y", nn::softmax(golden.input(g, "x"), 1));
    golden.check(g);
  }
  {
    Golden golden("layer_norm");
    Graph g;
    output("y", nn::layer_norm(golden.input(g, "x"), golden.input(g, "w"), golden.input(g, "b"), 1e-5));
    golden.check(g);
  }
  {
    Golden golden("rms_norm");
    Graph g;
    const Tensor x = golden.input(g, "x"), w = golden.input(g, "w");
    output("y", nn::rms_norm(x, w, 1e-6));
    output("gemma", nn::rms_norm(x, w, 1e-6, /*unit_offset=*/true));
    golden.check(g);
  }
}

TEST_CASE("rope and attention match PyTorch") {
  {
    Golden golden("rope");
    Graph g;
    const Tensor x = golden.input(g, "x");
    const nn::RopeTables tables = nn::rope_tables(g, 6, 8, 10000.0);
    output("y", nn::rope(x, tables.cos, tables.sin));
    output("cos", tables.cos);
    output("sin", tables.sin);
    golden.check(g);
  }
  {
    Golden golden("rope_tables_offset");
    Graph g;
    const nn::RopeTables tables = nn::rope_tables(g, 5, 8, 500000.0, 7);
    output("cos", tables.cos);
    output("sin", tables.sin);
    golden.check(g);
  }
  {
    // Linear scaling by 2 puts position 2q where position q was: the
    // frequencies halve exactly, so the tables agree to the bit.
    Graph g;
    const nn::RopeTables plain = nn::rope_tables(g, 4, 8, 10000.0);
    nn::RopeScaling linear;
    linear.kind = nn::RopeScaling::Kind::Linear;
    linear.factor = 2.0;
    const nn::RopeTables scaled = nn::rope_tables(g, 8, 8, 10000.0, 0, linear);
    output("plain", plain.cos);
    output("scaled", scaled.cos);
    const auto out = interp::run(g, {});
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t j = 0; j < 8; ++j) CHECK(out.at("scaled").get(2 * q * 8 + j) == out.at("plain").get(q * 8 + j));
    linear.factor = 0.5;
    CHECK_THROWS_WITH(nn::rope_tables(g, 8, 8, 10000.0, 0, linear), "rope scaling: factor must be at least 1, got 0.5");
  }
  for (const char* name : {"attention_causal_gqa", "attention_causal_cache", "attention_full"}) {
    Golden golden(name);
    Graph g;
    const bool causal = std::string(name) != "attention_full";
    output("y", nn::attention(golden.input(g, "q"), golden.input(g, "k"), golden.input(g, "v"), causal));
    golden.check(g);
  }
}

TEST_CASE("indexing, casts and concatenation match PyTorch") {
  {
    Golden golden("embedding");
    Graph g;
    output("y", nn::embedding(golden.input(g, "ids"), golden.input(g, "table")));
    golden.check(g, 0.0);
  }
  {
    Golden golden("topk");
    Graph g;
    const nn::TopK top = nn::topk(golden.input(g, "x"), 3);
    output("values", top.values);
    output("indices", top.indices);
    golden.check(g, 0.0);
  }
  {
    Golden golden("masked_fill");
    Graph g;
    output("y", nn::masked_fill(golden.input(g, "x"), golden.input(g, "mask"), -1e4));
    golden.check(g, 0.0);
  }
  {
    Golden golden("where");
    Graph g;
    output("y", nn::where(golden.input(g, "cond"), golden.input(g, "a"), golden.input(g, "b")));
    golden.check(g, 0.0);
  }
  {
    Golden golden("cast");
    Graph g;
    const Tensor x = golden.input(g, "x");
    output("bf16", nn::cast(x, DType::BF16));
    output("f16", nn::cast(x, DType::F16));
    output("i32", nn::cast(x, DType::I32));
    // round() is not a primitive: the reference rounds before casting to bool,
    // so the graph tests x != 0 on values whose rounding is nonzero exactly
    // when |x| >= 0.5.
    output("bool", nn::cast(golden.input(g, "z"), DType::Bool));
    golden.check(g, 0.0);
  }
  {
    Golden golden("concat");
    Graph g;
    output("y", nn::concat({golden.input(g, "p"), golden.input(g, "q"), golden.input(g, "r")}, 1));
    golden.check(g, 0.0);
  }
  {
    Golden golden("chunk_split");
    Graph g;
    const Tensor x = golden.input(g, "x");
    const std::vector<Tensor> chunks = nn::chunk(x, 3, 1);
    const std::vector<Tensor> parts = nn::split(x, {1, 3}, 0);
    output("c0", chunks[0]);
    output("c1", chunks[1]);
    output("c2", chunks[2]);
    output("s0", parts[0]);
    output("s1", parts[1]);
    golden.check(g, 0.0);
  }
}

TEST_CASE("a tiny llama block matches the PyTorch decoder layer") {
  Golden golden("llama_block");
  Graph g;
  const models::LlamaConfig config = models::LlamaConfig::tiny();
  const Tensor x = golden.input(g, "x");
  const nn::RopeTables rope = nn::rope_tables(g, x.dim(0), config.head_dim, config.rope_theta);
  output("y", models::llama_layer(config, x, rope.cos, rope.sin, "layer."));
  golden.check(g);
}
