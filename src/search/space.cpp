// A model's search space: the regions of spool::saturate as genome regions
// (with their short loops), compile's greedy extraction as the greedy genome,
// and compile::Saturated::program as the way to the unrolled program.

#include <spool/search/space.hpp>

#include <spool/support/error.hpp>

namespace spool::search {
namespace {

// The marker nodes of loop `loop` in a region's e-graph.
std::vector<egraph::NodeId> loop_markers(const compile::RegionEGraph& region, int64_t loop) {
  std::vector<egraph::NodeId> out;
  const egraph::EGraph& eg = *region.egraph;
  for (egraph::ClassId c : eg.classes())
    for (egraph::NodeId n : eg.class_nodes(c)) {
      const std::optional<Op> op = region.lang->hlir_op(eg.node(n).op);
      if (!op || !is_loop_marker(*op)) continue;
      if (std::get<LoopAttr>(region.lang->payload(eg.node(n).attr).attr).loop == loop) out.push_back(n);
    }
  return out;
}

}  // namespace

std::string SearchSpace::describe(size_t g, uint32_t choice) const {
  if (const LoweringGene* lg = lowering_gene(g)) {
    const int64_t v = lg->values.at(choice);
    return fmt::format("{} {} of {}", field_name(lg->field), v == 0 ? std::string("default") : std::to_string(v),
                       lg->label);
  }
  const GenomeSpace::Gene& gene = genomes_.gene(g);
  const egraph::EGraph& graph = *genomes_.region(gene.region).egraph;
  const egraph::NodeId n = genomes_.node(g, choice);
  return fmt::format("{}  (from {})", graph.node_str(n), graph.node_origin(n));
}

double SearchSpace::estimate(const Genome& genome) const {
  const std::vector<uint8_t> reach = genomes_.reachable(genome);
  double total = 0;
  const double zeros[16] = {};
  for (size_t g = 0; g < genomes_.num_genes(); ++g) {
    if (!reach[g] || genomes_.is_free(g)) continue;
    const uint32_t r = genomes_.gene(g).region;
    const egraph::EGraph& graph = *genomes_.region(r).egraph;
    const egraph::NodeId n = genomes_.node(g, genome[g]);
    const size_t arity = graph.node(n).children.size();
    if (r >= costs_.size() || !costs_[r]) {
      total += 1;
    } else if (arity <= 16) {
      total += costs_[r]->cost(graph, n, std::span<const double>(zeros, arity));
    } else {
      const std::vector<double> many(arity, 0.0);
      total += costs_[r]->cost(graph, n, many);
    }
  }
  return total;
}

SearchSpace search_space(const compile::Saturated& saturated) {
  std::vector<GenomeRegion> regions;
  std::vector<const hlir::HlirLanguage*> languages;
  std::vector<std::shared_ptr<const egraph::CostFunction>> costs;
  for (const compile::RegionEGraph& r : saturated.regions) {
    languages.push_back(r.lang.get());
    GenomeRegion region{r.egraph.get(), r.roots, {}};
    for (const compile::UnionedLoop& u : r.unioned_loops)
      region.loops.push_back(LoopGroup{u.loop_ends, u.loop_outputs, loop_markers(r, u.loop)});
    regions.push_back(std::move(region));
    costs.push_back(compile::extraction_cost(r));
  }
  const std::vector<egraph::Term> greedy_terms = compile::extract_greedy(saturated);
  GenomeSpace genomes(std::move(regions));
  Genome greedy = genomes.from_terms(greedy_terms);
  const compile::Saturated* s = &saturated;
  ProgramBuilder build = [s](std::span<const egraph::Term> terms) { return s->program(terms); };
  return SearchSpace(std::move(genomes), std::move(greedy), std::move(build), std::move(languages), std::move(costs));
}

}  // namespace spool::search
