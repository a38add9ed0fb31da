#pragma once
// Genomes: one e-node chosen per e-class, the unit of the extraction search.
//
// Greedy extraction prices each node alone and misjudges whole programs
// (shared producers, fusions that remove DRAM round trips), so the search
// measures complete programs instead. A genome picks one node for every
// e-class reachable from the roots of every region (a program with several
// e-graphs has one genome made of their genes laid end to end). A genome is
// valid when the choices reachable from the roots form an acyclic graph;
// random, mutated and crossed genomes are repaired into valid ones.

#include <spool/egraph/egraph.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/ir/graph.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spool::search {

// A small deterministic generator (splitmix64): the same seed gives the same
// stream on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return egraph::mix64(state_);
  }
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// A short loop kept both rolled and unrolled in one e-graph (its loop_end and
// loop_output classes also hold the unrolled chain's values). A program may
// use its rolled form (choose any of `markers`) only if every class of `ends`
// is in the program and chooses its marker: the body's next state is needed
// to unroll it.
struct LoopGroup {
  std::vector<egraph::ClassId> ends;
  std::vector<egraph::ClassId> outputs;
  std::vector<egraph::NodeId> markers;  // the loop's marker nodes in the e-graph
};

// One saturated e-graph (clean, not changing while the space is used), the
// classes of its outputs, and its short loops.
struct GenomeRegion {
  const egraph::EGraph* egraph = nullptr;
  std::vector<egraph::ClassId> roots;
  std::vector<LoopGroup> loops;
};

// For every gene of a GenomeSpace, the index of its chosen candidate.
using Genome = std::vector<uint32_t>;

class GenomeSpace {
 public:
  // A gene: an e-class reachable from the roots of its region, with the
  // nodes that can appear in an acyclic term (a node with a child that has
  // no acyclic term is never a candidate).
  struct Gene {
    uint32_t region = 0;
    egraph::ClassId cls;
    uint32_t first = 0;  // candidates are [first, first + count) in the candidate table
    uint32_t count = 0;
    uint32_t safe = 0;   // a candidate whose children are all strictly shallower
  };

  // Throws spool::Error if a root has no acyclic term.
  explicit GenomeSpace(std::vector<GenomeRegion> regions);

  // Free genes, appended after the e-graph's: genes of no e-class and no
  // region (region == kFreeRegion), always reachable, with `counts[i]`
  // candidates that have no children and no node. They carry choices that
  // are not e-nodes (the lowering's, see SearchSpace); candidate 0 is the
  // default. Returns the index of the first. Random genomes, mutation,
  // neighbours, crossover and hashing treat them as any other gene.
  static constexpr uint32_t kFreeRegion = UINT32_MAX;
  uint32_t add_free_genes(std::span<const uint32_t> counts);
  bool is_free(size_t g) const { return genes_[g].region == kFreeRegion; }
  size_t num_free_genes() const { return free_genes_; }

  size_t num_genes() const { return genes_.size(); }
  size_t num_regions() const { return regions_.size(); }
  const GenomeRegion& region(size_t r) const { return regions_[r]; }
  const Gene& gene(size_t g) const { return genes_[g]; }
  // Genes with more than one candidate.
  size_t num_choice_genes() const { return choice_genes_; }
  // The gene of each root of region `r`.
  std::span<const uint32_t> root_genes(size_t r) const { return root_genes_[r]; }
  // The e-node of candidate `choice` of gene `g`, and the genes of its children.
  egraph::NodeId node(size_t g, uint32_t choice) const { return cand_node_[genes_[g].first + choice]; }
  std::span<const uint32_t> children(size_t g, uint32_t choice) const;
  // The gene of a class of region `r`, if it is one.
  std::optional<uint32_t> gene_of(size_t r, egraph::ClassId c) const;

  // The genome choosing, in every gene, the node `pick(region, class)`
  // returns (the first candidate if it is not a candidate), repaired.
  template <typename Pick>
  Genome from_nodes(Pick&& pick) const {
    Genome genome(genes_.size(), 0);
    for (size_t g = 0; g < genes_.size(); ++g) {
      if (is_free(g)) continue;
      const egraph::NodeId want = pick(genes_[g].region, genes_[g].cls);
      for (uint32_t k = 0; k < genes_[g].count; ++k)
        if (node(g, k) == want) genome[g] = k;
    }
    repair(genome);
    return genome;
  }
  // What greedy extraction picks: extractors[r] is region r's extractor.
  Genome greedy(std::span<const egraph::Extractor* const> extractors) const;
  // Every gene on its safe candidate (always valid).
  Genome safe() const;

  // The genome choosing the nodes of `terms` (one per region, as
  // Extractor::extract or compile's greedy extraction builds them); genes the
  // terms do not reach take their first candidate. Throws spool::Error if a
  // term does not fit the e-graph.
  Genome from_terms(std::span<const egraph::Term> terms) const;

  // An empty string when `genome` is valid, else what is wrong with it.
  std::string check(const Genome& genome) const;
  bool valid(const Genome& genome) const { return check(genome).empty(); }
  // Makes `genome` valid with as few changes as the walk finds: a choice out
  // of range becomes the safe one; a cycle is broken by switching the
  // deepest class on it that is not on its safe candidate to it (safe
  // choices strictly decrease the depth, so every cycle has such a class and
  // the repair ends); genes in `keep` are switched only when no other gene
  // on the cycle can be. A short loop used rolled without all its loop_end
  // markers is taken unrolled (every exit class that chose one of its
  // markers takes its first other candidate), as greedy extraction does; if
  // no exit chose a marker, every class that can leaves the loop's markers;
  // failing that, every loop_end class takes its marker. Returns the number
  // of genes changed.
  size_t repair(Genome& genome, std::span<const uint32_t> keep = {}) const;
  // Which genes the roots reach under `genome` (a valid genome).
  std::vector<uint8_t> reachable(const Genome& genome) const;
  // Sets the genes the roots do not reach to their first candidate, so two
  // genomes choosing the same reachable nodes are equal.
  void normalize(Genome& genome) const;
  // A hash of the reachable choices (equal for genomes that normalize equal).
  uint64_t hash(const Genome& genome) const;

  // Uniform random choices, repaired and normalized; a draw the repair
  // leaves invalid (a short loop it cannot make consistent) is redrawn.
  // Throws spool::Error if 64 draws in a row are invalid.
  Genome random(Rng& rng) const;
  // Changes `count` reachable multi-candidate genes to another candidate,
  // repaired, normalized and valid. Returns the genome unchanged when no
  // change gives another valid genome.
  Genome mutate(const Genome& genome, Rng& rng, size_t count = 1) const;
  // Every genome one choice away from `genome` (a valid genome): for each
  // reachable gene with several candidates and each other candidate, the
  // genome with that one change, repaired keeping it where it can be,
  // normalized and valid; in gene then candidate order, without duplicates
  // and without `genome` itself. `changed[i]` is the gene of neighbour i.
  std::vector<Genome> neighbours(const Genome& genome, std::vector<uint32_t>* changed = nullptr) const;
  // Each gene from `a` or `b` with equal odds, repaired and normalized;
  // redrawn when invalid (after 64 draws, `a`).
  Genome crossover(const Genome& a, const Genome& b, Rng& rng) const;

  // The term of every region (its roots in order) under a valid genome.
  std::vector<egraph::Term> terms(const Genome& genome) const;

 private:
  std::vector<GenomeRegion> regions_;
  std::vector<Gene> genes_;
  std::vector<std::vector<uint32_t>> root_genes_;
  std::vector<std::vector<uint32_t>> class_gene_;  // per region, by class id; UINT32_MAX if none
  std::vector<egraph::NodeId> cand_node_;
  std::vector<uint32_t> cand_kids_begin_;  // per candidate, into cand_kids_ (one extra at the end)
  std::vector<uint32_t> cand_kids_;
  std::vector<uint32_t> cand_loop_;  // per candidate: the global loop group it is a marker of, or UINT32_MAX
  struct LoopGenes {
    std::vector<uint32_t> ends, exits;  // genes (exits: ends and outputs)
  };
  std::vector<LoopGenes> loops_;  // global loop groups (over all regions)
  size_t choice_genes_ = 0;
  size_t free_genes_ = 0;

  size_t break_cycles(Genome& genome, std::span<const uint32_t> keep) const;
  // Applies the short-loop rule once; returns the genes changed.
  size_t fix_loops(Genome& genome) const;
  // The loop group whose rule `genome` breaks, or UINT32_MAX.
  uint32_t broken_loop(const Genome& genome, const std::vector<uint8_t>& reach) const;
};

// The genes where `a` and `b` differ among those reachable under `a` or `b`.
std::vector<uint32_t> differing_genes(const GenomeSpace& space, const Genome& a, const Genome& b);

// The form in which the search measures a program: its compacted CSE. Two
// genomes may give programs that differ only in duplicated sub-expressions;
// measured as given, the duplicates would count twice in one of them, and
// the one fingerprint (below) would stand for two different figures.
Graph canonical_program(const Graph& program);

// A structural fingerprint of a program: equal for programs that differ only
// in node ids or duplicated sub-expressions (the hash of the text form of
// its canonical form).
uint64_t program_fingerprint(const Graph& program);
// The same fingerprint of a program already in canonical form.
uint64_t canonical_fingerprint(const Graph& canonical);

}  // namespace spool::search
