// The shipped kernel rules end to end: HLIR saturated with rules/default.rules
// and extracted by the kernel cost model gives LLIR with gemm kernels (with
// fused epilogues) and fused elementwise kernels, which the reference
// executor runs to the interpreter's result (issue 4, acceptance 2).

#include <doctest/doctest.h>

#include <spool/compile/compile.hpp>
#include <spool/hlir/cost.hpp>
#include <spool/interp/interp.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/ir/text.hpp>
#include <spool/nn/nn.hpp>
#include <spool/roll/roll.hpp>
#include <spool/hlir/appliers.hpp>
#include <spool/rules/rule_file.hpp>

#include <spool/models/llama.hpp>
#include <spool/models/moe.hpp>

#include "support/allclose.hpp"

#include <cstdlib>
#include <map>

using namespace spool;

namespace {

const std::string kDefaultRules = std::string(SPOOL_SOURCE_DIR) + "/rules/default.rules";

struct KernelCounts {
  std::map<Op, int> ops;
  int gemm_with_epilogue = 0;
  int gemm_with_prologue = 0;
  int multi_instr_fused = 0;
};

KernelCounts count_kernels(const Graph& g) {
  KernelCounts k;
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    ++k.ops[n.op];
    if (n.op == Op::Gemm) {
      const GemmAttr& a = std::get<GemmAttr>(n.attr);
      if (!a.epilogue.instrs.empty()) ++k.gemm_with_epilogue;
      if (!a.a.instrs.empty() || !a.b.instrs.empty()) ++k.gemm_with_prologue;
    }
    if (n.op == Op::Fused && std::get<ProgramAttr>(n.attr).instrs.size() > 1) ++k.multi_instr_fused;
  }
  return k;
}

// `program`'s outputs against `reference`'s on the same random inputs: each
// within `tolerance` times its scale, exactly when the tolerance is 0.
test::AllClose same_outputs(const Graph& reference, const Graph& program, uint64_t seed, double tolerance) {
  const interp::Env env = interp::random_inputs(reference, seed, 16);
  return test::allclose(interp::run(program, env), interp::run(reference, env), {.stol = tolerance});
}

struct Compiled {
  Graph program;
  egraph::RunReport saturation;
  size_t nodes = 0;
};

// Saturates `hlir` with the default rules in one e-graph, extracts by the
// kernel cost and unrolls: the stages of spool::compile on one region.
Compiled saturate_and_extract(const Graph& hlir) {
  hlir::HlirLanguage lang;
  std::unique_ptr<egraph::EGraph> eg = hlir::make_egraph(lang);
  const std::vector<egraph::ClassId> roots = hlir::add_graph(*eg, lang, hlir);
  eg->rebuild();
  Result<rules::RuleFile> file = rules::load_rule_file(kDefaultRules);
  REQUIRE(file.ok());
  const egraph::Registry& registry = hlir::registry();
  Result<std::vector<egraph::RuleSet>> sets =
      rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  REQUIRE(sets.ok());
  Compiled out;
  egraph::Runner runner;
  out.saturation = runner.run(*eg, sets.value(), rules::schedule_of(file.value()));
  out.nodes = eg->num_nodes();
  const hlir::HlirCost cost(lang);
  const egraph::Extractor extractor(*eg, cost);
  std::vector<std::string> names;
  for (const Output& o : hlir.outputs()) names.push_back(o.name);
  out.program = roll::unroll(hlir::to_graph(lang, extractor.extract(roots).term, names));
  return out;
}

}  // namespace

TEST_CASE("the tiny llama compiles to gemm kernels with epilogues and fused kernels that match the interpreter") {
  for (bool roll : {false, true}) {
    INFO((roll ? "rolled" : "unrolled"));
    models::LlamaConfig config = models::LlamaConfig::tiny();
    config.layers = 2;
    const Graph g = models::build_llama(config, models::Phase::prefill(8));
    const Graph hlir = roll ? roll::auto_roll(g).graph : g;
    const Compiled result = saturate_and_extract(hlir);
    KernelCounts k = count_kernels(result.program);
    MESSAGE(std::string(roll ? "rolled" : "unrolled")
            << ": " << result.program.num_live() << " nodes, " << k.ops[Op::Gemm] << " gemm (" << k.gemm_with_epilogue
            << " with epilogues, " << k.gemm_with_prologue << " with prologues), " << k.ops[Op::Fused] << " fused ("
            << k.multi_instr_fused << " multi-op), " << k.ops[Op::Reduce] << " reduce, " << k.ops[Op::SumReduce]
            << " sum_reduce, " << k.ops[Op::Mul] << " mul; e-graph " << result.nodes << " nodes; "
            << result.saturation.summary());
    // Every projection is a gemm: q, k, v, o, gate, up, down per layer, the
    // two attention matmuls per layer, and the LM head.
    CHECK(k.ops[Op::Gemm] >= 9 * config.layers + 1);
    CHECK(k.gemm_with_epilogue >= config.layers);
    CHECK(k.multi_instr_fused >= 1);
    CHECK(k.ops[Op::Mul] == 0);  // every product was fused into a kernel
    const test::AllClose same = same_outputs(g, result.program, 5, 1e-5);
    MESSAGE("max error relative to scale vs the interpreter: " << same.worst_to_scale);
    CHECK(same);
    if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
  }
}

TEST_CASE("spool::compile of the tiny llama with the default rules (rolled) gives fused kernels that match") {
  models::LlamaConfig config = models::LlamaConfig::tiny();
  config.layers = 2;
  const Graph g = models::build_llama(config, models::Phase::prefill(8));
  compile::Options options;
  options.rule_files = {kDefaultRules};
  const compile::Compiled result = compile::run(g, options);
  CHECK(result.report.roll.loops == 1);
  KernelCounts k = count_kernels(result.program);
  MESSAGE("spool::compile: " << result.program.num_live() << " nodes, " << k.ops[Op::Gemm] << " gemm ("
                             << k.gemm_with_epilogue << " with epilogues), " << k.ops[Op::Fused] << " fused; e-graphs "
                             << result.report.egraph.nodes << " nodes, " << result.report.egraph.iterations
                             << " iterations, " << egraph::stop_reason_name(result.report.egraph.stop));
  if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
  CHECK(result.report.egraph.stop == egraph::StopReason::Saturated);
  CHECK(k.ops[Op::Gemm] >= 9 * config.layers + 1);
  CHECK(k.gemm_with_epilogue >= config.layers);
  CHECK(k.multi_instr_fused + k.gemm_with_prologue >= 1);
  CHECK(k.ops[Op::Mul] == 0);
  const test::AllClose same = same_outputs(g, result.program, 7, 1e-5);
  MESSAGE("max error relative to scale vs the interpreter: " << same.worst_to_scale);
  CHECK(same);
}

TEST_CASE("softmax, rms_norm and layer_norm composites become one kernel each") {
  for (DType dt : {DType::F32, DType::BF16}) {
    INFO(dtype_name(dt));
    Graph g("norms");
    const Tensor x = input(g, "x", dt, {3, 5, 8});
    output("softmax", nn::softmax(x, 1));
    output("rms", nn::rms_norm(x, weight(g, "w", dt, {8}), 1e-5));
    output("gemma_rms", nn::rms_norm(x, weight(g, "w", dt, {8}), 1e-6, true));
    output("layer", nn::layer_norm(x, weight(g, "w", dt, {8}), weight(g, "b", dt, {8}), 1e-5));
    const Compiled result = saturate_and_extract(g);
    KernelCounts k = count_kernels(result.program);
    if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
    CHECK(k.ops[Op::Softmax] == 1);
    CHECK(k.ops[Op::RmsNorm] == 2);
    CHECK(k.ops[Op::LayerNorm] == 1);
    // Bit for bit by construction (the interpreter runs these kernels as their
    // composites); interp/kernel_test.cpp checks the kernels against direct loops.
    CHECK(same_outputs(g, result.program, 3, 0));
  }
}

TEST_CASE("causal attention: the mask runs in the scores GEMM's epilogue, in f32 and in bf16") {
  // In bf16 the scale is a cast to f32, a multiply and a cast back before
  // the mask's `where`, and the softmax casts the masked scores to f32: the
  // `where` reaches the GEMM's epilogue only if it is not inlined into the
  // softmax's f32 composite first.
  for (DType dt : {DType::F32, DType::BF16}) {
    CAPTURE(dtype_name(dt));
    Graph g("causal");
    const Tensor q = input(g, "q", dt, {2, 8, 16}), k = input(g, "k", dt, {2, 8, 16}),
                 v = input(g, "v", dt, {2, 8, 16});
    output("out", nn::attention(q, k, v, /*causal=*/true));
    const Compiled result = saturate_and_extract(g);
    if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
    KernelCounts kc = count_kernels(result.program);
    CHECK(kc.ops[Op::Gemm] == 2);
    CHECK(kc.ops[Op::Softmax] == 1);
    CHECK(kc.ops[Op::Fused] == 0);  // the mask is in the scores GEMM's epilogue
    CHECK(kc.ops[Op::Where] == 0);
    bool masked = false;
    for (NodeId id : result.program.topo_order()) {
      const Node& n = result.program.node(id);
      if (n.op != Op::Gemm) continue;
      for (const ProgramInstr& i : std::get<GemmAttr>(n.attr).epilogue.instrs) masked = masked || i.op == Op::Where;
    }
    CHECK(masked);
    CHECK(same_outputs(g, result.program, 5, dt == DType::F32 ? 1e-6 : 1e-2));
  }
}

TEST_CASE("MoE routing: masks and masked fills fuse around top-k (deepseek-v3 group-limited, qwen3 softmax)") {
  Graph g("routing");
  const Tensor logits = input(g, "logits", DType::F32, {5, 16});
  const models::Routing grouped =
      models::group_limited_routing(logits, weight(g, "bias", DType::F32, {16}), 4, 4, 2, true, 2.5);
  output("grouped_experts", grouped.experts);
  output("grouped_weights", grouped.weights);
  const models::Routing soft = models::softmax_topk_routing(logits, 2, true);
  output("soft_experts", soft.experts);
  output("soft_weights", soft.weights);
  const Compiled result = saturate_and_extract(g);
  KernelCounts k = count_kernels(result.program);
  if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
  MESSAGE("routing: " << result.program.num_live() << " nodes, " << k.ops[Op::TopK] << " topk, " << k.ops[Op::Fused]
                      << " fused, " << k.ops[Op::Softmax] << " softmax");
  CHECK(k.ops[Op::TopK] >= 3);
  CHECK(k.ops[Op::Softmax] == 1);
  // Every mask, not and masked fill sits inside a fused kernel.
  for (Op op : {Op::Where, Op::Not, Op::Equal, Op::LessThan}) CHECK(k.ops[op] == 0);
  CHECK(same_outputs(g, result.program, 9, 0));
}

TEST_CASE("llama4's chunked SwiGLU becomes the down projection's prologue, reading gate_up through slices") {
  Graph g("chunked_swiglu");
  const Tensor x = input(g, "x", DType::F32, {6, 16});
  const std::vector<Tensor> gate_up = nn::chunk(nn::linear(x, weight(g, "gate_up", DType::F32, {64, 16})), 2, -1);
  output("y", nn::linear(nn::swiglu(gate_up[0], gate_up[1]), weight(g, "down", DType::F32, {16, 32})));
  const Compiled result = saturate_and_extract(g);
  if (std::getenv("SPOOL_DUMP")) MESSAGE(print_graph(result.program));
  KernelCounts k = count_kernels(result.program);
  CHECK(k.ops[Op::Gemm] == 2);
  CHECK(k.gemm_with_prologue == 1);
  CHECK(result.program.num_live() - 3 == 2);  // two kernels besides the three sources
  // The down projection reads gate_up through two slice views.
  int slices = 0;
  for (NodeId id : result.program.topo_order()) {
    const Node& n = result.program.node(id);
    if (n.op != Op::Gemm || std::get<GemmAttr>(n.attr).a.instrs.empty()) continue;
    for (const Edge& e : n.inputs)
      for (const ViewStep& step : e.view.steps()) slices += step.kind == ViewKind::Slice;
  }
  CHECK(slices >= 2);
  CHECK(same_outputs(g, result.program, 4, 1e-5));
}

TEST_CASE("the kernel cost is monotone and prices a removed DRAM round trip") {
  Graph g("mlp");
  const Tensor x = input(g, "x", DType::F32, {64, 256});
  output("y", nn::silu(nn::linear(x, weight(g, "w", DType::F32, {512, 256}), weight(g, "b", DType::F32, {512}))));
  hlir::HlirLanguage lang;
  std::unique_ptr<egraph::EGraph> eg = hlir::make_egraph(lang);
  const std::vector<egraph::ClassId> roots = hlir::add_graph(*eg, lang, g);
  eg->rebuild();
  const hlir::HlirCost cost(lang);
  const double unfused = egraph::Extractor(*eg, cost).cost(roots[0]);
  Result<rules::RuleFile> file = rules::load_rule_file(kDefaultRules);
  REQUIRE(file.ok());
  const egraph::Registry& registry = hlir::registry();
  auto sets = rules::compile_rules(file.value(), lang.language(), registry, lang.parse_options());
  REQUIRE(sets.ok());
  egraph::Runner().run(*eg, sets.value(), rules::schedule_of(file.value()));
  const egraph::Extractor extractor(*eg, cost);
  // Monotone: every class's best node costs more than each of its children.
  for (egraph::ClassId c : eg->classes()) {
    if (!extractor.extractable(c)) continue;
    for (egraph::ClassId child : eg->node(extractor.best_node(c)).children)
      CHECK(extractor.cost(c) > extractor.cost(child));
  }
  // One gemm with bias and SiLU in its epilogue, far cheaper than the HLIR
  // (whose broadcast product alone is 64*256*512 floats written and read).
  const egraph::Extraction best = extractor.extract(roots);
  const Graph program = hlir::to_graph(lang, best.term);
  KernelCounts k = count_kernels(program);
  CHECK(k.ops[Op::Gemm] == 1);
  CHECK(k.gemm_with_epilogue == 1);
  CHECK(best.tree_cost * 100 < unfused);
  // The fused epilogue beats the gemm followed by an elementwise kernel by
  // at least a launch and the output's round trip.
  const double bw = hlir::HlirCostConfig{}.dram_bytes_per_cycle;
  const double gemm_alone = 400 + (64.0 * 256 + 512.0 * 256 + 64.0 * 512) * 4 / bw;
  CHECK(best.tree_cost < gemm_alone + 400 + 2 * 64.0 * 512 * 4 / bw);
  MESSAGE("linear+bias+silu [64,256]x[256,512]: " << unfused << " cycles as HLIR, " << best.tree_cost << " fused");
}

TEST_CASE("a padded view is priced as the copy the lowering makes of it, except as a concat's part") {
  // The lowering reads views in place but a pad, which it copies into a
  // filled buffer once per reader: two kernels and their bytes. A sum of
  // zero-padded parts is a concat, whose parts are copied into place anyway.
  auto cost = [](const Graph& g) { return hlir::program_cost(g); };
  Graph padded("padded"), plain("plain"), parts("parts"), whole("whole");
  const Tensor x = input(padded, "x", DType::F32, {64, 64});
  output("y", nn::exp(x.pad(1, 0, 64, 0.0)));
  output("y", nn::exp(input(plain, "x", DType::F32, {64, 128})));
  const Tensor a = input(parts, "a", DType::F32, {64, 64}), b = input(parts, "b", DType::F32, {64, 64});
  output("y", a.pad(1, 0, 64, 0.0) + b.pad(1, 64, 0, 0.0));
  output("y", input(whole, "a", DType::F32, {64, 128}) + input(whole, "b", DType::F32, {64, 128}));
  const double launch = hlir::HlirCostConfig{}.launch_cycles;
  CHECK(cost(padded) >= cost(plain) + 2 * launch);
  CHECK(cost(parts) <= cost(whole));
}

TEST_CASE("the kernel cost weighs an instruction by its vector issue slots: a sin as 8 adds, an i64 add as 2") {
  // The timing model's vector unit: an op over E elements of b bits takes
  // E * b / (lanes * VLEN) issue slots of its interval (sin 8, add 1).
  const int64_t E = 64 * 1024;
  const hlir::HlirCostConfig config;
  auto cost_of = [](Graph& g) { return hlir::program_cost(g); };
  auto one_op = [&](DType dtype, Op op, bool fused) {
    Graph g("one");
    const Tensor x = input(g, "x", dtype, {E});
    ProgramAttr p;
    p.instrs = {ProgramInstr{}};
    p.instrs[0].op = op;
    p.instrs[0].args = {0, 0, 0};
    const NodeId y = fused ? g.add(Op::Fused, {x.edge()}, p) : g.add(op, {x.edge()}, NoAttr{});
    output("y", Tensor(&g, y));
    return cost_of(g);
  };
  for (bool fused : {false, true}) {
    CAPTURE(fused);
    const double slot = static_cast<double>(E) / config.vector_ops_per_cycle;
    CHECK(one_op(DType::F32, Op::Sin, fused) - one_op(DType::F32, Op::Neg, fused) ==
          doctest::Approx((config.sin_slots - 1) * slot));
    CHECK(one_op(DType::F32, Op::Exp2, fused) - one_op(DType::F32, Op::Neg, fused) ==
          doctest::Approx((config.slow_slots - 1) * slot));
    // Twice the bytes in and out, and twice the slots.
    CHECK(one_op(DType::I64, Op::Neg, fused) - one_op(DType::I32, Op::Neg, fused) ==
          doctest::Approx(slot + 2.0 * E * 4 / config.dram_bytes_per_cycle));
  }
}

TEST_CASE("a fused kernel reads a concat's value instead of inlining the concat's padded parts") {
  // RoPE's rotate-half, cat(-x2, x1) * sin + x * cos: with the concat
  // inlined, the kernel would read two padded views, each copied by the
  // lowering; reading the concat's value, it reads none.
  Graph g("rotate");
  const Tensor x = input(g, "x", DType::F32, {8, 16});
  const Tensor sin = input(g, "sin", DType::F32, {8, 16}), cos = input(g, "cos", DType::F32, {8, 16});
  const Tensor rotated = nn::concat({-x.slice(1, 8, 16), x.slice(1, 0, 8)}, -1);
  output("y", rotated * sin + x * cos);
  const Compiled result = saturate_and_extract(g);
  int padded_reads = 0;
  for (NodeId id : result.program.topo_order()) {
    const Node& n = result.program.node(id);
    const bool sums_parts =
        n.op == Op::Add || (n.op == Op::Fused && is_sum_program(std::get<ProgramAttr>(n.attr), n.inputs.size()));
    for (const Edge& e : n.inputs)
      for (const ViewStep& step : e.view.steps())
        if (step.kind == ViewKind::Pad) {
          CHECK_MESSAGE(sums_parts, op_name(n.op) << " reads a padded view");
          ++padded_reads;
        }
  }
  CHECK(padded_reads == 2);  // the concat's two parts
  CHECK(count_kernels(result.program).ops[Op::Fused] >= 1);
  CHECK(same_outputs(g, result.program, 5, 1e-6));
}

TEST_CASE("a gemm fuses one operand's producer and reads the other as another kernel computes it") {
  // scores = (q * 2) sin(k)^T for 8 query heads sharing the keys, with
  // sin(k) also an output (as a layer returns its keys with RoPE applied):
  // q * 2 runs in the A prologue, and B reads the kernel that computes
  // sin(k) once instead of running the sins again for every head.
  const int64_t H = 8;
  Graph g("scores");
  const Tensor q = input(g, "q", DType::F32, {H, 64, 64});
  const Tensor k = input(g, "k", DType::F32, {512, 64});
  const Tensor keys = sin(k);
  output("keys", keys);
  const Tensor keys_t = keys.transpose(0, 1).unsqueeze(0).broadcast_to({H, 64, 512});
  output("scores", Tensor(&g, g.add(Op::Gemm, {(q * 2.0).edge(), keys_t.edge()}, GemmAttr{})));
  const Compiled result = saturate_and_extract(g);
  int gemms = 0, sins = 0;
  for (NodeId id : result.program.topo_order()) {
    const Node& n = result.program.node(id);
    auto count_sins = [&](const ProgramAttr& p) {
      for (const ProgramInstr& in : p.instrs) sins += in.op == Op::Sin;
    };
    if (n.op == Op::Sin) ++sins;
    if (n.op == Op::Fused) count_sins(std::get<ProgramAttr>(n.attr));
    if (n.op != Op::Gemm) continue;
    ++gemms;
    const GemmAttr& a = std::get<GemmAttr>(n.attr);
    count_sins(a.a);
    count_sins(a.b);
    CHECK(!a.a.instrs.empty());
    CHECK(a.b.instrs.empty());
  }
  CHECK(gemms == 1);
  CHECK(sins == 1);
  CHECK(same_outputs(g, result.program, 6, 1e-6));
}

TEST_CASE("fusion stays bounded on a long elementwise chain") {
  Graph g("chain");
  const Tensor y = input(g, "y", DType::F32, {4, 8});
  Tensor x = input(g, "x", DType::F32, {4, 8});
  const int ops = 300;
  for (int i = 0; i < ops; ++i) x = i % 3 == 0 ? x * y : (i % 3 == 1 ? x + 0.5 : nn::relu(x));
  output("out", x);
  const Compiled result = saturate_and_extract(g);
  MESSAGE(ops << "-op chain: e-graph " << result.nodes << " nodes, " << result.saturation.summary());
  CHECK(result.saturation.stop == egraph::StopReason::Saturated);
  CHECK(result.nodes < 12 * static_cast<size_t>(ops));  // a bounded number of fused variants per op
  KernelCounts k = count_kernels(result.program);
  CHECK(k.ops[Op::Fused] <= ops / 8);  // programs of up to 32 instructions
  CHECK(same_outputs(g, result.program, 2, 0));
}
