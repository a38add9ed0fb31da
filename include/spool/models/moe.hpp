#pragma once
// Mixture-of-experts pieces shared by qwen3_moe, deepseek_v3 and llama4:
// the three routers, and exact (no token dropping), static-shape expert
// computation over routed (token, expert) pairs.
//
// Formulation. With T tokens, top-k routing and E experts there are P = T*k
// routed pairs. The pairs are sorted by expert (a TopK over the P integer
// keys expert*P + pair, i.e. a stable counting order) and the routed rows are
// gathered ([P, hidden]). Because the pairs are sorted, equal expert ids form
// contiguous runs: each run is one expert's GEMM over its routed tokens.
//
// Expert blocks (expert_blocks). Each run is padded to a multiple of a block
// of B rows, so that every block of B rows belongs to one expert; each
// expert projection is then a batched GEMM over the blocks whose right
// operand is the block's expert matrix:
//     y[b] = x[b] · W[e_b]ᵀ   as   bmm(x[NB,B,in], gather(W[E,out,in], e, axis 0)ᵀ)
// The number of blocks is static: NB = floor((P + n·(B-1)) / B) with
// n = min(E, P) the most experts that can be routed to, which bounds
// Σ_e ceil(count_e / B) whatever the routing; blocks past the used ones
// belong to the last expert. Padding rows repeat a pair's row (their results
// are never read back). Block offsets come from the expert counts (a compare
// and a sum over [E, P]) and exclusive prefix sums over the E experts, all
// exact small integers in f32. With B = 1 there is no padding and the blocks
// are the pairs themselves (no dispatch is built).
//
// Cost: an expert matrix is read once per block, NB times in all, instead of
// once per pair (P times): on qwen3-30B-A3B prefill of 512 tokens (P = 4096,
// E = 128) B = 128 reads 159 expert matrices per projection, not 4096. The
// padded GEMMs do 2·NB·B·in·out FLOPs against the active 2·P·in·out;
// choose_expert_block picks B so that the blocks stay memory-bound. Extra
// work is the TopK over P keys, each pair's place in the sorted order (a
// prefix count over the tokens, [T, T] · [T, E], not a second sort), the
// dispatch (a gather of the NB·B block rows and the gather back of the P
// pairs' rows), and the combine: each token gathers its k rows from the
// sorted order and adds them. Everything moves rows by gathers: a
// scatter-add runs one read-add-write round trip per index on the NPU. In
// decode (T = 1, P = k < E) B = 1, exactly the k routed experts are read,
// and the one token sums its pairs in sorted order.

#include <spool/ir/tensor.hpp>

namespace spool::models {

// For each of T tokens: the ids (i64 [T, k]) of its k experts and their
// weights ([T, k]: f32 from the softmax and group-limited routers, which
// compute in f32 whatever the logits' dtype; the logits' dtype from the
// sigmoid router, as Llama-4 rounds its scores).
struct Routing {
  Tensor experts;
  Tensor weights;
  int64_t num_experts = 0;  // E, the router's logits' last axis
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

// The routed pairs of x [T, hidden], sorted by expert. With more than one
// token the routing must give its expert count (the routers do).
struct RoutedPairs {
  Tensor rows;     // [P, hidden] the token rows, gathered
  Tensor experts;  // i64 [P], nondecreasing
  Tensor tokens;   // i64 [P] the token of each pair
  Tensor weights;  // [P] the routing weight of each pair (the routing's dtype)
  Tensor position; // i64 [P]: where pair t*k + j (token-major) sits in the sorted order (T > 1)
  int64_t num_tokens = 0;
};
RoutedPairs route_pairs(const Tensor& x, const Routing& routing);

// The block size B for P routed pairs over E experts: 1 while there are
// fewer than two pairs per expert (decode), else the largest power of two
// not above 8·P/E, at most 128: the blocks read expert matrices
// ~P/B + min(E, P) times, so larger blocks read less, until the padded rows
// make the GEMMs compute-bound (on tpuv3, 128 rows against a 128x128 array;
// 64 instead of 128 on deepseek-v3 prefill costs 3% more time).
int64_t choose_expert_block(int64_t pairs, int64_t experts);

// Sorted routed rows [P, d] (d any width) grouped into blocks of B rows of
// one expert each.
struct ExpertBlocks {
  Tensor rows;     // [NB*B, d]: the pairs' rows at their slots; padding rows repeat a pair's row
  Tensor experts;  // i64 [NB]: the expert of each block
  Tensor slots;    // i64 [P]: the row of each pair in `rows` (not built when B = 1)
  int64_t block = 1;
};
// `experts` are the sorted pairs' expert ids (RoutedPairs::experts).
ExpertBlocks expert_blocks(const Tensor& rows, const Tensor& experts, int64_t num_experts, int64_t block);
// The pairs' rows [P, d] of block rows y [NB*B, d].
Tensor pair_rows(const Tensor& y, const ExpertBlocks& blocks);

// Block rows rows [NB*B, in] of blocks.experts [NB]: y[r] = rows[r] · w[e(r)]ᵀ
// for w [E, out, in] (linear layout, as the per-expert nn.Linear weights are
// stored); [NB*B, out].
Tensor expert_linear(const Tensor& rows, const Tensor& w, const Tensor& experts);
// The same for w [E, in, out] (llama4's fused layout): y[r] = rows[r] · w[e(r)].
Tensor expert_matmul(const Tensor& rows, const Tensor& w, const Tensor& experts);

// The routed experts of a SwiGLU MoE over expert blocks (choose_expert_block):
// y[p] = down_e(silu(gate_e(x_p)) * up_e(x_p)) for the pair's expert e, with
// linear-layout weights gate/up [E, ffn, hidden] and down [E, hidden, ffn];
// [P, hidden] in the pairs' order.
Tensor swiglu_experts(const RoutedPairs& pairs, const Tensor& gate_w, const Tensor& up_w, const Tensor& down_w);

// out[t] = sum over the pairs p of token t of (weighted ? weights[p] : 1) * y[p].
Tensor combine_pairs(const Tensor& y, const RoutedPairs& pairs, bool weighted);

}  // namespace spool::models
