#pragma once
// The search space of one compile: the saturated regions of a model
// (spool::saturate), the genome that compile's greedy extraction picks, and
// the way from a genome to the unrolled kernel-level program (LLIR) through
// compile::Saturated::program.

#include <spool/compile/compile.hpp>
#include <spool/search/genome.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spool::search {

// Terms (one per region) -> the unrolled kernel-level program.
using ProgramBuilder = std::function<Graph(std::span<const egraph::Term>)>;

class SearchSpace {
 public:
  // `costs[r]` prices the nodes of region r for estimate() (null: every
  // node costs 1).
  SearchSpace(GenomeSpace genomes, Genome greedy, ProgramBuilder build,
              std::vector<const hlir::HlirLanguage*> languages,
              std::vector<std::shared_ptr<const egraph::CostFunction>> costs = {})
      : genomes_(std::move(genomes)), greedy_(std::move(greedy)), build_(std::move(build)),
        languages_(std::move(languages)), costs_(std::move(costs)) {}

  const GenomeSpace& genomes() const { return genomes_; }
  const Genome& greedy() const { return greedy_; }
  // The program of a valid genome. Thread-safe when the builder is. Throws
  // spool::Error when the terms do not make a program.
  Graph program(const Genome& genome) const { return build_(genomes_.terms(genome)); }
  // "op[attr](c1 c2)  (from rule 'name' (file:line))" for candidate `choice`
  // of gene `g`: the node and the rule that created it ("input" for the
  // original graph's nodes).
  std::string describe(size_t g, uint32_t choice) const;
  // The HLIR language of region `r` (its attributes).
  const hlir::HlirLanguage& language(size_t r) const { return *languages_.at(r); }
  // The analytic cost of a valid genome: every chosen node reachable from
  // the roots once, at its own cost (the extraction cost's DAG cost). A
  // region's nodes count once however many times the region or its loop
  // runs, so it ranks genomes of one space, nothing more.
  double estimate(const Genome& genome) const;

 private:
  GenomeSpace genomes_;
  Genome greedy_;
  ProgramBuilder build_;
  std::vector<const hlir::HlirLanguage*> languages_;
  std::vector<std::shared_ptr<const egraph::CostFunction>> costs_;
};

// The space of a saturated model; the greedy genome is what compile extracts
// (extract_greedy over all regions). `saturated` must outlive the space.
SearchSpace search_space(const compile::Saturated& saturated);

}  // namespace spool::search
