// MoE routing and the sorted routed-pair formulation of the experts (see moe.hpp).

#include "moe.hpp"

#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <cmath>

namespace spool::examples {
namespace {

void expect_logits(const Tensor& logits, int64_t top_k, std::string_view router) {
  if (logits.rank() != 2) fail("{}: router logits must be [tokens, experts], got {}", router, shape_str(logits.shape()));
  if (top_k < 1 || top_k > logits.dim(1))
    fail("{}: top_k = {} is out of range for {} experts", router, top_k, logits.dim(1));
}

}  // namespace

Routing softmax_topk_routing(const Tensor& logits, int64_t top_k, bool normalize) {
  expect_logits(logits, top_k, "softmax_topk_routing");
  const nn::TopK top = nn::topk(nn::softmax(logits, -1), top_k);
  Tensor weights = top.values;
  if (normalize) weights = weights / weights.sum(-1, true);
  return {top.indices, weights};
}

Routing group_limited_routing(const Tensor& logits, const Tensor& bias, int64_t top_k, int64_t n_group,
                              int64_t topk_group, bool normalize, double scaling) {
  expect_logits(logits, top_k, "group_limited_routing");
  const int64_t tokens = logits.dim(0), experts = logits.dim(1);
  if (n_group < 1 || experts % n_group != 0)
    fail("group_limited_routing: {} experts cannot form {} groups", experts, n_group);
  const int64_t group_size = experts / n_group;
  if (group_size < 2) fail("group_limited_routing: groups need at least 2 experts, got {}", group_size);
  if (topk_group < 1 || topk_group > n_group)
    fail("group_limited_routing: topk_group = {} is out of range for {} groups", topk_group, n_group);
  if (top_k > topk_group * group_size)
    fail("group_limited_routing: top_k = {} exceeds the {} experts of the {} kept groups", top_k,
         topk_group * group_size, topk_group);
  Graph& g = logits.graph();
  const Tensor scores = nn::sigmoid(logits);
  const Tensor biased = scores + bias;  // selection only
  // Group score: the sum of the two best biased scores of the group.
  const Tensor group_scores = nn::topk(biased.reshape({tokens, n_group, group_size}), 2).values.sum(-1);
  const Tensor kept_groups = topk_indices(group_scores, topk_group);  // [T, topk_group]
  const Tensor kept = scatter_add(constant(g, 0.0, DType::F32, {tokens, n_group}), kept_groups,
                                  constant(g, 1.0, DType::F32, {tokens, topk_group}), 1)
                          .cast(DType::Bool);
  const Tensor kept_experts =
      kept.reshape({tokens, n_group, 1}).expand({tokens, n_group, group_size}).reshape({tokens, experts});
  // -inf (as DeepSeek's reference inference code): a masked expert can never
  // beat a kept one, whatever the sign of the biased scores.
  const Tensor choice = nn::masked_fill(biased, logical_not(kept_experts), -INFINITY);
  const Tensor chosen = topk_indices(choice, top_k);
  Tensor weights = gather(scores, chosen, 1);
  if (normalize) weights = weights / (weights.sum(-1, true) + 1e-20);
  return {chosen, weights * scaling};
}

Routing sigmoid_topk_routing(const Tensor& logits, int64_t top_k) {
  expect_logits(logits, top_k, "sigmoid_topk_routing");
  const nn::TopK top = nn::topk(logits, top_k);
  return {top.indices, nn::sigmoid(top.values)};
}

RoutedPairs route_pairs(const Tensor& x, const Routing& routing) {
  if (x.rank() != 2) fail("route_pairs: tokens must be [tokens, hidden], got {}", shape_str(x.shape()));
  const int64_t tokens = x.dim(0), hidden = x.dim(1), top_k = routing.experts.dim(1);
  if (routing.experts.rank() != 2 || routing.experts.dim(0) != tokens || routing.weights.shape() != routing.experts.shape())
    fail("route_pairs: routing {} / {} does not match {} tokens", shape_str(routing.experts.shape()),
         shape_str(routing.weights.shape()), tokens);
  Graph& g = x.graph();
  const int64_t pairs = tokens * top_k;
  // Pair p = t*k + j (token-major). Sort key expert*P + p: distinct, so the
  // order is by expert and, within an expert, by token.
  const Tensor experts = routing.experts.reshape({pairs});
  const Tensor key = experts * static_cast<double>(pairs) + iota(g, {pairs}, 0, DType::I64);
  const Tensor order = topk_indices(-key, pairs);  // ascending key
  const Tensor token_of_pair = iota(g, {tokens, top_k}, 0, DType::I64).reshape({pairs});
  RoutedPairs out;
  out.num_tokens = tokens;
  out.experts = gather(experts, order, 0);
  out.tokens = gather(token_of_pair, order, 0);
  out.weights = gather(routing.weights.reshape({pairs}), order, 0);
  out.rows = gather(x, out.tokens.reshape({pairs, 1}).expand({pairs, hidden}), 0);
  return out;
}

namespace {

// w [E, a, b] gathered per pair: [P, a, b].
Tensor gather_experts(const Tensor& w, const Tensor& experts, std::string_view op) {
  if (w.rank() != 3) fail("{}: expert weights must be [experts, a, b], got {}", op, shape_str(w.shape()));
  if (experts.rank() != 1) fail("{}: expert ids must be [pairs], got {}", op, shape_str(experts.shape()));
  const int64_t pairs = experts.dim(0);
  return gather(w, experts.reshape({pairs, 1, 1}).expand({pairs, w.dim(1), w.dim(2)}), 0);
}

}  // namespace

Tensor expert_linear(const Tensor& rows, const Tensor& w, const Tensor& experts) {
  const Tensor per_pair = gather_experts(w, experts, "expert_linear");  // [P, out, in]
  return nn::bmm(rows.unsqueeze(1), per_pair.transpose(1, 2)).squeeze(1);
}

Tensor expert_matmul(const Tensor& rows, const Tensor& w, const Tensor& experts) {
  const Tensor per_pair = gather_experts(w, experts, "expert_matmul");  // [P, in, out]
  return nn::bmm(rows.unsqueeze(1), per_pair).squeeze(1);
}

Tensor combine_pairs(const Tensor& y, const RoutedPairs& pairs, bool weighted) {
  const int64_t count = y.dim(0), hidden = y.dim(1);
  const Tensor contribution = weighted ? y * pairs.weights.unsqueeze(1) : y;
  return scatter_add(constant(y.graph(), 0.0, DType::F32, {pairs.num_tokens, hidden}),
                     pairs.tokens.reshape({count, 1}).expand({count, hidden}), contribution, 0);
}

}  // namespace spool::examples
