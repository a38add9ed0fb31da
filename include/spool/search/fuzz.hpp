#pragma once
// search::fuzz: proves, genome by genome, that the programs an e-graph can
// produce compute what the model computes.
//
// Random valid genomes are drawn, each program is built and checked against
// the reference interpreter's outputs for the HLIR (on the interpreter, or
// lowered to NPU kernels and run in functional simulation). The first
// failing genome is shrunk by delta debugging toward the greedy genome to a
// minimal set of choices that still fails; the report names those choices
// with the rules that created their e-nodes, and the first kernel of the
// shrunk program whose value matches no value of the reference.

#include <spool/interp/interp.hpp>
#include <spool/search/space.hpp>
#include <spool/target/npu.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace spool::search {

struct CheckResult {
  bool ok = true;
  double error = 0;     // largest error relative to the output's scale
  std::string message;  // why it failed: an output and its error, or the text of the exception
};
// Checks one program lowered with the given choices (the genome's lowering
// genes; a check that does not lower ignores them); thread-safe.
using ProgramCheck = std::function<CheckResult(const Graph& program, const LoweringChoices& lowering)>;

// The reference: the HLIR's outputs on seeded random inputs.
struct Reference {
  Graph hlir;
  interp::Env inputs;
  std::map<std::string, interp::HostTensor> outputs;
};
Reference make_reference(const Graph& hlir, uint64_t input_seed);

// Runs the program (LLIR) on the reference interpreter.
ProgramCheck interpreter_check(const Reference& reference, double tolerance);
// Lowers the program to NPU kernels (with the genome's lowering choices)
// and runs the functional simulator.
ProgramCheck simulator_check(const Reference& reference, const target::NpuConfig& config, double tolerance);

struct FuzzOptions {
  size_t genomes = 100;  // distinct genomes to check (fewer if the space has fewer)
  uint64_t seed = 1;
  int threads = 0;       // 0: TBB's default; the report never depends on it
  bool shrink = true;
  double tolerance = 1e-5;  // of the divergence search
  // When the check lowers and simulates: the config, so that a program
  // whose LLIR is right on the interpreter is searched kernel by kernel for
  // the first one that goes wrong when lowered (first_lowered_divergence).
  std::optional<target::NpuConfig> lowered_config;
};

struct FuzzFailure {
  Genome genome;                // the first failing genome drawn (in draw order)
  CheckResult check;
  std::vector<uint32_t> genes;  // a minimal set of genes whose choices, taken into the greedy genome, fail
  Genome minimal;               // that genome
  CheckResult minimal_check;
  std::string divergence;       // the first kernel of the minimal program that diverges, or why none was found
  size_t shrink_checks = 0;     // programs checked while shrinking
};

struct FuzzReport {
  size_t genomes = 0;   // distinct genomes checked (the greedy one included)
  size_t programs = 0;  // distinct programs checked
  size_t failures = 0;  // genomes whose program failed
  double max_error = 0; // over the programs that ran
  std::optional<FuzzFailure> first;

  bool ok() const { return failures == 0; }
  // A few lines; a failure lists the minimal choices with their rules.
  std::string to_text(const SearchSpace& space) const;
};

FuzzReport fuzz(const SearchSpace& space, const Reference& reference, const ProgramCheck& check,
                const FuzzOptions& options = {});

// `toward` with the choices of `genes` taken from `from`, repaired (those
// genes kept where the repair can) and normalized.
Genome blend(const GenomeSpace& space, const Genome& toward, const Genome& from, std::span<const uint32_t> genes);

// Delta debugging (ddmin) over the genes where `failing` differs from
// `toward`: a minimal set S such that blend(toward, failing, S) still fails
// (removing any one gene of S makes it pass). `fails` is called with blended
// genomes; `checks` counts the calls.
std::vector<uint32_t> shrink(const GenomeSpace& space, const Genome& failing, const Genome& toward,
                             const std::function<bool(const Genome&)>& fails, size_t* checks = nullptr);

// Where `program` goes wrong, on the reference inputs: the first node (in
// topological order) whose value is close to no value of
// `reference_programs` nor of the HLIR, and the first such node that is one
// of `suspects` (an op and attribute: the e-nodes of the shrunk choices). A
// new value that is right (a negation a rewrite introduced) also matches
// nothing, which is why the suspects are reported apart. nullopt if every
// value has a match; otherwise a line or two of the program's text.
struct Suspect {
  Op op;
  Attr attr;
};
std::optional<std::string> first_divergence(const Graph& program, const Reference& reference,
                                            std::span<const Graph> reference_programs,
                                            std::span<const Suspect> suspects, double tolerance);

// The first kernel node (in topological order) of `program` that computes
// another value when lowered and run in functional simulation alone, on the
// interpreter's values of its inputs, than the interpreter computes for it
// (or that cannot be lowered); nullopt if every kernel agrees. Returns its
// text line and the error.
std::optional<std::string> first_lowered_divergence(const Graph& program, const Reference& reference,
                                                    const target::NpuConfig& config, double tolerance);

}  // namespace spool::search
