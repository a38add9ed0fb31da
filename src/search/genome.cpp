// Genomes over saturated e-graphs: the gene table, validity, repair, random
// genomes, mutation, crossover, hashing and terms.
//
// Depths (the smallest height of an acyclic term of each class) decide the
// candidates and the safe choice of every gene: a node whose children all
// have a depth can be part of an acyclic term, and a node whose children are
// all strictly shallower than its class can never close a cycle.

#include <spool/search/genome.hpp>

#include <spool/ir/text.hpp>
#include <spool/support/error.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

namespace spool::search {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint32_t kInf = UINT32_MAX;
// Draws of a random genome or a crossover before giving up.
constexpr int kMaxDraws = 64;

// Classes of `graph` reachable from `roots` through any node, in
// breadth-first discovery order.
std::vector<egraph::ClassId> reachable_classes(const egraph::EGraph& graph, std::span<const egraph::ClassId> roots,
                                               std::vector<uint8_t>& seen) {
  std::vector<egraph::ClassId> order;
  seen.assign(graph.class_id_bound(), 0);
  for (egraph::ClassId r : roots) {
    const egraph::ClassId c = graph.find_const(r);
    if (!seen[c.value]) {
      seen[c.value] = 1;
      order.push_back(c);
    }
  }
  for (size_t i = 0; i < order.size(); ++i)
    for (egraph::NodeId n : graph.class_nodes(order[i]))
      for (egraph::ClassId child : graph.node(n).children) {
        const egraph::ClassId c = graph.find_const(child);
        if (!seen[c.value]) {
          seen[c.value] = 1;
          order.push_back(c);
        }
      }
  return order;
}

// The depth of a node given its children's depths (kInf if any has none).
uint32_t node_depth(const egraph::EGraph& graph, egraph::NodeId n, const std::vector<uint32_t>& depth) {
  uint32_t d = 0;
  for (egraph::ClassId child : graph.node(n).children) {
    const uint32_t cd = depth[graph.find_const(child).value];
    if (cd == kInf) return kInf;
    d = std::max(d, cd);
  }
  return d + 1;
}

}  // namespace

GenomeSpace::GenomeSpace(std::vector<GenomeRegion> regions) : regions_(std::move(regions)) {
  root_genes_.resize(regions_.size());
  class_gene_.resize(regions_.size());
  cand_kids_begin_.push_back(0);
  for (size_t r = 0; r < regions_.size(); ++r) {
    const egraph::EGraph& graph = *regions_[r].egraph;
    SPOOL_ASSERT(graph.clean(), "a genome space needs rebuilt e-graphs");
    std::vector<uint8_t> seen;
    const std::vector<egraph::ClassId> all = reachable_classes(graph, regions_[r].roots, seen);

    // Depths by sweeping to a fixpoint (Bellman-Ford on min of max).
    std::vector<uint32_t> depth(graph.class_id_bound(), kInf);
    for (bool changed = true; changed;) {
      changed = false;
      for (egraph::ClassId c : all)
        for (egraph::NodeId n : graph.class_nodes(c)) {
          const uint32_t d = node_depth(graph, n, depth);
          if (d < depth[c.value]) {
            depth[c.value] = d;
            changed = true;
          }
        }
    }
    for (egraph::ClassId root : regions_[r].roots) {
      const egraph::ClassId c = graph.find_const(root);
      if (depth[c.value] == kInf)
        fail("search: region {} root e-class c{} has no acyclic term", r, c.value);
    }

    // Genes: classes reachable through candidates, numbered in discovery order.
    std::vector<uint32_t>& class_gene = class_gene_[r];
    class_gene.assign(graph.class_id_bound(), kNone);
    const size_t first_gene = genes_.size();
    auto gene_for = [&](egraph::ClassId c) {
      c = graph.find_const(c);
      if (class_gene[c.value] == kNone) {
        class_gene[c.value] = static_cast<uint32_t>(genes_.size());
        genes_.push_back(Gene{static_cast<uint32_t>(r), c, 0, 0, 0});
      }
      return class_gene[c.value];
    };
    for (egraph::ClassId root : regions_[r].roots) root_genes_[r].push_back(gene_for(root));
    for (size_t g = first_gene; g < genes_.size(); ++g) {
      const egraph::ClassId c = genes_[g].cls;
      genes_[g].first = static_cast<uint32_t>(cand_node_.size());
      uint32_t count = 0;
      bool have_safe = false;
      for (egraph::NodeId n : graph.class_nodes(c)) {
        const uint32_t d = node_depth(graph, n, depth);
        if (d == kInf) continue;
        if (!have_safe && d == depth[c.value]) {
          genes_[g].safe = count;
          have_safe = true;
        }
        cand_node_.push_back(n);
        // gene_for may grow genes_: no reference into it is held here.
        for (egraph::ClassId child : graph.node(n).children) cand_kids_.push_back(gene_for(child));
        cand_kids_begin_.push_back(static_cast<uint32_t>(cand_kids_.size()));
        ++count;
      }
      SPOOL_ASSERT(have_safe && count > 0, "gene c{} without a safe candidate", c.value);
      genes_[g].count = count;
      if (count > 1) ++choice_genes_;
    }
  }

  // Short loops: their exit genes and which candidates are their markers.
  cand_loop_.assign(cand_node_.size(), kNone);
  for (size_t r = 0; r < regions_.size(); ++r)
    for (const LoopGroup& group : regions_[r].loops) {
      const uint32_t id = static_cast<uint32_t>(loops_.size());
      LoopGenes lg;
      bool all_ends = true;
      for (egraph::ClassId c : group.ends) {
        if (const std::optional<uint32_t> g = gene_of(r, c)) {
          lg.ends.push_back(*g);
          lg.exits.push_back(*g);
        } else {
          all_ends = false;
        }
      }
      for (egraph::ClassId c : group.outputs)
        if (const std::optional<uint32_t> g = gene_of(r, c)) lg.exits.push_back(*g);
      // A loop_end class that no acyclic term reaches can never be chosen:
      // the loop can only be taken unrolled (its ends list stays incomplete).
      if (!all_ends) lg.ends.push_back(kNone);
      std::vector<egraph::NodeId> markers = group.markers;
      std::sort(markers.begin(), markers.end());
      for (size_t g = 0; g < genes_.size(); ++g)
        if (genes_[g].region == r)
          for (uint32_t k = 0; k < genes_[g].count; ++k)
            if (std::binary_search(markers.begin(), markers.end(), node(g, k))) cand_loop_[genes_[g].first + k] = id;
      loops_.push_back(std::move(lg));
    }
}

uint32_t GenomeSpace::add_free_genes(std::span<const uint32_t> counts) {
  const uint32_t first = static_cast<uint32_t>(genes_.size());
  for (uint32_t count : counts) {
    SPOOL_ASSERT(count >= 1, "a free gene without a candidate");
    genes_.push_back(Gene{kFreeRegion, egraph::ClassId{}, static_cast<uint32_t>(cand_node_.size()), count, 0});
    for (uint32_t k = 0; k < count; ++k) {
      cand_node_.push_back(egraph::NodeId{});
      cand_kids_begin_.push_back(static_cast<uint32_t>(cand_kids_.size()));
      cand_loop_.push_back(kNone);
    }
    if (count > 1) ++choice_genes_;
    ++free_genes_;
  }
  return first;
}

uint32_t GenomeSpace::broken_loop(const Genome& genome, const std::vector<uint8_t>& reach) const {
  if (loops_.empty()) return kNone;
  std::vector<uint8_t> used(loops_.size(), 0);
  for (size_t g = 0; g < genes_.size(); ++g)
    if (reach[g]) {
      const uint32_t l = cand_loop_[genes_[g].first + genome[g]];
      if (l != kNone) used[l] = 1;
    }
  // The loop_end nodes must be in the program (reachable), not only chosen:
  // a consumer may read the chain's final value past the loop_end class
  // (a fused kernel that absorbed the last add).
  for (uint32_t l = 0; l < loops_.size(); ++l) {
    if (!used[l]) continue;
    for (uint32_t e : loops_[l].ends)
      if (e == kNone || !reach[e] || cand_loop_[genes_[e].first + genome[e]] != l) return l;
  }
  return kNone;
}

size_t GenomeSpace::fix_loops(Genome& genome) const {
  const std::vector<uint8_t> reach = reachable(genome);
  const uint32_t l = broken_loop(genome, reach);
  if (l == kNone) return 0;
  auto is_marker = [&](size_t g, uint32_t k) { return cand_loop_[genes_[g].first + k] == l; };
  // Switches gene g off the loop's markers; returns whether it could.
  auto unmark = [&](size_t g) {
    for (uint32_t k = 0; k < genes_[g].count; ++k)
      if (!is_marker(g, k)) {
        genome[g] = k;
        return true;
      }
    return false;
  };
  // 1. Take the loop unrolled at its exits (what greedy extraction does).
  size_t changed = 0;
  for (uint32_t x : loops_[l].exits)
    if (is_marker(x, genome[x])) changed += unmark(x);
  if (changed > 0) return changed;
  // 2. The markers are reached another way: `loop_input_static(x) == x`
  // puts a marker into the class of every value the body reads unchanged,
  // so a consumer outside the loop may pick it. Take the plain value there.
  for (size_t g = 0; g < genes_.size(); ++g)
    if (reach[g] && is_marker(g, genome[g])) changed += unmark(g);
  if (changed > 0) return changed;
  // 3. Only markers are left (the loop's body itself): use it rolled.
  for (uint32_t e : loops_[l].ends) {
    if (e == kNone || is_marker(e, genome[e])) continue;
    for (uint32_t k = 0; k < genes_[e].count; ++k)
      if (is_marker(e, k)) {
        genome[e] = k;
        ++changed;
        break;
      }
  }
  return changed;
}

Genome GenomeSpace::from_terms(std::span<const egraph::Term> terms) const {
  if (terms.size() != regions_.size()) fail("search: {} terms for {} regions", terms.size(), regions_.size());
  Genome genome(genes_.size(), 0);
  for (size_t r = 0; r < regions_.size(); ++r) {
    const egraph::Term& term = terms[r];
    const egraph::EGraph& graph = *regions_[r].egraph;
    if (term.roots.size() != root_genes_[r].size())
      fail("search: the term of region {} has {} roots, the region {}", r, term.roots.size(), root_genes_[r].size());
    // fits(t, g): the candidate of gene g that term node t is, or kNone
    // (memoised; a class may hold several nodes of one op, e.g. add(a b) and
    // add(b a), told apart by their children).
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> memo;
    std::function<uint32_t(uint32_t, uint32_t)> fits = [&](uint32_t t, uint32_t g) -> uint32_t {
      const auto key = std::make_pair(t, g);
      if (const auto it = memo.find(key); it != memo.end()) return it->second;
      memo[key] = kNone;  // a term is acyclic: a revisit on the way down cannot match
      const egraph::Term::Node& tn = term.nodes.at(t);
      uint32_t found = kNone;
      for (uint32_t k = 0; k < genes_[g].count && found == kNone; ++k) {
        const egraph::ENodeRef n = graph.node(node(g, k));
        if (n.op != tn.op || n.attr != tn.attr || n.children.size() != tn.children.size()) continue;
        const std::span<const uint32_t> kids = children(g, k);
        bool all = true;
        for (size_t i = 0; i < kids.size() && all; ++i) all = fits(tn.children[i], kids[i]) != kNone;
        if (all) found = k;
      }
      memo[key] = found;
      return found;
    };
    for (size_t i = 0; i < term.roots.size(); ++i)
      if (fits(term.roots[i], root_genes_[r][i]) == kNone)
        fail("search: root {} of the term of region {} is not in its e-class", i, r);
    for (const auto& [key, k] : memo)
      if (k != kNone) genome[key.second] = k;
  }
  repair(genome);
  normalize(genome);
  return genome;
}

std::span<const uint32_t> GenomeSpace::children(size_t g, uint32_t choice) const {
  const uint32_t k = genes_[g].first + choice;
  return std::span<const uint32_t>(cand_kids_.data() + cand_kids_begin_[k], cand_kids_begin_[k + 1] - cand_kids_begin_[k]);
}

std::optional<uint32_t> GenomeSpace::gene_of(size_t r, egraph::ClassId c) const {
  c = regions_.at(r).egraph->find_const(c);
  if (c.value >= class_gene_[r].size() || class_gene_[r][c.value] == kNone) return std::nullopt;
  return class_gene_[r][c.value];
}

Genome GenomeSpace::greedy(std::span<const egraph::Extractor* const> extractors) const {
  SPOOL_ASSERT(extractors.size() == regions_.size(), "one extractor per region");
  return from_nodes([&](uint32_t r, egraph::ClassId c) { return extractors[r]->best_node(c); });
}

Genome GenomeSpace::safe() const {
  Genome genome(genes_.size());
  for (size_t g = 0; g < genes_.size(); ++g) genome[g] = genes_[g].safe;
  normalize(genome);
  return genome;
}

std::string GenomeSpace::check(const Genome& genome) const {
  if (genome.size() != genes_.size())
    return fmt::format("the genome has {} genes, the space {}", genome.size(), genes_.size());
  // Three colours: 0 unvisited, 1 on the stack, 2 done.
  std::vector<uint8_t> state(genes_.size(), 0);
  struct Frame {
    uint32_t gene;
    uint32_t next;
  };
  std::vector<Frame> stack;
  for (const std::vector<uint32_t>& roots : root_genes_)
    for (uint32_t root : roots) {
      if (state[root]) continue;
      state[root] = 1;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        Frame& f = stack.back();
        const Gene& gene = genes_[f.gene];
        if (genome[f.gene] >= gene.count)
          return fmt::format("gene {} (e-class c{} of region {}) chooses candidate {} of {}", f.gene, gene.cls.value,
                             gene.region, genome[f.gene], gene.count);
        const std::span<const uint32_t> kids = children(f.gene, genome[f.gene]);
        if (f.next < kids.size()) {
          const uint32_t c = kids[f.next++];
          if (state[c] == 1)
            return fmt::format("the choices form a cycle through gene {} (e-class c{} of region {})", c,
                               genes_[c].cls.value, genes_[c].region);
          if (state[c] == 0) {
            state[c] = 1;
            stack.push_back({c, 0});
          }
          continue;
        }
        state[f.gene] = 2;
        stack.pop_back();
      }
    }
  for (size_t g = 0; g < genes_.size(); ++g)
    if (is_free(g) && genome[g] >= genes_[g].count)
      return fmt::format("free gene {} chooses candidate {} of {}", g, genome[g], genes_[g].count);
  if (const uint32_t l = broken_loop(genome, reachable(genome)); l != kNone)
    return fmt::format("short loop {} is used rolled but not every loop_end class chooses its marker", l);
  return {};
}

size_t GenomeSpace::repair(Genome& genome, std::span<const uint32_t> keep) const {
  size_t changed = 0;
  if (genome.size() != genes_.size()) {
    changed += genes_.size() > genome.size() ? genes_.size() - genome.size() : genome.size() - genes_.size();
    genome.resize(genes_.size(), kNone);
  }
  for (size_t g = 0; g < genes_.size(); ++g)
    if (genome[g] >= genes_[g].count) {
      genome[g] = genes_[g].safe;
      ++changed;
    }
  changed += break_cycles(genome, keep);
  // Taking a loop unrolled may reach new classes whose choices close cycles,
  // and a cycle repair may pick a marker again: alternate, boundedly (check()
  // reports a genome the rounds could not settle).
  for (size_t round = 0; round < 4 * loops_.size() + 4; ++round) {
    const size_t fixed = fix_loops(genome);
    if (fixed == 0) break;
    changed += fixed + break_cycles(genome, keep);
  }
  return changed;
}

size_t GenomeSpace::break_cycles(Genome& genome, std::span<const uint32_t> keep) const {
  size_t changed = 0;
  std::vector<uint8_t> kept(genes_.size(), 0);
  for (uint32_t g : keep) kept[g] = 1;
  std::vector<uint8_t> state(genes_.size(), 0);
  std::vector<uint32_t> position(genes_.size(), 0);  // stack index of a gene on the stack
  struct Frame {
    uint32_t gene;
    uint32_t next;
  };
  std::vector<Frame> stack;
  for (const std::vector<uint32_t>& roots : root_genes_)
    for (uint32_t root : roots) {
      if (state[root]) continue;
      state[root] = 1;
      position[root] = 0;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        Frame& f = stack.back();
        const std::span<const uint32_t> kids = children(f.gene, genome[f.gene]);
        if (f.next >= kids.size()) {
          state[f.gene] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t c = kids[f.next++];
        if (state[c] == 2) continue;
        if (state[c] == 0) {
          state[c] = 1;
          position[c] = static_cast<uint32_t>(stack.size());
          stack.push_back({c, 0});
          continue;
        }
        // A cycle: stack[position[c]] .. top, closed by top -> c. Switch the
        // deepest frame that is not on its safe candidate (one not in `keep`
        // if there is one) and resume there.
        size_t k = stack.size();
        for (int pass = 0; pass < 2 && k == stack.size(); ++pass)
          for (size_t i = stack.size(); i-- > position[c];)
            if (genome[stack[i].gene] != genes_[stack[i].gene].safe && (pass == 1 || !kept[stack[i].gene])) {
              k = i;
              break;
            }
        SPOOL_ASSERT(k < stack.size(), "a cycle of safe choices (depths are not strictly decreasing)");
        while (stack.size() > k + 1) {
          state[stack.back().gene] = 0;
          stack.pop_back();
        }
        genome[stack[k].gene] = genes_[stack[k].gene].safe;
        stack[k].next = 0;
        ++changed;
      }
    }
  return changed;
}

std::vector<uint8_t> GenomeSpace::reachable(const Genome& genome) const {
  std::vector<uint8_t> seen(genes_.size(), 0);
  for (size_t g = 0; g < genes_.size(); ++g)
    if (is_free(g)) seen[g] = 1;
  std::vector<uint32_t> work;
  for (const std::vector<uint32_t>& roots : root_genes_)
    for (uint32_t root : roots)
      if (!seen[root]) {
        seen[root] = 1;
        work.push_back(root);
      }
  while (!work.empty()) {
    const uint32_t g = work.back();
    work.pop_back();
    for (uint32_t c : children(g, genome[g]))
      if (!seen[c]) {
        seen[c] = 1;
        work.push_back(c);
      }
  }
  return seen;
}

void GenomeSpace::normalize(Genome& genome) const {
  const std::vector<uint8_t> seen = reachable(genome);
  for (size_t g = 0; g < genes_.size(); ++g)
    if (!seen[g]) genome[g] = 0;
}

uint64_t GenomeSpace::hash(const Genome& genome) const {
  const std::vector<uint8_t> seen = reachable(genome);
  uint64_t h = egraph::mix64(genes_.size());
  for (size_t g = 0; g < genes_.size(); ++g)
    if (seen[g]) h = egraph::hash_combine(egraph::hash_combine(h, g), genome[g]);
  return h;
}

Genome GenomeSpace::random(Rng& rng) const {
  // The repair always breaks cycles; a short loop the repair cannot make
  // consistent (see broken_loop) rejects the draw.
  for (int attempt = 0; attempt < kMaxDraws; ++attempt) {
    Genome genome(genes_.size());
    for (size_t g = 0; g < genes_.size(); ++g) genome[g] = static_cast<uint32_t>(rng.below(genes_[g].count));
    repair(genome);
    normalize(genome);
    if (valid(genome)) return genome;
  }
  fail("search: no valid random genome in {} draws (the short loops' markers cannot be made consistent)", kMaxDraws);
}

Genome GenomeSpace::mutate(const Genome& genome, Rng& rng, size_t count) const {
  const std::vector<uint8_t> seen = reachable(genome);
  // Every (gene, other candidate) pair the mutation may pick.
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (size_t g = 0; g < genes_.size(); ++g)
    if (seen[g])
      for (uint32_t c = 0; c < genes_[g].count; ++c)
        if (c != genome[g]) pairs.emplace_back(static_cast<uint32_t>(g), c);
  Genome out = genome;
  if (pairs.empty()) return out;
  const uint64_t before = hash(genome);
  // A change that only closes cycles through safe choices is undone by the
  // repair; such a pair is dropped and another one drawn.
  for (int attempt = 0; attempt < 64 && !pairs.empty(); ++attempt) {
    out = genome;
    std::vector<uint32_t> changed;
    size_t last = 0;
    for (size_t i = 0; i < std::max<size_t>(count, 1); ++i) {
      last = rng.below(pairs.size());
      out[pairs[last].first] = pairs[last].second;
      changed.push_back(pairs[last].first);
    }
    repair(out, changed);
    normalize(out);
    if (hash(out) != before && valid(out)) break;
    pairs[last] = pairs.back();
    pairs.pop_back();
    out = genome;
  }
  return out;
}

std::vector<Genome> GenomeSpace::neighbours(const Genome& genome, std::vector<uint32_t>* changed) const {
  const std::vector<uint8_t> seen = reachable(genome);
  std::vector<Genome> out;
  std::vector<uint64_t> hashes{hash(genome)};
  if (changed) changed->clear();
  for (size_t g = 0; g < genes_.size(); ++g) {
    if (!seen[g] || genes_[g].count < 2) continue;
    for (uint32_t c = 0; c < genes_[g].count; ++c) {
      if (c == genome[g]) continue;
      Genome n = genome;
      n[g] = c;
      const uint32_t keep = static_cast<uint32_t>(g);
      repair(n, std::span<const uint32_t>(&keep, 1));
      normalize(n);
      if (!valid(n)) continue;
      const uint64_t h = hash(n);
      // Few neighbours per genome: a linear scan keeps the order plain.
      if (std::find(hashes.begin(), hashes.end(), h) != hashes.end()) continue;
      hashes.push_back(h);
      out.push_back(std::move(n));
      if (changed) changed->push_back(keep);
    }
  }
  return out;
}

Genome GenomeSpace::crossover(const Genome& a, const Genome& b, Rng& rng) const {
  SPOOL_ASSERT(a.size() == genes_.size() && b.size() == genes_.size(), "crossover of genomes of another space");
  for (int attempt = 0; attempt < kMaxDraws; ++attempt) {
    Genome out(genes_.size());
    for (size_t g = 0; g < genes_.size(); ++g) out[g] = (rng.next() >> 63) ? a[g] : b[g];
    repair(out);
    normalize(out);
    if (valid(out)) return out;
  }
  Genome out = a;
  normalize(out);
  return out;
}

std::vector<egraph::Term> GenomeSpace::terms(const Genome& genome) const {
  SPOOL_ASSERT(genome.size() == genes_.size(), "a genome of another space");
  std::vector<egraph::Term> out(regions_.size());
  std::vector<uint32_t> index(genes_.size(), kNone);  // gene -> term node of its region
  struct Frame {
    uint32_t gene;
    uint32_t next;
  };
  std::vector<Frame> stack;
  std::vector<uint8_t> on_stack(genes_.size(), 0);
  for (size_t r = 0; r < regions_.size(); ++r) {
    const egraph::EGraph& graph = *regions_[r].egraph;
    egraph::Term& term = out[r];
    for (uint32_t root : root_genes_[r]) {
      if (index[root] == kNone) {
        stack.push_back({root, 0});
        on_stack[root] = 1;
        while (!stack.empty()) {
          Frame& f = stack.back();
          const std::span<const uint32_t> kids = children(f.gene, genome[f.gene]);
          if (f.next < kids.size()) {
            const uint32_t c = kids[f.next++];
            if (index[c] == kNone) {
              SPOOL_ASSERT(!on_stack[c], "terms() of an invalid genome (cycle through gene {})", c);
              on_stack[c] = 1;
              stack.push_back({c, 0});
            }
            continue;
          }
          const egraph::ENodeRef node = graph.node(this->node(f.gene, genome[f.gene]));
          egraph::Term::Node tn{node.op, node.attr, {}};
          for (uint32_t c : kids) tn.children.push_back(index[c]);
          index[f.gene] = static_cast<uint32_t>(term.nodes.size());
          term.nodes.push_back(std::move(tn));
          on_stack[f.gene] = 0;
          stack.pop_back();
        }
      }
      term.roots.push_back(index[root]);
    }
  }
  return out;
}

std::vector<uint32_t> differing_genes(const GenomeSpace& space, const Genome& a, const Genome& b) {
  const std::vector<uint8_t> ra = space.reachable(a), rb = space.reachable(b);
  std::vector<uint32_t> out;
  for (size_t g = 0; g < space.num_genes(); ++g)
    if ((ra[g] || rb[g]) && a[g] != b[g]) out.push_back(static_cast<uint32_t>(g));
  return out;
}

Graph canonical_program(const Graph& program) {
  Graph g = compacted(cse(program));
  g.set_name("program");
  return g;
}

uint64_t program_fingerprint(const Graph& program) { return canonical_fingerprint(canonical_program(program)); }

uint64_t canonical_fingerprint(const Graph& canonical) {
  const std::string text = print_graph(canonical);
  uint64_t h = egraph::mix64(text.size());
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    h = egraph::hash_combine(h, word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, text.data() + i, text.size() - i);
  return egraph::hash_combine(h, tail);
}

}  // namespace spool::search
