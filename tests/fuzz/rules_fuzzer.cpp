// libFuzzer target for the rule-file language: any bytes are parsed as a
// rule file, compiled against the HLIR language with the shipped appliers,
// and, when they compile, run on a small graph. Every outcome must be a
// result or a spool::Error diagnostic: no crash, hang or sanitizer report.
// Seeded with rules/*.rules and the test suites' rule files.

#include <spool/hlir/language.hpp>
#include <spool/nn/nn.hpp>
#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

using namespace spool;

namespace {

const Graph& small_graph() {
  static const Graph g = [] {
    Graph graph("fuzz");
    const Tensor x = input(graph, "x", DType::F32, {2, 4});
    const Tensor h =
        nn::silu(nn::linear(x, weight(graph, "w", DType::F32, {4, 4}), weight(graph, "b", DType::F32, {4})));
    output("y", nn::softmax(nn::rms_norm(h, weight(graph, "n", DType::F32, {4})), -1));
    return graph;
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Includes resolve relative to this (non-existent) directory: they fail
  // with a diagnostic, as they should.
  Result<rules::RuleFile> file = rules::parse_rule_text(text, "/nonexistent/fuzz.rules");
  if (!file) return 0;
  hlir::HlirLanguage lang;
  const egraph::Registry& registry = hlir::registry();
  Result<std::vector<egraph::RuleSet>> sets =
      rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  if (!sets) return 0;
  std::unique_ptr<egraph::EGraph> eg = hlir::make_egraph(lang);
  hlir::add_graph(*eg, lang, small_graph());
  eg->rebuild();
  egraph::RunnerConfig config;
  config.iter_limit = 4;
  config.node_limit = 2000;
  config.time_limit_ms = 200;
  try {
    egraph::Runner(config).run(*eg, sets.value(), rules::schedule_of(file.value()));
  } catch (const Error&) {
    // a diagnostic (an applier called with the wrong arguments, a refused merge)
  }
  return 0;
}
