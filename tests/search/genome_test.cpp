// Genomes over a saturated HLIR e-graph: validity, cycle repair, random
// genomes, mutation and crossover keep validity, terms follow the choices,
// the greedy genome is what the Extractor picks, hashing and fingerprints.

#include <spool/egraph/extract.hpp>
#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/search/genome.hpp>
#include <spool/search/space.hpp>

#include <doctest/doctest.h>

#include <spool/models/llama.hpp>

#include "support/allclose.hpp"

#include <set>

using namespace spool;
using namespace spool::search;

namespace {

// neg(neg(x + w)) * w + x * w: with the algebra rules, x + w holds
// neg(neg(x + w)) (a cycle through its own negation), and add/mul classes
// hold both argument orders.
Graph small_graph() {
  Graph g("small");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor w = weight(g, "w", DType::F32, {4, 8});
  output("y", (-(-(x + w))) * w + x * w);
  return g;
}

compile::Options algebra() {
  compile::Options o;
  o.roll = false;
  o.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/algebra.rules"};
  return o;
}

void check_same_outputs(const Graph& reference, const Graph& program) {
  const interp::Env env = interp::random_inputs(reference, 5);
  const auto want = interp::run(reference, env);
  CHECK(test::allclose(interp::run(program, env), want, {.stol = 1e-6}));
}

}  // namespace

TEST_CASE("the gene table: every reachable class once, candidates with acyclic terms") {
  const Graph g = small_graph();
  const compile::Saturated sat = compile::saturate(g, algebra());
  REQUIRE(sat.regions.size() == 1);
  const compile::RegionEGraph& region = sat.regions[0];
  const GenomeSpace space({search::GenomeRegion{region.egraph.get(), region.roots, {}}});
  CHECK(space.num_genes() > 4);
  CHECK(space.num_choice_genes() >= 3);  // the add and mul classes at least
  std::set<uint32_t> classes;
  for (size_t i = 0; i < space.num_genes(); ++i) {
    classes.insert(space.gene(i).cls.value);
    CHECK(space.gene(i).count >= 1);
    CHECK(space.gene(i).safe < space.gene(i).count);
    CHECK(space.gene_of(0, space.gene(i).cls) == std::optional<uint32_t>(static_cast<uint32_t>(i)));
  }
  CHECK(classes.size() == space.num_genes());
  CHECK(space.root_genes(0).size() == 1);
  CHECK(space.valid(space.safe()));
}

TEST_CASE("a genome choosing a cycle is invalid, and repair breaks the cycle") {
  const Graph g = small_graph();
  const compile::Saturated sat = compile::saturate(g, algebra());
  REQUIRE(sat.regions.size() == 1);
  const compile::RegionEGraph& region = sat.regions[0];
  const GenomeSpace space({search::GenomeRegion{region.egraph.get(), region.roots, {}}});
  // Find a gene whose candidates include a `neg` node whose child's class
  // in turn holds a `neg` back to it (x + w <-> neg(x + w)).
  const egraph::OpId neg = region.lang->op(Op::Neg);
  Genome genome = space.safe();
  bool planted = false;
  for (size_t a = 0; a < space.num_genes() && !planted; ++a)
    for (uint32_t ca = 0; ca < space.gene(a).count && !planted; ++ca) {
      if (region.egraph->node(space.node(a, ca)).op != neg) continue;
      const uint32_t b = space.children(a, ca)[0];
      for (uint32_t cb = 0; cb < space.gene(b).count; ++cb)
        if (region.egraph->node(space.node(b, cb)).op == neg && space.children(b, cb)[0] == a) {
          // Make both reachable: choose the cycle in both classes.
          genome[a] = ca;
          genome[b] = cb;
          planted = true;
          break;
        }
    }
  REQUIRE(planted);
  // The cycle is reachable only if a or b is; choose it in every gene that can reach it
  // by walking from the root with the safe genome: the safe genome reaches x + w.
  const std::string why = space.check(genome);
  CHECK(why.find("cycle") != std::string::npos);
  Genome repaired = genome;
  CHECK(space.repair(repaired) >= 1);
  CHECK(space.check(repaired).empty());
  // Out-of-range choices are invalid and repaired too.
  Genome bad = space.safe();
  bad[space.root_genes(0)[0]] = 1000;
  CHECK(space.check(bad).find("chooses candidate 1000") != std::string::npos);
  CHECK(space.repair(bad) == 1);
  CHECK(space.valid(bad));
  Genome short_genome(2, 0);
  CHECK(space.check(short_genome).find("genes") != std::string::npos);
}

TEST_CASE("random genomes, mutation and crossover stay valid and compute the same outputs") {
  const Graph g = small_graph();
  const compile::Saturated sat = compile::saturate(g, algebra());
  REQUIRE(sat.regions.size() == 1);
  const SearchSpace search = search_space(sat);
  const GenomeSpace& space = search.genomes();
  Rng rng(7);
  std::set<uint64_t> seen;
  std::set<uint64_t> programs;
  Genome current = space.random(rng);
  for (int i = 0; i < 200; ++i) {
    const Genome r = space.random(rng);
    REQUIRE(space.check(r) == "");
    const Genome m = space.mutate(current, rng);
    REQUIRE(space.check(m) == "");
    // A mutation changes the reachable choices (this space always has a second candidate).
    CHECK(space.hash(m) != space.hash(current));
    const Genome c = space.crossover(r, m, rng);
    REQUIRE(space.check(c) == "");
    current = m;
    seen.insert(space.hash(r));
    if (i % 20 == 0) {
      const Graph p = search.program(r);
      check_same_outputs(g, p);
      programs.insert(program_fingerprint(p));
    }
  }
  CHECK(seen.size() > 10);  // random genomes explore the space
  CHECK(programs.size() > 1);
}

TEST_CASE("the greedy genome builds compile's greedy term; hashes and fingerprints") {
  const Graph g = small_graph();
  const compile::Saturated sat = compile::saturate(g, algebra());
  REQUIRE(sat.regions.size() == 1);
  const compile::RegionEGraph& region = sat.regions[0];
  const SearchSpace search = search_space(sat);
  const GenomeSpace& space = search.genomes();
  const std::vector<egraph::Term> terms = space.terms(search.greedy());
  REQUIRE(terms.size() == 1);
  CHECK(terms[0] == compile::extract_greedy(region, *compile::extraction_cost(region)));
  // from_terms inverts terms(): an Extractor's term under another cost too.
  const egraph::AstSize size;
  const egraph::Extractor extractor(*region.egraph, size);
  const egraph::Term by_size = extractor.extract(region.roots).term;
  const egraph::Term back[] = {by_size};
  CHECK(space.terms(space.from_terms(back))[0] == by_size);
  CHECK(space.valid(search.greedy()));

  // Genes the roots do not reach do not change the hash; normalize zeroes them.
  Genome a = search.greedy();
  const std::vector<uint8_t> reach = space.reachable(a);
  Genome b = a;
  size_t unreachable = 0;
  for (size_t i = 0; i < space.num_genes(); ++i)
    if (!reach[i] && space.gene(i).count > 1) {
      b[i] = space.gene(i).count - 1;
      ++unreachable;
    }
  CHECK(space.hash(a) == space.hash(b));
  space.normalize(b);
  Genome an = a;
  space.normalize(an);
  CHECK(an == b);
  // Differing genes of two genomes are reachable in one of them.
  Rng rng(3);
  const Genome r = space.random(rng);
  for (uint32_t d : differing_genes(space, a, r)) CHECK((reach[d] || space.reachable(r)[d]));

  // The fingerprint ignores node ids and duplicates: the same program built
  // twice (and compacted) has one fingerprint; a different one another.
  const Graph p = search.program(a);
  CHECK(program_fingerprint(p) == program_fingerprint(compacted(p)));
  Genome other = a;
  bool differs = false;
  for (int i = 0; i < 50 && !differs; ++i) {
    other = space.mutate(other, rng);
    differs = print_graph(compacted(cse(search.program(other)))) != print_graph(compacted(cse(p)));
  }
  REQUIRE(differs);
  CHECK(program_fingerprint(search.program(other)) != program_fingerprint(p));
}

TEST_CASE("several regions: one genome across them, greedy is compile's program, random genomes build") {
  models::LlamaConfig config = models::LlamaConfig::tiny();
  config.layers = 6;  // more trips than the unroll union keeps: the body gets a region of its own
  const Graph g = models::build_llama(config, models::Phase::prefill(8));
  compile::Options o;
  o.rule_files = {std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules"};
  const compile::Saturated sat = compile::saturate(g, o);
  REQUIRE(sat.regions.size() >= 2);
  const SearchSpace search = search_space(sat);
  const GenomeSpace& space = search.genomes();
  CHECK(space.num_regions() == sat.regions.size());
  std::set<uint32_t> regions;
  for (size_t i = 0; i < space.num_genes(); ++i) regions.insert(space.gene(i).region);
  CHECK(regions.size() == sat.regions.size());
  for (size_t r = 0; r < sat.regions.size(); ++r) CHECK(space.root_genes(r).size() == sat.regions[r].roots.size());
  // The greedy genome's program is the one compile extracts.
  const compile::Compiled compiled = compile::run(g, o);
  CHECK(compacted(cse(search.program(search.greedy()))) == compacted(cse(compiled.program)));
  Rng rng(2);
  for (int i = 0; i < 5; ++i) {
    const Genome r = space.random(rng);
    REQUIRE(space.valid(r));
    check_same_outputs(g, search.program(r));
  }
}
