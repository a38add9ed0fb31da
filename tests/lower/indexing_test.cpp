// Gather and ScatterAdd lowered to indirect DMA: lowered, run in functional
// simulation and compared with the interpreter (bit for bit) on random
// inputs at shapes that are not multiples of any tile, with i32 and i64
// indices, views on the index edge and duplicate scatter indices; the
// out-of-range error; the indirect DMA's text form, verifier and timing.

#include "lower_test_util.hpp"

#include <spool/interp/host_tensor.hpp>
#include <spool/nn/nn.hpp>
#include <spool/npu/verify.hpp>
#include <spool/sim/sim.hpp>
#include <spool/support/error.hpp>

using namespace spool;
using spool::lower_test::timed;
using spool::lower_test::lower_and_run;

namespace {

const char* const kConfigs[] = {"toy", "tpuv3"};

// Scratchpad budgets: the config's own, and one small enough that every
// tensor below is cut into several ragged tiles.
const int64_t kBudgets[] = {0, 3000};

int count_indirect(const npu::Program& p) {
  int n = 0;
  for (const npu::Kernel& k : p.kernels)
    npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
      if (const auto* d = std::get_if<npu::DmaOp>(&s.node)) n += d->indirect();
    });
  return n;
}

int count_kind(const lower::Lowered& l, const std::string& kind) {
  int n = 0;
  for (const lower::KernelInfo& k : l.report.per_kernel) n += k.kind == kind;
  return n;
}

// f(config, options, index dtype) over both configs, both budgets and i32/i64 indices.
template <typename F>
void for_each_setup(F&& f) {
  for (const char* cfg : kConfigs)
    for (int64_t budget : kBudgets)
      for (DType itype : {DType::I32, DType::I64}) {
        CAPTURE(cfg);
        CAPTURE(budget);
        CAPTURE(dtype_name(itype));
        lower::LowerOptions options;
        options.spad_budget = budget;
        f(cfg, options, itype);
      }
}

// Lowers and runs with the given inputs; returns the outputs.
std::map<std::string, interp::HostTensor> run_lowered(const Graph& g, const std::string& cfg,
                                                      const std::map<std::string, interp::HostTensor>& env) {
  const target::NpuConfig config = target::load_config(cfg);
  const lower::Lowered l = lower::to_npu(g, config, timed(config));
  return sim::run_functional(l.program, config, l.inputs, l.outputs, env).outputs;
}

}  // namespace

TEST_CASE("lower: row gathers (embedding, token rows, expert matrices) match the interpreter") {
  for_each_setup([](const char* cfg, const lower::LowerOptions& options, DType itype) {
    Graph g("rows");
    // nn::embedding: ids [2, 5] reshaped and expanded over the row on the index edge.
    Tensor table = weight(g, "table", DType::F32, {9, 130});
    Tensor ids = input(g, "ids", itype, {2, 5});
    output("emb", nn::embedding(ids, table));
    // Token rows of a bf16 activation, 11 picks (duplicates) out of 9 rows.
    Tensor x = input(g, "x", DType::BF16, {9, 37});
    Tensor tok = input(g, "tok", itype, {11});
    output("rows", gather(x, tok.reshape({11, 1}).expand({11, 37}), 0));
    // Whole expert matrices per pair: w [E, a, b] by experts expanded to [P, a, b].
    Tensor w = weight(g, "w", DType::F32, {9, 7, 19});
    Tensor experts = input(g, "experts", itype, {5});
    output("per_pair", gather(w, experts.reshape({5, 1, 1}).expand({5, 7, 19}), 0));
    lower::Lowered lowered;
    CHECK(lower_and_run(g, cfg, 3, 9, &lowered, options).exactly());
    CHECK(count_kind(lowered, "gather") == 3);
    CHECK(count_indirect(lowered.program) >= 3);
  });
}

TEST_CASE("lower: element gathers along a leading or middle axis match the interpreter") {
  for (const char* cfg : kConfigs) {
    for (int64_t budget : kBudgets) {
      CAPTURE(cfg);
      CAPTURE(budget);
      lower::LowerOptions options;
      options.spad_budget = budget;
      Graph g("elements");
      Tensor d3 = input(g, "d3", DType::F32, {4, 6, 45});
      Tensor i3 = input(g, "i3", DType::I64, {4, 3, 45});
      output("mid", gather(d3, i3, 1));
      Tensor d2 = input(g, "d2", DType::F32, {6, 7});
      Tensor i2 = input(g, "i2", DType::I32, {13, 7});
      output("lead", gather(d2, i2, 0));
      // A permuted index edge: the index is read strided.
      Tensor it = input(g, "it", DType::I32, {7, 13});
      output("perm", gather(d2, it.permute({1, 0}), 0));
      lower::Lowered lowered;
      CHECK(lower_and_run(g, cfg, 5, 6, &lowered, options).exactly());
      CHECK(count_kind(lowered, "gather") == 3);
    }
  }
}

TEST_CASE("lower: scatter_add matches the interpreter, duplicates accumulated in index order") {
  for_each_setup([](const char* cfg, const lower::LowerOptions& options, DType itype) {
    Graph g("scatter");
    // MoE combine: rows of 13 pairs into 5 tokens (duplicates), from zeros.
    Tensor y = input(g, "y", DType::F32, {13, 130});
    Tensor tok = input(g, "tok", itype, {13});
    output("combine",
           scatter_add(constant(g, 0.0, DType::F32, {5, 130}), tok.reshape({13, 1}).expand({13, 130}), y, 0));
    // Element scatter into a non-constant bf16 tensor along axis 0.
    Tensor data = input(g, "data", DType::BF16, {5, 7});
    Tensor idx = input(g, "idx", itype, {4, 7});
    Tensor src = input(g, "src", DType::BF16, {4, 7});
    output("elements", scatter_add(data, idx, src, 0));
    // The deepseek-v3 kept-group mask: ones scattered along the last axis (a literal source).
    Tensor kept = input(g, "kept", itype, {6, 3});
    output("mask",
           scatter_add(constant(g, 0.0, DType::F32, {6, 5}), kept, constant(g, 1.0, DType::F32, {6, 3}), 1));
    // Integer sums.
    Tensor counts = input(g, "counts", DType::I32, {3, 5});
    output("ints", scatter_add(counts, input(g, "cidx", itype, {3, 4}), input(g, "ones", DType::I32, {3, 4}), 1));
    lower::Lowered lowered;
    CHECK(lower_and_run(g, cfg, 7, 5, &lowered, options).exactly());
    CHECK(count_kind(lowered, "scatter_add") == 4);
  });
}

TEST_CASE("lower: scatter_add order is the reference's (f32 sums that depend on it)") {
  // Row 1 receives 1e8, 1, -1e8 in that order: (1e8 + 1) rounds to 1e8 in
  // f32, so the index order gives 0 where any other order gives 1.
  Graph g("order");
  Tensor y = input(g, "y", DType::F32, {4, 3});
  Tensor tok = input(g, "tok", DType::I64, {4});
  output("out", scatter_add(constant(g, 0.0, DType::F32, {2, 3}), tok.reshape({4, 1}).expand({4, 3}), y, 0));
  const std::vector<float> yv{1e8f, 1e8f, 1e8f, 1, 1, 1, -1e8f, -1e8f, -1e8f, 5, 6, 7};
  const std::vector<int64_t> tv{1, 1, 1, 0};
  std::map<std::string, interp::HostTensor> env{{"y", interp::HostTensor::from_f32({4, 3}, yv)},
                                                {"tok", interp::HostTensor::from_i64({4}, tv)}};
  const auto expected = interp::run(g, env).at("out");
  CHECK(expected.get(3) == 0.0);
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    const auto got = run_lowered(g, cfg, env).at("out");
    CHECK(test::allclose(got, expected));
  }
}

TEST_CASE("lower: an out-of-range index is a runtime error naming the kernel") {
  Graph g("oob");
  Tensor table = weight(g, "table", DType::F32, {5, 8});
  Tensor ids = input(g, "ids", DType::I32, {3});
  output("emb", nn::embedding(ids, table));
  Tensor y = input(g, "y", DType::F32, {3, 8});
  output("sum", scatter_add(constant(g, 0.0, DType::F32, {5, 8}), ids.reshape({3, 1}).expand({3, 8}), y, 0));
  std::map<std::string, interp::HostTensor> env = interp::random_inputs(g, 1, 5);
  for (int64_t bad : {int64_t{7}, int64_t{-1}}) {
    env["ids"].set_int(1, bad);
    CHECK_THROWS_AS(interp::run(g, env), Error);
    try {
      run_lowered(g, "toy", env);
      FAIL("no error for index " << bad);
    } catch (const Error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find("kernel 'gather_") != std::string::npos);
      CHECK(what.find(fmt::format("op 'dma.load' on '@table': index {} (element 1 of %idx) is out of range [0, 5)",
                                  bad)) != std::string::npos);
    }
  }
}

namespace {

const std::string kIndirect = R"(program "p" spad 4096
buffer @x : f32[40] input
buffer @ix : i32[3] input
buffer @y : f32[24] output
kernel "k" {
  spad %I : i32[3] x1 at 0
  spad %D : f32[24] x1 at 64
  dma.load [3] %I[0 : 1] <- @ix[0 : 1] tag 0
  dma.load [3, 8] %D[0 : 8, 1] <- @x[0 : 0, 1] index %I[0 : 1, 0] scale 8 limit 5 tag 0
  dma.store [3, 8] @y[0 : 8, 1] <- %D[0 : 8, 1] tag 1
  wait 1
}
)";

npu::Program parse_ok(const std::string& text) {
  auto parsed = npu::parse(text, "test.npu");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  return parsed.value();
}

}  // namespace

TEST_CASE("npu: the indirect DMA's text form round-trips and runs") {
  const npu::Program p = parse_ok(kIndirect);
  CHECK(npu::print(p) == kIndirect);
  CHECK(parse_ok(npu::print(p)) == p);
  CHECK(npu::verify(p).empty());
  const auto& d = std::get<npu::DmaOp>(p.kernels[0].body[1].node);
  CHECK(d.indirect());
  CHECK(d.index_strides == std::vector<int64_t>{1, 0});
  CHECK(d.index_scale == 8);
  CHECK(d.index_limit == 5);

  sim::Memory mem(p);
  std::vector<double> x(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  mem.write("x", x);
  mem.write("ix", std::vector<double>{4, 0, 4});
  sim::Options opt;
  opt.mode = sim::Mode::Functional;
  opt.memory = &mem;
  const sim::Report r = sim::run(p, target::load_config("toy"), opt);
  const std::vector<double> y = mem.read("y");
  for (int64_t row = 0; row < 3; ++row)
    for (int64_t c = 0; c < 8; ++c) CHECK(y[static_cast<size_t>(row * 8 + c)] == (row == 1 ? 0 : 32) + c);
  // Exact bytes: the index (12) and three rows of 32 bytes, plus the stored 96.
  CHECK(r.dram_useful_bytes == 12 + 96 + 96);
}

TEST_CASE("npu verifier: indirect DMA operands") {
  auto replace = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  auto verify_text = [](const std::string& text) { return npu::verify(parse_ok(text)); };
  CHECK(verify_text(replace(kIndirect, "spad %I : i32[3]", "spad %I : f32[3]")) ==
        std::vector<std::string>{"kernel 'k': op 'dma.load' moves i32 '@ix' into f32 %I",
                                 "kernel 'k': op 'dma.load' on '@x' is indexed by %I of dtype f32 (an index buffer "
                                 "holds i32 or i64)"});
  CHECK(
      verify_text(replace(kIndirect, "limit 5", "limit 6")) ==
      std::vector<std::string>{"kernel 'k': op 'dma.load' accesses elements [0, 48) of '@x' outside its 40 elements"});
  CHECK(verify_text(replace(kIndirect, "index %I[0 : 1, 0]", "index %I[0 : 2, 0]")) ==
        std::vector<std::string>{"kernel 'k': op 'dma.load' accesses elements [0, 5) of %I outside its 3 elements"});
  CHECK(verify_text(replace(kIndirect, "index %I[0 : 1, 0]", "index %I[0 : 1]")) ==
        std::vector<std::string>{"kernel 'k': op 'dma.load' on '@x' needs one index stride per dimension"});
}

TEST_CASE("lower: a big expert gather is tiled and simulates quickly in timing mode, bytes exact") {
  // 64 pairs of a [768, 2048] bf16 expert matrix out of 8 experts: 200 MB each way.
  Graph g("experts");
  Tensor w = weight(g, "w", DType::BF16, {8, 768, 2048});
  Tensor experts = input(g, "experts", DType::I64, {64});
  output("per_pair", gather(w, experts.reshape({64, 1, 1}).expand({64, 768, 2048}), 0));
  const target::NpuConfig config = target::load_config("tpuv3");
  const lower::Lowered lowered = lower::to_npu(g, config, timed(config));
  REQUIRE(lowered.report.per_kernel.size() == 1);
  CHECK(lowered.report.per_kernel[0].spad_bytes <= config.spad_bytes());
  const sim::Report r = sim::run(lowered.program, config);
  const int64_t matrices = int64_t{64} * 768 * 2048 * 2;
  CHECK(r.dram_useful_bytes == 64 * 8 + 2 * matrices);  // indices, gathered rows read, output written
  // DMA-bound: at least the bytes over the peak bandwidth, and not far from it
  // (whole matrices move as contiguous runs).
  CHECK(r.cycles >= r.roofline_cycles);
  CHECK(r.cycles < 2 * r.roofline_cycles);
}

TEST_CASE("npu timing: an indirect DMA waits for its index values, and moves the same bytes as a direct one") {
  const target::NpuConfig config = target::load_config("tpuv3");
  std::string direct = kIndirect;
  const std::string clause = "@x[0 : 0, 1] index %I[0 : 1, 0] scale 8 limit 5";
  direct.replace(direct.find(clause), clause.size(), "@x[0 : 8, 1]");
  const sim::Report ind = sim::run(parse_ok(kIndirect), config);
  const sim::Report dir = sim::run(parse_ok(direct), config);
  CHECK(ind.dram_useful_bytes == dir.dram_useful_bytes);
  // The direct load issues right behind the index load; the indirect one
  // starts only when the index values have arrived (a DRAM round trip).
  CHECK(ind.cycles > dir.cycles + config.dram.latency_cycles / 2);
}

TEST_CASE("lower: a constant index (no index load: the value is written once into the scratchpad)") {
  for (const char* cfg : kConfigs) {
    CAPTURE(cfg);
    Graph g("literal_index");
    Tensor d = input(g, "d", DType::F32, {6, 9, 5});
    output("g", gather(d, constant(g, 4.0, DType::I64, {3, 9, 5}), 0));
    Tensor y = input(g, "y", DType::F32, {4, 9});
    output("s", scatter_add(input(g, "base", DType::F32, {6, 9}), constant(g, 2.0, DType::I32, {4, 9}), y, 0));
    lower::Lowered lowered;
    CHECK(lower_and_run(g, cfg, 11, 2, &lowered).exactly());
    CHECK(count_kind(lowered, "gather") == 1);
    CHECK(count_kind(lowered, "scatter_add") == 1);
  }
}

TEST_CASE("lower: an expert gather read by a batched GEMM loads its operand through the index (no gather kernel)") {
  for (const char* cfg : {"toy", "tpuv3", "tpuv4"}) {
    for (bool fuse : {true, false}) {
      CAPTURE(cfg);
      CAPTURE(fuse);
      Graph g("expert_gemm");
      Tensor w = weight(g, "w", DType::F32, {6, 24, 40});  // [E, out, in]
      Tensor experts = input(g, "experts", DType::I64, {5});
      Tensor x = input(g, "x", DType::F32, {5, 3, 40});  // [P, m, in]
      Tensor per_pair = gather(w, experts.reshape({5, 1, 1}).expand({5, 24, 40}), 0);
      output("y", Tensor(&g, g.add(Op::Gemm, {x.edge(), per_pair.permute({0, 2, 1}).edge()}, GemmAttr{})));
      lower::LowerOptions options;
      options.fuse = fuse;
      lower::Lowered lowered;
      CHECK(lower_and_run(g, cfg, 13, 6, &lowered, options).within(1e-6));
      CHECK(count_kind(lowered, "gather") == (fuse ? 0 : 1));
      int gemm_indirect = 0;
      for (const npu::Kernel& k : lowered.program.kernels)
        npu::for_each_stmt(k.body, [&](const npu::Stmt& s) {
          if (const auto* d = std::get_if<npu::DmaOp>(&s.node))
            gemm_indirect += d->indirect() && k.name.find("gemm") != std::string::npos;
        });
      CHECK((gemm_indirect > 0) == fuse);
    }
  }
}
