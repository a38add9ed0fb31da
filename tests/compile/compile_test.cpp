// The pipeline end to end on the tiny llama: rolled and unrolled compiles,
// checked against the reference interpreter.

#include <doctest/doctest.h>

#include <spool/compile/compile.hpp>
#include <spool/compile/region.hpp>
#include <spool/hlir/cost.hpp>
#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include <spool/models/llama.hpp>

using namespace spool;

namespace {
void check_same_outputs(const Graph& reference, const Graph& program) {
  const interp::Env env = interp::random_inputs(reference, 11, 16);
  const auto want = interp::run(reference, env);
  const auto got = interp::run(program, env);
  REQUIRE(want.size() == got.size());
  for (const auto& [name, value] : want) {
    INFO(name);
    CHECK(interp::compare(got.at(name), value).max_rel_to_scale <= 1e-5);
  }
}
}  // namespace

namespace {

const std::string kRules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";

// The tiny llama with `layers` layers, prefill of 8 tokens.
Graph tiny_llama(int64_t layers) {
  models::LlamaConfig config = models::LlamaConfig::tiny();
  config.layers = layers;
  return models::build_llama(config, models::Phase::prefill(8));
}

// The extraction cost of a program's own nodes (each distinct node once),
// under the cost compile extracts by.
double program_cost(const Graph& program) {
  return hlir::program_cost(program);
}

// saturate + greedy extraction, stopping before the stitched program is unrolled.
Graph rolled_program(const Graph& g, const compile::Options& options) {
  const compile::Saturated s = compile::saturate(g, options);
  return s.rolled_program(compile::extract_greedy(s));
}

size_t count_ops(const Graph& g, Op op) {
  size_t n = 0;
  for (const NodeId id : g.live_ids()) n += g.node(id).op == op;
  return n;
}

// x [4, 8] through `layers` layers of `inner` chained steps each (a nested repeat).
Graph nested(int layers, int inner) {
  Graph g("nested");
  Tensor x = input(g, "x", DType::F32, {4, 8});
  for (int i = 0; i < layers; ++i) {
    for (int j = 0; j < inner; ++j) x = nn::relu(x * weight(g, fmt::format("s{}_{}", i, j), DType::F32, {8}) + 1.0);
    x = x + weight(g, fmt::format("b{}", i), DType::F32, {8});
  }
  output("y", x);
  return g;
}

}  // namespace

TEST_CASE("region saturation with 1 and 2 threads gives identical programs") {
  for (const Graph& g : {tiny_llama(8), nested(6, 6)}) {
    INFO(g.name());
    compile::Options options;
    options.rule_files = {kRules};
    options.threads = options.runner.threads = 1;
    const compile::Saturated one = compile::saturate(g, options);
    options.threads = options.runner.threads = 2;
    const compile::Saturated two = compile::saturate(g, options);
    CHECK(one.report.egraph.egraphs >= 2);
    REQUIRE(one.regions.size() == two.regions.size());
    std::vector<egraph::Term> terms_one, terms_two;
    for (size_t i = 0; i < one.regions.size(); ++i) {
      CHECK(one.regions[i].egraph->num_nodes() == two.regions[i].egraph->num_nodes());
      CHECK(one.regions[i].egraph->num_classes() == two.regions[i].egraph->num_classes());
      terms_one.push_back(compile::extract_greedy(one.regions[i], *compile::extraction_cost(one.regions[i])));
      terms_two.push_back(compile::extract_greedy(two.regions[i], *compile::extraction_cost(two.regions[i])));
      CHECK(terms_one.back() == terms_two.back());
    }
    CHECK(one.program(terms_one) == two.program(terms_two));
    // The first region's extractor, built beside the others' saturation, is
    // the one extraction would build; the terms are the same without it.
    REQUIRE(two.regions[0].unpriced_extractor);
    for (size_t i = 1; i < two.regions.size(); ++i) CHECK_FALSE(two.regions[i].unpriced_extractor);
    const egraph::DagExtractor fresh(*two.regions[0].egraph, *compile::extraction_cost(two.regions[0]));
    for (const egraph::ClassId c : two.regions[0].egraph->classes()) {
      CHECK(two.regions[0].unpriced_extractor->cost(c) == fresh.cost(c));
      CHECK(two.regions[0].unpriced_extractor->best_node(c) == fresh.best_node(c));
    }
    compile::Saturated without = compile::saturate(g, options);
    without.regions[0].unpriced_extractor.reset();
    CHECK(compile::extract_greedy(without) == compile::extract_greedy(two));
    options.threads = options.runner.threads = 1;
    const compile::Compiled a = compile::run(g, options);
    options.threads = options.runner.threads = 2;
    const compile::Compiled b = compile::run(g, options);
    CHECK(a.program == b.program);
    check_same_outputs(g, a.program);
  }
}

TEST_CASE("a nested repeat with long loops is three regions, and identical regions are saturated once") {
  // Six layers of six steps: both loops are long, so the outer body and the
  // inner body are regions of their own.
  compile::Options options;
  options.rule_files = {kRules};
  const Graph g = nested(6, 6);
  const compile::Compiled r = compile::run(g, options);
  CHECK(r.report.roll.loops == 2);
  CHECK(r.report.egraph.regions == 3);
  CHECK(r.report.egraph.egraphs == 3);
  check_same_outputs(g, r.program);

  // Four steps a layer: the inner loop is short, so it stays in the outer
  // body's region, rolled and unrolled at once.
  const Graph short_inner = nested(6, 4);
  const compile::Compiled si = compile::run(short_inner, options);
  CHECK(si.report.roll.loops == 2);
  CHECK(si.report.egraph.regions == 2);
  check_same_outputs(short_inner, si.program);
  const compile::Saturated sat = compile::saturate(short_inner, options);
  size_t unioned = 0;
  for (const compile::RegionEGraph& region : sat.regions) unioned += region.unioned_loops.size();
  CHECK(unioned == 1);

  // Two runs of six identical layers, split by an exp2 that does not repeat:
  // two loops whose bodies are the same region.
  Graph two("two-loops");
  Tensor x = input(two, "x", DType::F32, {4, 8});
  for (int half = 0; half < 2; ++half) {
    for (int i = 0; i < 6; ++i)
      x = nn::relu(x * weight(two, fmt::format("w{}_{}", half, i), DType::F32, {8}) + 1.0) * 0.5;
    if (half == 0) x = exp2(x * -1.0);
  }
  output("y", x);
  const compile::Compiled t = compile::run(two, options);
  CHECK(t.report.roll.loops == 2);
  CHECK(t.report.egraph.regions == 3);
  CHECK(t.report.egraph.egraphs == 2);
  check_same_outputs(two, t.program);
}

TEST_CASE("the program extracted region by region costs no more than one whole-graph e-graph gives") {
  // Static loop inputs (scalars, RoPE tables, the causal mask) must fuse
  // into the body's kernels as they do in one e-graph for the whole graph.
  std::vector<Graph> graphs{nested(6, 6)};
  for (int layers : {2, 8}) {
    graphs.push_back(tiny_llama(layers));
  }
  for (const Graph& g : graphs) {
    compile::Options options;
    options.rule_files = {kRules};
    const Graph by_regions = rolled_program(g, options);
    options.split_regions = false;
    const Graph whole = rolled_program(g, options);
    const double cost_regions = program_cost(by_regions), cost_whole = program_cost(whole);
    MESSAGE(g.name() << " (" << g.num_live() << " nodes): cost " << cost_regions << " by regions, " << cost_whole
                     << " whole");
    CHECK(cost_regions <= cost_whole * (1 + 1e-12));
    check_same_outputs(g, roll::unroll(by_regions));
  }
}

TEST_CASE("the compile report has its JSON keys") {
  compile::Options options;
  options.rule_files = {kRules};
  const compile::Compiled r = compile::run(tiny_llama(8), options);
  const nlohmann::json j = to_json(r.report);
  CHECK(j.at("roll").at("loops") == 1);
  CHECK(j.at("roll").at("trips") == std::vector<int64_t>{8});
  CHECK(j.at("roll").at("body_nodes") == r.report.roll.body_nodes);
  CHECK(r.report.roll.body_nodes > 0);
  CHECK(j.at("roll").at("hlir_nodes_before").get<size_t>() > j.at("roll").at("hlir_nodes_after").get<size_t>());
  CHECK(j.at("egraph").at("egraphs") == 2);
  CHECK(j.at("egraph").at("nodes") == r.report.egraph.nodes);
  CHECK(j.at("egraph").at("classes").get<size_t>() > 0);
  CHECK(j.at("egraph").at("iterations").get<size_t>() > 0);
  CHECK(j.at("egraph").at("stop_reason") == "saturated");
  for (const char* key : {"roll_ms", "saturate_ms", "extract_ms", "unroll_ms", "total_ms"})
    CHECK(j.at("compile").at(key).get<double>() >= 0.0);
  CHECK(j.at("compile").at("total_ms").get<double>() >=
        j.at("compile").at("saturate_ms").get<double>() + j.at("compile").at("roll_ms").get<double>());
}

TEST_CASE("a 3-trip chain of scalar multiplies followed by an exp2 fuses through the unroll-union") {
  // loop 1 (3 trips): state = state * 2; then exp2 of the last state.
  Graph g("short-loop");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  const Tensor two = constant(g, 2.0, DType::F32, {});
  const LoopAttr loop{1, 3, 0};
  const Tensor state(&g, g.add(Op::LoopStart, {x.edge()}, loop));
  const Tensor factor(&g, g.add(Op::LoopInputStatic, {two.edge()}, loop));
  const Tensor next = state * factor;
  const Tensor end(&g, g.add(Op::LoopEnd, {next.edge(), state.edge()}, loop));
  output("y", exp2(end));
  const Graph reference = roll::unroll(g);

  compile::Options options;
  options.rule_files = {kRules};
  const compile::Compiled fused = compile::run(g, options);
  check_same_outputs(reference, fused.program);
  // One kernel: the three multiplies and the exp2 in one fused program.
  size_t kernels = 0;
  for (const NodeId id : fused.program.live_ids()) {
    const Node& n = fused.program.node(id);
    if (op_info(n.op).cls == OpClass::Source) continue;
    ++kernels;
    REQUIRE(n.op == Op::Fused);
    const ProgramAttr& program = std::get<ProgramAttr>(n.attr);
    size_t muls = 0, exps = 0;
    for (const ProgramInstr& instr : program.instrs) {
      muls += instr.op == Op::Mul;
      exps += instr.op == Op::Exp2;
    }
    CHECK(muls == 3);
    CHECK(exps == 1);
  }
  CHECK(kernels == 1);

  // Without the union the loop is a region of its own: a kernel per
  // iteration and one for the exp2.
  options.unroll_union_max_trips = 0;
  const compile::Compiled apart = compile::run(g, options);
  check_same_outputs(reference, apart.program);
  CHECK(count_ops(apart.program, Op::Fused) + count_ops(apart.program, Op::Mul) + count_ops(apart.program, Op::Exp2) ==
        4);
}

TEST_CASE("rolled and unrolled compiles of the tiny llama with the shipped rules") {
  const std::string loops = std::string(SPOOL_SOURCE_DIR) + "/rules/loops.rules";
  for (int layers : {2, 4, 8, 16}) {
    INFO(layers << " layers");
    const Graph g = tiny_llama(layers);
    compile::Options options;
    options.rule_files = {kRules};
    const compile::Compiled rolled = compile::run(g, options);
    options.roll = false;
    const compile::Compiled unrolled = compile::run(g, options);
    CHECK(rolled.report.roll.loops == 1);
    CHECK(rolled.report.roll.trips == std::vector<int64_t>{layers});
    CHECK(unrolled.report.roll.loops == 0);
    CHECK(count_ops(rolled.program, Op::Gemm) > 0);
    check_same_outputs(g, rolled.program);
    check_same_outputs(g, unrolled.program);
    const double cost_rolled = program_cost(rolled.program), cost_unrolled = program_cost(unrolled.program);
    MESSAGE(layers << " layers: e-graph " << rolled.report.egraph.nodes << " nodes rolled vs "
                   << unrolled.report.egraph.nodes << " unrolled; program " << rolled.program.num_live() << " vs "
                   << unrolled.program.num_live() << " nodes, cost " << cost_rolled << " vs " << cost_unrolled);
    // Up to 4 trips the loop's region holds it both rolled and unrolled
    // (unroll-union); beyond, the body is saturated once, in fewer e-nodes.
    if (layers > 4) CHECK(rolled.report.egraph.nodes < unrolled.report.egraph.nodes);
    CHECK(cost_rolled <= cost_unrolled * (1 + 1e-12));
    CHECK(compacted(cse(rolled.program)) == compacted(cse(unrolled.program)));

    // With the loop-marker rules alone the programs are the same at every depth.
    compile::Options plain;
    plain.rule_files = {loops};
    const compile::Compiled a = compile::run(g, plain);
    plain.roll = false;
    const compile::Compiled b = compile::run(g, plain);
    CHECK(compacted(cse(a.program)) == compacted(cse(b.program)));
  }
}

TEST_CASE("a loop input with one source in every iteration becomes static in the e-graph; the program is unchanged") {
  // The tiny llama rolled, with every static input that reads a source
  // rewritten as a loop_input listing that source once per trip (auto_roll
  // writes the static form itself when the sources are one node).
  const Graph g = tiny_llama(8);
  const Graph rolled = roll::auto_roll(g).graph;
  Graph marked = rolled;
  size_t replaced = 0;
  for (const NodeId id : rolled.live_ids()) {
    const Node& n = rolled.node(id);
    if (n.op != Op::LoopInputStatic || op_info(rolled.node(n.inputs[0].src).op).cls != OpClass::Source) continue;
    const LoopAttr loop = std::get<LoopAttr>(n.attr);
    const NodeId input = marked.add(Op::LoopInput, std::vector<Edge>(static_cast<size_t>(loop.trips), n.inputs[0]), loop);
    marked.replace_uses(id, Edge{input, {}});
    marked.remove(id);
    ++replaced;
  }
  REQUIRE(replaced > 0);
  CHECK(count_ops(marked, Op::LoopInputStatic) + replaced == count_ops(rolled, Op::LoopInputStatic));

  compile::Options options;
  options.rule_files = {kRules};
  options.roll = false;  // the markers as written
  // Classes holding a loop_input, and those of them also holding a
  // loop_input_static (built by loop-input-same-sources): exactly the
  // rewritten ones, not the per-layer weights' loop inputs. One e-graph for
  // the whole graph: split into regions, the body reads a loop input whose
  // sources are one edge as a copy of that source, and no e-graph holds it.
  compile::Options whole = options;
  whole.split_regions = false;
  const compile::Saturated s = compile::saturate(marked, whole);
  size_t with_input = 0, with_both = 0;
  for (const compile::RegionEGraph& region : s.regions) {
    egraph::EGraph& eg = *region.egraph;
    for (const egraph::ClassId c : eg.classes()) {
      bool input = false, made_static = false;
      for (const egraph::NodeId n : eg.class_nodes(c)) {
        input |= eg.node(n).op == region.lang->op(Op::LoopInput);
        made_static |= eg.node(n).op == region.lang->op(Op::LoopInputStatic);
      }
      with_input += input;
      with_both += input && made_static;
    }
  }
  CHECK(with_both == replaced);
  CHECK(with_input > with_both);

  const compile::Compiled from_marked = compile::run(marked, options);
  const compile::Compiled unrolled = compile::run(g, options);
  options.roll = true;
  const compile::Compiled from_rolled = compile::run(g, options);
  check_same_outputs(g, from_marked.program);
  CHECK(compacted(cse(from_marked.program)) == compacted(cse(unrolled.program)));
  CHECK(compacted(cse(from_marked.program)) == compacted(cse(from_rolled.program)));
}

TEST_CASE("loop inputs of per-layer weights are in no e-graph; regions read them as placeholders") {
  const Graph g = tiny_llama(8);
  compile::Options options;
  options.rule_files = {kRules};
  const compile::Saturated s = compile::saturate(g, options);
  REQUIRE(count_ops(s.rolled, Op::LoopInput) > 0);
  size_t in_egraphs = 0;
  for (const compile::RegionEGraph& region : s.regions)
    for (const egraph::ClassId c : region.egraph->classes())
      for (const egraph::NodeId n : region.egraph->class_nodes(c))
        in_egraphs += region.egraph->node(n).op == region.lang->op(Op::LoopInput);
  CHECK(in_egraphs == 0);
  // Each is read by the body through a placeholder, and computed by no region.
  const auto home = compile::home_of(s.rolled, s.split);
  size_t read = 0;
  for (const compile::Instance& inst : s.split.instances)
    for (const NodeId m : inst.inputs)
      if (s.rolled.node(m).op == Op::LoopInput) {
        CHECK(home[m.value].first == UINT32_MAX);
        ++read;
      }
  CHECK(read == count_ops(s.rolled, Op::LoopInput));
  const Graph program = s.program(compile::extract_greedy(s));
  check_same_outputs(g, program);
  options.roll = false;
  CHECK(compacted(cse(program)) == compacted(cse(compile::run(g, options).program)));
}

TEST_CASE("a loop input of a tied weight (a node per layer, one name) is read like the other weights") {
  // Regions read each source node through a placeholder of its own, so the
  // sources are different leaves and no rule can make the input static.
  Graph g("tied");
  NodeId h = g.add_source(Op::Input, NameAttr{"x"}, DType::F32, {4});
  for (int l = 0; l < 6; ++l) {
    const NodeId w = g.add_source(Op::Weight, NameAttr{"w"}, DType::F32, {4});
    const NodeId m = g.add(Op::Mul, {Edge{h, {}}, Edge{w, {}}}, NoAttr{});
    h = g.add(Op::Add, {Edge{m, {}}, Edge{h, {}}}, NoAttr{});
  }
  g.add_output("y", Edge{h, {}});
  compile::Options options;
  options.rule_files = {kRules};
  const compile::Saturated s = compile::saturate(g, options);
  REQUIRE(count_ops(s.rolled, Op::LoopInput) == 1);
  const auto home = compile::home_of(s.rolled, s.split);
  for (const NodeId id : s.rolled.live_ids())
    if (s.rolled.node(id).op == Op::LoopInput) CHECK(home[id.value].first == UINT32_MAX);
  check_same_outputs(g, s.program(compile::extract_greedy(s)));
}

TEST_CASE("a region term whose node reads a later node is an error, not a program") {
  const Graph g = nested(6, 2);
  compile::Options options;
  options.rule_files = {kRules};
  const compile::Saturated s = compile::saturate(g, options);
  std::vector<egraph::Term> terms = compile::extract_greedy(s);
  CHECK_NOTHROW(s.rolled_program(terms));
  for (egraph::Term::Node& n : terms[0].nodes)
    if (!n.children.empty()) {
      n.children[0] = static_cast<uint32_t>(terms[0].nodes.size());
      break;
    }
  CHECK_THROWS_WITH_AS(s.rolled_program(terms), doctest::Contains("which does not come before it"), Error);
}

TEST_CASE("a loop whose carried state resolves to a constant compiles, with and without the unroll-union") {
  // loop_end(next = a constant outside the body): after the first iteration
  // the state is that constant (the iteration-invariant slot of roll::unroll).
  Graph g("invariant");
  const Tensor x = input(g, "x", DType::F32, {3, 8});
  const Tensor c = constant(g, 2.0, DType::F32, {3, 8});
  for (const int64_t trips : {3, 6}) {
    INFO(trips << " trips");
    Graph h = g;
    const LoopAttr loop{1, trips, 0};
    const Tensor state(&h, h.add(Op::LoopStart, {x.edge()}, loop));
    const Tensor body = exp2(state * 10.0);
    const Tensor end(&h, h.add(Op::LoopEnd, {c.edge(), state.edge()}, loop));
    output("final", end);
    output("first", Tensor(&h, h.add(Op::LoopOutput, {body.edge()}, LoopAttr{1, trips, 0})));
    output("last", Tensor(&h, h.add(Op::LoopOutput, {body.edge()}, LoopAttr{1, trips, trips - 1})));
    const Graph reference = roll::unroll(h);
    compile::Options options;
    options.rule_files = {kRules};
    const compile::Compiled r = compile::run(h, options);
    check_same_outputs(reference, r.program);
    CHECK(r.report.egraph.regions == (trips > 4 ? 2u : 1u));
    CHECK(count_ops(r.program, Op::LoopStart) + count_ops(r.program, Op::LoopEnd) == 0);
  }
}

TEST_CASE("compiles with several rule sets in turn each get their own rules") {
  const Graph g = tiny_llama(2);
  const std::vector<std::vector<std::string>> sets = {
      {kRules}, {std::string(SPOOL_SOURCE_DIR) + "/rules/loops.rules"}, {}};
  std::vector<Graph> first;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < sets.size(); ++i) {
      compile::Options options;
      options.rule_files = sets[i];
      Graph program = compile::run(g, options).program;
      if (round == 0)
        first.push_back(std::move(program));
      else
        CHECK(program == first[i]);
    }
  // The three sets give three programs, so a set compiled with another's
  // rules would show above. (The shipped rules fuse kernels.)
  CHECK(first[0].num_live() < first[1].num_live());
  CHECK(first[0] != first[2]);
  CHECK(first[1] != first[2]);
}

TEST_CASE("a bad rule file is a diagnostic naming the file and the place") {
  const std::string path = std::string(SPOOL_BINARY_DIR) + "/compile_test_bad.rules";
  {
    std::ofstream out(path);
    out << "(ruleset r)\n(rewrite bad (nosuchop ?x) ?x :ruleset r)\n";
  }
  compile::Options options;
  options.rule_files = {path};
  const Graph g = nested(2, 2);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second read must not come from a cache
    try {
      compile::run(g, options);
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("compile_test_bad.rules:2:15: error: unknown op 'nosuchop'") !=
            std::string::npos);
    }
  }
  // Fixed in place: the next compile reads the new text.
  {
    std::ofstream out(path);
    out << "(ruleset r)\n(rewrite mul-one (mul ?x ?x) (mul ?x ?x) :ruleset r)\n";
  }
  CHECK_NOTHROW(compile::run(g, options));
  // Broken again within the same timestamp tick (the time set back to what
  // it was), to the same size: the cached parse is checked against the bytes.
  const auto fixed_time = std::filesystem::last_write_time(path);
  {
    std::ofstream out(path);
    out << "(ruleset r)\n(rewrite mul-one (mux ?x ?x) (mul ?x ?x) :ruleset r)\n";
  }
  std::filesystem::last_write_time(path, fixed_time);
  CHECK_THROWS_WITH_AS(compile::run(g, options), doctest::Contains("unknown op 'mux'"), Error);
}

TEST_CASE("rules prepared beside another stage: the compile waits for them and gives the same program") {
  const Graph g = tiny_llama(2);
  compile::Options options;
  options.rule_files = {kRules};
  const Graph want = compile::run(g, options).program;
  // Rule files of their own (a copy of the folder, for the files it
  // includes), so that no earlier compile has read them: the compile below
  // starts while prepare_rules may still be reading them, and must wait for
  // it rather than read them beside it.
  const std::filesystem::path dir = std::string(SPOOL_BINARY_DIR) + "/compile_test_prepared";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(std::string(SPOOL_SOURCE_DIR) + "/rules", dir);
  options.rule_files = {(dir / "default.rules").string()};
  {
    std::jthread prepare([&] { compile::prepare_rules(options.rule_files); });
    CHECK(compile::run(g, options).program == want);
  }
  CHECK(compile::run(g, options).program == want);

  // A file that does not parse: prepare_rules stays silent, the compile
  // reports it.
  const std::string bad = std::string(SPOOL_BINARY_DIR) + "/compile_test_prepared_bad.rules";
  {
    std::ofstream out(bad);
    out << "(ruleset r)\n(rewrite bad (nosuchop ?x) ?x :ruleset r)\n";
  }
  CHECK_NOTHROW(compile::prepare_rules({bad}));
  CHECK_NOTHROW(compile::prepare_rules({std::string(SPOOL_BINARY_DIR) + "/no_such_file.rules"}));
  options.rule_files = {bad};
  CHECK_THROWS_WITH_AS(compile::run(g, options), doctest::Contains("unknown op 'nosuchop'"), Error);
}

TEST_CASE("extraction prices kernels for the target: the config changes the program") {
  // An RMSNorm feeding a projection. On a machine whose launches are free
  // and whose vector work is slow, its primitives stay single-op kernels
  // (a fused kernel's cost is dominated by vector work the split form
  // shares); with costly launches it is one rms_norm kernel.
  Graph g("norm_proj");
  const Tensor x = input(g, "x", DType::F32, {256, 512});
  output("y", nn::linear(nn::rms_norm(x, weight(g, "n", DType::F32, {512})), weight(g, "w", DType::F32, {2048, 512})));
  auto kernels_for = [&](const target::NpuConfig& npu) {
    compile::Options options;
    options.rule_files = {kRules};
    options.cost = hlir::cost_config(npu);
    const Graph program = compile::run(g, options).program;
    std::map<std::string, int> ops;
    for (const NodeId id : program.live_ids()) ++ops[std::string(op_name(program.node(id).op))];
    return ops;
  };
  const target::NpuConfig v3 = target::load_config("tpuv3");
  // The derived figures are tpuv3's defaults.
  const hlir::HlirCostConfig derived = hlir::cost_config(v3), defaults;
  CHECK(derived.launch_cycles == defaults.launch_cycles);
  CHECK(derived.dram_bytes_per_cycle == doctest::Approx(defaults.dram_bytes_per_cycle));
  CHECK(derived.matmul_flops_per_cycle == defaults.matmul_flops_per_cycle);
  CHECK(derived.vector_ops_per_cycle == defaults.vector_ops_per_cycle);
  CHECK(derived.sin_slots == defaults.sin_slots);
  CHECK(derived.slow_slots == defaults.slow_slots);

  std::ifstream in(std::string(SPOOL_SOURCE_DIR) + "/configs/tpuv3.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["launch"]["fixed_cycles"] = 0;
  for (auto& [cls, t] : j["vector"]["ops"].items()) t["interval"] = t["interval"].get<int>() * 64;
  const target::NpuConfig slow_vector = target::parse_config(j.dump(), "slow_vector.json");
  j["launch"]["fixed_cycles"] = 1000000;
  const target::NpuConfig costly_launch = target::parse_config(j.dump(), "costly_launch.json");
  const auto a = kernels_for(slow_vector), b = kernels_for(costly_launch);
  CHECK(a.count("rms_norm") == 0);
  CHECK(a.at("reduce") == 1);
  CHECK(a.at("mul") >= 2);
  CHECK(b.at("rms_norm") == 1);
  CHECK(b.at("gemm") == 1);
  CHECK(b.count("mul") == 0);
  CHECK(b.count("reduce") == 0);
}
