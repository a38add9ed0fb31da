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
// Prefill (grouped_experts: at least two pairs per expert). The runs are
// the groups of a grouped_matmul (ops.def): each expert projection is
//     y = grouped_matmul(rows [P, in], W [E, out, in], counts [E])
// with the counts from a compare and a sum over [E, P]. The lowering reads
// each expert's matrix once and streams exactly its rows through it (the
// counts are read at run time), so nothing is padded: 2·P·in·out FLOPs and
// E expert matrices per projection (qwen3-30B-A3B prefill of 512 tokens:
// P = 4096 rows against 128 matrices). Extra work is the TopK over P keys,
// each pair's place in the sorted order (a prefix count over the tokens,
// [T, T] · [T, E], not a second sort), the gather of the pairs' rows, and
// the combine: each token gathers its k rows from the sorted order and
// adds them. Everything moves rows by gathers: a scatter-add runs one
// read-add-write round trip per index on the NPU.
//
// Decode (T = 1, P = k < E): one expert matrix per pair, a batched GEMM
// whose right operand is gathered by expert id (the lowering reads it by
// indirect DMA): exactly the k routed experts are read, and the one token
// sums its pairs in sorted order.
//
// Expert blocks (expert_blocks) generalise the decode form: runs padded to
// blocks of B rows, each block a batched GEMM against its expert's matrix,
// NB = floor((P + n·(B-1)) / B) blocks for n = min(E, P); with B = 1 they
// are the pairs themselves. The models use B = 1 only; B > 1 stays as a
// tested static-shape alternative (each matrix read once per block, rows
// padded).

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

// Whether P routed pairs over E experts run the experts as grouped matmuls
// (prefill: at least two pairs per expert; see below) rather than one
// expert matrix per pair (decode, B = 1).
bool grouped_experts(int64_t pairs, int64_t experts);
// How many of the sorted pairs each expert has: i64 [E] (a compare and a
// sum over [E, P]).
Tensor expert_counts(const Tensor& experts, int64_t num_experts);

// The routed experts of a SwiGLU MoE: in prefill (grouped_experts) one
// grouped_matmul per projection over the pairs sorted by expert, with the
// expert counts as the groups, so each expert's matrix is read once for its
// rows and no row is padded; in decode one expert matrix per pair (B = 1):
// y[p] = down_e(silu(gate_e(x_p)) * up_e(x_p)) for the pair's expert e, with
// linear-layout weights gate/up [E, ffn, hidden] and down [E, hidden, ffn];
// [P, hidden] in the pairs' order.
Tensor swiglu_experts(const RoutedPairs& pairs, const Tensor& gate_w, const Tensor& up_w, const Tensor& down_w);

// out[t] = sum over the pairs p of token t of (weighted ? weights[p] : 1) * y[p].
Tensor combine_pairs(const Tensor& y, const RoutedPairs& pairs, bool weighted);

}  // namespace spool::models
