// The DRAM model's fast path (shifts for power-of-two geometry, whole
// stripes of channels * row_bytes accounted per channel) against the
// granule-by-granule walk that defines the model: on mixed sequences of
// descriptors (long unaligned contiguous runs, strided row runs, power-of-two
// rows aligned to their size, single elements) touch() run by run and
// touch_rows() per descriptor give the same request counts, row hits and
// misses, channel service times and busy intervals, in the same order; so
// do the calls touch_rows() has seen before and replays from what it kept,
// and the calls a second thread walked ahead (RowsAhead), in the order the
// model asks for them or another.

#include "dram.hpp"
#include "rows_ahead.hpp"
#include "scoreboard.hpp"

#include <spool/target/npu.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

using namespace spool;
using spool::sim::detail::DramModel;
using spool::sim::detail::RowsAhead;
using spool::sim::detail::RowsKey;
using spool::sim::detail::RowsVisit;
using spool::sim::detail::Time;

namespace {

// One descriptor: runs of `bytes` bytes, `count` of them `stride` apart.
struct Rows {
  int64_t base, bytes, count, stride;
};

std::vector<Rows> runs(int64_t base, int64_t bytes, int64_t count, int64_t stride) {
  return {Rows{base, bytes, count, stride}};
}

std::vector<std::vector<Rows>> descriptors(uint32_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<std::vector<Rows>> out;
  out.push_back(runs(0, 4 << 20, 1, 0));                          // aligned 4 MiB
  out.push_back(runs(4096 + 20, (3 << 20) + 77, 1, 0));           // unaligned both ends
  out.push_back(runs(1 << 24, 1024, 4096, 16384));                // weight rows (K^T tile)
  out.push_back(runs((1 << 24) + 512, 7168, 512, 57344));         // wide rows
  out.push_back(runs(1 << 20, 4, 300, 512));                      // one element per request
  out.push_back(runs(0, 4 << 20, 1, 0));                          // again: rows now open
  out.push_back(runs(1 << 26, 512, 2048, 28672));                 // K^T tile rows of 128 f32
  out.push_back(runs((1 << 26) + 2048, 2048, 512, 8192));         // half-group rows
  out.push_back(runs(1 << 27, 4096, 256, 28672));                 // whole-group rows
  out.push_back(runs((1 << 27) + 256, 256, 1000, 768));           // one granule per row
  out.push_back(runs((1 << 27) + 512, 1024, 300, 1536));          // rows not aligned to their size
  out.push_back(runs(1 << 28, 512, 200, 1 << 22));                // a block revisited at a new row each time
  out.push_back(runs((1 << 28) + (1 << 21), 512, 200, 1 << 20));  // rows crossing those of the last one
  out.push_back(runs(1 << 24, 256, 1100, 256));                   // every (bank, channel) once, then again
  out.push_back(runs((1 << 23) + 2, 2, 32, 4));                   // every other bf16 element
  out.push_back(runs((1 << 23) + 130, 2, 300, 4));                // the same across granules
  out.push_back(runs((1 << 23) + 6, 4, 500, 8));                  // rows across their stride's cells
  out.push_back(runs((1 << 23) + 8193, 1, 1000, 2));              // one byte of every two
  out.push_back(runs((1 << 23) + 16400, 16, 300, 32));            // half of every 32 bytes
  out.push_back(runs((1 << 23) + 448, 2, 300, 4));                // aligned to the stride, across granules
  out.push_back(runs((1 << 23) + 1024, 16, 100, 32));             // the same, 16 bytes of every 32
  out.push_back(runs((1 << 23) + 48, 8, 256, 0));                 // one element broadcast
  out.push_back(runs((1 << 23) + 200, 64, 100, 96));              // short rows, some across granules
  out.push_back(runs((1 << 23) + 4000, 24, 90, -40));             // descending
  // Strides that divide a DRAM row of every bank and channel (tpuv3: 256
  // KiB), over many of them: walked a region pattern at a time.
  out.push_back(runs((1 << 25) + 3 * 8192, 512, 5000, 8192));               // rows before the first region, and after
  out.push_back(runs((1 << 25) + 3 * (1 << 18) + 4096, 4096, 300, 65536));  // four rows per region
  out.push_back(runs((1 << 28) + 512, 256, 3000, 1024));                    // a region's rows visit blocks twice
  out.push_back(runs(1 << 29, 2048, 700, 1 << 18));                         // one row per region
  out.push_back(runs((1 << 29) + 1024, 1024, 1500, 1 << 20));               // rows regions apart
  out.push_back(runs(1 << 25, 512, 5000, 8192));  // the first call's rows again, from its start
  out.push_back(runs((1 << 25) + 64, 128, 512, 8192));  // rows inside a granule each, in regions
  out.push_back(runs((1 << 26) + 130, 120, 700, 256));  // one per granule, across requests
  out.push_back(runs((1 << 26) + 200, 56, 40, 768));    // granules apart, not dividing a region
  for (int i = 0; i < 40; ++i) {
    const int64_t base = pick(0, int64_t{1} << 32) & ~int64_t{3};
    const int64_t bytes = 4 * pick(1, i % 3 == 0 ? (1 << 20) : 4096);
    out.push_back(runs(base, bytes, pick(1, 64), bytes + 4 * pick(0, 8192)));
    // Power-of-two rows aligned to their size, at strides that keep them so.
    const int64_t pow2 = int64_t{1} << pick(2, 13);
    out.push_back(runs(base & ~(pow2 - 1), pow2, pick(1, 256), pow2 * pick(1, 40)));
    // Rows shorter than a granule, close together or overlapping.
    out.push_back(runs(base, 2 * pick(1, 100), pick(1, 300), 2 * pick(0, 150)));
  }
  return out;
}

using Busy = std::tuple<int, Time, Time>;

// How the calls a RowsAhead walks relate to the calls the model makes.
enum class Ahead {
  None,      // no walk ahead
  Same,      // the model's calls, in its order
  Shuffled,  // the model's calls, every other pair swapped
  Skipping,  // the model's calls but every third one
};

// The calls `sequence` makes, in order, as a RowsAhead is given them.
std::vector<RowsKey> calls_of(const std::vector<std::vector<Rows>>& sequence, Ahead ahead) {
  std::vector<RowsKey> calls;
  for (const std::vector<Rows>& d : sequence)
    for (const Rows& r : d) calls.push_back(RowsKey{r.base, r.bytes, r.count, r.stride});
  if (ahead == Ahead::Shuffled)
    for (size_t i = 0; i + 1 < calls.size(); i += 4) std::swap(calls[i], calls[i + 1]);
  if (ahead == Ahead::Skipping) {
    std::vector<RowsKey> kept;
    for (size_t i = 0; i < calls.size(); ++i)
      if (i % 3 != 2) kept.push_back(calls[i]);
    calls = kept;
  }
  return calls;
}

// touch() run by run, touch_rows() per descriptor (with its rows walked
// ahead as `ahead` says, through a ring of `slots`), and the reference walk.
void check_same(const target::NpuConfig& config, Ahead ahead = Ahead::None, size_t slots = 1024) {
  DramModel fast(config), rows(config), reference(config);
  Time arrival = 0;
  // Each call three times or more, others between: from its third time on,
  // touch_rows() applies what it kept of a call instead of walking its rows,
  // against other rows left open.
  std::vector<std::vector<Rows>> sequence;
  for (const uint32_t seed : {7u, 8u, 7u, 7u})
    for (std::vector<Rows>& d : descriptors(seed)) sequence.push_back(std::move(d));
  std::unique_ptr<RowsAhead> walked;
  if (ahead != Ahead::None) {
    const std::vector<RowsKey> calls = calls_of(sequence, ahead);
    walked = std::make_unique<RowsAhead>(
        config,
        [calls](const std::function<bool(const RowsKey&)>& call) {
          for (const RowsKey& k : calls)
            if (!call(k)) return;
        },
        slots);
    rows.set_ahead(walked.get());
  }
  size_t index = 0;
  for (const std::vector<Rows>& d : sequence) {
    fast.begin();
    rows.begin();
    reference.begin();
    // Now and then, let the thread catch up (else it may still be behind
    // when the model asks, and the model walks every call itself).
    if (walked && ++index % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (const Rows& r : d) {
      rows.touch_rows(r.base, r.bytes, r.count, r.stride);
      for (int64_t i = 0; i < r.count; ++i) {
        fast.touch(r.base + i * r.stride, r.bytes);
        reference.touch_reference(r.base + i * r.stride, r.bytes);
      }
    }
    for (const DramModel* m : {&fast, &rows}) {
      CHECK(m->cost().requests == reference.cost().requests);
      CHECK(m->cost().useful_bytes == reference.cost().useful_bytes);
      CHECK(m->row_hits() == reference.row_hits());
      CHECK(m->row_misses() == reference.row_misses());
    }
    std::vector<Busy> busy_fast, busy_rows, busy_reference;
    const Time end_fast = fast.serve(arrival, arrival + 1000000, false,
                                     [&](int ch, Time s, Time t) { busy_fast.emplace_back(ch, s, t); });
    const Time end_rows = rows.serve(arrival, arrival + 1000000, false,
                                     [&](int ch, Time s, Time t) { busy_rows.emplace_back(ch, s, t); });
    const Time end_reference = reference.serve(
        arrival, arrival + 1000000, false, [&](int ch, Time s, Time t) { busy_reference.emplace_back(ch, s, t); });
    CHECK(end_fast == end_reference);
    CHECK(end_rows == end_reference);
    CHECK(busy_fast == busy_reference);
    CHECK(busy_rows == busy_reference);
    arrival += 500000;
  }
  CHECK(fast.read_bytes() == reference.read_bytes());
  CHECK(rows.read_bytes() == reference.read_bytes());
  CHECK(fast.channel_busy() == reference.channel_busy());
  CHECK(rows.channel_busy() == reference.channel_busy());
  rows.set_ahead(nullptr);
  if (ahead == Ahead::Same) CHECK(walked->taken() > 0);
}

}  // namespace

TEST_CASE("dram fast path: identical to the granule walk on every shipped config") {
  for (const char* name : {"tpuv3", "tpuv4", "toy"}) {
    CAPTURE(name);
    check_same(target::load_config(name));
  }
}

// A block-path call's visits by their definition: row by row, each row's
// block (its bank, and its first granule's channel rounded down to the
// row's granules), its first and last row, and its later visits that found
// the block's row open and that did not.
std::vector<RowsVisit> visits_by_rows(const target::NpuConfig& c, const RowsKey& k) {
  const int64_t il = c.dram.interleave_bytes, channels = c.dram.channels, banks = c.dram.banks;
  int bits = 0;
  while ((int64_t{1} << bits) < channels) ++bits;
  std::vector<RowsVisit> out;
  std::vector<int64_t> index(static_cast<size_t>(channels * banks), -1);
  for (int64_t i = 0; i < k.count; ++i) {
    const int64_t addr = k.addr + i * k.stride, granule = addr / il;
    int64_t ch = granule % channels;
    if (c.dram.xor_hash && channels > 1) {
      ch = 0;
      for (uint64_t g = static_cast<uint64_t>(granule); g != 0; g >>= bits)
        ch ^= static_cast<int64_t>(g) & (channels - 1);
    }
    ch &= ~(std::max<int64_t>(1, k.bytes / il) - 1);
    const int64_t local_row = (granule / channels) * il / c.dram.row_bytes;
    const int64_t bank = local_row % banks, row = local_row / banks;
    int64_t& at = index[static_cast<size_t>(bank * channels + ch)];
    if (at < 0) {
      at = static_cast<int64_t>(out.size());
      out.push_back(RowsVisit{static_cast<size_t>(bank), static_cast<int>(ch), row, row, 0, 0});
      continue;
    }
    RowsVisit& v = out[static_cast<size_t>(at)];
    (v.last_row == row ? v.hits : v.misses) += 1;
    v.last_row = row;
  }
  return out;
}

bool same_visits(std::vector<RowsVisit> a, std::vector<RowsVisit> b) {
  auto key = [](const RowsVisit& v) { return std::make_pair(v.bank, v.first); };
  std::sort(a.begin(), a.end(), [&](const RowsVisit& x, const RowsVisit& y) { return key(x) < key(y); });
  std::sort(b.begin(), b.end(), [&](const RowsVisit& x, const RowsVisit& y) { return key(x) < key(y); });
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const RowsVisit& x, const RowsVisit& y) {
           return x.bank == y.bank && x.first == y.first && x.first_row == y.first_row && x.last_row == y.last_row &&
                  x.hits == y.hits && x.misses == y.misses;
         });
}

TEST_CASE("dram: a block-path call's visits are those of its rows one by one, a region pattern at a time or not") {
  std::mt19937_64 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (const char* name : {"tpuv3", "tpuv4", "toy"}) {
    CAPTURE(name);
    target::NpuConfig c = target::load_config(name);
    for (const bool xor_hash : {true, false}) {
      c.dram.xor_hash = xor_hash;
      DramModel model(c);
      const int64_t region = c.dram.row_bytes * c.dram.channels * c.dram.banks;
      std::vector<RowsVisit> walked;
      for (int i = 0; i < 300; ++i) {
        // Whole granules (most), or rows inside one granule each.
        const bool small = i % 4 == 3;
        const int64_t il = c.dram.interleave_bytes;
        const int64_t bytes = small ? 2 * pick(1, il / 2 - 1) : il << pick(0, 3);
        const int64_t unit = std::max(bytes, il);
        // Strides that divide a region (most), or not; starts anywhere a row may.
        const int64_t stride = i % 5 == 4 ? unit * pick(1, 300) : std::max(unit, region >> pick(0, 10));
        const int64_t addr = small ? (pick(0, int64_t{1} << 34) / il) * il + pick(0, il - bytes)
                                   : (pick(0, int64_t{1} << 34) / bytes) * bytes;
        const RowsKey k{addr, bytes, pick(1, 6000), stride};
        CAPTURE(k.addr);
        CAPTURE(k.bytes);
        CAPTURE(k.count);
        CAPTURE(k.stride);
        if (!model.block_rows(k.addr, k.bytes, k.stride)) continue;
        model.walk_rows(k.addr, k.bytes, k.count, k.stride, walked);
        CHECK(same_visits(walked, visits_by_rows(c, k)));
      }
    }
  }
}

TEST_CASE("dram: rows walked ahead on a second thread give the model's own counts and times") {
  if (std::thread::hardware_concurrency() < 2) return;  // the thread would only wait
  for (const char* name : {"tpuv3", "tpuv4", "toy"}) {
    CAPTURE(name);
    const target::NpuConfig config = target::load_config(name);
    check_same(config, Ahead::Same);
    check_same(config, Ahead::Shuffled);
    check_same(config, Ahead::Skipping);
    check_same(config, Ahead::Same, 2);  // a ring of two: the thread waits for every call
  }
}

TEST_CASE("dram: a walk ahead gives what the model's own walk gives, again after a rewind") {
  const target::NpuConfig config = target::load_config("tpuv3");
  const std::vector<RowsKey> calls = {{1 << 24, 1024, 4096, 16384}, {1 << 26, 512, 2048, 28672},
                                      {1 << 27, 4096, 256, 28672},  {1 << 24, 1024, 4096, 16384},
                                      {1 << 24, 1024, 4096, 16384}, {(1 << 26) + 2048, 2048, 512, 8192}};
  DramModel own(config);
  std::vector<std::vector<RowsVisit>> expected(calls.size());
  for (size_t i = 0; i < calls.size(); ++i)
    own.walk_rows(calls[i].addr, calls[i].bytes, calls[i].count, calls[i].stride, expected[i]);
  auto same = [](const std::vector<RowsVisit>& a, const std::vector<RowsVisit>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const RowsVisit& x, const RowsVisit& y) {
             return x.bank == y.bank && x.first == y.first && x.first_row == y.first_row && x.last_row == y.last_row &&
                    x.hits == y.hits && x.misses == y.misses;
           });
  };
  RowsAhead ahead(
      config,
      [&](const std::function<bool(const RowsKey&)>& call) {
        for (const RowsKey& k : calls)
          if (!call(k)) return;
      },
      4);
  // Wait for the thread (it stops at a full ring of four).
  auto wait_for = [&](uint64_t n) {
    for (int i = 0; i < 20000 && ahead.reached() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(ahead.reached() >= n);
  };
  wait_for(4);
  const std::vector<RowsVisit>* v = ahead.take(calls[0]);
  REQUIRE(v != nullptr);
  CHECK(same(*v, expected[0]));
  ahead.hold();
  for (size_t i = 1; i < 3; ++i) {
    v = ahead.take(calls[i]);
    REQUIRE(v != nullptr);
    CHECK(same(*v, expected[i]));
  }
  ahead.rewind();  // a refused replay: the same calls again
  for (size_t i = 1; i < 3; ++i) {
    v = ahead.take(calls[i]);
    REQUIRE(v != nullptr);
    CHECK(same(*v, expected[i]));
  }
  ahead.release();
  // Another call than the one in this place: not handed out.
  CHECK(ahead.take(calls[5]) == nullptr);
  wait_for(5);
  v = ahead.take(calls[4]);
  REQUIRE(v != nullptr);
  CHECK(same(*v, expected[4]));
  CHECK(ahead.taken() == 6);
}

TEST_CASE("dram: a walk ahead that is never taken from stops with its owner") {
  const target::NpuConfig config = target::load_config("tpuv3");
  // The thread fills a ring of two and waits; destroying it must not hang.
  RowsAhead ahead(
      config,
      [](const std::function<bool(const RowsKey&)>& call) {
        for (int i = 0; i < 100; ++i)
          if (!call(RowsKey{int64_t{1} << 24, 1024, 64, 16384})) return;
      },
      2);
  for (int i = 0; i < 20000 && ahead.reached() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(ahead.reached() == 2);
  CHECK(ahead.taken() == 0);
}

TEST_CASE("dram fast path: identical without the XOR hash, with one granule per row, one channel") {
  target::NpuConfig c = target::load_config("tpuv3");
  c.dram.xor_hash = false;
  check_same(c);
  c.dram.xor_hash = true;
  c.dram.row_bytes = c.dram.interleave_bytes;  // one granule per channel per stripe
  check_same(c);
  c.dram.channels = 1;
  c.dram.row_bytes = 2048;
  check_same(c);
  c.dram.channels = 6;  // not a power of two: the walk itself
  c.dram.xor_hash = false;
  check_same(c);
}

TEST_CASE("dram: a descriptor touched and never served leaves nothing to the next one") {
  // A refused replay walks a descriptor's addresses, finds its requests
  // differ from the record and restores the model without serving it.
  const target::NpuConfig config = target::load_config("tpuv3");
  DramModel refused(config), clean(config);
  DramModel::Snapshot before;
  refused.save(before);
  refused.begin();
  refused.touch_rows(1 << 22, 2048, 256, 8192);
  refused.touch(1 << 24, 100000);
  refused.restore(before);
  std::vector<Busy> busy_refused, busy_clean;
  for (DramModel* m : {&refused, &clean}) {
    m->begin();
    m->touch_rows(1 << 26, 1024, 64, 16384);
    CHECK(m->cost().requests == 64 * 1024 / config.dma.request_bytes);
  }
  const Time end_refused =
      refused.serve(0, 1000, false, [&](int ch, Time s, Time t) { busy_refused.emplace_back(ch, s, t); });
  const Time end_clean =
      clean.serve(0, 1000, false, [&](int ch, Time s, Time t) { busy_clean.emplace_back(ch, s, t); });
  CHECK(end_refused == end_clean);
  CHECK(busy_refused == busy_clean);
  CHECK(refused.read_bytes() == clean.read_bytes());
}

TEST_CASE("scoreboard: div_mod is / and % for every divisor, power of two, 32-bit or not") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() >> (i % 40));  // from 2^63 down to small
    int64_t b = 1 + static_cast<int64_t>(rng() >> (24 + i % 39));
    if (i % 3 == 0) b = int64_t{1} << (i % 62);
    const auto [q, r] = spool::sim::detail::div_mod(a, b);
    REQUIRE(q == a / b);
    REQUIRE(r == a % b);
  }
  CHECK(spool::sim::detail::div_mod(-7, 4) == std::pair<int64_t, int64_t>{-1, -3});  // C++'s rounding
}
