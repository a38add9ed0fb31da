// The reference interpreter: each op's semantics on hand-computed cases.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/support/error.hpp>

#include <cmath>
#include <limits>

using namespace spool;
using interp::HostTensor;

namespace {

HostTensor f32(Shape shape, std::vector<float> values) { return HostTensor::from_f32(std::move(shape), values); }
HostTensor i64(Shape shape, std::vector<int64_t> values) { return HostTensor::from_i64(std::move(shape), values); }

std::vector<double> values(const HostTensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.size(); ++i) out.push_back(t.get(i));
  return out;
}

// Parses `text`, runs it on `inputs` and returns output `name`.
HostTensor run_text(const char* text, const interp::Env& inputs, const std::string& name = "y") {
  Result<Graph> g = parse_graph(text);
  REQUIRE_MESSAGE(g.ok(), g.error().render());
  return interp::run(g.value(), inputs).at(name);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("views: permute, slice with step, pad, expand, reshape") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {2, 3});
  output("t", x.transpose(0, 1));
  output("s", x.slice(1, 0, 3, 2));
  output("p", x.pad(1, 1, 2, 9.0));
  output("e", x.slice(0, 1, 2).expand({3, 3}));
  output("r", x.reshape({3, 2}).slice(0, 1, 3));
  const auto out = interp::run(g, {{"x", f32({2, 3}, {1, 2, 3, 4, 5, 6})}});
  CHECK(values(out.at("t")) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(values(out.at("s")) == std::vector<double>{1, 3, 4, 6});
  CHECK(values(out.at("p")) == std::vector<double>{9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9});
  CHECK(values(out.at("e")) == std::vector<double>{4, 5, 6, 4, 5, 6, 4, 5, 6});
  CHECK(values(out.at("r")) == std::vector<double>{3, 4, 5, 6});
}

TEST_CASE("arithmetic: mod takes the divisor's sign, integers wrap, max propagates NaN") {
  Graph g;
  const Tensor a = input(g, "a", DType::F32, {4});
  const Tensor b = input(g, "b", DType::F32, {4});
  const Tensor i = input(g, "i", DType::I32, {4});
  const Tensor j = input(g, "j", DType::I32, {4});
  output("fmod", a % b);
  output("imod", i % j);
  output("iadd", i + j);
  output("imul", i * j);
  output("max", maximum(a, b));
  output("neg", -i);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor ii(DType::I32, {4}), jj(DType::I32, {4});
  const int64_t iv[] = {7, -7, 2147483647, -2147483648LL};
  const int64_t jv[] = {3, 3, 1, -1};
  for (int k = 0; k < 4; ++k) {
    ii.set_int(k, iv[k]);
    jj.set_int(k, jv[k]);
  }
  const auto out = interp::run(g, {{"a", f32({4}, {7, -7, 5.5f, nan})}, {"b", f32({4}, {-3, 3, 2, 1})}, {"i", ii}, {"j", jj}});
  const std::vector<double> fmod = values(out.at("fmod"));
  CHECK(fmod[0] == -2);
  CHECK(fmod[1] == 2);
  CHECK(fmod[2] == 1.5);
  CHECK(std::isnan(fmod[3]));
  CHECK(values(out.at("imod")) == std::vector<double>{1, 2, 0, 0});
  CHECK(values(out.at("iadd")) == std::vector<double>{10, -4, -2147483648.0, 2147483647.0});  // wraps
  CHECK(values(out.at("imul")) == std::vector<double>{21, -21, 2147483647.0, -2147483648.0});
  CHECK(values(out.at("neg")) == std::vector<double>{-7, 7, -2147483647.0, -2147483648.0});
  const std::vector<double> mx = values(out.at("max"));
  CHECK(mx[0] == 7);
  CHECK(mx[1] == 3);
  CHECK(std::isnan(mx[3]));

  Graph z;
  const Tensor p = input(z, "p", DType::I64, {1});
  output("y", p % input(z, "q", DType::I64, {1}));
  CHECK(error_of([&] { interp::run(z, {{"p", i64({1}, {5})}, {"q", i64({1}, {0})}}); }) == "mod: integer division by zero");
}

TEST_CASE("every store rounds to the node's dtype; reductions round once") {
  const char* text = R"(graph g {
    %0 = input {name="x"} : bf16[4]
    %1 = sum_reduce(%0) {axis=0} : bf16[]
    %2 = add(%0, %0) : bf16[4]
    output "sum" = %1
    output "twice" = %2
  })";
  Result<Graph> g = parse_graph(text);
  REQUIRE(g.ok());
  HostTensor x(DType::BF16, {4});
  // 256 + 1 + 1 + 1 = 259 rounds to 260 in bf16 (8 bits of mantissa), but
  // adding one at a time in bf16 would stay at 256 (256 + 1 ties to 256).
  x.set(0, 256);
  x.set(1, 1);
  x.set(2, 1);
  x.set(3, 1);
  const auto out = interp::run(g.value(), {{"x", x}});
  CHECK(out.at("sum").get(0) == 260);
  CHECK(values(out.at("twice")) == std::vector<double>{512, 2, 2, 2});
}

TEST_CASE("casts: float to integer truncates and saturates, NaN gives 0; integers wrap; to bool is x != 0") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {6});
  output("i32", x.cast(DType::I32));
  output("bool", x.cast(DType::Bool));
  output("wrap", x.cast(DType::I64).cast(DType::I32));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto out = interp::run(g, {{"x", f32({6}, {2.9f, -2.9f, 3e9f, -3e9f, nan, 0.0f})}});
  CHECK(values(out.at("i32")) == std::vector<double>{2, -2, 2147483647.0, -2147483648.0, 0, 0});
  CHECK(values(out.at("bool")) == std::vector<double>{1, 1, 1, 1, 1, 0});
  // 3e9 as i64 then wrapped to i32: 3000000000 - 2^32.
  CHECK(values(out.at("wrap"))[2] == 3000000000.0 - 4294967296.0);
}

TEST_CASE("topk: descending, ties to the lower index, NaN largest") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {2, 4});
  output("y", topk_indices(x, 3));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto out = interp::run(g, {{"x", f32({2, 4}, {1, 5, 5, 2, 0, nan, 3, 3})}});
  CHECK(values(out.at("y")) == std::vector<double>{1, 2, 3, 1, 2, 3});
}

TEST_CASE("gather, scatter_add and iota") {
  Graph g;
  const Tensor data = input(g, "data", DType::F32, {2, 3});
  const Tensor idx = input(g, "idx", DType::I64, {2, 2});
  output("gather", gather(data, idx, 1));
  output("scatter", scatter_add(data, idx, input(g, "src", DType::F32, {2, 2}), 1));
  output("iota", iota(g, {2, 3}, 1, DType::F32) + iota(g, {2, 3}, 0, DType::F32) * 10.0);
  const auto out = interp::run(g, {{"data", f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                                   {"idx", i64({2, 2}, {2, 0, 1, 1})},
                                   {"src", f32({2, 2}, {10, 20, 30, 40})}});
  CHECK(values(out.at("gather")) == std::vector<double>{3, 1, 5, 5});
  CHECK(values(out.at("scatter")) == std::vector<double>{21, 2, 13, 4, 75, 6});  // duplicates accumulate
  CHECK(values(out.at("iota")) == std::vector<double>{0, 1, 2, 10, 11, 12});

  CHECK(error_of([&] {
          interp::run(g, {{"data", f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                          {"idx", i64({2, 2}, {3, 0, 1, 1})},
                          {"src", f32({2, 2}, {10, 20, 30, 40})}});
        }) == "gather: index 3 is out of range for axis 1 of size 3");
}

TEST_CASE("missing or mistyped inputs are reported by name") {
  Graph g;
  output("y", -input(g, "x", DType::F32, {2}));
  CHECK(error_of([&] { interp::run(g, {}); }) == "input 'x' has no value");
  CHECK(error_of([&] { interp::run(g, {{"x", f32({3}, {1, 2, 3})}}); }) == "input 'x': expected f32[2], got f32[3]");
}

TEST_CASE("constants and padding of every dtype") {
  HostTensor y = run_text(R"(graph g {
    %0 = constant {value=-inf} : f32[]
    %1 = constant {value=-3} : i64[]
    %2 = constant {value=true} : bool[]
    %3 = cast(%1 <reshape(1) expand(3)>) {to=f32} : f32[3]
    %4 = cast(%2 <reshape(1) pad(1:1;0)>) {to=f32} : f32[3]
    %5 = max(%3, %0 <reshape(1) expand(3)>) : f32[3]
    %6 = add(%5, %4) : f32[3]
    output "y" = %6
  })", {});
  CHECK(values(y) == std::vector<double>{-3, -2, -3});
}

TEST_CASE("random inputs are deterministic and per-name") {
  Graph g;
  const Tensor a = input(g, "a", DType::F32, {8});
  output("y", a + weight(g, "w", DType::F32, {8}));
  const interp::Env e1 = interp::random_inputs(g, 42);
  const interp::Env e2 = interp::random_inputs(g, 42);
  const interp::Env e3 = interp::random_inputs(g, 43);
  CHECK(e1.at("a") == e2.at("a"));
  CHECK(!(e1.at("a") == e3.at("a")));
  CHECK(!(e1.at("a") == e1.at("w")));
}

TEST_CASE("compare: NaN and infinities are counted, never hidden") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto tensor = [](std::vector<double> v) {
    interp::HostTensor t(DType::F32, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
    return t;
  };
  // Equal finite values: no difference, nothing counted.
  const interp::Difference same = interp::compare(tensor({1, -2, 0.5}), tensor({1, -2, 0.5}));
  CHECK(same.max_abs == 0);
  CHECK(same.non_finite == 0);
  // NaN in both: equal, but counted; the scale comes from the finite values.
  const interp::Difference both = interp::compare(tensor({nan, 2, 1}), tensor({nan, 2, 3}));
  CHECK(both.non_finite == 1);
  CHECK(both.max_abs == 2);
  CHECK(both.max_rel_to_scale == doctest::Approx(2.0 / 3.0));
  // NaN on one side only, or an infinity against a finite value: infinite error.
  CHECK(std::isinf(interp::compare(tensor({nan, 1}), tensor({0, 1})).max_abs));
  CHECK(std::isinf(interp::compare(tensor({1}), tensor({inf})).max_abs));
  CHECK(interp::compare(tensor({inf, -inf}), tensor({inf, -inf})).non_finite == 2);
}
