// Lowering genes: the lowering's own choices for each distinct kernel
// (GEMM tiles, operand slots, loop order, placement over cores) as free
// genes of the genome, next to the e-graph's choices; kernel keys, and the
// choices a genome makes for the kernels of its program.

#include <spool/search/space.hpp>

#include <spool/ir/text.hpp>
#include <spool/search/fitness.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <set>
#include <string_view>

namespace spool::search {
namespace {

int64_t& field_of(lower::KernelChoice& c, LoweringGene::Field f, int64_t& scratch) {
  switch (f) {
    case LoweringGene::Field::TileM:
      return c.tile_m;
    case LoweringGene::Field::TileN:
      return c.tile_n;
    case LoweringGene::Field::TileK:
      return c.tile_k;
    case LoweringGene::Field::Slots:
      return c.slots;
    default:
      return scratch;
  }
}

void set_field(lower::KernelChoice& c, LoweringGene::Field f, int64_t v) {
  int64_t scratch = 0;
  if (f == LoweringGene::Field::Order) {
    c.order = static_cast<int>(v);
  } else if (f == LoweringGene::Field::Cores) {
    c.cores = static_cast<int>(v);
  } else {
    field_of(c, f, scratch) = v;
  }
}

std::string value_str(LoweringGene::Field f, int64_t v) {
  if (v == 0) return "default";
  if (f == LoweringGene::Field::Order) return v == 2 ? "m blocks outer" : "column blocks outer";
  if (f == LoweringGene::Field::Cores) return v == 1 ? "one core" : "spread over cores";
  return std::to_string(v);
}

// "m128 n256 k512" -> {128, 256, 512}; zeros when it does not parse.
std::array<int64_t, 3> parse_tile(const std::string& tile) {
  std::array<int64_t, 3> out{0, 0, 0};
  if (std::sscanf(tile.c_str(), "m%ld n%ld k%ld", &out[0], &out[1], &out[2]) != 3) out = {0, 0, 0};
  return out;
}

// The same on every platform (std::hash of a string need not be).
uint64_t text_hash(std::string_view text) {
  uint64_t h = egraph::mix64(text.size());
  for (unsigned char c : text) h = egraph::hash_combine(h, c);
  return h;
}

}  // namespace

const char* field_name(LoweringGene::Field field) {
  switch (field) {
    case LoweringGene::Field::TileM:
      return "tile_m";
    case LoweringGene::Field::TileN:
      return "tile_n";
    case LoweringGene::Field::TileK:
      return "tile_k";
    case LoweringGene::Field::Slots:
      return "slots";
    case LoweringGene::Field::Order:
      return "order";
    case LoweringGene::Field::Cores:
      return "cores";
  }
  return "?";
}

std::string kernel_key(const Graph& program, NodeId id) {
  return print_graph(SimulatedCycles::kernel_alone(program, id));
}

LoweringChoices used_choices(const Graph& program, const LoweringChoices& choices) {
  LoweringChoices out;
  if (choices.empty()) return out;
  for (NodeId id : program.live_ids()) {
    if (program.node(id).op != Op::Gemm) continue;
    std::string key = kernel_key(program, id);
    if (const auto it = choices.find(key); it != choices.end() && !it->second.is_default())
      out.emplace(std::move(key), it->second);
  }
  return out;
}

uint64_t with_lowering(uint64_t program_fingerprint, const LoweringChoices& used) {
  uint64_t h = program_fingerprint;
  for (const auto& [key, choice] : used) {
    h = egraph::hash_combine(h, text_hash(key));
    h = egraph::hash_combine(h, text_hash(choice.to_string()));
  }
  return h;
}

lower::LowerOptions with_choices(lower::LowerOptions options, const LoweringChoices& choices) {
  if (choices.empty()) return options;
  auto owned = std::make_shared<const LoweringChoices>(choices);
  options.choice = [owned](const Graph& g, NodeId id) {
    if (g.node(id).op != Op::Gemm) return lower::KernelChoice{};
    const auto it = owned->find(kernel_key(g, id));
    return it == owned->end() ? lower::KernelChoice{} : it->second;
  };
  return options;
}

uint32_t SearchSpace::add_lowering_genes(std::vector<LoweringGene> genes) {
  SPOOL_ASSERT(lowering_.empty(), "lowering genes are added once");
  std::vector<uint32_t> counts;
  for (const LoweringGene& g : genes) {
    SPOOL_ASSERT(!g.values.empty() && g.values[0] == 0, "a lowering gene's first value is the default");
    counts.push_back(static_cast<uint32_t>(g.values.size()));
  }
  first_lowering_ = genomes_.add_free_genes(counts);
  lowering_ = std::move(genes);
  greedy_.resize(genomes_.num_genes(), 0);
  return static_cast<uint32_t>(first_lowering_);
}

LoweringChoices SearchSpace::lowering(const Genome& genome) const {
  LoweringChoices out;
  for (size_t i = 0; i < lowering_.size(); ++i) {
    const uint32_t v = genome.at(first_lowering_ + i);
    if (v == 0) continue;
    set_field(out[lowering_[i].kernel], lowering_[i].field, lowering_[i].values.at(v));
  }
  return out;
}

std::vector<std::string> SearchSpace::changed_genes(const Genome& genome) const {
  std::vector<std::string> out;
  for (uint32_t g : differing_genes(genomes_, genome, greedy_)) {
    if (const LoweringGene* lg = lowering_gene(g)) {
      out.push_back(fmt::format("{} of {}: {} -> {}", field_name(lg->field), lg->label,
                                value_str(lg->field, lg->values[greedy_[g]]),
                                value_str(lg->field, lg->values[genome[g]])));
    } else {
      out.push_back(fmt::format("e-class c{} of region {}: {} -> {}", genomes_.gene(g).cls.value,
                                genomes_.gene(g).region, describe(g, greedy_[g]), describe(g, genome[g])));
    }
  }
  return out;
}

std::vector<LoweringGene> gemm_lowering_genes(const Graph& program, const target::NpuConfig& config,
                                              const lower::LowerOptions& options) {
  lower::LowerOptions timed = options;
  timed.choice = nullptr;
  if (!timed.tile_cycles) timed.tile_cycles = sim::tile_timer(config);
  std::vector<LoweringGene> out;
  std::set<std::string, std::less<>> seen;
  const int64_t R = config.systolic.rows;
  for (NodeId id : program.topo_order()) {
    const Node& node = program.node(id);
    if (node.op != Op::Gemm) continue;
    std::string key = kernel_key(program, id);
    if (!seen.insert(key).second) continue;
    const Graph alone = SimulatedCycles::kernel_alone(program, id);
    lower::Lowered lowered;
    try {
      lowered = lower::to_npu(alone, config, timed);
    } catch (const Error&) {
      continue;  // a kernel the lowering refuses alone has no choices to offer
    }
    std::string tile;
    int split = 1;
    for (const lower::KernelInfo& k : lowered.report.per_kernel)
      if (k.kind == "gemm" && !k.tile.empty()) {
        tile = k.tile;
        split = k.core_split;
      }
    const auto [TM, TN, TK] = parse_tile(tile);
    if (TM == 0) continue;
    const Shape& os = node.shape;
    const int64_t M = os[os.size() - 2], N = os[os.size() - 1];
    const Shape as = program.edge_type(node.inputs[0]).shape;
    const int64_t K = as.back();
    const int64_t unit = std::min(N, config.systolic.cols * config.systolic.arrays);
    // Named by its first node in the greedy program (two GEMMs of one shape
    // may differ in their prologues or epilogue).
    const std::string label =
        fmt::format("gemm %{} {} (M {} K {} N {}, tuned {})", id.value, shape_str(os), M, K, N, tile);
    auto gene = [&](LoweringGene::Field f, std::vector<int64_t> values, int64_t tuned) {
      std::vector<int64_t> vs{0};
      for (int64_t v : values)
        if (v > 0 && v != tuned && std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
      if (vs.size() > 1) out.push_back(LoweringGene{key, label, f, std::move(vs)});
    };
    auto clamp_m = [&](int64_t v) { return std::min(v, M); };
    gene(LoweringGene::Field::TileM, {TM / 2 >= 8 ? TM / 2 : 0, TM < M ? clamp_m(TM * 2) : 0}, TM);
    auto clamp_n = [&](int64_t v) { return v < unit ? 0 : std::min(N, (v + unit - 1) / unit * unit); };
    gene(LoweringGene::Field::TileN, {clamp_n(TN / 2), TN < N ? clamp_n(TN * 2) : 0, TN < N ? clamp_n(TN * 4) : 0}, TN);
    const int64_t kmax = K <= R ? K : (K + R - 1) / R * R;
    auto clamp_k = [&](int64_t v) { return K <= R || v < R ? 0 : std::min(kmax, (v + R - 1) / R * R); };
    gene(LoweringGene::Field::TileK,
         {clamp_k(TK / 2), TK < kmax ? clamp_k(TK * 2) : 0, TK < kmax ? clamp_k(TK * 4) : 0}, TK);
    gene(LoweringGene::Field::Slots, {1, 2, 3}, 0);
    const int64_t MT = (M + TM - 1) / TM, NB = (N + TN - 1) / TN;
    if (MT > 1 && NB > 1) gene(LoweringGene::Field::Order, {2}, 0);
    if (config.cores > 1 && options.multi_core) gene(LoweringGene::Field::Cores, {1, 2}, split > 1 ? 2 : 1);
  }
  return out;
}

}  // namespace spool::search
