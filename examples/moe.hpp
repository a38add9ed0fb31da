#pragma once
// Mixture-of-experts pieces shared by qwen3_moe, deepseek_v3 and llama4:
// the three routers, and exact (no token dropping), static-shape expert
// computation over routed (token, expert) pairs.
//
// Formulation. With T tokens, top-k routing and E experts there are P = T*k
// routed pairs. The pairs are sorted by expert (a TopK over the P integer
// keys expert*P + pair, i.e. a stable counting order), the routed rows are
// gathered ([P, hidden]), and each expert projection is a batched GEMM over
// the pairs whose right operand is the pair's expert matrix:
//     y[p] = x[p] · W[e_p]ᵀ   as   bmm(x[P,1,in], gather(W[E,out,in], e, axis 0)ᵀ)
// Because the pairs are sorted, equal expert ids form contiguous runs: each
// run is one expert's GEMM over its routed tokens, i.e. a grouped GEMM, which
// a lowering can recognise from gather(W, sorted ids) feeding a bmm. The
// results are weighted and scatter-added back to their tokens (in expert
// order, as Hugging Face's index_add_ loop over experts does).
//
// Cost: the expert GEMMs do exactly the active FLOPs, 2·P·in·out per
// projection — never E/k times more as a dense all-experts formulation would.
// Extra work is a TopK over P keys, gathers of P rows (in, out) and P routing
// weights, and one scatter-add of [P, hidden]. A naive lowering that
// materialises gather(W, e) reads P expert matrices ([P, out, in]); a grouped
// lowering reads each routed expert once per run. In decode (T = 1) both read
// exactly the k routed experts.

#include <spool/ir/tensor.hpp>

namespace spool::examples {

// For each of T tokens: the ids (i64 [T, k]) of its k experts and their
// weights (f32 [T, k]).
struct Routing {
  Tensor experts;
  Tensor weights;
};

// qwen3-MoE: softmax over the E router logits, top-k of the probabilities,
// renormalised to sum to 1 when `normalize` (norm_topk_prob).
Routing softmax_topk_routing(const Tensor& logits, int64_t top_k, bool normalize);

// deepseek-v3 (noaux_tc): sigmoid scores; `bias` (e_score_correction_bias,
// [E]) is added for selection only. Experts form n_group groups; a group's
// score is the sum of its two best biased scores; the topk_group best groups
// are kept (the others masked to -inf with masked_fill) and the top-k experts
// chosen among them. Weights are the unbiased sigmoid scores of the chosen
// experts, renormalised when `normalize`, times `scaling` (routed_scaling_factor).
Routing group_limited_routing(const Tensor& logits, const Tensor& bias, int64_t top_k, int64_t n_group,
                              int64_t topk_group, bool normalize, double scaling);

// llama4: top-k of the raw logits, weights sigmoid(logit) of the chosen ones.
Routing sigmoid_topk_routing(const Tensor& logits, int64_t top_k);

// The routed pairs of x [T, hidden], sorted by expert.
struct RoutedPairs {
  Tensor rows;     // [P, hidden] the token rows, gathered
  Tensor experts;  // i64 [P], nondecreasing
  Tensor tokens;   // i64 [P] the token of each pair
  Tensor weights;  // f32 [P] the routing weight of each pair
  int64_t num_tokens = 0;
};
RoutedPairs route_pairs(const Tensor& x, const Routing& routing);

// y[p] = rows[p] · w[experts[p]]ᵀ for w [E, out, in] (linear layout, as the
// per-expert nn.Linear weights are stored).
Tensor expert_linear(const Tensor& rows, const Tensor& w, const Tensor& experts);
// y[p] = rows[p] · w[experts[p]] for w [E, in, out] (llama4's fused layout).
Tensor expert_matmul(const Tensor& rows, const Tensor& w, const Tensor& experts);

// out[t] = sum over the pairs p of token t of (weighted ? weights[p] : 1) * y[p].
Tensor combine_pairs(const Tensor& y, const RoutedPairs& pairs, bool weighted);

}  // namespace spool::examples
