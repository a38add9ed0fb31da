// The fuzzing harness: a correct rule set passes; a planted rule that is
// wrong for one e-node choice is caught, shrunk to exactly that choice,
// named with the rule that made it, and localised to its kernel.

#include <spool/ir/tensor.hpp>
#include <spool/search/fuzz.hpp>

#include <doctest/doctest.h>

#include <fstream>

using namespace spool;
using namespace spool::search;

namespace {

// exp2(x) * w + (x + w) * w: the algebra rules give the adds and muls two
// argument orders each, so many genomes exist besides the planted choice.
Graph small_model() {
  Graph g("planted");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor w = weight(g, "w", DType::F32, {4, 8});
  output("y", exp2(x) * w + (x + w) * w);
  return g;
}

// A rule file whose one rule is wrong: exp2(x) is not exp2(-x). It only
// matters to programs that choose the node it adds.
std::string planted_rule_file() {
  const std::string path = std::string(SPOOL_BINARY_DIR) + "/tests/search/planted.rules";
  std::ofstream(path) << "(ruleset planted)\n"
                         "; Wrong on purpose: the fuzz test must catch it.\n"
                         "(rewrite planted-wrong (exp2 ?x) (exp2 (neg ?x)) :ruleset planted)\n";
  return path;
}

compile::Options options_with(std::vector<std::string> files) {
  compile::Options o;
  o.roll = false;
  o.rule_files = std::move(files);
  return o;
}

const std::string kAlgebra = std::string(SPOOL_SOURCE_DIR) + "/rules/algebra.rules";

}  // namespace

TEST_CASE("fuzz: every genome of the exact algebra rules computes the model") {
  const Graph g = small_model();
  const compile::Saturated sat = compile::saturate(g, options_with({kAlgebra}));
  const SearchSpace space = search_space(sat);
  const Reference ref = make_reference(g, 3);
  FuzzOptions o;
  o.genomes = 40;
  const FuzzReport r = fuzz(space, ref, interpreter_check(ref, 1e-5), o);
  CHECK(r.ok());
  CHECK(r.genomes > 10);
  CHECK(r.programs > 10);
  CHECK(!r.first.has_value());
  CHECK(r.to_text(space).find("0 failed") != std::string::npos);
}

TEST_CASE("fuzz: a planted wrong rule is caught and shrunk to its one choice") {
  const Graph g = small_model();
  const compile::Saturated sat = compile::saturate(g, options_with({kAlgebra, planted_rule_file()}));
  const SearchSpace space = search_space(sat);
  const Reference ref = make_reference(g, 3);
  // The greedy program does not use the planted node (it is no cheaper).
  const ProgramCheck check = interpreter_check(ref, 1e-5);
  REQUIRE(check(space.program(space.greedy()), {}).ok);

  FuzzOptions o;
  o.genomes = 40;
  o.threads = 1;
  const FuzzReport r = fuzz(space, ref, check, o);
  CHECK_FALSE(r.ok());
  CHECK(r.failures > 0);
  CHECK(r.failures < r.genomes);  // wrong only for some choices
  REQUIRE(r.first.has_value());
  const FuzzFailure& f = *r.first;
  CHECK_FALSE(f.check.ok);
  CHECK(f.check.message.find("output 'y' differs") != std::string::npos);
  // Shrunk to exactly one choice: the planted node, in the class of exp2(x).
  REQUIRE(f.genes.size() == 1);
  const uint32_t gene = f.genes[0];
  const egraph::EGraph& eg = *sat.regions[0].egraph;
  const egraph::NodeId chosen = space.genomes().node(gene, f.minimal[gene]);
  CHECK(eg.node_origin(chosen).find("planted-wrong") != std::string::npos);
  CHECK(eg.node(chosen).op == sat.regions[0].lang->op(Op::Exp2));
  CHECK_FALSE(f.minimal_check.ok);
  // The blend of greedy with that one choice is the minimal genome; without it the program passes.
  CHECK(f.minimal == blend(space.genomes(), space.greedy(), f.genome, f.genes));
  CHECK(check(space.program(blend(space.genomes(), space.greedy(), f.genome, {})), {}).ok);
  // The first diverging kernel is the exp2 of the negation.
  CHECK(f.divergence.find("exp2") != std::string::npos);
  const std::string text = r.to_text(space);
  CHECK(text.find("shrunk     to 1 choice differing from greedy") != std::string::npos);
  CHECK(text.find("rule 'planted-wrong'") != std::string::npos);
  MESSAGE(text);

  // The report does not depend on the thread count.
  o.threads = 2;
  const FuzzReport r2 = fuzz(space, ref, check, o);
  CHECK(r2.failures == r.failures);
  REQUIRE(r2.first.has_value());
  CHECK(r2.first->genome == f.genome);
  CHECK(r2.first->genes == f.genes);
}

TEST_CASE("shrink: ddmin finds the one gene that matters among many") {
  const Graph g = small_model();
  const compile::Saturated sat = compile::saturate(g, options_with({kAlgebra}));
  const SearchSpace space = search_space(sat);
  const GenomeSpace& gs = space.genomes();
  // A genome differing from greedy in several genes; "fails" when a chosen
  // gene keeps the failing genome's choice.
  Rng rng(11);
  Genome failing = space.greedy();
  std::vector<uint32_t> diff;
  for (int i = 0; i < 50 && diff.size() < 3; ++i) {
    failing = gs.mutate(failing, rng);
    diff = differing_genes(gs, failing, space.greedy());
  }
  REQUIRE(diff.size() >= 3);
  const uint32_t culprit = diff[diff.size() / 2];
  size_t checks = 0;
  const std::vector<uint32_t> s = shrink(
      gs, failing, space.greedy(), [&](const Genome& x) { return x[culprit] == failing[culprit]; }, &checks);
  CHECK(s == std::vector<uint32_t>{culprit});
  CHECK(checks > 0);
}
