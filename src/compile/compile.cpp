// The compile pipeline, top to bottom. Each stage is one call and is logged.

#include <spool/compile/compile.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/egraph/hlir.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/support/error.hpp>

#include <spdlog/spdlog.h>

#include <chrono>

namespace spool {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CompileResult compile(const Graph& hlir, const CompileOptions& options) {
  CompileResult result;
  const auto start = Clock::now();

  // 1. Roll repeated layers.
  auto t = Clock::now();
  Graph rolled = hlir;
  if (options.roll) {
    roll::RollResult r = roll::auto_roll(hlir);
    rolled = std::move(r.graph);
    result.roll = std::move(r.report);
  } else {
    result.roll.hlir_nodes_before = result.roll.hlir_nodes_after = hlir.num_live();
  }
  result.times.roll_ms = ms_since(t);
  spdlog::info("roll: {} loops, {} -> {} nodes in {:.1f} ms", result.roll.loops, result.roll.hlir_nodes_before,
               result.roll.hlir_nodes_after, result.times.roll_ms);

  // 2. Saturate the rolled graph with the rule files' rulesets.
  t = Clock::now();
  egraph::hlir::HlirLanguage lang;
  std::unique_ptr<egraph::EGraph> eg = egraph::hlir::make_egraph(lang);
  const std::vector<egraph::ClassId> roots = egraph::hlir::add_graph(*eg, lang, rolled);
  eg->rebuild();
  for (const std::string& path : options.rule_files) {
    Result<rules::RuleFile> file = rules::load_rule_file(path);
    if (!file) throw Error(file.error().render());
    const egraph::Registry registry;
    Result<std::vector<egraph::RuleSet>> sets =
        rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
    if (!sets) throw Error(sets.error().render());
    egraph::Runner runner(options.runner);
    // One run per rule file, in order; the report keeps the iterations of
    // all of them and the last run's stop reason and sizes.
    const size_t earlier_iterations = result.saturation.iterations;
    result.saturation = runner.run(*eg, sets.value(), rules::schedule_of(file.value()));
    result.saturation.iterations += earlier_iterations;
  }
  result.egraph_nodes = eg->num_nodes();
  result.egraph_classes = eg->num_classes();
  result.times.saturate_ms = ms_since(t);
  spdlog::info("saturate: {} nodes, {} classes in {:.1f} ms", result.egraph_nodes, result.egraph_classes,
               result.times.saturate_ms);

  // 3. Extract the cheapest program.
  t = Clock::now();
  const egraph::AstSize cost;
  const egraph::Extractor extractor(*eg, cost);
  const egraph::Extraction extraction = extractor.extract(roots);
  std::vector<std::string> names;
  for (const Output& o : rolled.outputs()) names.push_back(o.name);
  Graph extracted = egraph::hlir::to_graph(lang, extraction.term, names);
  result.times.extract_ms = ms_since(t);

  // 4. Unroll the loops.
  t = Clock::now();
  result.program = roll::unroll(extracted);
  result.program.verify();
  result.times.unroll_ms = ms_since(t);
  result.times.total_ms = ms_since(start);
  spdlog::info("extract {:.1f} ms, unroll {:.1f} ms: {} nodes", result.times.extract_ms, result.times.unroll_ms,
               result.program.num_live());
  return result;
}

}  // namespace spool
