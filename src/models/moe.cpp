// MoE routing and the sorted routed-pair formulation of the experts (see moe.hpp).

#include <spool/models/moe.hpp>

#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <cmath>

namespace spool::models {
namespace {

// Exclusive prefix sums over the E entries of v [E]: the sum of v[e'] for
// e' < e (exact small integers in f32), as a masked [E, E] row sum.
Tensor exclusive_prefix(const Tensor& v) {
  Graph& g = v.graph();
  const int64_t E = v.dim(0);
  const Tensor before = less_than(iota(g, {E, E}, 1, DType::F32), iota(g, {E, E}, 0, DType::F32));
  return where(before, v.reshape({1, E}).expand({E, E}), 0.0).sum(1);
}

void expect_logits(const Tensor& logits, int64_t top_k, std::string_view router) {
  if (logits.rank() != 2) fail("{}: router logits must be [tokens, experts], got {}", router, shape_str(logits.shape()));
  if (top_k < 1 || top_k > logits.dim(1))
    fail("{}: top_k = {} is out of range for {} experts", router, top_k, logits.dim(1));
}

}  // namespace

Routing softmax_topk_routing(const Tensor& logits, int64_t top_k, bool normalize) {
  expect_logits(logits, top_k, "softmax_topk_routing");
  // The probabilities, top-k and renormalisation in f32 whatever the logits' dtype.
  const nn::TopK top = nn::topk(nn::softmax(logits.cast(DType::F32), -1), top_k);
  Tensor weights = top.values;
  if (normalize) weights = weights / weights.sum(-1, true);
  return {top.indices, weights, logits.dim(1)};
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
  // Scores, selection and weights in f32 whatever the logits' dtype.
  const Tensor scores = nn::sigmoid(logits.cast(DType::F32));
  const Tensor biased = scores + bias.cast(DType::F32);  // selection only
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
  return {chosen, weights * scaling, logits.dim(1)};
}

Routing sigmoid_topk_routing(const Tensor& logits, int64_t top_k) {
  expect_logits(logits, top_k, "sigmoid_topk_routing");
  const nn::TopK top = nn::topk(logits, top_k);
  return {top.indices, nn::sigmoid(top.values), logits.dim(1)};
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
  // Where each pair sits in the sorted order, without sorting again: after
  // every pair of a smaller expert, then after the pairs of its own expert
  // from earlier tokens, then from earlier choices of its own token. The
  // middle term is a prefix count over the tokens, [T, T] · [T, E] on the
  // arrays. (One token owns every pair: combine_pairs needs no positions.)
  if (tokens > 1) {
    const int64_t E = routing.num_experts;
    if (E < 1) fail("route_pairs: the routing does not say how many experts there are");
    const DType i64 = routing.experts.dtype();
    auto choice = [&](int64_t j) { return routing.experts.slice(1, j, j + 1); };  // [T, 1]
    Tensor chose;  // [T, E]: how often each token chose each expert
    for (int64_t j = 0; j < top_k; ++j) {
      const Tensor hit = equal(choice(j).expand({tokens, E}), iota(g, {tokens, E}, 1, i64)).cast(DType::F32);
      chose = j == 0 ? hit : chose + hit;
    }
    const Tensor earlier_tokens =
        less_than(iota(g, {tokens, tokens}, 1, DType::F32), iota(g, {tokens, tokens}, 0, DType::F32)).cast(DType::F32);
    const Tensor before_token = nn::matmul(earlier_tokens, chose);  // [T, E]
    std::vector<Tensor> rank;  // per choice j: [T, 1]
    for (int64_t j = 0; j < top_k; ++j) {
      Tensor r = gather(before_token, choice(j), 1);
      for (int64_t i = 0; i < j; ++i) r = r + equal(choice(i), choice(j)).cast(DType::F32);
      rank.push_back(r);
    }
    const Tensor within = nn::concat(rank, 1).reshape({pairs});
    const Tensor first = exclusive_prefix(chose.sum(0));
    out.position = (gather(first, experts, 0) + within).cast(DType::I64);
  }
  return out;
}

namespace {

// w [E, a, b] gathered per block: [NB, a, b].
Tensor gather_experts(const Tensor& w, const Tensor& experts, std::string_view op) {
  if (w.rank() != 3) fail("{}: expert weights must be [experts, a, b], got {}", op, shape_str(w.shape()));
  if (experts.rank() != 1) fail("{}: expert ids must be [blocks], got {}", op, shape_str(experts.shape()));
  const int64_t blocks = experts.dim(0);
  return gather(w, experts.reshape({blocks, 1, 1}).expand({blocks, w.dim(1), w.dim(2)}), 0);
}

// rows [NB*B, in] as [NB, B, in] for the NB blocks of `experts`.
Tensor as_blocks(const Tensor& rows, const Tensor& experts, std::string_view op) {
  if (rows.rank() != 2) fail("{}: rows must be [rows, features], got {}", op, shape_str(rows.shape()));
  const int64_t blocks = experts.rank() == 1 ? experts.dim(0) : 0;
  if (blocks < 1 || rows.dim(0) % blocks != 0)
    fail("{}: {} rows do not form the blocks of expert ids {}", op, rows.dim(0), shape_str(experts.shape()));
  return rows.reshape({blocks, rows.dim(0) / blocks, rows.dim(1)});
}

}  // namespace

int64_t choose_expert_block(int64_t pairs, int64_t experts) {
  if (pairs < 1 || experts < 1) fail("choose_expert_block: {} pairs over {} experts", pairs, experts);
  if (pairs < 2 * experts) return 1;
  int64_t block = 1;
  while (block < 128 && 2 * block * experts <= 8 * pairs) block *= 2;
  return block;
}

ExpertBlocks expert_blocks(const Tensor& rows, const Tensor& experts, int64_t num_experts, int64_t block) {
  if (rows.rank() != 2) fail("expert_blocks: rows must be [pairs, features], got {}", shape_str(rows.shape()));
  if (experts.rank() != 1 || experts.dim(0) != rows.dim(0))
    fail("expert_blocks: expert ids {} do not match rows {}", shape_str(experts.shape()), shape_str(rows.shape()));
  if (num_experts < 1) fail("expert_blocks: {} experts", num_experts);
  if (block < 1) fail("expert_blocks: the block size must be positive, got {}", block);
  if (block == 1) return {rows, experts, {}, 1};
  Graph& g = rows.graph();
  const int64_t pairs = rows.dim(0), width = rows.dim(1), E = num_experts;
  const int64_t blocks = (pairs + std::min(E, pairs) * (block - 1)) / block;
  const double B = static_cast<double>(block);
  // Rows per expert, and padded up to whole blocks. A count is how many
  // pairs name the expert: a compare and a sum over [E, pairs], which the
  // vector unit streams, where a scatter_add of ones would read, add and
  // write one count per pair in turn (a DRAM round trip each).
  const Tensor counts =
      equal(experts.reshape({1, pairs}).expand({E, pairs}), iota(g, {E, pairs}, 0, experts.dtype())).cast(DType::F32).sum(1);
  const Tensor padded = counts + (-counts % B);
  const Tensor first = exclusive_prefix(counts);  // the first pair of each expert
  const Tensor start = exclusive_prefix(padded);  // the first block row of each expert
  // Pair p (the p-th in expert order) goes to start[e_p] + (p - first[e_p]).
  const Tensor slots = (gather(start - first, experts, 0) + iota(g, {pairs}, 0, DType::F32)).cast(DType::I64);
  ExpertBlocks out;
  out.block = block;
  out.slots = slots;
  // Block b starts at row b*B: its expert is the number of experts whose
  // padded run ends at or before that row (empty experts included), and the
  // unused blocks past the last run take the last expert.
  const Tensor end = (start + padded).reshape({1, E}).expand({blocks, E});
  const Tensor ended = 1.0 - less_than(iota(g, {blocks, E}, 0, DType::F32) * B, end).cast(DType::F32);
  out.experts = (-maximum(-ended.sum(1), -static_cast<double>(E - 1))).cast(DType::I64);
  // Row r of block b holds pair first[e_b] + (r - start[e_b]) while that is
  // one of e_b's pairs; a gather of the rows by that index moves every block
  // row in one pipelined pass (a scatter into the rows would wait out a DRAM
  // round trip per pair, as scatter_add must for repeated indices). Rows
  // past a run's pairs (and past the last run) pad: they hold the row of a
  // pair nearby, clamped into range, and what they compute is never read
  // back (pair_rows reads the slots).
  const int64_t R = blocks * block;
  const Tensor row_expert = gather(out.experts, iota(g, {blocks, block}, 0, DType::I64).reshape({R}), 0);
  const Tensor row = iota(g, {R}, 0, DType::F32);
  const Tensor source = -maximum(-(gather(first - start, row_expert, 0) + row), -static_cast<double>(pairs - 1));
  out.rows = gather(rows, source.cast(DType::I64).reshape({R, 1}).expand({R, width}), 0);
  return out;
}

Tensor pair_rows(const Tensor& y, const ExpertBlocks& blocks) {
  if (blocks.block == 1) return y;
  if (y.rank() != 2 || y.dim(0) != blocks.rows.dim(0))
    fail("pair_rows: {} is not the block rows [{}, *]", shape_str(y.shape()), blocks.rows.dim(0));
  const int64_t pairs = blocks.slots.dim(0);
  return gather(y, blocks.slots.reshape({pairs, 1}).expand({pairs, y.dim(1)}), 0);
}

Tensor expert_linear(const Tensor& rows, const Tensor& w, const Tensor& experts) {
  const Tensor per_block = gather_experts(w, experts, "expert_linear");  // [NB, out, in]
  const Tensor x = as_blocks(rows, experts, "expert_linear");            // [NB, B, in]
  return nn::bmm(x, per_block.transpose(1, 2)).reshape({rows.dim(0), w.dim(1)});
}

Tensor expert_matmul(const Tensor& rows, const Tensor& w, const Tensor& experts) {
  const Tensor per_block = gather_experts(w, experts, "expert_matmul");  // [NB, in, out]
  const Tensor x = as_blocks(rows, experts, "expert_matmul");            // [NB, B, in]
  return nn::bmm(x, per_block).reshape({rows.dim(0), w.dim(2)});
}

bool grouped_experts(int64_t pairs, int64_t experts) { return choose_expert_block(pairs, experts) > 1; }

Tensor expert_counts(const Tensor& experts, int64_t num_experts) {
  if (experts.rank() != 1 || num_experts < 1)
    fail("expert_counts: expert ids must be [pairs] over at least one expert, got {} over {}",
         shape_str(experts.shape()), num_experts);
  const int64_t pairs = experts.dim(0);
  return equal(experts.reshape({1, pairs}).expand({num_experts, pairs}),
               iota(experts.graph(), {num_experts, pairs}, 0, experts.dtype()))
      .cast(DType::I64)
      .sum(1);
}

Tensor swiglu_experts(const RoutedPairs& pairs, const Tensor& gate_w, const Tensor& up_w, const Tensor& down_w) {
  if (gate_w.rank() != 3) fail("swiglu_experts: expert weights must be [experts, ffn, hidden], got {}", shape_str(gate_w.shape()));
  const int64_t experts = gate_w.dim(0);
  if (grouped_experts(pairs.experts.dim(0), experts)) {
    const Tensor counts = expert_counts(pairs.experts, experts);
    const Tensor gate = grouped_matmul(pairs.rows, gate_w, counts);
    const Tensor up = grouped_matmul(pairs.rows, up_w, counts);
    return grouped_matmul(nn::swiglu(gate, up), down_w, counts);
  }
  const ExpertBlocks blocks =
      expert_blocks(pairs.rows, pairs.experts, experts, choose_expert_block(pairs.experts.dim(0), experts));
  const Tensor gate = expert_linear(blocks.rows, gate_w, blocks.experts);
  const Tensor up = expert_linear(blocks.rows, up_w, blocks.experts);
  return pair_rows(expert_linear(nn::swiglu(gate, up), down_w, blocks.experts), blocks);
}

Tensor combine_pairs(const Tensor& y, const RoutedPairs& pairs, bool weighted) {
  const int64_t count = y.dim(0), hidden = y.dim(1), tokens = pairs.num_tokens;
  if (y.rank() != 2 || count != pairs.weights.dim(0) || tokens < 1 || count % tokens != 0)
    fail("combine_pairs: {} is not one row per routed pair of {} tokens", shape_str(y.shape()), tokens);
  // Each token reads its k pairs' rows back from the sorted order (a gather:
  // no pair's row is written twice, so nothing waits; one token owns them
  // all in any order) and adds them, as k views of [tokens, hidden] (one
  // elementwise pass along the hidden axis; a sum over the k axis would
  // reduce k values per output).
  const int64_t k = count / tokens;
  const bool one_token = tokens == 1;
  const Tensor by_token = one_token ? y : gather(y, pairs.position.reshape({count, 1}).expand({count, hidden}), 0);
  const Tensor weights = pairs.weights.cast(y.dtype());  // rounded to the rows' dtype, as they are combined
  const Tensor w = one_token ? weights : gather(weights, pairs.position, 0);
  // Choice j of every token, weighted: an elementwise chain over [tokens,
  // hidden] reading k row-strided views, which fuses into one pass (a
  // weighted [P, hidden] product first would be a pass of its own).
  const Tensor rows = by_token.reshape({tokens, k, hidden});
  const Tensor wk = w.reshape({tokens, k});
  auto choice = [&](int64_t j) {
    const Tensor r = rows.slice(1, j, j + 1).reshape({tokens, hidden});
    return weighted ? r * wk.slice(1, j, j + 1) : r;
  };
  Tensor out = choice(0);
  for (int64_t j = 1; j < k; ++j) out = out + choice(j);
  return out;
}

}  // namespace spool::models
