#pragma once
// spool::compile: the pipeline from an HLIR graph to a kernel-level program,
// as one linear function:
//
//   roll::auto_roll        repeated layers -> one body between loop markers
//   split          the rolled graph cut into regions (before/after a
//                          loop, each loop body), identical regions once;
//                          run beside the roll's last search
//   saturation             one e-graph per distinct region, in parallel (TBB)
//   extraction             one term per region (greedy here; search elsewhere)
//   stitch + roll::unroll  the region terms joined, loops cloned back out
//
// `saturate` and `Saturated::program` are the two halves around extraction,
// so that a search can choose the e-nodes itself. Lowering to NPU kernels and
// simulation come after it.

#include <spool/compile/region.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/hlir/language.hpp>
#include <spool/hlir/cost.hpp>
#include <spool/egraph/runner.hpp>
#include <spool/ir/graph.hpp>
#include <spool/roll/roll.hpp>
#include <spool/target/npu.hpp>

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace spool::compile {

struct Options {
  bool roll = true;
  // The machine extraction prices kernels for (default: tpuv3's figures);
  // cost_config derives it from a target description.
  hlir::HlirCostConfig cost;
  std::vector<std::string> rule_files;  // empty: no rewriting
  egraph::RunnerConfig runner;          // budgets of each region's e-graph
  // Regions saturated at once (0: TBB's default). Results never depend on it.
  int threads = 0;
  // Loops with at most this many trips stay in their parent region both
  // rolled and unrolled (unioned), so fusions spanning the chain can fire;
  // longer loops get a region of their own. 0 turns the union off.
  int64_t unroll_union_max_trips = 4;
  // false: the whole rolled graph in one e-graph (for comparison; slower).
  bool split_regions = true;
  // Rules in C++, run in every region after the rule files, to saturation
  // (made once per region, for that region's language).
  std::function<std::vector<egraph::Rule>(hlir::HlirLanguage&)> extra_rules;
  // Called after each stage with its name and its result in text form:
  //   hlir      the input graph (HLIR text, ir/text.hpp)
  //   roll      the rolled graph, loop markers included
  //   split     each distinct region's graph (placeholders @in.K for what it reads)
  //   saturate  each region's e-graph: nodes, classes, iterations, stop reason
  //   extract   the extracted program before unrolling (LLIR with loop markers)
  //   unroll    the kernel-level program (LLIR)
  // pipeline::run adds lower (the NPU program, npu/text.hpp) and simulate
  // (the simulator's report). Empty: nothing is printed.
  std::function<void(std::string_view stage, const std::string& text)> print_after;
};

// The stages print_after names, in order.
inline constexpr const char* kStages[] = {"hlir", "roll", "split", "saturate", "extract", "unroll", "lower", "simulate"};

// Wall time per stage. roll_ms holds the split when it runs beside the
// roll's last search (whenever something rolls); saturate_ms holds it
// otherwise.
struct Times {
  double roll_ms = 0, saturate_ms = 0, extract_ms = 0, unroll_ms = 0, total_ms = 0;
};

// The e-graphs of a compile, summed over the distinct regions.
struct EGraphReport {
  size_t egraphs = 0;  // distinct regions saturated
  size_t regions = 0;  // regions of the rolled graph (identical ones counted apart)
  size_t nodes = 0, classes = 0, iterations = 0;
  // The first region (in region order) that stopped on a budget, or saturated.
  egraph::StopReason stop = egraph::StopReason::Saturated;
  // Every saturate step of a rule schedule that stopped at its budget, one
  // line each ("region 0: (saturate (run grow)) stopped at its iter-limit
  // after 30 iterations, +9000 nodes; the steps after it ran").
  std::vector<std::string> budget_stops;
};

struct Report {
  roll::RollReport roll;
  EGraphReport egraph;
  Times times;
};

// The report's JSON keys:
//   {"roll":    {loops, trips, body_nodes, hlir_nodes_before, hlir_nodes_after},
//    "egraph":  {egraphs, regions, nodes, classes, iterations, stop_reason},
//    "compile": {roll_ms, saturate_ms, extract_ms, unroll_ms, total_ms}}
// `spool run` merges these objects into its report.
nlohmann::json to_json(const Report& report);

// A loop with few trips kept in a region both rolled and unrolled. Its
// loop_end nodes share classes with the chain's final states, its
// loop_output nodes with the chain's per-iteration values.
struct UnionedLoop {
  int64_t loop = 0;                          // the loop id inside the region's graph
  std::vector<egraph::ClassId> loop_ends;    // classes holding the loop_end nodes
  std::vector<egraph::ClassId> loop_outputs; // classes holding the loop_output nodes
};

// One distinct region in its own e-graph. Each region has its own language
// (ops are registered in the same order, so OpIds agree across regions;
// AttrIds do not): regions are saturated in parallel, and interning
// attributes into one shared table from several threads would hand out ids
// in an order that depends on the thread count.
struct RegionEGraph {
  std::unique_ptr<hlir::HlirLanguage> lang;
  hlir::HlirCostConfig cost;       // what extraction_cost prices with
  std::unique_ptr<egraph::EGraph> egraph;  // saturated and clean
  std::vector<egraph::ClassId> roots;      // the values other regions read, in order
  // A term may use a unioned loop's rolled form (any of its markers) only if
  // it picks the loop_end node in every one of `loop_ends`: the body's next
  // state is needed to unroll it. Saturated::program throws otherwise.
  std::vector<UnionedLoop> unioned_loops;
  egraph::RunReport saturation;  // iterations summed over the rule files
  // The first of several regions: its extractor under extraction_cost with
  // every placeholder priced as itself, built by its saturation task while
  // the others saturate. extract_greedy's first pass prices no placeholder
  // of the first region (no other region has an extractor yet) and takes
  // this one instead of building it. Null for every other region.
  std::unique_ptr<egraph::CostFunction> unpriced_cost;
  std::unique_ptr<egraph::DagExtractor> unpriced_extractor;
};

// The rolled graph saturated region by region: the input of extraction.
struct Saturated {
  Graph rolled;                 // the HLIR after rolling
  Split split;          // the regions' graphs and where they sit in `rolled`
  std::vector<RegionEGraph> regions;  // one per split.regions entry, same order
  Report report;         // roll, egraph, roll_ms and saturate_ms filled

  // The kernel-level program (no loop markers) built from one term per
  // region, in `regions` order, each with one root per RegionEGraph::roots entry
  // (the Term format of egraph/extract.hpp, AttrIds of that region's
  // language). Throws spool::Error on terms that do not fit.
  Graph program(std::span<const egraph::Term> terms) const;
  // The same before unrolling: the stitched program with its loop markers.
  Graph rolled_program(std::span<const egraph::Term> terms) const;
};

// Rolls (if options.roll), splits, and saturates every distinct region with
// the rules of options.rule_files, in parallel. Throws spool::Error on a bad
// rule file or a graph the pipeline cannot handle.
Saturated saturate(const Graph& hlir, const Options& options = {});

// The cost compile extracts by, for one region's e-graph (HlirCost with the
// region's cost figures).
std::unique_ptr<egraph::CostFunction> extraction_cost(const RegionEGraph& region);

// Greedy extraction of one region under `cost` by DAG cost (each distinct
// node once, egraph::DagExtractor), with the unioned loops made
// consistent (a loop whose rolled form is used with a loop_end left out is
// taken unrolled instead).
egraph::Term extract_greedy(const RegionEGraph& region, const egraph::CostFunction& cost);

// The terms compile extracts: extract_greedy of every region under
// extraction_cost, with each placeholder leaf priced as the value it stands
// for (its DAG cost in the region computing it), as one e-graph for the whole
// graph would price it, so that greedy choices agree with that e-graph's.
std::vector<egraph::Term> extract_greedy(const Saturated& saturated, int threads = 0);

struct Compiled {
  Graph program;  // kernel-level (LLIR), no loop markers
  Report report;
};

// saturate, extract_greedy per region with extraction_cost, program.
Compiled run(const Graph& hlir, const Options& options = {});

// Reads, verifies and compiles `rule_files` into this process's caches, as
// the first compile with these rule files would before its regions start,
// so that the compile finds them ready: a tool calls it on a thread of its
// own beside its first stage (building or reading the model), which runs
// on one thread. A compile that starts while it runs waits for it. Errors
// (a file that does not parse or compile) are left for the compile, which
// reports them; this never throws.
void prepare_rules(const std::vector<std::string>& rule_files) noexcept;

}  // namespace spool::compile
