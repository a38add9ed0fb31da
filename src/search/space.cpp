// A model's search space: saturation of the rolled graph in one e-graph, the
// greedy genome, and genome -> term -> graph -> unrolled program.

#include <spool/search/space.hpp>

#include <spool/roll/roll.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/support/error.hpp>

namespace spool::search {

SaturatedHlir saturate_hlir(const Graph& hlir, const SaturateOptions& options) {
  SaturatedHlir out;
  const Graph rolled = options.roll ? roll::auto_roll(hlir).graph : hlir;
  out.lang = std::make_unique<egraph::hlir::HlirLanguage>();
  out.egraph = egraph::hlir::make_egraph(*out.lang);
  out.roots = egraph::hlir::add_graph(*out.egraph, *out.lang, rolled);
  for (const Output& o : rolled.outputs()) out.output_names.push_back(o.name);
  out.egraph->rebuild();
  for (const std::string& path : options.rule_files) {
    Result<rules::RuleFile> file = rules::load_rule_file(path);
    if (!file) throw Error(file.error().render());
    const egraph::Registry registry;
    Result<std::vector<egraph::RuleSet>> sets =
        rules::compile_rules(file.value(), out.lang->language(), registry, out.lang->parse_options());
    if (!sets) throw Error(sets.error().render());
    egraph::Runner runner(options.runner);
    runner.run(*out.egraph, sets.value(), rules::schedule_of(file.value()));
  }
  if (options.extra_rules) {
    const std::vector<egraph::Rule> extra = options.extra_rules(*out.lang);
    egraph::Runner runner(options.runner);
    runner.run(*out.egraph, extra);
  }
  if (!out.egraph->clean()) out.egraph->rebuild();
  return out;
}

std::string SearchSpace::describe(size_t g, uint32_t choice) const {
  const GenomeSpace::Gene& gene = genomes_.gene(g);
  const egraph::EGraph& graph = *genomes_.region(gene.region).egraph;
  return graph.node_str(genomes_.node(g, choice));
}

SearchSpace search_space(const SaturatedHlir& saturated, const egraph::CostFunction& greedy_cost) {
  GenomeSpace genomes({Region{saturated.egraph.get(), saturated.roots}});
  const egraph::Extractor extractor(*saturated.egraph, greedy_cost);
  const egraph::Extractor* extractors[] = {&extractor};
  Genome greedy = genomes.greedy(extractors);
  const SaturatedHlir* s = &saturated;
  ProgramBuilder build = [s](std::span<const egraph::Term> terms) {
    SPOOL_ASSERT(terms.size() == 1, "one term per region");
    return roll::unroll(egraph::hlir::to_graph(*s->lang, terms[0], s->output_names));
  };
  return SearchSpace(std::move(genomes), std::move(greedy), std::move(build));
}

}  // namespace spool::search
