// The NPU verifier: each rejection with its exact message, and the valid
// variant of each case accepted.

#include <spool/npu/text.hpp>
#include <spool/npu/verify.hpp>
#include <spool/support/error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace spool;

namespace {

std::vector<std::string> verify_text(const std::string& text) {
  auto parsed = npu::parse(text, "test.npu");
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().render());
  return npu::verify(parsed.value());
}

const std::string kHead = "program \"p\" spad 4096\nbuffer @x : f32[100] input\nbuffer @t : f32[100] temp\n";

}  // namespace

TEST_CASE("verifier: comparing index with i64 needs an explicit cast") {
  const std::string bad = kHead + R"(kernel "mask" {
  spad %A : f32[64] x1 at 0
  spad %L : i64[64] x1 at 256
  vector "mask" [1, 64] {
    %i = iota.col : index
    %n = load %L[0 : 64] : i64
    %c = cmp.lt %i, %n : i1
    %a = load %A[0 : 64] : f32
    %z = const 0 : f32
    %m = select %c, %a, %z : f32
    store %A[0 : 64], %m
  }
}
)";
  CHECK(verify_text(bad) ==
        std::vector<std::string>{"kernel 'mask': value %c: op 'cmp.lt' compares index with i64 without an explicit cast"});

  std::string good = bad;
  good.replace(good.find("    %c = cmp.lt %i, %n : i1"), std::string("    %c = cmp.lt %i, %n : i1").size(),
               "    %i64 = cast %i : i64\n    %c = cmp.lt %i64, %n : i1");
  CHECK(verify_text(good).empty());
}

TEST_CASE("verifier: other ill-typed bodies") {
  auto body = [](const std::string& lines) {
    return kHead + "kernel \"k\" {\n  spad %A : f32[64] x1 at 0\n  vector \"v\" [1, 64] {\n    %a = load %A[0 : 64] : f32\n" +
           lines + "  }\n}\n";
  };
  CHECK(verify_text(body("    %b = cast %a : bf16\n    %c = add %a, %b : f32\n")) ==
        std::vector<std::string>{"kernel 'k': value %c: op 'add' mixes f32 with bf16 without an explicit cast"});
  CHECK(verify_text(body("    %c = exp %a : bf16\n")) ==
        std::vector<std::string>{"kernel 'k': value %c: op 'exp' of f32 is annotated bf16"});
  CHECK(verify_text(body("    %i = iota.row : index\n    %c = sqrt %i : index\n")) ==
        std::vector<std::string>{"kernel 'k': value %c: op 'sqrt' needs a float operand, got index"});
  CHECK(verify_text(body("    %s = select %a, %a, %a : f32\n")) ==
        std::vector<std::string>{"kernel 'k': value %s: op 'select' needs an i1 condition, got f32"});
  CHECK(verify_text(body("    %i = load %A[0 : 64] : i32\n")) ==
        std::vector<std::string>{"kernel 'k': value %i: op 'load' has type i32 but %A holds f32 (loaded as f32)"});
  CHECK(verify_text(body("    %c = cast %a : bf16\n    store %A[0 : 64], %c\n")) ==
        std::vector<std::string>{"kernel 'k': value %c: op 'store' writes bf16 into %A, which holds f32 (stored from f32)"});
  CHECK(verify_text(body("    %s = reduce.sum %a : f32\n    %t = reduce.sum %s : f32\n")) ==
        std::vector<std::string>{"kernel 'k': value %t: op 'reduce.sum' reduces %s, which is already one value per row"});
  CHECK(verify_text(body("    %s = reduce.max.rows %a : f32\n    %t = reduce.sum.rows %s : f32\n")) ==
        std::vector<std::string>{
            "kernel 'k': value %t: op 'reduce.sum.rows' reduces %s, which is already one value per column"});
  CHECK(verify_text(body("    %s = reduce.max.rows %a : f32\n    %t = sub %a, %s : f32\n    store %A[0 : 64], %t\n")).empty());
}

TEST_CASE("verifier: scratchpad access outside its buffer") {
  const std::string bad = kHead + R"(kernel "k" {
  spad %A : f32[64] x1 at 0
  dma.load [80] %A[0 : 1] <- @x[0 : 1] tag 0
}
)";
  CHECK(verify_text(bad) ==
        std::vector<std::string>{"kernel 'k': op 'dma.load' accesses elements [0, 80) of %A outside its 64 elements"});
  const std::string tile = kHead + R"(kernel "k" {
  spad %A : f32[64] x2 at 0
  spad %C : f32[64] x1 at 512
  for i in 0..3 {
    matmul [8, 8, 8] %C[0 : 8] = %A{i}[8*i : 8], %A{i}[0 : 8]
  }
}
)";
  CHECK(verify_text(tile) ==
        std::vector<std::string>{"kernel 'k': op 'matmul' accesses elements [0, 80) of %A outside its 64 elements"});
}

TEST_CASE("verifier: scratchpad buffer outside the scratchpad") {
  const std::string bad = "program \"p\" spad 1024\nbuffer @x : f32[100] input\n" + std::string(R"(kernel "k" {
  spad %A : f32[512] x1 at 0
  dma.load [100] %A[0 : 1] <- @x[0 : 1] tag 0
}
)");
  CHECK(verify_text(bad) ==
        std::vector<std::string>{"kernel 'k': scratchpad buffer %A at bytes [0, 2048) is outside the 1024-byte scratchpad"});
}

TEST_CASE("verifier: overlapping scratchpad buffers only while both are live") {
  const std::string live = kHead + R"(kernel "k" {
  spad %A : f32[256] x1 at 0
  spad %B : f32[256] x1 at 512
  dma.load [100] %A[0 : 1] <- @x[0 : 1] tag 0
  dma.load [100] %B[0 : 1] <- @x[0 : 1] tag 0
  dma.store [100] @t[0 : 1] <- %A[0 : 1] tag 1
}
)";
  CHECK(verify_text(live) ==
        std::vector<std::string>{"kernel 'k': scratchpad buffers %A and %B overlap at bytes [512, 1024) while both are live"});
  // %A is dead before %B is first used: they may share space.
  const std::string sequential = kHead + R"(kernel "k" {
  spad %A : f32[256] x1 at 0
  spad %B : f32[256] x1 at 512
  dma.load [100] %A[0 : 1] <- @x[0 : 1] tag 0
  dma.store [100] @t[0 : 1] <- %A[0 : 1] tag 1
  dma.load [100] %B[0 : 1] <- @t[0 : 1] tag 0
}
)";
  CHECK(verify_text(sequential).empty());
  // Inside a loop, a buffer used anywhere in the body is live for the whole loop.
  const std::string looped = kHead + R"(kernel "k" {
  spad %A : f32[256] x1 at 0
  spad %B : f32[256] x1 at 512
  for i in 0..2 {
    dma.load [100] %A[0 : 1] <- @x[0 : 1] tag 0
    dma.store [100] @t[0 : 1] <- %A[0 : 1] tag 1
    dma.load [100] %B[0 : 1] <- @x[0 : 1] tag 0
  }
}
)";
  CHECK(verify_text(looped) ==
        std::vector<std::string>{"kernel 'k': scratchpad buffers %A and %B overlap at bytes [512, 1024) while both are live"});
}

TEST_CASE("verifier: DMA outside its DRAM buffer, with exact ragged edges") {
  const std::string ragged = kHead + R"(kernel "k" {
  spad %A : f32[40] x2 at 0
  for i in 0..3 {
    dma.load [min(40, 100 - 40*i)] %A{i}[0 : 1] <- @x[40*i : 1] tag 0
  }
}
)";
  CHECK(verify_text(ragged).empty());
  std::string bad = ragged;
  bad.replace(bad.find("min(40, 100 - 40*i)"), std::string("min(40, 100 - 40*i)").size(), "40");
  CHECK(verify_text(bad) ==
        std::vector<std::string>{"kernel 'k': op 'dma.load' accesses elements [0, 120) of '@x' outside its 100 elements"});
  const std::string strided = kHead + R"(kernel "k" {
  spad %A : f32[40] x1 at 0
  dma.load [4, 10] %A[0 : 10, 1] <- @x[5 : 25, 1] tag 0
}
)";
  CHECK(verify_text(strided).empty());
  const std::string alias = "program \"p\" spad 4096\nbuffer @x : f32[100] input\nbuffer @v : f32[60] alias @x + 50\n";
  CHECK(npu::verify(npu::parse(alias).take()) ==
        std::vector<std::string>{"buffer '@v': alias covers elements [50, 110) outside '@x' (100 elements)"});
}

TEST_CASE("verifier: a kernel reading another kernel's output must depend on it") {
  const std::string text = kHead + R"(kernel "w" {
  spad %A : f32[100] x1 at 0
  dma.load [100] %A[0 : 1] <- @x[0 : 1] tag 0
  dma.store [100] @t[0 : 1] <- %A[0 : 1] tag 1
}
kernel "r" {
  spad %A : f32[100] x1 at 0
  dma.load [100] %A[0 : 1] <- @t[0 : 1] tag 0
}
)";
  CHECK(verify_text(text) == std::vector<std::string>{"kernel 'r': reads '@t' written by kernel 'w' but does not depend on it"});
  std::string fixed = text;
  fixed.replace(fixed.find("kernel \"r\" {"), std::string("kernel \"r\" {").size(), "kernel \"r\" after \"w\" {");
  CHECK(verify_text(fixed).empty());
  CHECK_THROWS_WITH_AS(npu::verify_or_throw(npu::parse(text).take()),
                       "invalid NPU program 'p': kernel 'r': reads '@t' written by kernel 'w' but does not depend on it",
                       spool::Error);
}

TEST_CASE("verifier: a program of many kernels reports every kernel's errors in kernel order") {
  // Enough kernels that they are checked in parallel; kernels 3 and 17
  // annotate a type wrongly, kernel 11 twice.
  std::string text = kHead;
  std::vector<std::string> expected;
  for (int k = 0; k < 20; ++k) {
    const bool bad = k == 3 || k == 11 || k == 17;
    text += fmt::format(
        "kernel \"k{}\" {{\n  spad %A : f32[64] x1 at 0\n  vector \"v\" [1, 64] {{\n"
        "    %a = load %A[0 : 64] : f32\n    %c = exp %a : {}\n",
        k, bad ? "bf16" : "f32");
    if (k == 11) text += "    %d = sqrt %a : bf16\n";
    text += "  }\n}\n";
    if (bad) expected.push_back(fmt::format("kernel 'k{}': value %c: op 'exp' of f32 is annotated bf16", k));
    if (k == 11) expected.push_back("kernel 'k11': value %d: op 'sqrt' of f32 is annotated bf16");
  }
  CHECK(verify_text(text) == expected);
}

TEST_CASE("verifier: kernels of one shape are checked against their own DRAM buffers") {
  // The same kernel on @x, on @y (as large: checked once, by the first) and
  // on @z (smaller: a shape of its own), enough kernels to be checked in
  // parallel; only the ones on @z read outside their buffer.
  std::string text =
      "program \"p\" spad 4096\nbuffer @x : f32[100] input\nbuffer @y : f32[100] input\nbuffer @z : f32[60] input\n";
  std::vector<std::string> expected;
  for (int k = 0; k < 18; ++k) {
    const char* buffer = k % 3 == 0 ? "x" : k % 3 == 1 ? "y" : "z";
    text += fmt::format(
        "kernel \"k{}\" {{\n  spad %A : f32[100] x1 at 0\n  dma.load [100] %A[0 : 1] <- @{}[0 : 1] tag 0\n}}\n", k,
        buffer);
    if (k % 3 == 2)
      expected.push_back(
          fmt::format("kernel 'k{}': op 'dma.load' accesses elements [0, 100) of '@z' outside its 60 elements", k));
  }
  CHECK(verify_text(text) == expected);
}
