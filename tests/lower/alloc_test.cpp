// The liveness-aware scratchpad allocator on random lifetimes: live buffers
// never overlap, the footprint covers every buffer, and with equal sizes
// (where first fit on intervals is optimal) the footprint equals the largest
// live sum.

#include <spool/lower/spad_alloc.hpp>

#include <doctest/doctest.h>

#include <random>

using namespace spool;

namespace {

void check_placement(const std::vector<lower::SpadRequest>& reqs, const lower::SpadPlacement& p) {
  auto size = [](int64_t b) { return (b + lower::kSpadAlign - 1) / lower::kSpadAlign * lower::kSpadAlign; };
  REQUIRE(p.offsets.size() == reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    CHECK(p.offsets[i] % lower::kSpadAlign == 0);
    CHECK(p.offsets[i] + size(reqs[i].bytes) <= p.footprint);
    for (size_t j = i + 1; j < reqs.size(); ++j) {
      const bool live_together = reqs[i].first <= reqs[j].last && reqs[j].first <= reqs[i].last;
      const bool overlap = p.offsets[i] < p.offsets[j] + size(reqs[j].bytes) &&
                           p.offsets[j] < p.offsets[i] + size(reqs[i].bytes);
      if (live_together && size(reqs[i].bytes) > 0 && size(reqs[j].bytes) > 0) CHECK_FALSE(overlap);
    }
  }
  CHECK(p.footprint >= p.max_live);
}

}  // namespace

TEST_CASE("spad allocator: random lifetimes never overlap live buffers") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24);
    std::vector<lower::SpadRequest> reqs;
    for (int i = 0; i < n; ++i) {
      const int a = static_cast<int>(rng() % 40), b = static_cast<int>(rng() % 40);
      reqs.push_back({1 + static_cast<int64_t>(rng() % 5000), std::min(a, b), std::max(a, b)});
    }
    check_placement(reqs, lower::place_spad(reqs));
  }
}

TEST_CASE("spad allocator: with equal sizes the footprint is the largest live sum") {
  std::mt19937_64 rng(7);
  int reused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 24);
    const int64_t bytes = 64 * (1 + static_cast<int64_t>(rng() % 8));
    std::vector<lower::SpadRequest> reqs;
    for (int i = 0; i < n; ++i) {
      const int a = static_cast<int>(rng() % 40), b = static_cast<int>(rng() % 40);
      reqs.push_back({bytes, std::min(a, b), std::max(a, b)});
    }
    const lower::SpadPlacement p = lower::place_spad(reqs);
    check_placement(reqs, p);
    CHECK(p.footprint == p.max_live);
    if (p.footprint < bytes * n) ++reused;
  }
  CHECK(reused > 100);  // dead buffers' space is actually reused
}

TEST_CASE("spad allocator: a kernel's buffers are placed from its statement liveness") {
  npu::Kernel k;
  k.name = "k";
  k.spad = {npu::SpadBuffer{"a", DType::F32, 256, 1, 0}, npu::SpadBuffer{"b", DType::F32, 256, 1, 0},
            npu::SpadBuffer{"c", DType::F32, 256, 1, 0}};
  auto vec = [](int load, int store) {
    npu::VectorOp v;
    v.rows = npu::Extent::of(1);
    v.cols = npu::Extent::of(4);
    npu::VecInstr in;
    in.name = "x";
    in.op = npu::VecOp::Load;
    in.ref = npu::SpadRef{load, npu::Affine::of(0), npu::Affine::of(0), 4};
    v.body = {in};
    v.stores = {npu::VecStore{npu::SpadRef{store, npu::Affine::of(0), npu::Affine::of(0), 4}, 0}};
    return npu::Stmt{v};
  };
  // a -> b, then b -> c: a is dead when c is born, so c reuses a's space.
  k.body = {vec(0, 1), vec(1, 2)};
  const int64_t footprint = lower::allocate_kernel_spad(k);
  CHECK(footprint == 2 * 1024);
  CHECK(k.spad[2].offset == k.spad[0].offset);
  CHECK(k.spad[1].offset != k.spad[0].offset);
}
