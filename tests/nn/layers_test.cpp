// spool::nn's Llama-4 and DeepSeek-V3 pieces against the formulas written
// out element by element: interleaved-pair RoPE, the L2 norm, chunked
// (local) causal attention and values of their own head dim.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/nn/nn.hpp>

#include "support/allclose.hpp"

#include <cmath>
#include <limits>
#include <vector>

using namespace spool;
using interp::HostTensor;

namespace {

// Values of the graph's input `name` from a fixed pattern.
HostTensor pattern(const Shape& shape, double phase) {
  HostTensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(0.37 * static_cast<double>(i) + phase) * 1.5);
  return t;
}

}  // namespace

TEST_CASE("rope_interleaved rotates pairs (x[2i], x[2i+1]) and returns first members, then second members") {
  const int64_t heads = 2, seq = 3, dim = 8, offset = 5;
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {heads, seq, dim});
  const nn::RopeTables tables = nn::rope_tables(g, seq, dim, 10000.0, offset);
  output("y", nn::rope_interleaved(x, tables.cos, tables.sin));
  const HostTensor xv = pattern({heads, seq, dim}, 0.1);
  const auto out = interp::run(g, {{"x", xv}});
  const HostTensor& y = out.at("y");
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t i = 0; i < dim / 2; ++i) {
        const double angle = static_cast<double>(s + offset) * std::pow(10000.0, -2.0 * static_cast<double>(i) / dim);
        const int64_t row = (h * seq + s) * dim;
        const double a = xv.get(row + 2 * i), b = xv.get(row + 2 * i + 1);
        CHECK(y.get(row + i) == doctest::Approx(a * std::cos(angle) - b * std::sin(angle)).epsilon(1e-5));
        CHECK(y.get(row + dim / 2 + i) == doctest::Approx(a * std::sin(angle) + b * std::cos(angle)).epsilon(1e-5));
      }
  CHECK_THROWS_WITH(nn::rope_interleaved(input(g, "odd", DType::F32, {3, 7}), tables.cos, tables.sin),
                    "rope_interleaved: head dimension 7 of [3,7] is odd");
}

TEST_CASE("l2_norm divides each row by its root mean square, without a weight") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {3, 6});
  output("y", nn::l2_norm(x, 1e-5));
  const HostTensor xv = pattern({3, 6}, 0.4);
  const auto out = interp::run(g, {{"x", xv}});
  for (int64_t r = 0; r < 3; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < 6; ++j) sum += xv.get(r * 6 + j) * xv.get(r * 6 + j);
    const double scale = 1.0 / std::sqrt(sum / 6.0 + 1e-5);
    for (int64_t j = 0; j < 6; ++j)
      CHECK(out.at("y").get(r * 6 + j) == doctest::Approx(xv.get(r * 6 + j) * scale).epsilon(1e-5));
  }
}

TEST_CASE("chunked attention: a query sees the keys of its own chunk up to itself; values have their own width") {
  const int64_t hq = 2, d = 4, dv = 3, t = 7, chunk = 3;
  for (const int64_t s : {int64_t{5}, int64_t{1}}) {
    CAPTURE(s);
    Graph g;
    const Tensor q = input(g, "q", DType::F32, {hq, s, d});
    const Tensor k = input(g, "k", DType::F32, {1, t, d});
    const Tensor v = input(g, "v", DType::F32, {1, t, dv});
    output("y", nn::attention(q, k, v, /*causal=*/true, 0.5, chunk));
    const interp::Env env = {
        {"q", pattern({hq, s, d}, 0.2)}, {"k", pattern({1, t, d}, 1.1)}, {"v", pattern({1, t, dv}, 2.3)}};
    const auto out = interp::run(g, env);
    HostTensor expected(DType::F32, {hq, s, dv});
    for (int64_t h = 0; h < hq; ++h)
      for (int64_t i = 0; i < s; ++i) {
        const int64_t pos = t - s + i, first = pos - pos % chunk;  // the query's chunk starts at `first`
        std::vector<double> weights;
        double total = 0.0, top = -std::numeric_limits<double>::infinity();
        for (int64_t j = first; j <= pos; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += env.at("q").get((h * s + i) * d + c) * env.at("k").get(j * d + c);
          weights.push_back(0.5 * dot);
          top = std::max(top, 0.5 * dot);
        }
        for (double& w : weights) total += (w = std::exp(w - top));
        for (int64_t c = 0; c < dv; ++c) {
          double sum = 0.0;
          for (int64_t j = first; j <= pos; ++j)
            sum += weights[static_cast<size_t>(j - first)] / total * env.at("v").get(j * dv + c);
          expected.set((h * s + i) * dv + c, sum);
        }
      }
    CHECK(test::allclose(out.at("y"), expected, {.stol = 1e-5}));
  }
  Graph g;
  CHECK_THROWS_WITH(nn::attention(input(g, "q", DType::F32, {1, 2, 4}), input(g, "k", DType::F32, {1, 2, 4}),
                                  input(g, "v", DType::F32, {1, 2, 4}), /*causal=*/false, std::nullopt, 2),
                    "attention: chunked attention is causal");
}
