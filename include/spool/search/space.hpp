#pragma once
// The search space of one compile: the saturated e-graphs of a model, the
// genome greedy extraction picks, and the way from a genome to the unrolled
// kernel-level program (LLIR).
//
// `saturate_hlir` is the front half of spool::compile (roll, one e-graph for
// the rolled graph, the rule files, then any extra rules given in C++), kept
// here so a space can be built from a model; `program` is the back half
// (term -> graph -> unroll).

#include <spool/egraph/hlir.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/search/genome.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spool::search {

struct SaturateOptions {
  bool roll = true;
  std::vector<std::string> rule_files;
  // Rules in C++ run after the rule files, to saturation (tests plant rules here).
  std::function<std::vector<egraph::Rule>(egraph::hlir::HlirLanguage&)> extra_rules;
  egraph::RunnerConfig runner;
};

// A rolled model saturated in one e-graph.
struct SaturatedHlir {
  std::unique_ptr<egraph::hlir::HlirLanguage> lang;
  std::unique_ptr<egraph::EGraph> egraph;
  std::vector<egraph::ClassId> roots;
  std::vector<std::string> output_names;
};

// Throws spool::Error on a bad rule file.
SaturatedHlir saturate_hlir(const Graph& hlir, const SaturateOptions& options);

// Terms (one per region) -> the unrolled kernel-level program.
using ProgramBuilder = std::function<Graph(std::span<const egraph::Term>)>;

class SearchSpace {
 public:
  SearchSpace(GenomeSpace genomes, Genome greedy, ProgramBuilder build)
      : genomes_(std::move(genomes)), greedy_(std::move(greedy)), build_(std::move(build)) {}

  const GenomeSpace& genomes() const { return genomes_; }
  const Genome& greedy() const { return greedy_; }
  // The program of a valid genome. Thread-safe when the builder is.
  Graph program(const Genome& genome) const { return build_(genomes_.terms(genome)); }
  // "op[attr](c1 c2)" for candidate `choice` of gene `g`, with the rule
  // that created the node ("input" for nodes of the original graph).
  std::string describe(size_t g, uint32_t choice) const;

 private:
  GenomeSpace genomes_;
  Genome greedy_;
  ProgramBuilder build_;
};

// The space of a saturated model; the greedy genome is what an Extractor
// with `greedy_cost` picks. `saturated` must outlive the space.
SearchSpace search_space(const SaturatedHlir& saturated, const egraph::CostFunction& greedy_cost);

}  // namespace spool::search
