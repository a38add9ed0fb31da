// The genome fuzzing harness: draw, build, check, shrink, localise.
//
// Genomes are drawn in the main thread from one seeded generator; programs
// are built and checked in parallel, each into its own slot, and the first
// failure is the first in draw order, so the report depends only on the
// seed. Shrinking is sequential (each step depends on the last).

#include <spool/search/fuzz.hpp>

#include <spool/ir/text.hpp>
#include <spool/search/fitness.hpp>
#include <spool/lower/lower.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace spool::search {
namespace {

// Every live node's value on `inputs` (sources included), by node id.
std::map<uint32_t, interp::HostTensor> all_values(const Graph& graph, const interp::Env& inputs) {
  Graph g = graph;
  std::vector<NodeId> ids = g.topo_order();
  for (NodeId id : ids) g.add_output("%" + std::to_string(id.value), Edge{id, View{}});
  const std::map<std::string, interp::HostTensor> out = interp::run(g, inputs);
  std::map<uint32_t, interp::HostTensor> values;
  for (NodeId id : ids) values.emplace(id.value, out.at("%" + std::to_string(id.value)));
  return values;
}

CheckResult compare_outputs(const std::map<std::string, interp::HostTensor>& got,
                            const std::map<std::string, interp::HostTensor>& want, double tolerance) {
  CheckResult r;
  for (const auto& [name, value] : want) {
    const auto it = got.find(name);
    if (it == got.end()) return CheckResult{false, 0, fmt::format("output '{}' is missing", name)};
    if (it->second.shape() != value.shape())
      return CheckResult{false, 0, fmt::format("output '{}' has another shape", name)};
    const interp::Difference diff = interp::compare(it->second, value);
    const double e = diff.max_rel_to_scale, allowed = interp::check_tolerance(tolerance, value.dtype());
    if (e > r.error) r.error = e;
    if (diff.non_finite > 0 && r.ok) {
      r.ok = false;
      r.message = fmt::format("output '{}' holds {} NaN or infinite values", name, diff.non_finite);
    }
    if (!(e <= allowed) && r.ok) {
      r.ok = false;
      r.message = fmt::format("output '{}' differs by {:.3g} of its scale (tolerance {:.3g})", name, e, allowed);
    }
  }
  return r;
}

// The line of `%ID = ...` in the program's text form.
std::string node_line(const std::string& text, uint32_t id) {
  const std::string key = "%" + std::to_string(id) + " = ";
  size_t at = text.find(key);
  while (at != std::string::npos && at > 0 && text[at - 1] != ' ' && text[at - 1] != '\n') at = text.find(key, at + 1);
  if (at == std::string::npos) return key + "?";
  const size_t end = text.find('\n', at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

Reference make_reference(const Graph& hlir, uint64_t input_seed) {
  Reference r;
  r.hlir = hlir;
  // Integer inputs (tokens, positions) below 16: inside every example model's vocabulary.
  r.inputs = interp::random_inputs(hlir, input_seed, 16);
  r.outputs = interp::run(hlir, r.inputs);
  return r;
}

ProgramCheck interpreter_check(const Reference& reference, double tolerance) {
  return [&reference, tolerance](const Graph& program, const LoweringChoices&) {
    try {
      return compare_outputs(interp::run(program, reference.inputs), reference.outputs, tolerance);
    } catch (const Error& e) {
      return CheckResult{false, 0, fmt::format("interpreter: {}", e.what())};
    }
  };
}

ProgramCheck simulator_check(const Reference& reference, const target::NpuConfig& config, double tolerance) {
  lower::LowerOptions timed;
  timed.tile_cycles = sim::tile_timer(config);
  return [&reference, config, timed, tolerance](const Graph& program, const LoweringChoices& lowering) {
    try {
      const lower::Lowered lowered = lower::to_npu(program, config, with_choices(timed, lowering));
      const sim::Executed run = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, reference.inputs);
      return compare_outputs(run.outputs, reference.outputs, tolerance);
    } catch (const Error& e) {
      return CheckResult{false, 0, fmt::format("lowering or simulation: {}", e.what())};
    }
  };
}

Genome blend(const GenomeSpace& space, const Genome& toward, const Genome& from, std::span<const uint32_t> genes) {
  Genome g = toward;
  for (uint32_t i : genes) g[i] = from[i];
  space.repair(g, genes);
  space.normalize(g);
  return g;
}

std::vector<uint32_t> shrink(const GenomeSpace& space, const Genome& failing, const Genome& toward,
                             const std::function<bool(const Genome&)>& fails, size_t* checks) {
  std::vector<uint32_t> d = differing_genes(space, failing, toward);
  size_t calls = 0;
  auto test = [&](const std::vector<uint32_t>& genes) {
    ++calls;
    return fails(blend(space, toward, failing, genes));
  };
  // ddmin (Zeller and Hildebrandt): try each chunk, then each complement,
  // then finer chunks, until no single gene can be removed.
  size_t n = 2;
  while (d.size() >= 2) {
    std::vector<std::vector<uint32_t>> chunks(n);
    for (size_t i = 0; i < d.size(); ++i) chunks[i * n / d.size()].push_back(d[i]);
    bool reduced = false;
    for (const std::vector<uint32_t>& c : chunks)
      if (!c.empty() && test(c)) {
        d = c;
        n = 2;
        reduced = true;
        break;
      }
    if (!reduced && n > 2)
      for (size_t k = 0; k < chunks.size() && !reduced; ++k) {
        std::vector<uint32_t> rest;
        for (size_t j = 0; j < chunks.size(); ++j)
          if (j != k) rest.insert(rest.end(), chunks[j].begin(), chunks[j].end());
        if (test(rest)) {
          d = rest;
          n = std::max<size_t>(n - 1, 2);
          reduced = true;
        }
      }
    if (!reduced) {
      if (n >= d.size()) break;
      n = std::min(2 * n, d.size());
    }
  }
  if (checks) *checks += calls;
  return d;
}

std::optional<std::string> first_divergence(const Graph& program, const Reference& reference,
                                            std::span<const Graph> reference_programs,
                                            std::span<const Suspect> suspects, double tolerance) {
  // The pool of correct values, by dtype and shape.
  std::map<std::pair<int, Shape>, std::vector<interp::HostTensor>> pool;
  auto add_all = [&](const Graph& g) {
    for (auto& [id, value] : all_values(g, reference.inputs))
      pool[{static_cast<int>(value.dtype()), value.shape()}].push_back(std::move(value));
  };
  add_all(reference.hlir);
  for (const Graph& g : reference_programs) add_all(g);
  const std::string text = print_graph(program);
  const std::map<uint32_t, interp::HostTensor> values = all_values(program, reference.inputs);
  std::optional<uint32_t> first, first_suspect;
  for (NodeId id : program.topo_order()) {
    const Node& node = program.node(id);
    if (op_info(node.op).cls == OpClass::Source) continue;
    const interp::HostTensor& v = values.at(id.value);
    bool matched = false;
    const auto it = pool.find({static_cast<int>(v.dtype()), v.shape()});
    if (it != pool.end())
      for (const interp::HostTensor& ref : it->second)
        if (interp::compare(v, ref).max_rel_to_scale <= tolerance) {
          matched = true;
          break;
        }
    if (matched) continue;
    if (!first) first = id.value;
    const bool suspect = std::any_of(suspects.begin(), suspects.end(),
                                     [&](const Suspect& s) { return s.op == node.op && s.attr == node.attr; });
    if (suspect) {
      first_suspect = id.value;
      break;
    }
  }
  if (!first) return std::nullopt;
  if (!first_suspect || *first_suspect == *first) return node_line(text, *first);
  return fmt::format("{}\n           (the first value no reference computes: {})", node_line(text, *first_suspect),
                     node_line(text, *first));
}

std::optional<std::string> first_lowered_divergence(const Graph& program, const Reference& reference,
                                                    const target::NpuConfig& config, double tolerance) {
  const std::map<uint32_t, interp::HostTensor> values = all_values(program, reference.inputs);
  const std::string text = print_graph(program);
  lower::LowerOptions timed;
  timed.tile_cycles = sim::tile_timer(config);
  for (NodeId id : program.topo_order()) {
    const Node& node = program.node(id);
    if (node.op == Op::Input || node.op == Op::Weight) continue;
    // The inputs as SimulatedCycles::kernel_alone names them: in0, in1, ...
    // for the distinct producers in input order.
    std::map<std::string, interp::HostTensor> inputs;
    std::map<uint32_t, size_t> seen;
    for (const Edge& e : node.inputs)
      if (seen.emplace(e.src.value, seen.size()).second)
        inputs.emplace("in" + std::to_string(seen.size() - 1), values.at(e.src.value));
    try {
      const lower::Lowered lowered = lower::to_npu(SimulatedCycles::kernel_alone(program, id), config, timed);
      const sim::Executed run = sim::run_functional(lowered.program, config, lowered.inputs, lowered.outputs, inputs);
      const double e = interp::compare(run.outputs.at("out"), values.at(id.value)).max_rel_to_scale;
      if (!(e <= tolerance))
        return fmt::format("{}\n           lowered alone it differs by {:.3g} of its scale", node_line(text, id.value), e);
    } catch (const Error& e) {
      return fmt::format("{}\n           cannot be lowered alone: {}", node_line(text, id.value), e.what());
    }
  }
  return std::nullopt;
}

FuzzReport fuzz(const SearchSpace& space, const Reference& reference, const ProgramCheck& check,
                const FuzzOptions& options) {
  const GenomeSpace& genomes = space.genomes();
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  FuzzReport report;

  // Draw: the greedy genome first, then distinct random ones.
  std::vector<Genome> drawn;
  std::unordered_map<uint64_t, int> seen;  // looked up only
  Genome greedy = space.greedy();
  genomes.normalize(greedy);
  drawn.push_back(greedy);
  seen.emplace(genomes.hash(greedy), 1);
  Rng rng(options.seed);
  for (size_t attempt = 0; drawn.size() < options.genomes && attempt < 20 * options.genomes; ++attempt) {
    Genome g = genomes.random(rng);
    if (seen.emplace(genomes.hash(g), 1).second) drawn.push_back(std::move(g));
  }

  // Build every program and check each distinct one (in parallel).
  std::vector<Graph> programs(drawn.size());
  std::vector<LoweringChoices> lowerings(drawn.size());
  std::vector<uint64_t> prints(drawn.size(), 0);
  std::vector<CheckResult> results(drawn.size());
  std::vector<uint8_t> built(drawn.size(), 0);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, drawn.size(), [&](size_t i) {
      try {
        programs[i] = space.program(drawn[i]);
        lowerings[i] = used_choices(programs[i], space.lowering(drawn[i]));
        prints[i] = with_lowering(program_fingerprint(programs[i]), lowerings[i]);
        built[i] = 1;
      } catch (const Error& e) {
        results[i] = CheckResult{false, 0, fmt::format("the program cannot be built: {}", e.what())};
      }
    });
  });
  std::vector<size_t> to_check;
  std::unordered_map<uint64_t, size_t> first_of;  // fingerprint -> first genome with it
  for (size_t i = 0; i < drawn.size(); ++i)
    if (built[i] && first_of.emplace(prints[i], i).second) to_check.push_back(i);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, to_check.size(),
                      [&](size_t k) { results[to_check[k]] = check(programs[to_check[k]], lowerings[to_check[k]]); });
  });
  report.genomes = drawn.size();
  report.programs = to_check.size();
  std::optional<size_t> first_failure;
  for (size_t i = 0; i < drawn.size(); ++i) {
    const CheckResult& r = built[i] ? results[first_of.at(prints[i])] : results[i];
    report.max_error = std::max(report.max_error, r.error);
    if (!r.ok) {
      ++report.failures;
      if (!first_failure) first_failure = i;
    }
  }
  if (!first_failure) return report;

  FuzzFailure f;
  const size_t i = *first_failure;
  f.genome = drawn[i];
  f.check = built[i] ? results[first_of.at(prints[i])] : results[i];
  f.minimal = f.genome;
  f.minimal_check = f.check;
  if (i == 0) {
    f.divergence = "the greedy program itself fails: there is no correct genome to shrink toward";
  } else if (!results[0].ok) {
    f.divergence = "the greedy program fails too: there is no correct genome to shrink toward";
  } else {
    if (options.shrink) {
      // A blend fails "the same way": a wrong result reproduces a wrong
      // result, a program that cannot be built reproduces that.
      const bool build_failure = !built[i];
      auto fails = [&](const Genome& g) {
        try {
          const Graph p = space.program(g);
          return !build_failure && !check(p, space.lowering(g)).ok;
        } catch (const Error&) {
          return build_failure;
        }
      };
      f.genes = shrink(genomes, f.genome, greedy, fails, &f.shrink_checks);
      f.minimal = blend(genomes, greedy, f.genome, f.genes);
    } else {
      f.genes = differing_genes(genomes, f.genome, greedy);
    }
    try {
      const Graph minimal = space.program(f.minimal);
      f.minimal_check = check(minimal, space.lowering(f.minimal));
      const Graph refs[] = {programs[0]};
      std::vector<Suspect> suspects;
      for (uint32_t gene : f.genes) {
        if (genomes.is_free(gene)) continue;
        const GenomeSpace::Gene& info = genomes.gene(gene);
        const egraph::NodeId n = genomes.node(gene, f.minimal[gene]);
        const egraph::ENodeRef node = genomes.region(info.region).egraph->node(n);
        const hlir::HlirLanguage& lang = space.language(info.region);
        // AttrId 0 is "no attribute" (it has no payload).
        if (const std::optional<Op> op = lang.hlir_op(node.op))
          suspects.push_back(Suspect{*op, node.attr.value == 0 ? Attr{NoAttr{}} : lang.payload(node.attr).attr});
      }
      std::optional<std::string> d = first_divergence(minimal, reference, refs, suspects, options.tolerance);
      if (!d && options.lowered_config) {
        d = first_lowered_divergence(minimal, reference, *options.lowered_config, options.tolerance);
        if (d) d = "(the LLIR is right on the interpreter) " + *d;
      }
      f.divergence = d ? *d
                       : "every kernel's value matches a reference value on the interpreter, and each kernel "
                         "lowered alone agrees: the divergence comes from kernels together (buffers, aliases)";
    } catch (const Error& e) {
      f.minimal_check = CheckResult{false, 0, fmt::format("the program cannot be built: {}", e.what())};
      f.divergence = "the minimal program cannot be built";
    }
  }
  report.first = std::move(f);
  return report;
}

std::string FuzzReport::to_text(const SearchSpace& space) const {
  std::string out = fmt::format("genomes    {} distinct, {} distinct programs, {} failed, max error {:.3g}\n", genomes,
                                programs, failures, max_error);
  if (!first) return out;
  const FuzzFailure& f = *first;
  const GenomeSpace& g = space.genomes();
  out += fmt::format("failure    genome {:016x}: {}\n", g.hash(f.genome), f.check.message);
  out += fmt::format("shrunk     to {} choice{} differing from greedy ({} checks): {}\n", f.genes.size(),
                     f.genes.size() == 1 ? "" : "s", f.shrink_checks,
                     f.minimal_check.ok ? "passes (the failure did not reproduce)" : f.minimal_check.message);
  for (uint32_t gene : f.genes) {
    const GenomeSpace::Gene& info = g.gene(gene);
    if (g.is_free(gene))
      out += "  lowering gene:\n";
    else
      out += fmt::format("  e-class c{} (region {}):\n", info.cls.value, info.region);
    out += fmt::format("    chosen  {}\n", space.describe(gene, f.minimal[gene]));
    out += fmt::format("    greedy  {}\n", space.describe(gene, space.greedy()[gene]));
  }
  out += fmt::format("diverges   {}\n", f.divergence);
  return out;
}

}  // namespace spool::search
