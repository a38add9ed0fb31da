// The HLIR graph: building, diagnostics for ill-formed graphs, id stability,
// views and graph algorithms.

#include <doctest/doctest.h>

#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <cmath>
#include <optional>

#include <set>

using namespace spool;

namespace {
// The message of the spool::Error that `build` throws.
template <typename F>
std::string error_of(F&& build) {
  try {
    build();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("ill-formed graphs are rejected with exact diagnostics") {
  Graph g;
  const Tensor a = input(g, "a", DType::F32, {2, 64});
  const Tensor b = input(g, "b", DType::F32, {32, 8});
  const Tensor i = input(g, "i", DType::I32, {2, 64});
  const Tensor flags = input(g, "flags", DType::Bool, {2, 64});

  CHECK(error_of([&] { nn::matmul(a, b); }) == "matmul: inner dimensions differ: lhs [2,64] vs rhs [32,8]");
  CHECK(error_of([&] { a + b; }) == "add: cannot broadcast [2,64] with [32,8]");
  CHECK(error_of([&] { a * i; }) == "mul: dtypes differ: lhs f32 vs rhs i32");
  CHECK(error_of([&] { a.sum(2); }) == "sum: axis 2 is out of range for [2,64]");
  CHECK(error_of([&] { a.permute({0, 0}); }) == "permute: (0,0) is not a permutation of the 2 axes of [2,64]");
  CHECK(error_of([&] { a.reshape({3, 40}); }) == "reshape: cannot view [2,64] (128 elements) as [3,40] (120 elements)");
  CHECK(error_of([&] { a.slice(1, 10, 70); }) == "slice: range 10:70 on axis 1 is out of bounds for [2,64]");
  CHECK(error_of([&] { a.expand({4, 64}); }) == "expand: cannot expand [2,64] to [4,64]: axis 0 has size 2, not 1");
  CHECK(error_of([&] { a.chunk(3, 1); }) == "chunk: axis 1 of [2,64] (size 64) does not split into 3 equal chunks");
  CHECK(error_of([&] { exp2(i); }) == "exp2: expects a floating dtype, got i32");
  CHECK(error_of([&] { where(a, a, a); }) == "where: expects bool, got f32");
  CHECK(error_of([&] { flags + flags; }) == "add: not defined on bool");
  CHECK(error_of([&] { topk_indices(a, 65); }) == "topk: k = 65 is out of range for [2,64] (1..64)");
  CHECK(error_of([&] { gather(a, i.slice(0, 0, 1).slice(1, 0, 3), 1); }) ==
        "gather: data [2,64] and indices [1,3] differ on axis 0 (only axis 1 may differ)");
  CHECK(error_of([&] { gather(a, a, 0); }) == "gather: indices must be i32 or i64, got f32");
  CHECK(error_of([&] { nn::linear(a, b); }) == "linear: input [2,64] has 64 features but weight [32,8] expects 8");
  CHECK(error_of([&] { nn::layer_norm(a, b, std::nullopt); }) ==
        "layer_norm: weight must be [64] to match input [2,64], got [32,8]");
  CHECK(error_of([&] { nn::attention(a.reshape({2, 8, 8}), b.reshape({4, 8, 8}).slice(0, 0, 3), b.reshape({4, 8, 8}).slice(0, 0, 3), true); }) ==
        "attention: 2 query heads cannot be grouped over 3 KV heads");
  CHECK(error_of([&] { nn::concat({a, b}, 0); }) ==
        "concat: inputs [2,64] and [32,8] differ on axis 1 (only axis 0 may differ)");
  CHECK(error_of([&] { input(g, "", DType::F32, {1}); }) == "input: name must not be empty");
  CHECK(error_of([&] { output("a_out", a); output("a_out", a); }) == "output 'a_out' is defined twice");
  CHECK(error_of([&] { constant(g, 0.5, DType::I32); }) == "constant: 0.5 is not an integer and cannot be a i32 value");
  // None of the failed calls left a node behind: the checks come before any node is added.
  CHECK(g.num_live() == 4);
}

TEST_CASE("node ids are never reused after deletion") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {4});
  std::set<uint32_t> ever_used;
  std::vector<NodeId> live;
  for (NodeId id : g.live_ids()) ever_used.insert(id.value);
  uint64_t state = 7;
  for (int round = 0; round < 200; ++round) {
    state = state * 6364136223846793005ULL + 1;
    if (!live.empty() && (state >> 33) % 3 == 0) {
      // Delete a node nobody uses.
      const NodeId victim = live.back();
      live.pop_back();
      g.remove(victim);
      CHECK(!g.contains(victim));
    } else {
      const Tensor y = exp2(x);
      CHECK(ever_used.count(y.node().value) == 0);  // a fresh id, never seen before
      ever_used.insert(y.node().value);
      live.push_back(y.node());
    }
  }
  CHECK(g.id_bound() == ever_used.size());
  CHECK(g.num_live() == live.size() + 1);

  // A node in use cannot be removed; the error names the user.
  const Tensor y = exp2(x);
  const Tensor z = -y;
  CHECK(error_of([&] { g.remove(y.node()); }) ==
        fmt::format("remove: %{} is still used by %{}", y.node().value, z.node().value));
  output("z", z);
  CHECK(error_of([&] { g.remove(z.node()); }) == fmt::format("remove: %{} is the output 'z'", z.node().value));
}

TEST_CASE("views compose into one canonical view per edge") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {2, 3, 4});
  // Two permutes merge; a permute and its inverse vanish.
  CHECK(x.permute({1, 2, 0}).permute({1, 2, 0}).view().steps().size() == 1);
  CHECK(x.permute({1, 2, 0}).permute({2, 0, 1}).view().is_identity());
  CHECK(x.transpose(0, 1).transpose(0, 1).view().is_identity());
  // Reshapes merge, and reshaping back is the identity.
  CHECK(x.reshape({6, 4}).reshape({24}).view().steps().size() == 1);
  CHECK(x.reshape({6, 4}).reshape({2, 3, 4}).view().is_identity());
  // A slice of a slice is one slice with composed start and step.
  const Tensor s = x.slice(2, 1, 4).slice(2, 0, 3, 2);  // elements 1 and 3
  REQUIRE(s.view().steps().size() == 1);
  const ViewStep& step = s.view().steps()[0];
  CHECK(step.a[2] == 1);
  CHECK(step.c[2] == 2);
  CHECK(s.shape() == Shape{2, 3, 2});
  // Pads with the same value merge; zero padding vanishes.
  CHECK(x.pad(0, 1, 0).pad(0, 0, 2).view().steps().size() == 1);
  CHECK(x.pad(1, 0, 0).view().is_identity());
  CHECK(x.pad(0, 1, 0, 1.0).pad(0, 1, 0, 2.0).view().steps().size() == 2);
  // Expands merge.
  const Tensor one = input(g, "one", DType::F32, {1, 1});
  CHECK(one.expand({3, 1}).expand({3, 5}).view().steps().size() == 1);
  // The view is metadata: no node was added by any of the above.
  CHECK(g.num_live() == 2);
  CHECK(x.permute({2, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(x.reshape({-1, 4}).shape() == Shape{6, 4});
}

TEST_CASE("topological order and cycle detection go through Boost.Graph") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {3});
  const Tensor a = exp2(x);
  const Tensor b = -a;
  const Tensor c = a + b;
  const std::vector<NodeId> order = g.topo_order();
  // Id order is topological here, and the order keeps it.
  for (size_t i = 1; i < order.size(); ++i) CHECK(order[i - 1] < order[i]);
  CHECK_NOTHROW(g.verify());

  // Rewire a's input to c: a cycle a -> b -> c -> a.
  g.set_input(a.node(), 0, c.edge());
  CHECK(error_of([&] { g.topo_order(); }).rfind("graph has a cycle through", 0) == 0);
  CHECK(error_of([&] { g.verify(); }).rfind("graph has a cycle through", 0) == 0);

  // set_input may not change a node's type.
  Graph h;
  const Tensor p = input(h, "p", DType::F32, {3});
  const Tensor q = input(h, "q", DType::F32, {4});
  const Tensor r = -p;
  CHECK(error_of([&] { h.set_input(r.node(), 0, q.edge()); }) ==
        fmt::format("set_input: neg %{} would change type from f32[3] to f32[4]", r.node().value));
}

TEST_CASE("the id order is the topological order exactly when every input precedes its reader") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {3});
  const Tensor a = exp2(x);
  const Tensor d = -x;
  const std::optional<std::vector<NodeId>> by_id = g.id_order_if_topological();
  REQUIRE(by_id.has_value());
  CHECK(*by_id == std::vector<NodeId>{x.node(), a.node(), d.node()});
  CHECK(g.topo_order() == *by_id);

  // a reads d, a later id: acyclic, but the id order is no longer topological.
  g.set_input(a.node(), 0, d.edge());
  CHECK_FALSE(g.id_order_if_topological().has_value());
  CHECK(g.topo_order() == std::vector<NodeId>{x.node(), d.node(), a.node()});

  // Deleted ids are skipped.
  g.set_input(a.node(), 0, x.edge());
  g.remove(d.node());
  REQUIRE(g.id_order_if_topological().has_value());
  CHECK(*g.id_order_if_topological() == std::vector<NodeId>{x.node(), a.node()});
}

TEST_CASE("dtype conversions round to nearest even") {
  CHECK(round_to_float(DType::BF16, 1.0 + 1.0 / 256) == 1.0);             // tie, to even
  CHECK(round_to_float(DType::BF16, 1.0 + 3.0 / 256) == 1.0 + 4.0 / 256); // tie, to even (up)
  CHECK(round_to_float(DType::BF16, 1.0 + 1.0 / 256 + 1e-12) == 1.0 + 2.0 / 256);  // just above the tie
  CHECK(round_to_float(DType::F16, 65504.0) == 65504.0);
  CHECK(std::isinf(round_to_float(DType::F16, 65520.0)));
  CHECK(round_to_float(DType::F16, 65519.0) == 65504.0);
  CHECK(round_to_float(DType::F16, std::ldexp(1.0, -24)) == std::ldexp(1.0, -24));  // smallest subnormal
  CHECK(round_to_float(DType::F16, std::ldexp(1.0, -25)) == 0.0);                   // tie to even: zero
  CHECK(round_to_float(DType::F16, std::ldexp(1.5, -25)) == std::ldexp(1.0, -24));
  CHECK(round_to_float(DType::F16, 1.0 / 3.0) == 0.333251953125);
  CHECK(round_to_float(DType::F32, 0.1) == static_cast<double>(0.1f));
  // Double rounding through f32 would get this wrong: just above a bf16 tie
  // by less than half an f32 ulp.
  CHECK(round_to_float(DType::BF16, 1.0 + 1.0 / 256 + std::ldexp(1.0, -40)) == 1.0 + 2.0 / 256);
  for (float f : {0.0f, -0.0f, 1.5f, -3.25f, 0.0009765625f, 65504.0f}) {
    CHECK(f16_bits_to_float(float_to_f16_bits(f)) == f);
    CHECK(bf16_bits_to_float(float_to_bf16_bits(f)) == static_cast<float>(round_to_float(DType::BF16, f)));
  }
  CHECK(wrap_to_int(DType::I32, 2147483648LL) == -2147483648LL);
}

TEST_CASE("cse keeps the first node of each value and rewires readers and outputs to it") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor a = exp2(x);
  const Tensor c = a + exp2(x);              // (exp2 x) twice: c reads a twice after cse
  const Tensor d = exp2(x) + exp2(x);        // equal to c once its inputs are rewired
  const Tensor t = exp2(x.transpose(0, 1));  // another view of x: another value
  output("c", c);
  output("d", d);
  output("t", t);
  REQUIRE(g.num_live() == 8);
  const Graph out = cse(g);
  CHECK(out.num_live() == 4);  // x, a, c and the transposed exp2
  CHECK(out.outputs()[0].edge.src == c.node());
  CHECK(out.outputs()[1].edge.src == c.node());
  CHECK(out.outputs()[2].edge.src == t.node());
  for (const Edge& e : out.node(c.node()).inputs) CHECK(e.src == a.node());
  CHECK(!out.contains(d.node()));
  out.verify();
  // Idempotent, and the input graph is left as it was.
  CHECK(compacted(cse(out)) == compacted(out));
  CHECK(g.num_live() == 8);
}
