// Loop rolling: detection, markers, unrolling, and the cases that bit before.

#include <doctest/doctest.h>

#include <spool/interp/interp.hpp>
#include <spool/ir/tensor.hpp>
#include <spool/ir/text.hpp>
#include <spool/nn/nn.hpp>
#include <spool/roll/roll.hpp>
#include <spool/support/error.hpp>

#include <spool/models/llama.hpp>

#include "support/allclose.hpp"

#include <cctype>

using namespace spool;

namespace {

// Runs both graphs on the same random inputs; every output must be bitwise equal.
void check_same_outputs(const Graph& a, const Graph& b) {
  const interp::Env env = interp::random_inputs(a, 7, 16);
  const auto out_a = interp::run(a, env);
  CHECK(test::allclose(interp::run(b, env), out_a));
}

size_t count_ops(const Graph& g, Op op) {
  size_t n = 0;
  for (const NodeId id : g.live_ids()) n += g.node(id).op == op;
  return n;
}

// A chain of `layers` copies of body(x, i) on x [4, 8].
template <typename Body>
Graph chain(int layers, Body body) {
  Graph g("chain");
  Tensor x = input(g, "x", DType::F32, {4, 8});
  for (int i = 0; i < layers; ++i) x = body(g, x, i);
  output("y", x);
  return g;
}

// The same graph with its ids reversed (through the text form, which keeps
// ids): every reader then has a smaller id than its inputs.
Graph reversed_ids(const Graph& g) {
  const std::string text = print_graph(g);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool id = text[i] == '%' && i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]));
    if (!id) {
      out += text[i];
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    out += "%" + std::to_string(g.id_bound() - 1 - std::stoul(text.substr(i + 1, end - i - 1)));
    i = end - 1;
  }
  Result<Graph> parsed = parse_graph(out);
  REQUIRE(parsed.ok());
  return std::move(parsed.value());
}

}  // namespace

TEST_CASE("rolling numbers the nodes it keeps densely, in their order, and the markers after them") {
  // Each layer reads its own copy of the constant 1.0; the copies merge into
  // the first, which the loop body reads.
  const Graph g = chain(5, [](Graph& g, Tensor x, int i) {
    return nn::relu(x * weight(g, "w" + std::to_string(i), DType::F32, {8}) + 1.0);
  });
  const roll::RollResult rolled = roll::auto_roll(g);
  REQUIRE(rolled.report.loops == 1);
  CHECK(rolled.report.trips[0] == 5);
  CHECK_NOTHROW(rolled.graph.verify());
  // Dense: no id is left over for the occurrences that went.
  CHECK(rolled.graph.id_bound() == rolled.graph.num_live());
  CHECK(rolled.graph.id_bound() < g.id_bound());
  // The kept nodes, in id order, are nodes of `g` in its id order (each the
  // next original node of the same op, attribute and shape); markers follow.
  const std::vector<NodeId> originals = g.live_ids();
  size_t next = 0;
  bool markers_began = false;
  for (const NodeId id : rolled.graph.live_ids()) {
    const Node& n = rolled.graph.node(id);
    if (is_loop_marker(n.op)) {
      markers_began = true;
      continue;
    }
    CHECK_FALSE(markers_began);
    while (next < originals.size() && !(g.node(originals[next]).op == n.op && g.node(originals[next]).attr == n.attr &&
                                        g.node(originals[next]).shape == n.shape))
      ++next;
    CHECK(next < originals.size());
    ++next;
  }
  CHECK(markers_began);
  auto constants = [](const Graph& graph) {
    size_t n = 0;
    for (const NodeId id : graph.live_ids()) n += graph.node(id).op == Op::Constant;
    return n;
  };
  const Graph one =
      chain(1, [](Graph& g, Tensor x, int) { return nn::relu(x * weight(g, "w", DType::F32, {8}) + 1.0); });
  CHECK(constants(g) == 5 * constants(one));
  CHECK(constants(rolled.graph) == constants(one));
  check_same_outputs(g, roll::unroll(rolled.graph));
}

TEST_CASE("a graph whose readers have smaller ids than their inputs rolls and unrolls to the same values") {
  // (With the ids reversed, the topological order interleaves the first
  // layers, so only three of the four roll.)
  {
    models::LlamaConfig config = models::LlamaConfig::tiny();
    config.layers = 4;
    const Graph g = reversed_ids(models::build_llama(config, models::Phase::prefill(8)));
    // The roll passes' order is Graph::topo_order's, here where the ids are
    // not topological, and on the rolled graph, whose markers read later ids.
    CHECK_FALSE(g.id_order_if_topological().has_value());
    CHECK(roll::topo_order(g) == g.topo_order());
    const roll::RollResult rolled = roll::auto_roll(g);
    CHECK(roll::topo_order(rolled.graph) == rolled.graph.topo_order());
    CHECK(rolled.report.trips == std::vector<int64_t>{3});
    CHECK(rolled.report.hlir_nodes_after < rolled.report.hlir_nodes_before);
    CHECK_NOTHROW(rolled.graph.verify());
    const Result<Graph> parsed = parse_graph(print_graph(rolled.graph));
    REQUIRE(parsed.ok());
    CHECK(parsed.value() == rolled.graph);
    check_same_outputs(g, roll::unroll(rolled.graph));
  }
  const Graph nested = reversed_ids(chain(6, [](Graph& g, Tensor x, int i) {
    for (int j = 0; j < 4; ++j) x = nn::relu(x * weight(g, fmt::format("s{}_{}", i, j), DType::F32, {8}) + 1.0);
    return x + weight(g, "b" + std::to_string(i), DType::F32, {8});
  }));
  const roll::RollResult rolled = roll::auto_roll(nested);
  CHECK(rolled.report.loops >= 1);
  check_same_outputs(nested, roll::unroll(rolled.graph));
}

TEST_CASE("the tiny llama rolls into one loop over its layers and unrolls to the same program") {
  for (int layers : {2, 4, 8}) {
    INFO(layers << " layers");
    models::LlamaConfig config = models::LlamaConfig::tiny();
    config.layers = layers;
    const Graph g = models::build_llama(config, models::Phase::prefill(8));
    const roll::RollResult rolled = roll::auto_roll(g);
    CHECK(rolled.report.loops == 1);
    REQUIRE(rolled.report.trips.size() == 1);
    CHECK(rolled.report.trips[0] == layers);
    CHECK(rolled.report.hlir_nodes_before == g.num_live());
    CHECK(rolled.report.hlir_nodes_after == rolled.graph.num_live());
    CHECK(rolled.report.hlir_nodes_after < rolled.report.hlir_nodes_before);
    CHECK_NOTHROW(rolled.graph.verify());
    // The rolled graph's size does not grow with the layer count.
    MESSAGE(layers << " layers: " << rolled.report.hlir_nodes_before << " -> " << rolled.report.hlir_nodes_after
                   << " nodes, body " << rolled.report.body_nodes);

    const Graph unrolled = roll::unroll(rolled.graph);
    CHECK(count_ops(unrolled, Op::LoopInput) + count_ops(unrolled, Op::LoopStart) == 0);
    // Same program up to node ids (and shared copies of equal constants).
    CHECK(compacted(cse(unrolled)) == compacted(cse(g)));
    check_same_outputs(g, unrolled);
    // The rolled graph has a text form that round-trips.
    const Result<Graph> parsed = parse_graph(print_graph(rolled.graph));
    REQUIRE(parsed.ok());
    CHECK(parsed.value() == rolled.graph);
  }
}

TEST_CASE("rolled size is flat in the number of layers") {
  size_t computed_at_2 = 0;
  for (int layers : {2, 8, 32}) {
    models::LlamaConfig config = models::LlamaConfig::tiny();
    config.layers = layers;
    const roll::RollResult rolled = roll::auto_roll(models::build_llama(config, models::Phase::prefill(8)));
    // Only the per-layer weights and per-layer outputs (the KV cache each
    // layer writes, one loop_output per layer) grow; the nodes that compute
    // are the same at every depth.
    size_t computed = 0, weights = 0, outputs = 0;
    for (const NodeId id : rolled.graph.live_ids()) {
      const Op op = rolled.graph.node(id).op;
      computed += op_info(op).cls != OpClass::Source && op != Op::LoopOutput;
      weights += op == Op::Weight;
      outputs += op == Op::LoopOutput;
    }
    if (layers == 2) computed_at_2 = computed;
    CHECK(computed == computed_at_2);
    CHECK(outputs == rolled.graph.outputs().size() - 1);  // every output but the logits
    MESSAGE(layers << " layers: " << computed << " computing nodes, " << weights << " weights, " << outputs
                   << " per-layer outputs");
  }
}

TEST_CASE("a periodic pattern rolls as one body of two layers") {
  const Graph g = chain(8, [](Graph& g, Tensor x, int i) {
    const Tensor w = weight(g, "w" + std::to_string(i), DType::F32, {8});
    return i % 2 == 0 ? nn::relu(x * w) : nn::silu(x + w);  // dense / other kind, alternating
  });
  const roll::RollResult rolled = roll::auto_roll(g);
  REQUIRE(rolled.report.loops == 1);
  CHECK(rolled.report.trips[0] == 4);
  const std::vector<roll::Loop> loops = roll::find_loops(rolled.graph);
  REQUIRE(loops.size() == 1);
  // Both kinds are in the body.
  bool has_max = false, has_recip = false;
  for (const NodeId n : loops[0].body) {
    has_max |= rolled.graph.node(n).op == Op::Max;
    has_recip |= rolled.graph.node(n).op == Op::Recip;
  }
  CHECK(has_max);
  CHECK(has_recip);
  check_same_outputs(g, roll::unroll(rolled.graph));
}

TEST_CASE("a nested pattern rolls twice") {
  // Each layer: four chained scale-shift-relu steps, then a weight add; six layers.
  const Graph g = chain(6, [](Graph& g, Tensor x, int i) {
    for (int j = 0; j < 4; ++j) x = nn::relu(x * weight(g, fmt::format("s{}_{}", i, j), DType::F32, {8}) + 1.0);
    return x + weight(g, "b" + std::to_string(i), DType::F32, {8});
  });
  const roll::RollResult rolled = roll::auto_roll(g);
  CHECK(rolled.report.loops == 2);
  const std::vector<roll::Loop> loops = roll::find_loops(rolled.graph);
  REQUIRE(loops.size() == 2);
  CHECK(loops[0].parent == -1);
  CHECK(loops[0].trips == 6);
  CHECK(loops[1].parent == loops[0].id);
  CHECK(loops[1].trips == 4);
  check_same_outputs(g, roll::unroll(rolled.graph));
  CHECK(compacted(cse(roll::unroll(rolled.graph))) == compacted(cse(g)));
}

TEST_CASE("auto_roll hands each graph it builds to a side task while searching it, the last one its result") {
  // Two rolls (nested): a graph after each, the second the result.
  const Graph g = chain(6, [](Graph& g, Tensor x, int i) {
    for (int j = 0; j < 4; ++j) x = nn::relu(x * weight(g, fmt::format("s{}_{}", i, j), DType::F32, {8}) + 1.0);
    return x + weight(g, "b" + std::to_string(i), DType::F32, {8});
  });
  std::vector<Graph> seen;
  const roll::RollResult rolled = roll::auto_roll(g, [&](const Graph& r) { seen.push_back(r); });
  CHECK(rolled.report.loops == 2);
  REQUIRE(seen.size() == 2);
  CHECK(seen.back() == rolled.graph);
  CHECK(roll::find_loops(seen.front()).size() == 1);
  // The same rolls as without a side task.
  CHECK(rolled.graph == roll::auto_roll(g).graph);

  // Nothing rolls: no graph to hand over.
  Graph flat("flat");
  const Tensor x = input(flat, "x", DType::F32, {4, 8});
  output("y", nn::relu(x * weight(flat, "w", DType::F32, {8})));
  size_t calls = 0;
  CHECK(roll::auto_roll(flat, [&](const Graph&) { ++calls; }).report.loops == 0);
  CHECK(calls == 0);
}

TEST_CASE("a candidate with an input from an earlier occurrence is rejected") {
  // Layer i reads layers i-1 and i-2. A loop of one layer per iteration
  // would need a value from two iterations back, which no marker carries:
  // that candidate must be rejected. Two layers per iteration is a valid
  // loop (both inputs come from the previous iteration), and is what rolls.
  Graph g("skip");
  std::vector<Tensor> xs{input(g, "x", DType::F32, {4, 8})};
  xs.push_back(xs[0] * 2.0);
  for (int i = 0; i < 8; ++i) {
    const Tensor w = weight(g, "w" + std::to_string(i), DType::F32, {8});
    xs.push_back(nn::relu(xs.back() * w) + xs[xs.size() - 2]);
  }
  output("y", xs.back());
  const roll::RollResult rolled = roll::auto_roll(g);
  REQUIRE(rolled.report.loops == 1);
  CHECK(rolled.report.trips[0] == 4);  // 8 layers, 2 per iteration
  const std::vector<roll::Loop> loops = roll::find_loops(rolled.graph);
  size_t slots = 0;
  for (const NodeId n : loops[0].entries) slots += rolled.graph.node(n).op == Op::LoopStart;
  CHECK(slots == 2);
  check_same_outputs(g, roll::unroll(rolled.graph));
}

TEST_CASE("independent repeats without carried state do not roll") {
  Graph g("parallel");
  const Tensor x = input(g, "x", DType::F32, {4, 8});
  Tensor acc = x;
  for (int i = 0; i < 4; ++i)
    output("y" + std::to_string(i), nn::relu(x * weight(g, "w" + std::to_string(i), DType::F32, {8})));
  (void)acc;
  CHECK(roll::auto_roll(g).report.loops == 0);
}

TEST_CASE("a loop whose carried state resolves to a value outside the body unrolls correctly") {
  // loop_end(next = a constant defined outside the body): after the first
  // iteration the state is that constant, whatever the init was.
  Graph g("invariant");
  const Tensor x = input(g, "x", DType::F32, {3});
  const Tensor c = constant(g, 2.0, DType::F32, {3});
  const LoopAttr loop{1, 3, 0};
  const Tensor state(&g, g.add(Op::LoopStart, {x.edge()}, loop));
  const Tensor body = state * 10.0;  // per-iteration output: 10 * state
  const Tensor end(&g, g.add(Op::LoopEnd, {c.edge(), state.edge()}, loop));
  output("final", end);
  output("it0", Tensor(&g, g.add(Op::LoopOutput, {body.edge()}, LoopAttr{1, 3, 0})));
  output("it2", Tensor(&g, g.add(Op::LoopOutput, {body.edge()}, LoopAttr{1, 3, 2})));
  const Graph unrolled = roll::unroll(g);
  const auto out = interp::run(unrolled, {{"x", interp::HostTensor::from_f32({3}, std::vector<float>{1, 2, 3})}});
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(out.at("final").get(i) == 2.0);
    CHECK(out.at("it0").get(i) == 10.0 * static_cast<double>(i + 1));
    CHECK(out.at("it2").get(i) == 20.0);
  }
}

TEST_CASE("unrolling composes the views of loop inputs, body edges, exit readers and outputs") {
  // Loop inputs read through a slice, body edges and the readers of the
  // exits (a node and outputs) through their own views; two outputs read
  // their iterations through equal views. The expected text is what unroll
  // gave before it planned each clone's inputs once per loop.
  const Result<Graph> rolled = parse_graph(R"(graph views {
  %0 = input {name="x"} : f32[2,6]
  %1 = input {name="w0"} : f32[2,8]
  %2 = input {name="w1"} : f32[2,8]
  %3 = input {name="w2"} : f32[2,8]
  %4 = loop_start(%0) {loop=1, trips=3, index=0} : f32[2,6]
  %5 = loop_input(%1 <slice(0:2:1,1:7:1)>, %2 <slice(0:2:1,1:7:1)>, %3 <slice(0:2:1,1:7:1)>) {loop=1, trips=3, index=0} : f32[2,6]
  %6 = add(%4, %5) : f32[2,6]
  %7 = exp2(%6 <permute(1,0)>) : f32[6,2]
  %8 = add(%7, %5 <permute(1,0)>) : f32[6,2]
  %9 = constant {value=0.5} : f32[]
  %10 = mul(%4 <slice(0:2:1,0:6:2) pad(0:0,0:3;0)>, %9 <reshape(1,1) expand(2,6)>) : f32[2,6]
  %11 = add(%8 <permute(1,0)>, %10) : f32[2,6]
  %12 = loop_end(%11, %4) {loop=1, trips=3, index=0} : f32[2,6]
  %13 = loop_output(%8) {loop=1, trips=3, index=0} : f32[6,2]
  %14 = loop_output(%8) {loop=1, trips=3, index=2} : f32[6,2]
  %15 = constant {value=2.0} : f32[]
  %16 = mul(%12 <permute(1,0)>, %15 <reshape(1,1) expand(6,2)>) : f32[6,2]
  output "t0" = %13 <permute(1,0) reshape(12)>
  output "t2" = %14 <permute(1,0) reshape(12)>
  output "final" = %16
  output "final_flat" = %12 <reshape(12)>
}
)");
  REQUIRE(rolled.ok());
  CHECK(print_graph(roll::unroll(rolled.value())) == R"(graph views {
  %0 = input {name="x"} : f32[2,6]
  %1 = input {name="w0"} : f32[2,8]
  %2 = input {name="w1"} : f32[2,8]
  %3 = input {name="w2"} : f32[2,8]
  %9 = constant {value=0.5} : f32[]
  %15 = constant {value=2.0} : f32[]
  %17 = add(%0, %1 <slice(0:2:1,1:7:1)>) : f32[2,6]
  %18 = exp2(%17 <permute(1,0)>) : f32[6,2]
  %19 = add(%18, %1 <slice(0:2:1,1:7:1) permute(1,0)>) : f32[6,2]
  %20 = mul(%0 <slice(0:2:1,0:6:2) pad(0:0,0:3;0)>, %9 <reshape(1,1) expand(2,6)>) : f32[2,6]
  %21 = add(%19 <permute(1,0)>, %20) : f32[2,6]
  %22 = add(%21, %2 <slice(0:2:1,1:7:1)>) : f32[2,6]
  %23 = exp2(%22 <permute(1,0)>) : f32[6,2]
  %24 = add(%23, %2 <slice(0:2:1,1:7:1) permute(1,0)>) : f32[6,2]
  %25 = mul(%21 <slice(0:2:1,0:6:2) pad(0:0,0:3;0)>, %9 <reshape(1,1) expand(2,6)>) : f32[2,6]
  %26 = add(%24 <permute(1,0)>, %25) : f32[2,6]
  %27 = add(%26, %3 <slice(0:2:1,1:7:1)>) : f32[2,6]
  %28 = exp2(%27 <permute(1,0)>) : f32[6,2]
  %29 = add(%28, %3 <slice(0:2:1,1:7:1) permute(1,0)>) : f32[6,2]
  %30 = mul(%26 <slice(0:2:1,0:6:2) pad(0:0,0:3;0)>, %9 <reshape(1,1) expand(2,6)>) : f32[2,6]
  %31 = add(%29 <permute(1,0)>, %30) : f32[2,6]
  %16 = mul(%31 <permute(1,0)>, %15 <reshape(1,1) expand(6,2)>) : f32[6,2]
  output "t0" = %19 <permute(1,0) reshape(12)>
  output "t2" = %29 <permute(1,0) reshape(12)>
  output "final" = %16
  output "final_flat" = %31 <reshape(12)>
}
)");
}

TEST_CASE("inconsistent markers are reported, and the interpreter refuses rolled graphs") {
  Graph g("bad");
  const Tensor x = input(g, "x", DType::F32, {3});
  const Tensor a(&g, g.add(Op::LoopInput, {x.edge(), x.edge()}, LoopAttr{1, 2, 0}));
  const Tensor b(&g, g.add(Op::LoopInputStatic, {x.edge()}, LoopAttr{1, 3, 0}));
  output("y", a + b);
  try {
    roll::find_loops(g);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("loop 1: loop_input_static") == 0);
  }
  try {
    interp::run(g, {{"x", interp::HostTensor::from_f32({3}, std::vector<float>{1, 2, 3})}});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "interp: loop_input of loop 1: a rolled graph must be unrolled (roll::unroll) before it runs");
  }
}
