// NPU program text form: round trips (text -> program -> text, and every
// built-in workload's program -> text -> program) and parse diagnostics.

#include <spool/npu/text.hpp>
#include <spool/npu/verify.hpp>
#include <spool/target/npu.hpp>

#include <spool/models/workloads.hpp>

#include <doctest/doctest.h>

using namespace spool;

namespace {

// Every statement kind, every load broadcast, casts, compares, selects,
// reductions, aliases, dependencies, ragged extents and multi-slot buffers.
const char* kProgram = R"(program "all" spad 65536
buffer @x : f32[64, 32] input
buffer @w : f32[32, 8] weight
buffer @y : f32[64, 8] output
buffer @yv : f32[512] alias @y + 0
buffer @i : i64[64] input
kernel "first" {
  spad %A : f32[512] x2 at 0
  spad %B : f32[256] x1 at 4096
  spad %C : f32[128] x2 at 8192
  spad %M : i64[16] x1 at 9216
  dma.load [32, 8] %B[0 : 8, 1] <- @w[0 : 8, 1] tag 0
  for m in 0..4 {
    dma.load [min(16, 70 - 16*m), 32] %A{m}[0 : 32, 1] <- @x[512*m : 32, 1] tag 0
    dma.load [1, 1, 2, 8] %M[0 : 16, 16, 8, 1] <- @i[16*m : 16, 16, 8, 1] tag 2
    matmul [16, 32, 8] %C{m}[0 : 8] = %A{m}[0 : 32], %B[0 : 8]
    matmul [8, 16, 8] %C{m}[0 : 8] += %A{m + 1}[16 : 16], %B[0 : 16] ta tb
    vector "epilogue" [16, 8] {
      %c = load %C{m}[0 : 8] : f32
      %g = load.col %B[0 : 1] : f32
      %r = load.row %A{m}[0 : 1] : f32
      %z = const 0 : f32
      %half = const -0.5 : f32
      %col = iota.col : index
      %row = iota.row : index
      %idx = load %M[0 : 8] : i64
      %col64 = cast %col : i64
      %lt = cmp.lt %col64, %idx : i1
      %le = cmp.le %row, %col : i1
      %both = and %lt, %le : i1
      %sel = select %both, %c, %z : f32
      %e = exp %sel : f32
      %s = reduce.sum %e : f32
      %mx = reduce.max %e : f32
      %sum = add %e, %s : f32
      %scaled = mul %sum, %half : f32
      %b16 = cast %scaled : bf16
      %back = cast %b16 : f32
      %rr = add %back, %r : f32
      %q = sub %rr, %g : f32
      store %C{m}[0 : 8], %q
      store %A{m}[0 : 1], %mx
    }
    dma.store [16, 8] @y[128*m : 8, 1] <- %C{m}[0 : 8, 1] tag 1
  }
  wait 1
}
kernel "second" after "first" {
  spad %T : f32[512] x2 at 0
  for i in 0..1 {
    dma.load [512] %T{i}[0 : 1] <- @yv[0 : 1] tag 0
  }
}
)";

}  // namespace

TEST_CASE("npu text: parse then print reproduces the text") {
  auto parsed = npu::parse(kProgram, "all.npu");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  CHECK(npu::print(parsed.value()) == kProgram);
  const npu::Program& p = parsed.value();
  CHECK(p.kernels.size() == 2);
  CHECK(p.kernels[1].deps == std::vector<int>{0});
  CHECK(p.buffers[3].alias_of == 2);
  // The second matmul's operand ref with a slot expression and offsets.
  const auto& loop = std::get<npu::LoopOp>(p.kernels[0].body[1].node);
  const auto& mm = std::get<npu::MatmulOp>(loop.body[3].node);
  CHECK(mm.accumulate);
  CHECK(mm.trans_a);
  CHECK(mm.trans_b);
  CHECK(mm.a.slot == npu::Affine::var(0) + npu::Affine::of(1));
  CHECK(mm.a.offset == npu::Affine::of(16));
}

TEST_CASE("npu text: every built-in workload round-trips on every config") {
  for (const char* config_name : {"toy", "tpuv3", "tpuv4"}) {
    const target::NpuConfig config = target::load_config(config_name);
    for (const char* spec : {"gemm:37x20x19", "gemm:256x256x256", "softmax:10x37", "layernorm:9x40",
                             "attention:2x20x12", "bert:base"}) {
      CAPTURE(config_name);
      CAPTURE(spec);
      const models::Workload w = models::compile_workload(spec, config);
      const std::string text = npu::print(w.program);
      auto reparsed = npu::parse(text);
      REQUIRE_MESSAGE(reparsed.ok(), reparsed.error().render());
      CHECK(reparsed.value() == w.program);
      CHECK(npu::print(reparsed.value()) == text);
      CHECK(npu::verify(w.program).empty());
    }
  }
}

TEST_CASE("npu text: parse errors carry file, line and column") {
  auto error_of = [](const std::string& text) {
    auto r = npu::parse(text, "bad.npu");
    REQUIRE_FALSE(r.ok());
    return r.error().render();
  };
  const std::string head = "program \"p\" spad 1024\nbuffer @x : f32[16] input\n";
  CHECK(error_of(head + "kernel \"k\" {\n  dma.load [16] %A[0 : 1] <- @x[0 : 1] tag 0\n}\n") ==
        "bad.npu:4:17: error: unknown scratchpad buffer '%A'");
  CHECK(error_of(head + "kernel \"k\" {\n  spad %A : f32[16] x1 at 0\n  dma.load [16] %A[0 : 1] <- @z[0 : 1] tag 0\n}\n") ==
        "bad.npu:5:30: error: unknown buffer '@z'");
  CHECK(error_of(head + "kernel \"k\" {\n  spad %A : f32[16] x1 at 0\n  dma.load [16] %A[4*j : 1] <- @x[0 : 1] tag 0\n}\n") ==
        "bad.npu:5:22: error: unknown loop variable 'j'");
  CHECK(error_of(head + "kernel \"k\" {\n  spad %A : f32[16] x1 at 0\n  vector \"v\" [1, 16] {\n    %a = load %A[0 : 16] : f32\n    %b = tanh %a : f32\n  }\n}\n") ==
        "bad.npu:7:10: error: unknown vector op 'tanh'");
  CHECK(error_of(head + "kernel \"k\" after \"nope\" {\n}\n") == "bad.npu:3:18: error: unknown kernel 'nope'");
  CHECK(error_of(head + "buffer @x : f32[4] temp\n") == "bad.npu:3:8: error: duplicate buffer '@x'");
  CHECK(error_of(head + "kernel \"k\" {\n  spad %A : f32[16] x1 at 0\n  frobnicate\n}\n") ==
        "bad.npu:5:3: error: unknown statement 'frobnicate'");
}
