#pragma once
// The search space of one compile: the saturated regions of a model
// (spool::saturate), the genome that compile's greedy extraction picks, and
// the way from a genome to the unrolled kernel-level program (LLIR) through
// compile::Saturated::program.

#include <spool/compile/compile.hpp>
#include <spool/lower/lower.hpp>
#include <spool/search/genome.hpp>
#include <spool/target/npu.hpp>

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spool::search {

// Terms (one per region) -> the unrolled kernel-level program.
using ProgramBuilder = std::function<Graph(std::span<const egraph::Term>)>;

// The lowering's choices for the kernels of a program, by kernel key
// (kernel_key: the text of the kernel alone); a kernel not named takes the
// default choice.
using LoweringChoices = std::map<std::string, lower::KernelChoice, std::less<>>;

// The key of kernel node `id` of `program`: the text of its one-node
// program (SimulatedCycles::kernel_alone), equal for the same kernel in any
// layer and any program.
std::string kernel_key(const Graph& program, NodeId id);

// The choices of `choices` for the kernels `program` has (the rest
// dropped): two genomes whose programs are equal and whose choices agree on
// those kernels lower to the same NPU program.
LoweringChoices used_choices(const Graph& program, const LoweringChoices& choices);

// A program's fingerprint combined with the choices it is lowered with
// (used_choices): the identity of what the search measures.
uint64_t with_lowering(uint64_t program_fingerprint, const LoweringChoices& used);

// Lowering options that give every kernel of a graph its choice.
lower::LowerOptions with_choices(lower::LowerOptions options, const LoweringChoices& choices);

// A lowering gene: one field of the KernelChoice of one distinct kernel,
// with the values it can take (values[0] == 0: the lowering's own choice).
struct LoweringGene {
  enum class Field : uint8_t { TileM, TileN, TileK, Slots, Order, Cores };
  std::string kernel;  // kernel_key
  std::string label;   // "gemm %403 [512,4096] (M 512 K 4096 N 4096, tuned m512 n512 k1024)"
  Field field = Field::TileM;
  std::vector<int64_t> values;
};
const char* field_name(LoweringGene::Field field);

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

  // Lowering genes, appended to the genome as free genes (the greedy genome
  // takes their default, candidate 0). Returns the index of the first.
  uint32_t add_lowering_genes(std::vector<LoweringGene> genes);
  size_t num_lowering_genes() const { return lowering_.size(); }
  // The lowering gene of genome gene `g`, or null for an e-graph gene.
  const LoweringGene* lowering_gene(size_t g) const {
    return g >= first_lowering_ && g - first_lowering_ < lowering_.size() ? &lowering_[g - first_lowering_] : nullptr;
  }
  // The lowering choices of a genome (the kernels whose genes all take
  // their default are not named).
  LoweringChoices lowering(const Genome& genome) const;
  // "gene: greedy -> chosen" for every gene where `genome` differs from the
  // greedy genome (among the genes either reaches), in gene order.
  std::vector<std::string> changed_genes(const Genome& genome) const;

 private:
  GenomeSpace genomes_;
  Genome greedy_;
  ProgramBuilder build_;
  std::vector<const hlir::HlirLanguage*> languages_;
  std::vector<std::shared_ptr<const egraph::CostFunction>> costs_;
  std::vector<LoweringGene> lowering_;
  size_t first_lowering_ = SIZE_MAX;
};

// The space of a saturated model; the greedy genome is what compile extracts
// (extract_greedy over all regions). `saturated` must outlive the space.
SearchSpace search_space(const compile::Saturated& saturated);

// The lowering genes of the distinct GEMM kernels of `program` (the greedy
// program, in canonical form), seeded with the tile tuner's choice: each
// kernel is lowered alone with `options` and its tuned tile read back; each
// gene offers the tuned tile's rows, columns or k halved, doubled (k and
// columns also quadrupled), two or three operand slots, the other loop order
// (with several m and column blocks) and, on a config of several cores, the
// other placement. A gene with no value but the default is left out.
std::vector<LoweringGene> gemm_lowering_genes(const Graph& program, const target::NpuConfig& config,
                                              const lower::LowerOptions& options);

}  // namespace spool::search
