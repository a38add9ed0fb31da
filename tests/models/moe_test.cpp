// The MoE pieces: routers on hand-computed cases, and the sorted routed-pair
// formulation against a dense every-expert formulation of the same block.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/nn/nn.hpp>

#include <spool/support/error.hpp>
#include <spool/support/npy.hpp>

#include <spool/models/deepseek_v3.hpp>
#include <spool/models/llama4.hpp>
#include <spool/models/moe.hpp>
#include <spool/models/qwen3_moe.hpp>

#include "support/allclose.hpp"

#include <cmath>
#include <filesystem>

using namespace spool;
using namespace spool::models;
using interp::HostTensor;

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// A block golden of tests/golden/models/blocks: every file but out_y is a
// graph source by name.
struct BlockGolden {
  interp::Env env;
  HostTensor expected;
};

BlockGolden load_block(const std::string& name) {
  const std::string dir = std::string(SPOOL_SOURCE_DIR) + "/tests/golden/models/blocks/" + name;
  REQUIRE_MESSAGE(std::filesystem::is_directory(dir), "missing golden folder " << dir);
  BlockGolden golden;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string(), stem = entry.path().stem().string();
    HostTensor value = HostTensor::from_npy(read_npy(path), path);
    if (stem == "out_y")
      golden.expected = std::move(value);
    else
      golden.env.emplace(stem, std::move(value));
  }
  return golden;
}

void check_block(const Graph& g, const BlockGolden& golden, const char* what) {
  const auto out = interp::run(g, golden.env);
  const test::AllClose result = test::allclose(out.at("y"), golden.expected, {.stol = 1e-5});
  MESSAGE(std::string(what) << " vs PyTorch: max abs " << result.worst << ", relative to scale "
                            << result.worst_to_scale);
  CHECK(result);
}

}  // namespace

TEST_CASE("deepseek group-limited routing keeps the best groups, selects with the bias, weighs without it") {
  Graph g;
  const Tensor logits = input(g, "logits", DType::F32, {1, 8});
  const Tensor bias = input(g, "bias", DType::F32, {8});
  const Routing r = group_limited_routing(logits, bias, /*top_k=*/2, /*n_group=*/4, /*topk_group=*/2,
                                          /*normalize=*/true, /*scaling=*/2.5);
  output("experts", r.experts);
  output("weights", r.weights);
  interp::Env env;
  // Groups {0,1} {2,3} {4,5} {6,7}. Expert 2 has the best raw score but its
  // group sums to 1.0; the bias of expert 7 lifts group 3 and expert 7.
  env["logits"] = HostTensor::from_f32({1, 8}, std::vector<float>{0.5f, 0.4f, 3.0f, -3.0f, 1.0f, 0.9f, -1.0f, -2.0f});
  env["bias"] = HostTensor::from_f32({8}, std::vector<float>{0, 0, 0, 0, 0, 0, 0, 5.0f});
  const auto out = interp::run(g, env);
  CHECK(out.at("experts").get_int(0) == 7);
  CHECK(out.at("experts").get_int(1) == 4);
  const double s7 = sigmoid(-2.0), s4 = sigmoid(1.0);
  CHECK(out.at("weights").get(0) == doctest::Approx(2.5 * s7 / (s7 + s4)).epsilon(1e-6));
  CHECK(out.at("weights").get(1) == doctest::Approx(2.5 * s4 / (s7 + s4)).epsilon(1e-6));
}

TEST_CASE("softmax top-k routing renormalises; llama4 routing is the sigmoid of the top logit") {
  Graph g;
  const Tensor logits = input(g, "logits", DType::F32, {1, 4});
  const Routing soft = softmax_topk_routing(logits, 2, true);
  const Routing sig = sigmoid_topk_routing(logits, 1);
  output("soft_experts", soft.experts);
  output("soft_weights", soft.weights);
  output("sig_experts", sig.experts);
  output("sig_weights", sig.weights);
  interp::Env env;
  env["logits"] = HostTensor::from_f32({1, 4}, std::vector<float>{0.1f, 2.0f, -1.0f, 1.0f});
  const auto out = interp::run(g, env);
  CHECK(out.at("soft_experts").get_int(0) == 1);
  CHECK(out.at("soft_experts").get_int(1) == 3);
  const double e1 = std::exp(2.0), e3 = std::exp(1.0);
  CHECK(out.at("soft_weights").get(0) == doctest::Approx(e1 / (e1 + e3)).epsilon(1e-6));
  CHECK(out.at("soft_weights").get(1) == doctest::Approx(e3 / (e1 + e3)).epsilon(1e-6));
  CHECK(out.at("sig_experts").get_int(0) == 1);
  CHECK(out.at("sig_weights").get(0) == doctest::Approx(sigmoid(2.0)).epsilon(1e-6));
}

TEST_CASE("routed pairs are sorted by expert, then by token") {
  Graph g;
  const Tensor x = input(g, "x", DType::F32, {3, 2});
  const Tensor experts = input(g, "experts", DType::I64, {3, 2});
  const Tensor weights = input(g, "weights", DType::F32, {3, 2});
  const RoutedPairs pairs = route_pairs(x, {experts, weights, 3});
  output("experts", pairs.experts);
  output("tokens", pairs.tokens);
  output("weights", pairs.weights);
  output("position", pairs.position);
  interp::Env env;
  env["x"] = HostTensor::from_f32({3, 2}, std::vector<float>{0, 1, 2, 3, 4, 5});
  env["experts"] = HostTensor::from_i64({3, 2}, std::vector<int64_t>{2, 0, 0, 1, 2, 1});
  env["weights"] = HostTensor::from_f32({3, 2}, std::vector<float>{.1f, .2f, .3f, .4f, .5f, .6f});
  const auto out = interp::run(g, env);
  const std::vector<int64_t> sorted_experts = {0, 0, 1, 1, 2, 2}, sorted_tokens = {0, 1, 1, 2, 0, 2};
  const std::vector<float> sorted_weights = {.2f, .3f, .4f, .6f, .1f, .5f};
  // Where each pair (token-major) sits in the sorted order.
  const std::vector<int64_t> position = {4, 0, 1, 2, 5, 3};
  for (int64_t p = 0; p < 6; ++p) {
    CHECK(out.at("experts").get_int(p) == sorted_experts[static_cast<size_t>(p)]);
    CHECK(out.at("tokens").get_int(p) == sorted_tokens[static_cast<size_t>(p)]);
    CHECK(out.at("weights").get(p) == doctest::Approx(sorted_weights[static_cast<size_t>(p)]));
    CHECK(out.at("position").get_int(p) == position[static_cast<size_t>(p)]);
  }

  // A routing that names one expert twice for a token still gives every
  // pair its own place.
  Graph h;
  const Tensor y = input(h, "y", DType::F32, {2, 2});
  const Tensor twice = input(h, "experts", DType::I64, {2, 2});
  output("position", route_pairs(y, {twice, input(h, "weights", DType::F32, {2, 2}), 2}).position);
  interp::Env env2 = interp::random_inputs(h, 1);
  env2["experts"] = HostTensor::from_i64({2, 2}, std::vector<int64_t>{1, 1, 0, 1});
  const auto out2 = interp::run(h, env2);
  const std::vector<int64_t> position2 = {1, 2, 0, 3};
  for (int64_t p = 0; p < 4; ++p) CHECK(out2.at("position").get_int(p) == position2[static_cast<size_t>(p)]);
  CHECK_THROWS_WITH_AS(route_pairs(y, {twice, input(h, "w2", DType::F32, {2, 2})}),
                       doctest::Contains("how many experts"), spool::Error);
}

TEST_CASE("the routed-pair MoE equals a dense every-expert formulation (qwen3-MoE block)") {
  Qwen3MoeConfig c = Qwen3MoeConfig::tiny();
  Graph g;
  const int64_t tokens = 6;
  const Tensor x = input(g, "x", DType::F32, {tokens, c.hidden});
  output("sparse", qwen3_moe_block(c, x, "mlp."));
  // Rows move by gathers only (dispatch, the gather back, the combine): the
  // NPU runs a scatter_add one read-add-write round trip per index.
  for (const NodeId id : g.live_ids()) CHECK(g.node(id).op != Op::ScatterAdd);

  // Dense: every expert on every token, weighted by the (renormalised) routing
  // weight of the expert, zero when it was not chosen.
  const Tensor logits = nn::linear(x, weight(g, "mlp.gate.weight", DType::F32, {c.experts, c.hidden}));
  const Routing r = softmax_topk_routing(logits, c.top_k, true);
  const Tensor gate_w = weight(g, "mlp.experts.gate_proj.weight", DType::F32, {c.experts, c.moe_ffn, c.hidden});
  const Tensor up_w = weight(g, "mlp.experts.up_proj.weight", DType::F32, {c.experts, c.moe_ffn, c.hidden});
  const Tensor down_w = weight(g, "mlp.experts.down_proj.weight", DType::F32, {c.experts, c.hidden, c.moe_ffn});
  Tensor dense;
  for (int64_t e = 0; e < c.experts; ++e) {
    auto slice = [&](const Tensor& w) { return w.slice(0, e, e + 1).squeeze(0); };
    const Tensor y = nn::linear(nn::swiglu(nn::linear(x, slice(gate_w)), nn::linear(x, slice(up_w))), slice(down_w));
    const Tensor chosen = equal(r.experts, constant(g, static_cast<double>(e), DType::I64, {tokens, c.top_k}));
    const Tensor w = nn::where(chosen, r.weights, constant(g, 0.0, DType::F32, {tokens, c.top_k})).sum(-1, true);
    dense = dense.is_null() ? y * w : dense + y * w;
  }
  output("dense", dense);
  const auto out = interp::run(g, interp::random_inputs(g, 11));
  const test::AllClose result = test::allclose(out.at("sparse"), out.at("dense"), {.stol = 1e-6});
  MESSAGE("routed pairs vs dense experts: max abs " << result.worst << ", relative " << result.worst_to_scale);
  CHECK(result);
}

TEST_CASE("the deepseek-v3 MoE block matches a PyTorch reimplementation of Hugging Face's DeepseekV3MoE "
          "written here") {
  const BlockGolden golden = load_block("deepseek_v3_moe");
  DeepseekV3Config c = DeepseekV3Config::tiny();
  c.hidden = 32;
  c.moe_ffn = 16;
  c.experts = 16;
  c.n_group = 4;
  c.topk_group = 2;
  c.top_k = 4;
  c.shared_experts = 1;
  c.routed_scaling_factor = 2.5;
  Graph g;
  output("y", deepseek_v3_moe_block(c, input(g, "x", DType::F32, {6, c.hidden}), "mlp."));
  check_block(g, golden, "deepseek_v3 MoE block");
}

TEST_CASE("the llama4 MoE block matches a PyTorch reimplementation of Hugging Face's Llama4TextMoe "
          "written here") {
  const BlockGolden golden = load_block("llama4_moe");
  Llama4Config c = Llama4Config::tiny();
  c.hidden = 32;
  c.ffn = 16;
  c.experts = 4;
  c.top_k = 1;
  Graph g;
  output("y", llama4_moe_block(c, input(g, "x", DType::F32, {6, c.hidden}), "feed_forward."));
  check_block(g, golden, "llama4 MoE block");
}

TEST_CASE("choose_expert_block: one row per block in decode, up to 128 rows in prefill") {
  CHECK(choose_expert_block(8, 128) == 1);         // qwen3-MoE decode
  CHECK(choose_expert_block(255, 128) == 1);       // fewer than two pairs per expert
  CHECK(choose_expert_block(256, 128) == 16);      // 8 * 256 / 128 = 16
  CHECK(choose_expert_block(4096, 128) == 128);    // qwen3-MoE prefill 512
  CHECK(choose_expert_block(4096, 256) == 128);    // deepseek-v3 prefill 512
  CHECK(choose_expert_block(16, 8) == 16);         // tiny qwen3-MoE prefill 8
  CHECK_THROWS(choose_expert_block(0, 8));
}

TEST_CASE("expert blocks hold each expert's rows in whole blocks and give the per-pair results back") {
  // Sorted expert ids of P = 10 pairs over E = 4 experts, from one expert
  // taking everything to every expert used.
  const std::vector<std::vector<int64_t>> routings = {
      {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, {0, 0, 0, 1, 1, 2, 3, 3, 3, 3}, {0, 3, 3, 3, 3, 3, 3, 3, 3, 3}, {1, 1, 1, 1, 1, 2, 2, 2, 2, 2}};
  const int64_t pairs = 10, experts = 4, in = 5, out = 3;
  for (const std::vector<int64_t>& ids : routings)
    for (const int64_t block : {2, 3, 4, 8}) {
      CAPTURE(block);
      Graph g;
      const Tensor rows = input(g, "rows", DType::F32, {pairs, in});
      const Tensor expert_ids = input(g, "experts", DType::I64, {pairs});
      const Tensor w = weight(g, "w", DType::F32, {experts, out, in});
      const ExpertBlocks b = expert_blocks(rows, expert_ids, experts, block);
      REQUIRE(b.rows.dim(0) == b.experts.dim(0) * block);
      // No scatter_add, which the NPU runs one read-add-write round trip per
      // index: the counts per expert are a compare and a sum, and the rows
      // are placed by a gather.
      size_t scatters = 0;
      for (const NodeId id : g.live_ids()) scatters += g.node(id).op == Op::ScatterAdd;
      CHECK(scatters == 0);
      CHECK(b.experts.dim(0) == (pairs + std::min(experts, pairs) * (block - 1)) / block);
      output("block_rows", b.rows);
      output("block_experts", b.experts);
      output("blocked", pair_rows(expert_linear(b.rows, w, b.experts), b));
      output("per_pair", expert_linear(rows, w, expert_ids));
      interp::Env env = interp::random_inputs(g, 3);
      env["experts"] = HostTensor::from_i64({pairs}, ids);
      const auto res = interp::run(g, env);
      // Every block holds rows of its own expert only; its padding rows
      // repeat rows of the input.
      const HostTensor& block_rows = res.at("block_rows");
      const HostTensor& block_experts = res.at("block_experts");
      std::vector<int64_t> seen(static_cast<size_t>(b.rows.dim(0)), -1);
      int64_t p = 0;
      for (int64_t e = 0; e < experts; ++e) {
        int64_t first_row = -1;
        for (int64_t r = 0; r < b.rows.dim(0); ++r)
          if (block_experts.get_int(r / block) == e && first_row < 0 && p < pairs && ids[static_cast<size_t>(p)] == e)
            first_row = r;
        for (int64_t k = 0; p < pairs && ids[static_cast<size_t>(p)] == e; ++p, ++k) {
          REQUIRE(first_row >= 0);
          CHECK(block_experts.get_int((first_row + k) / block) == e);
          for (int64_t j = 0; j < in; ++j)
            CHECK(block_rows.get((first_row + k) * in + j) == env.at("rows").get(p * in + j));
          seen[static_cast<size_t>(first_row + k)] = p;
        }
      }
      for (int64_t r = 0; r < b.rows.dim(0); ++r) {
        if (seen[static_cast<size_t>(r)] >= 0) continue;
        bool repeats = false;
        for (int64_t q = 0; q < pairs && !repeats; ++q) {
          repeats = true;
          for (int64_t j = 0; j < in; ++j) repeats = repeats && block_rows.get(r * in + j) == env.at("rows").get(q * in + j);
        }
        CHECK(repeats);
      }
      CHECK(test::allclose(res.at("blocked"), res.at("per_pair")));
    }
}
