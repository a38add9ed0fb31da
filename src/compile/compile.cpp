// The compile pipeline, top to bottom. Each stage is one call and is logged.
//
// Regions are saturated in parallel, each in its own language (a copy of the
// one the rules were compiled in) and e-graph; the compiled rules are shared
// and only read. Nothing a thread writes is seen by another while they run:
// the e-graphs (and with them the extracted programs) never depend on the
// thread count.

#include <spool/compile/compile.hpp>
#include <spool/egraph/extract.hpp>
#include <spool/hlir/language.hpp>
#include <spool/hlir/cost.hpp>
#include <spool/ir/text.hpp>
#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>
#include <spool/support/error.hpp>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace spool::compile {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A file's bytes, or nullopt if it cannot be read.
std::optional<std::string> file_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string text;
  char buffer[16384];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return std::nullopt;
  return text;
}

// What a cached parse is checked against, per file it read: the size and
// modification time (one stat: every compile asks whether its rule files
// changed, and reading them costs more than the rest of a small compile's
// bookkeeping). A file modified shortly before it is stamped could change
// again within the same timestamp tick (file times are coarse: 2 s on FAT),
// so its bytes are kept and compared too, as git does for racily clean files.
constexpr std::chrono::seconds kRacyWindow{3};
struct FileStamp {
  std::string path;
  std::optional<std::pair<int64_t, int64_t>> stamp;  // (size, modified ns since the epoch); nullopt: unreadable
  std::optional<std::string> racy_text;               // kept only for a racy stamp
  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {path, std::nullopt, std::nullopt};
  const int64_t modified = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  FileStamp s{path, std::make_pair(int64_t{st.st_size}, modified), std::nullopt};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (now - modified < std::chrono::nanoseconds(kRacyWindow).count()) s.racy_text = file_text(path);
  return s;
}
// Whether the file is as stamped. A racy stamp found unchanged once the file
// is older than the window drops its bytes: any later change moves the time.
bool still_current(FileStamp& s) {
  const FileStamp now = stamp_of(s.path);
  if (now.stamp != s.stamp) return false;
  if (!s.racy_text) return true;
  if ((now.racy_text ? now.racy_text : file_text(s.path)) != s.racy_text) return false;
  if (!now.racy_text) s.racy_text.reset();
  return true;
}

// Reads a rule file and everything it includes; a file that does not parse
// is reported here, before any region starts (rules that do not compile are
// reported by compiled_rules, also before). Parses are kept for the process
// and reused while every file a parse read has the same size and
// modification time: compiles of several models, or of one model rolled and
// unrolled, read the same files. A parse is reused only if no file changed
// while it was made: the stamps taken after the parse before it and after
// it agree. A process's first compile parses once (a one-shot run never
// asks again) and keeps its stamps; the second parses again to verify.
std::shared_ptr<const rules::RuleFile> read_rule_file(const std::string& path) {
  struct Entry {
    std::vector<FileStamp> stamps;  // every file the parse read, stamped after it
    std::shared_ptr<const rules::RuleFile> file;
    bool verified = false;  // parsed between two agreeing stamps: reusable
  };
  static std::mutex mutex;
  static std::map<std::string, Entry> cache;
  std::optional<std::vector<FileStamp>> before;  // the last parse's stamps, still current
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(path);
    if (it != cache.end()) {
      bool current = true;
      for (FileStamp& stamp : it->second.stamps) current = current && still_current(stamp);
      if (current && it->second.verified) return it->second.file;
      if (current) before = it->second.stamps;
    }
  }
  Entry entry;
  Result<rules::RuleFile> file = rules::load_rule_file(path);
  if (!file) throw Error(file.error().render());
  for (const std::string& f : file.value().files) entry.stamps.push_back(stamp_of(f));
  entry.file = std::make_shared<const rules::RuleFile>(std::move(file.value()));
  entry.verified = before && *before == entry.stamps;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    cache[path] = entry;
  }
  return entry.file;
}

// The rules of a compile's rule files, compiled once into one language.
// Each region's language starts as a copy of it, so the compiled rules (whose
// patterns name its ops and attributes by id) run on every region's e-graph;
// the appliers find a region's language through its e-graph.
struct CompiledRules {
  std::vector<std::shared_ptr<const rules::RuleFile>> files;  // compiled from, in order
  hlir::HlirLanguage lang;
  std::vector<std::vector<egraph::RuleSet>> sets;  // per file
  std::vector<egraph::Schedule> schedules;         // per file
};

// The compiled rules of `files`. The last few sets compiled are kept, most
// recently used first, and reused while their files are the same parses
// (read_rule_file returns a new parse for a changed file): a process that
// compiles with several rule sets in turn compiles each once. Throws
// spool::Error, naming the rule, if one does not compile.
constexpr size_t kCompiledRuleSets = 4;
std::shared_ptr<const CompiledRules> compiled_rules(const std::vector<std::shared_ptr<const rules::RuleFile>>& files) {
  static std::mutex mutex;
  static std::vector<std::shared_ptr<const CompiledRules>> kept;  // most recently used first
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& c) { return c->files == files; });
    if (it != kept.end()) {
      std::rotate(kept.begin(), it, it + 1);
      return kept.front();
    }
  }
  auto compiled = std::make_shared<CompiledRules>();
  compiled->files = files;
  for (const std::shared_ptr<const rules::RuleFile>& file : files) {
    Result<std::vector<egraph::RuleSet>> sets = rules::compile_rules(
        *file, compiled->lang.language(), hlir::registry(), compiled->lang.parse_options());
    if (!sets) throw Error(sets.error().render());
    compiled->sets.push_back(std::move(sets.value()));
    compiled->schedules.push_back(rules::schedule_of(*file));
  }
  const std::lock_guard<std::mutex> lock(mutex);
  kept.insert(kept.begin(), compiled);
  if (kept.size() > kCompiledRuleSets) kept.pop_back();
  return compiled;
}

// The compiled rules of the files at `paths`, read (read_rule_file) and
// compiled (compiled_rules) under one lock: a compile that starts while
// prepare_rules reads the same files waits for it instead of reading them
// a second time beside it.
std::mutex rules_mutex;
std::shared_ptr<const CompiledRules> load_rules_locked(const std::vector<std::string>& paths) {
  std::vector<std::shared_ptr<const rules::RuleFile>> files;
  for (const std::string& path : paths) files.push_back(read_rule_file(path));
  return compiled_rules(files);
}
std::shared_ptr<const CompiledRules> load_rules(const std::vector<std::string>& paths) {
  const std::lock_guard<std::mutex> lock(rules_mutex);
  return load_rules_locked(paths);
}

// Runs `body(i)` for i in [0, n) on up to `threads` threads (0: TBB's
// default). Each index writes only its own slot, so the order does not matter.
template <typename Body>
void parallel_indices(size_t n, int threads, const Body& body) {
  if (n == 0) return;
  if (threads == 1 || n == 1) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  auto run = [&] { tbb::parallel_for(size_t{0}, n, size_t{1}, [&](size_t i) { body(i); }); };
  if (threads <= 0) return run();  // the default arena (a new arena per call costs tens of microseconds)
  tbb::task_arena arena(threads);
  arena.execute(run);
}

// One region's e-graph: its graph, plus (for loops short enough) the same
// graph with those loops unrolled, each output unioned with its unrolled self.
RegionEGraph build_region(const RegionGraph& rg, const hlir::HlirLanguage& rules_lang) {
  RegionEGraph region;
  region.lang = std::make_unique<hlir::HlirLanguage>(rules_lang);
  region.egraph = hlir::make_egraph(*region.lang);
  egraph::EGraph& eg = *region.egraph;
  if (rg.short_loops.empty()) {
    region.roots = hlir::add_graph(eg, *region.lang, rg.graph);
    eg.rebuild();
    return region;
  }
  // The exits of the short loops become extra outputs, so that unrolling
  // gives each of them its value in the chain.
  Graph g = rg.graph;
  const size_t num_roots = g.outputs().size();
  std::vector<std::pair<int64_t, Op>> exits;  // (loop, op) of each extra output
  for (const NodeId id : g.live_ids()) {
    const Node& n = g.node(id);
    if (n.op != Op::LoopEnd && n.op != Op::LoopOutput) continue;
    const int64_t loop = std::get<LoopAttr>(n.attr).loop;
    if (std::find(rg.short_loops.begin(), rg.short_loops.end(), loop) == rg.short_loops.end()) continue;
    g.add_output(fmt::format("@exit.{}", exits.size()), Edge{id, {}});
    exits.emplace_back(loop, n.op);
  }
  const std::vector<egraph::ClassId> rolled = hlir::add_graph(eg, *region.lang, g);
  const std::vector<egraph::ClassId> chain =
      hlir::add_graph(eg, *region.lang, roll::unroll(g, rg.short_loops));
  for (size_t i = 0; i < rolled.size(); ++i) eg.merge(rolled[i], chain[i], "unroll-union");
  eg.rebuild();
  region.roots.assign(rolled.begin(), rolled.begin() + static_cast<std::ptrdiff_t>(num_roots));
  for (const int64_t loop : rg.short_loops) {
    UnionedLoop u{loop, {}, {}};
    for (size_t i = 0; i < exits.size(); ++i)
      if (exits[i].first == loop)
        (exits[i].second == Op::LoopEnd ? u.loop_ends : u.loop_outputs).push_back(rolled[num_roots + i]);
    region.unioned_loops.push_back(std::move(u));
  }
  return region;
}

void saturate_region(RegionEGraph& region, const CompiledRules& rules, const Options& options) {
  egraph::EGraph& eg = *region.egraph;
  hlir::HlirLanguage& lang = *region.lang;
  size_t iterations = 0;
  auto run = [&](egraph::RunReport report) {
    iterations += report.iterations;
    region.saturation = std::move(report);
    region.saturation.iterations = iterations;
  };
  for (size_t f = 0; f < rules.sets.size(); ++f) {
    egraph::Runner runner(options.runner);
    run(runner.run(eg, rules.sets[f], rules.schedules[f]));
  }
  if (options.extra_rules) {
    const std::vector<egraph::Rule> rules = options.extra_rules(lang);
    egraph::Runner runner(options.runner);
    run(runner.run(eg, rules));
  }
  for (egraph::ClassId& root : region.roots) root = eg.find(root);
  for (UnionedLoop& u : region.unioned_loops) {
    for (egraph::ClassId& c : u.loop_ends) c = eg.find(c);
    for (egraph::ClassId& c : u.loop_outputs) c = eg.find(c);
  }
}

// The loop a node marks, if it is a loop marker.
std::optional<LoopAttr> marker_of(const hlir::HlirLanguage& lang, egraph::ENodeRef node) {
  const std::optional<Op> op = lang.hlir_op(node.op);
  if (!op || !is_loop_marker(*op)) return std::nullopt;
  return std::get<LoopAttr>(lang.payload(node.attr).attr);
}

// The greedy term of a region, whose extractor is given.
egraph::Term greedy_term(const RegionEGraph& region, const egraph::DagExtractor& extractor);

// The placeholder K of a region's e-graph node, if it is one.
std::optional<size_t> placeholder_of(const hlir::HlirLanguage& lang, egraph::ENodeRef node) {
  const std::optional<Op> op = lang.hlir_op(node.op);
  if (!op || (*op != Op::Input && *op != Op::Weight)) return std::nullopt;
  const std::string& name = std::get<NameAttr>(lang.payload(node.attr).attr).name;
  const std::string_view prefix = kInputPrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  return std::stoul(name.substr(prefix.size()));
}

// A region's cost with its placeholders priced as what they stand for: the
// DAG cost of the value in the region computing it, as the placeholder's own
// cost. In one e-graph for the whole graph a term reading that value holds
// its sub-term, counted once however often it is read; greedy choices (which
// weigh a term by the distinct nodes under it) then agree with that
// e-graph's. Where two placeholders' values share a sub-term, each price
// holds it, while one e-graph would count it once: a term reading both is
// priced a little high.
class PlaceholderCost : public egraph::CostFunction {
 public:
  // Every placeholder leaf of a region's e-graph: its node, attribute and K.
  struct Placeholder {
    egraph::NodeId node;
    uint32_t attr;
    size_t k;
  };
  using Placeholders = std::vector<Placeholder>;
  static Placeholders placeholders(const RegionEGraph& region) {
    Placeholders out;
    const egraph::EGraph& eg = *region.egraph;
    for (const egraph::ClassId c : eg.classes())
      for (const egraph::NodeId n : eg.class_nodes(c))
        if (const std::optional<size_t> k = placeholder_of(*region.lang, eg.node(n)))
          out.push_back({n, eg.node(n).attr.value, *k});
    return out;
  }

  PlaceholderCost(const RegionEGraph& region, const Placeholders& placeholders, const egraph::CostFunction& base,
                  const std::vector<double>& leaf_costs)
      : base_(base), by_attr_(region.lang->language().attrs.size(), -1.0) {
    for (const Placeholder& p : placeholders)
      if (p.k < leaf_costs.size() && leaf_costs[p.k] >= 0) by_attr_[p.attr] = leaf_costs[p.k];
  }
  double cost(const egraph::EGraph& graph, egraph::NodeId node, std::span<const double> child_costs) const override {
    const egraph::ENodeRef n = graph.node(node);
    if (n.children.empty() && n.attr.value < by_attr_.size() && by_attr_[n.attr.value] >= 0) {
      // Still more than the plain leaf, as a cost must be monotone.
      return base_.cost(graph, node, child_costs) + by_attr_[n.attr.value];
    }
    return base_.cost(graph, node, child_costs);
  }

 private:
  const egraph::CostFunction& base_;
  std::vector<double> by_attr_;  // attribute of a placeholder leaf -> its price; -1: not one
};

// Greedy terms for every region, with placeholder prices found by passes
// over the regions: each region's placeholders are priced at the cost of
// their values under the freshest extractors (a region's extractor is rebuilt
// just before the regions after it read it, if its prices changed), until a
// whole pass changes no price. The values form an acyclic graph, so the prices
// settle on the one assignment where every placeholder costs what its value
// costs, whatever the order; in region order it takes a pass per region
// boundary on the longest path that runs against that order, plus one. (A
// prologue and epilogue around one loop: three extractors, where rebuilding
// every stale region once per pass takes five. The first of them, the first
// region's with no price known, comes built from its saturation task.)
std::vector<egraph::Term> extract_regions(const Saturated& s, int threads) {
  const size_t n = s.regions.size();
  std::vector<std::unique_ptr<egraph::CostFunction>> base(n);
  for (size_t d = 0; d < n; ++d) base[d] = extraction_cost(s.regions[d]);
  // Each distinct region is priced by its first instance.
  std::vector<size_t> first_instance(n, SIZE_MAX);
  for (size_t i = s.split.instances.size(); i-- > 0;) first_instance[s.split.instances[i].region] = i;
  const auto home = home_of(s.rolled, s.split);
  std::vector<std::vector<double>> leaf(n);
  for (size_t d = 0; d < n; ++d) leaf[d].assign(s.split.instances[first_instance[d]].inputs.size(), -1.0);
  std::vector<PlaceholderCost::Placeholders> placeholders(n);  // found once; the prices change
  for (size_t d = 0; d < n; ++d) placeholders[d] = PlaceholderCost::placeholders(s.regions[d]);
  // The cost and extractor of each region under its current prices;
  // rebuilt only for regions whose prices changed.
  std::vector<std::unique_ptr<PlaceholderCost>> cost(n);
  std::vector<std::unique_ptr<egraph::DagExtractor>> built(n);
  std::vector<const egraph::DagExtractor*> extractor(n, nullptr);
  std::vector<bool> stale(n, true);
  auto refresh = [&](size_t d) {
    if (!stale[d]) return;
    stale[d] = false;
    const bool unpriced = std::all_of(leaf[d].begin(), leaf[d].end(), [](double c) { return c < 0; });
    if (unpriced && s.regions[d].unpriced_extractor) {
      extractor[d] = s.regions[d].unpriced_extractor.get();
      return;
    }
    // A region priced before differs from its last extractor's costs in its
    // placeholders alone: their own costs are all that is asked again.
    auto next_cost = std::make_unique<PlaceholderCost>(s.regions[d], placeholders[d], *base[d], leaf[d]);
    std::unique_ptr<egraph::DagExtractor> next;
    if (extractor[d]) {
      std::vector<egraph::NodeId> repriced;
      for (const PlaceholderCost::Placeholder& p : placeholders[d]) repriced.push_back(p.node);
      next = std::make_unique<egraph::DagExtractor>(*extractor[d], *next_cost, repriced);
    } else {
      next = std::make_unique<egraph::DagExtractor>(*s.regions[d].egraph, *next_cost);
    }
    built[d] = std::move(next);
    cost[d] = std::move(next_cost);
    extractor[d] = built[d].get();
  };
  // One region reads no other region's values: its placeholders are graph
  // inputs and weights, priced as themselves.
  for (size_t pass = 0; n > 1 && pass <= n + 1; ++pass) {
    bool changed = false;
    for (size_t d = 0; d < n; ++d) {
      const Instance& inst = s.split.instances[first_instance[d]];
      for (size_t k = 0; k < inst.inputs.size(); ++k) {
        const auto [j, r] = home[inst.inputs[k].value];
        if (j == UINT32_MAX) continue;  // a source, or a loop input of sources: priced as itself
        const size_t from = s.split.instances[j].region;
        if (!extractor[from]) {  // not built yet: priced in the next pass
          changed = true;
          continue;
        }
        const double c = extractor[from]->cost(s.regions[from].roots[r]);
        if (c != leaf[d][k]) {
          leaf[d][k] = c;
          stale[d] = true;
          changed = true;
        }
      }
      refresh(d);
    }
    if (!changed) break;
  }
  std::vector<egraph::Term> terms(n);
  parallel_indices(n, threads, [&](size_t d) {
    refresh(d);
    terms[d] = greedy_term(s.regions[d], *extractor[d]);
  });
  return terms;
}

}  // namespace

nlohmann::json to_json(const Report& report) {
  const roll::RollReport& r = report.roll;
  const EGraphReport& e = report.egraph;
  const Times& t = report.times;
  return {
      {"roll",
       {{"loops", r.loops},
        {"trips", r.trips},
        {"body_nodes", r.body_nodes},
        {"hlir_nodes_before", r.hlir_nodes_before},
        {"hlir_nodes_after", r.hlir_nodes_after}}},
      {"egraph",
       {{"egraphs", e.egraphs},
        {"regions", e.regions},
        {"nodes", e.nodes},
        {"classes", e.classes},
        {"iterations", e.iterations},
        {"stop_reason", std::string(egraph::stop_reason_name(e.stop))},
        {"budget_stops", e.budget_stops}}},
      {"compile",
       {{"roll_ms", t.roll_ms},
        {"saturate_ms", t.saturate_ms},
        {"extract_ms", t.extract_ms},
        {"unroll_ms", t.unroll_ms},
        {"total_ms", t.total_ms}}},
  };
}

Saturated saturate(const Graph& hlir, const Options& options) {
  Saturated s;

  // 1. Roll repeated layers. The rolled graph is split into regions while
  // the roll's last search (the one that finds nothing more) runs.
  auto t = Clock::now();
  std::optional<Split> split;  // of the last graph the roll passed
  auto split_of = [&](const Graph& g) {
    const auto split_start = Clock::now();
    split = compile::split(g, options.unroll_union_max_trips, options.split_regions);
    spdlog::debug("split: {} regions, {} distinct, in {:.2f} ms", split->instances.size(), split->regions.size(),
                  ms_since(split_start));
  };
  // A graph a later roll replaces is never compiled: a failed split of it
  // is no error (the split of the result, if it fails, fails again below).
  auto split_beside = [&](const Graph& g) {
    split.reset();
    try {
      split_of(g);
    } catch (const std::exception&) {
      // Left unsplit: split again (and reported) below if it is the result.
    }
  };
  if (options.print_after) options.print_after("hlir", print_graph(hlir));
  if (options.roll) {
    roll::RollResult r = roll::auto_roll(hlir, split_beside);
    s.rolled = std::move(r.graph);
    s.report.roll = std::move(r.report);
  } else {
    s.rolled = hlir;
    s.report.roll.hlir_nodes_before = s.report.roll.hlir_nodes_after = hlir.num_live();
  }
  s.report.times.roll_ms = ms_since(t);
  spdlog::info("roll: {} loops, {} -> {} nodes in {:.1f} ms", s.report.roll.loops, s.report.roll.hlir_nodes_before,
               s.report.roll.hlir_nodes_after, s.report.times.roll_ms);
  if (options.print_after) options.print_after("roll", print_graph(s.rolled));

  // 2. Split into regions (unless done beside the roll) and saturate each
  // distinct one, in parallel. Rule files are read (and a bad one reported)
  // before any region starts.
  t = Clock::now();
  if (!split) split_of(s.rolled);
  s.split = std::move(*split);
  if (options.print_after) {
    std::string text;
    for (size_t i = 0; i < s.split.regions.size(); ++i)
      text += fmt::format("; region {}\n{}\n", i, print_graph(s.split.regions[i].graph));
    options.print_after("split", text);
  }
  const auto rules_start = Clock::now();
  const std::shared_ptr<const CompiledRules> rules = load_rules(options.rule_files);
  spdlog::debug("rule files read and compiled in {:.2f} ms", ms_since(rules_start));
  s.regions.resize(s.split.regions.size());
  parallel_indices(s.regions.size(), options.threads, [&](size_t i) {
    const auto region_start = Clock::now();
    s.regions[i] = build_region(s.split.regions[i], rules->lang);
    s.regions[i].cost = options.cost;
    saturate_region(s.regions[i], *rules, options);
    if (i == 0 && s.regions.size() > 1) {
      RegionEGraph& first = s.regions[0];
      first.unpriced_cost = extraction_cost(first);
      first.unpriced_extractor = std::make_unique<egraph::DagExtractor>(*first.egraph, *first.unpriced_cost);
    }
    spdlog::debug("region {}: {} graph nodes, {} e-nodes, {} iterations ({}) in {:.1f} ms", i,
                  s.split.regions[i].graph.num_live(), s.regions[i].egraph->num_nodes(),
                  s.regions[i].saturation.iterations, egraph::stop_reason_name(s.regions[i].saturation.stop),
                  ms_since(region_start));
  });
  EGraphReport& e = s.report.egraph;
  e.egraphs = s.regions.size();
  e.regions = s.split.instances.size();
  for (const RegionEGraph& r : s.regions) {
    e.nodes += r.egraph->num_nodes();
    e.classes += r.egraph->num_classes();
    e.iterations += r.saturation.iterations;
    if (e.stop == egraph::StopReason::Saturated) e.stop = r.saturation.stop;
  }
  for (size_t i = 0; i < s.regions.size(); ++i)
    for (const egraph::StepReport& step : s.regions[i].saturation.steps)
      e.budget_stops.push_back(fmt::format("region {}: {} stopped at its {} after {} iterations, +{} nodes; the steps "
                                           "after it ran",
                                           i, step.schedule, egraph::stop_reason_name(step.stop), step.iterations,
                                           step.nodes_added));
  for (const std::string& line : e.budget_stops) spdlog::warn("saturate: {}", line);
  s.report.times.saturate_ms = ms_since(t);
  spdlog::info("saturate: {} regions, {} e-graphs, {} nodes, {} classes, {} iterations ({}) in {:.1f} ms",
               e.regions, e.egraphs, e.nodes, e.classes, e.iterations, egraph::stop_reason_name(e.stop),
               s.report.times.saturate_ms);
  if (options.print_after) {
    std::string text;
    for (size_t i = 0; i < s.regions.size(); ++i)
      text += fmt::format("region {}: {} e-nodes, {} classes, {} iterations, stop {}\n", i,
                          s.regions[i].egraph->num_nodes(), s.regions[i].egraph->num_classes(),
                          s.regions[i].saturation.iterations, egraph::stop_reason_name(s.regions[i].saturation.stop));
    options.print_after("saturate", text);
  }
  return s;
}

std::unique_ptr<egraph::CostFunction> extraction_cost(const RegionEGraph& region) {
  return std::make_unique<hlir::HlirCost>(*region.lang, region.cost);
}

egraph::Term extract_greedy(const RegionEGraph& region, const egraph::CostFunction& cost) {
  const egraph::DagExtractor extractor(*region.egraph, cost);
  return greedy_term(region, extractor);
}

namespace {

egraph::Term greedy_term(const RegionEGraph& region, const egraph::DagExtractor& extractor) {
  const egraph::EGraph& eg = *region.egraph;
  const hlir::HlirLanguage& lang = *region.lang;
  std::map<uint32_t, egraph::NodeId> chosen_instead;  // class -> node, overriding the extractor's choice
  auto choice = [&](egraph::ClassId c) {
    const auto it = chosen_instead.find(c.value);
    return it != chosen_instead.end() ? it->second : extractor.best_node(c);
  };
  for (;;) {
    // The term of the current choices: a post-order walk over classes.
    egraph::Term term;
    std::vector<uint32_t> index_of(eg.class_id_bound(), UINT32_MAX);  // class -> term node
    std::vector<bool> on_path(eg.class_id_bound(), false);
    std::set<int64_t> used_loops;
    for (const egraph::ClassId root : region.roots) {
      struct Frame {
        egraph::ClassId cls;
        size_t next = 0;
      };
      std::vector<Frame> stack{{eg.find_const(root)}};
      while (!stack.empty()) {
        const egraph::ClassId c = stack.back().cls;
        if (index_of[c.value] != UINT32_MAX) {
          stack.pop_back();
          continue;
        }
        if (!extractor.extractable(c)) fail("extraction: class {} has no finite-cost term", c.value);
        const egraph::ENodeRef node = eg.node(choice(c));
        on_path[c.value] = true;
        if (stack.back().next < node.children.size()) {
          const egraph::ClassId child = eg.find_const(node.children[stack.back().next++]);
          if (index_of[child.value] != UINT32_MAX) continue;
          if (on_path[child.value]) fail("extraction: the chosen nodes form a cycle through class {}", child.value);
          stack.push_back({child});
          continue;
        }
        egraph::Term::Node tn{node.op, node.attr, {}};
        for (const egraph::ClassId child : node.children) tn.children.push_back(index_of[eg.find_const(child).value]);
        if (const std::optional<LoopAttr> marker = marker_of(lang, node)) used_loops.insert(marker->loop);
        index_of[c.value] = static_cast<uint32_t>(term.nodes.size());
        term.nodes.push_back(std::move(tn));
        on_path[c.value] = false;
        stack.pop_back();
      }
      term.roots.push_back(index_of[eg.find_const(root).value]);
    }

    // A unioned loop whose rolled form is used needs every loop_end in the
    // program: chosen, and read (a consumer may read the chain's final value
    // past a loop_end class that still chooses its marker). If one is
    // missing, take the whole loop unrolled (each exit's cheapest node that
    // is not one of the loop's markers).
    bool changed = false;
    for (const UnionedLoop& u : region.unioned_loops) {
      if (!used_loops.count(u.loop)) continue;
      const bool complete = std::all_of(u.loop_ends.begin(), u.loop_ends.end(), [&](egraph::ClassId c) {
        const std::optional<LoopAttr> m = marker_of(lang, eg.node(choice(c)));
        return m && m->loop == u.loop && index_of[eg.find_const(c).value] != UINT32_MAX;
      });
      if (complete) {
        // The loop stays rolled: each value it exports is read from the loop
        // (its loop_output), not rebuilt from the unrolled chain beside it,
        // which unrolling would compute a second time, perhaps otherwise
        // (a layer's KV cache for the output and for the attention).
        for (const egraph::ClassId c : u.loop_outputs) {
          const std::optional<LoopAttr> m = marker_of(lang, eg.node(choice(c)));
          if (m && m->loop == u.loop) continue;
          for (const egraph::NodeId n : eg.class_nodes(eg.find_const(c))) {
            const std::optional<LoopAttr> mk = marker_of(lang, eg.node(n));
            if (!mk || mk->loop != u.loop || !(extractor.node_cost(n) < std::numeric_limits<double>::infinity())) continue;
            chosen_instead[eg.find_const(c).value] = n;
            changed = true;
            break;
          }
        }
        continue;
      }
      std::vector<egraph::ClassId> exits = u.loop_ends;
      exits.insert(exits.end(), u.loop_outputs.begin(), u.loop_outputs.end());
      for (const egraph::ClassId c : exits) {
        double best = std::numeric_limits<double>::infinity();
        std::optional<egraph::NodeId> pick;
        for (const egraph::NodeId n : eg.class_nodes(eg.find_const(c))) {
          const egraph::ENodeRef node = eg.node(n);
          const std::optional<LoopAttr> m = marker_of(lang, node);
          if (m && m->loop == u.loop) continue;
          const double cst = extractor.node_cost(n);
          if (cst < best) {
            best = cst;
            pick = n;
          }
        }
        if (pick && choice(c) != *pick) {
          chosen_instead[eg.find_const(c).value] = *pick;
          changed = true;
        }
      }
    }
    if (!changed) return term;
  }
}

}  // namespace

std::vector<egraph::Term> extract_greedy(const Saturated& saturated, int threads) {
  return extract_regions(saturated, threads);
}

Compiled run(const Graph& hlir, const Options& options) {
  const auto start = Clock::now();
  Saturated s = saturate(hlir, options);
  Compiled result;
  result.report = s.report;

  // 3. Extract one term per region (the cheapest under the cost, greedily).
  auto t = Clock::now();
  const std::vector<egraph::Term> terms = extract_greedy(s, options.threads);
  result.report.times.extract_ms = ms_since(t);

  // 4. Stitch the regions together and unroll the loops.
  t = Clock::now();
  Graph stitched = s.rolled_program(terms);
  const double stitch_ms = ms_since(t);
  if (options.print_after) options.print_after("extract", print_graph(stitched));
  // A value the loop exports (loop_output) may be extracted from the unrolled
  // chain while the loop itself stays rolled: unrolling then builds it twice
  // (a layer's KV cache for the output and for the attention). CSE keeps one.
  result.program = cse(roll::unroll(std::move(stitched)));
  const double unrolled_ms = ms_since(t);
#ifndef NDEBUG
  // Nodes are built with the types their terms give (the stitch) or cloned
  // with their original's (unroll), not inferred again: debug builds check
  // that all of it types and is acyclic.
  result.program.verify();
#endif
  spdlog::debug("stitch {:.2f} ms, unroll {:.2f} ms, verify {:.2f} ms", stitch_ms, unrolled_ms - stitch_ms,
                ms_since(t) - unrolled_ms);
  result.report.times.unroll_ms = ms_since(t);
  result.report.times.total_ms = ms_since(start);
  spdlog::info("extract {:.1f} ms, unroll {:.1f} ms: {} nodes", result.report.times.extract_ms,
               result.report.times.unroll_ms, result.program.num_live());
  if (options.print_after) options.print_after("unroll", print_graph(result.program));
  return result;
}

void prepare_rules(const std::vector<std::string>& rule_files) noexcept {
  try {
    const std::lock_guard<std::mutex> lock(rules_mutex);
    // Each file parsed twice: a parse is reused only once a second one,
    // between agreeing stamps, has verified it (read_rule_file); the
    // compile then only stamps the files again.
    for (const std::string& path : rule_files) (void)read_rule_file(path);
    (void)load_rules_locked(rule_files);
  } catch (...) {
    // The compile reads the files again and reports what is wrong.
  }
}

}  // namespace spool::compile
