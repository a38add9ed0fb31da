#pragma once
// DRAM and DMA timing model, shared by every core (internal to spool_sim).
//
// A DMA descriptor is expanded into contiguous address runs (dimensions that
// are contiguous in DRAM are merged first), each run into the interleave
// granules it touches, and each granule into request_bytes-sized requests
// (a request covers one aligned request_bytes block; a strided access that
// touches one element per block pays a whole request per element).
//
// Address mapping: granule g = addr / interleave_bytes goes to channel
// g % channels, or with dram.address_hash = "xor" to the XOR of all
// log2(channels)-bit groups of g (as memory controllers hash, so that
// power-of-two strides do not camp on one channel); inside the channel, local address a' = (g / channels) *
// interleave_bytes + addr % interleave_bytes lies in row r' = a' / row_bytes,
// bank r' % banks, row r' / banks. Each bank keeps its open row across
// descriptors (row-buffer hit/miss).
//
// touch() gives exactly the counts and row-buffer states of touch_reference()
// (the granule-by-granule walk above, kept as the specification and checked
// against it in tests/sim/dram_fast_test.cpp), faster: with power-of-two
// geometry the divisions are shifts, and a run covering whole stripes of
// channels * row_bytes bytes (aligned) is accounted one (channel, row) at a
// time: such a stripe maps every channel's share to one row of one bank
// (row_bytes / interleave_bytes granules per channel), so per channel the
// first granule decides hit or miss and the others hit. Shorter runs are
// accounted in aligned power-of-two blocks of granules of one stripe: such a
// block maps onto a block of as many consecutive channels of one bank
// (the hash XORs one value into the granule's low bits), updated at once.
// Neither the counts nor the row states depend on the order in which a
// descriptor's (channel, bank) pairs are met, and channels are served in
// index order, so both paths give the same times.
//
// Service time of one descriptor on channel c, in DRAM cycles:
//   bus_c  = requests_c * request_bytes / bytes_per_cycle
//   bank_b = misses_b * (t_rp + t_rcd) + requests_b * request_bytes / bytes_per_cycle
//   svc_c  = max(bus_c, max over banks b of c: bank_b)
// (bank-level parallelism: activations in one bank overlap transfers of the
// others; a stream that keeps missing in one bank is bound by that bank).
// Channels serve descriptors first come, first served: a descriptor starts
// on channel c at max(channel_free_c, first request arrival) and holds it for
// svc_c, which is what makes two streams on the same channel conflict. With
// all-bank refresh (dram.t_refi, dram.t_rfc) a channel serves nothing for
// t_rfc of every t_refi cycles: svc_c is stretched by t_refi / (t_refi -
// t_rfc), refresh's share of any stretch of time (the channels' refresh
// clocks are not modelled, so neither is where a short descriptor falls
// relative to them).

#include <spool/target/npu.hpp>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace spool::sim::detail {

using Time = int64_t;  // femtoseconds

struct DmaCost {
  int64_t requests = 0;
  int64_t useful_bytes = 0;
};

// A touch_rows() call: touch(addr + i * stride, bytes) for i < count.
struct RowsKey {
  int64_t addr, bytes, count, stride;
  bool operator==(const RowsKey&) const = default;
};
struct RowsKeyHash {
  size_t operator()(const RowsKey& k) const;
};
// What a block-path call does to one block (a bank's aligned block of
// channels), a function of the call alone: the rows of its first and last
// visit, and the later visits that hit and missed.
struct RowsVisit {
  size_t bank;
  int first;  // the block's first channel
  int64_t first_row, last_row, hits, misses;
};

class RowsAhead;

class DramModel {
 public:
  explicit DramModel(const target::NpuConfig& config);

  // Starts a descriptor: clears the per-descriptor counters.
  void begin();
  // Adds a contiguous run of `bytes` bytes at DRAM byte address `addr`.
  void touch(int64_t addr, int64_t bytes);
  // touch(addr + i * stride, bytes) for i = 0 .. count - 1 (the rows of a
  // strided descriptor), with the common row shape handled inline.
  void touch_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride);
  // The same, one interleave granule at a time: the model's definition.
  void touch_reference(int64_t addr, int64_t bytes);
  // Block-path calls of at least this many rows are remembered (rows_memo_)
  // and may be walked ahead (RowsAhead).
  static constexpr int64_t kMemoRows = 8;
  // Whether touch_rows() takes a call on the block path (power-of-two
  // geometry): rows of 2^m whole granules, each aligned to its size; or
  // rows inside one granule each, whole granules apart.
  bool block_rows(int64_t addr, int64_t bytes, int64_t stride) const;
  // A block-path call's visits (one per block; their order decides
  // nothing, as the blocks are disjoint): the walk touch_rows() makes, which
  // reads and writes no state of the model but its own scratch.
  void walk_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride, std::vector<RowsVisit>& out);
  // Block-path calls walked ahead by another thread, taken by touch_rows()
  // in place of its own walk (nullptr: none). Not owned.
  void set_ahead(RowsAhead* ahead) { ahead_ = ahead; }
  // Serves the descriptor whose first request reaches the channels at
  // `arrival` and whose last request reaches them at `last_arrival`.
  // Returns when the last channel finished serving it (before the return
  // latency), and records per-channel busy intervals through `on_busy`.
  // Consumes the descriptor's requests (begin() clears them only after a
  // descriptor touched and never served).
  template <typename OnBusy>
  Time serve(Time arrival, Time last_arrival, bool write, OnBusy&& on_busy);

  // The state touch() and serve() change, to undo a replay (timing_memo.cpp).
  struct Snapshot {
    std::vector<int64_t> open_row;
    std::vector<Time> channel_free, channel_busy;
    int64_t row_hits = 0, row_misses = 0, read_bytes = 0, write_bytes = 0;
  };
  // A walk ahead (RowsAhead) keeps the calls from here on until restore()
  // asks for them again or release_saved() says they will not be.
  void save(Snapshot& s) const;
  void restore(const Snapshot& s);
  // The state saved last will not be restored.
  void release_saved();
  const std::vector<Time>& channel_free() const { return channel_free_; }

  // A one-core run split at kernel boundaries (timing_parts.cpp): a later
  // part starts from open rows it can only guess, so it records the row
  // each (bank, channel) is first asked for; the guess held if, wherever it
  // differs from the rows the earlier part left open, that first request
  // hits or misses alike. Rows per bank * channels + channel; -1 closed.
  static constexpr int64_t kUntouched = INT64_MIN;  // never asked for (track_first_rows())
  const std::vector<int64_t>& open_rows() const { return open_row_; }
  void set_open_rows(const std::vector<int64_t>& rows) { open_row_ = rows; }
  void track_first_rows() { first_row_.assign(open_row_.size(), kUntouched); }
  // Whether `later`, a run that started from the open rows `guess` where
  // this one ends, met the rows as it would have met this one's.
  bool guess_held(const std::vector<int64_t>& guess, const DramModel& later) const;
  // Continues this model with `later`'s run (guess_held()), whose times are
  // `shift` behind: its rows, counters and busy channels.
  void append(const DramModel& later, Time shift);

  const DmaCost& cost() const { return cost_; }
  int64_t row_hits() const { return row_hits_; }
  int64_t row_misses() const { return row_misses_; }
  int64_t read_bytes() const { return read_bytes_; }
  int64_t write_bytes() const { return write_bytes_; }
  const std::vector<Time>& channel_busy() const { return channel_busy_; }
  Time period() const { return period_; }
  // How long a channel is held by `cycles` DRAM cycles of work: stretched by
  // all-bank refresh, which takes t_rfc of every t_refi cycles (its average
  // share, rounded up: a descriptor is not aligned to the refresh clock).
  Time service_time(int64_t cycles) const {
    const Time t = cycles * period_;
    if (refresh_free_ == 0) return t;
    if (t <= (INT64_MAX - refresh_free_) / refresh_period_)  // a descriptor's service: always
      return (t * refresh_period_ + refresh_free_ - 1) / refresh_free_;
    return static_cast<Time>((static_cast<__int128>(t) * refresh_period_ + refresh_free_ - 1) / refresh_free_);
  }

 private:
  const target::NpuConfig& config_;
  Time period_;
  int64_t refresh_period_ = 0, refresh_free_ = 0;  // t_refi and t_refi - t_rfc; 0: no refresh
  int bpc_shift_ = -1;                             // log2(dram.bytes_per_cycle), -1: not a power of two
  bool served_ = true;                             // the last descriptor's counters were consumed by serve()
  int channels_ = 0, banks_ = 0;
  std::vector<Time> channel_free_;
  std::vector<Time> channel_busy_;
  // Per bank * channels + channel (bank-major, so that the channels of one
  // bank are contiguous for account_block).
  std::vector<int64_t> open_row_;    // -1 closed
  std::vector<int64_t> first_row_;   // track_first_rows(): the row first asked for, or kUntouched; else empty
  void note_first(size_t idx, int64_t row) {
    if (first_row_[idx] == kUntouched) first_row_[idx] = row;
  }
  // Per descriptor: requests << 32 | row misses, one add per touch (a
  // descriptor is a scratchpad tile: far fewer than 2^32 requests).
  std::vector<uint64_t> bank_count_;
  std::vector<int64_t> channel_req_;  // per descriptor, summed from bank_count_ by serve()
  std::vector<int64_t> worst_;       // per channel, scratch
  // touch_rows' blocks (bank, aligned block of channels), by the index of
  // the block's first (bank, channel): the call that last saw it, the row
  // it left the block's channels at, and the visits after its first in
  // that call that hit and that missed.
  struct BlockVisits {
    uint64_t call = 0;
    int64_t first_row = 0, row = 0, hits = 0, misses = 0;
  };
  std::vector<BlockVisits> blocks_;
  std::vector<size_t> blocks_seen_;  // by the current call, first visit first (sized for every block, + 1)
  // walk_regions()' scratch, zero between calls: rows per block of one
  // region's pattern and its blocks; regions per hash value; per block, its
  // regions and visits; the blocks those name.
  struct RegionsOf {
    int64_t count = 0, visits = 0, first = 0, last = 0;
  };
  std::vector<int64_t> pattern_;
  std::vector<size_t> pattern_blocks_;
  std::vector<RegionsOf> regions_of_;
  std::vector<RegionsOf> block_regions_;
  std::vector<size_t> touched_blocks_;
  uint64_t rows_call_ = 0;
  // touch_rows' calls on the block path, by their arguments: the blocks a
  // call visits, the row of each one's first and last visit and the later
  // visits that hit and missed are a function of the arguments alone (the
  // address mapping), not of the rows left open. A call seen twice keeps
  // them; from its third time on they are applied without walking the rows
  // (a GEMM loads each activation tile once per column tile): each block's
  // first visit still meets the rows left open, channel by channel.
  struct RowsMemo {
    bool kept = false;  // false: seen once, nothing kept yet
    std::vector<RowsVisit> visits;
  };
  std::unordered_map<RowsKey, RowsMemo, RowsKeyHash> rows_memo_;
  static constexpr size_t kMemoCalls = 1 << 16;  // calls remembered at most (then forgotten at once)
  std::vector<RowsVisit> visits_;  // the current call's, for apply_rows
  RowsAhead* ahead_ = nullptr;
  // Applies a call's visits (walked, or kept from an earlier walk): each
  // block's first visit against the open rows, channel by channel, then
  // the later visits' counts; `per_row` requests per row and channel of a
  // block, `total` in all.
  void apply_rows(const std::vector<RowsVisit>& visits, int n, int64_t per_row, int64_t total);
  // Touched by the descriptor: channel bits per bank, and channel bits.
  size_t words_ = 1;                 // 64-bit words of channel bits
  std::vector<uint64_t> bank_touched_;     // per bank * words_ + word
  std::vector<uint64_t> channel_touched_;  // per word
  int channel_bits_ = 0;
  bool xor_hash_ = false;  // dram.address_hash = "xor", over more than one channel
  // Power-of-two geometry (every size below a power of two, row_bytes a
  // multiple of interleave_bytes, interleave_bytes of request_bytes): log2s.
  bool pow2_ = false;
  int il_shift_ = 0, rb_shift_ = 0, row_shift_ = 0, bank_bits_ = 0;
  int channel_of(int64_t granule) const;
  template <typename Geometry>
  size_t walk_blocks(const Geometry& g, int64_t addr, int64_t granules, int64_t count, int64_t stride, uint64_t call,
                     size_t nseen);
  template <typename Geometry>
  size_t walk_regions(const Geometry& g, int64_t offset, int64_t region1, int64_t m, int64_t granules, int64_t stride,
                      uint64_t call, size_t nseen);
  static uint64_t count_of(int64_t requests, int64_t misses) {
    return (static_cast<uint64_t>(requests) << 32) + static_cast<uint64_t>(misses);
  }
  void account(int ch, int bank, int64_t row, int64_t requests);
  // `requests` on each of the channels [first, first + count) (count a power
  // of two, first a multiple of it) of one bank, all at `row`.
  void account_block(int first, int count, int bank, int64_t row, int64_t requests);
  void touch_granules(int64_t addr, int64_t bytes);
  void touch_small_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride);
  void touch_stripes(int64_t first, int64_t count);
  template <typename F>
  void for_each_bit(const uint64_t* words, F&& f) const {
    for (size_t w = 0; w < words_; ++w)
      for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1)
        f(static_cast<int>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
  }
  DmaCost cost_;
  int64_t row_hits_ = 0;
  int64_t row_misses_ = 0;
  int64_t read_bytes_ = 0;
  int64_t write_bytes_ = 0;
};

inline void DramModel::account_block(int first, int count, int bank, int64_t row, int64_t requests) {
  const size_t base = static_cast<size_t>(bank) * static_cast<size_t>(channels_) + static_cast<size_t>(first);
  int64_t* open = &open_row_[base];
  uint64_t* bank_count = &bank_count_[base];
  if (!first_row_.empty())
    for (int i = 0; i < count; ++i) note_first(base + static_cast<size_t>(i), row);
  int64_t misses = 0;
  for (int i = 0; i < count; ++i) {
    const int64_t miss = open[i] != row ? 1 : 0;
    open[i] = row;
    bank_count[i] += count_of(requests, miss);
    misses += miss;
  }
  // count is a power of two and first a multiple of it: one word holds the bits.
  const uint64_t bits = count >= 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1) << (first & 63);
  for (int w = first >> 6; w < ((first + count + 63) >> 6); ++w) {
    bank_touched_[static_cast<size_t>(bank) * words_ + static_cast<size_t>(w)] |= bits;
    channel_touched_[static_cast<size_t>(w)] |= bits;
  }
  const int64_t total = requests * count;
  row_misses_ += misses;
  row_hits_ += total - misses;
  cost_.requests += total;
}

template <typename OnBusy>
Time DramModel::serve(Time arrival, Time last_arrival, bool write, OnBusy&& on_busy) {
  const int64_t rb = config_.dma.request_bytes;
  const int64_t bpc = config_.dram.bytes_per_cycle;
  const int64_t miss_cycles = config_.dram.t_rp + config_.dram.t_rcd;
  const int bpc_shift = bpc_shift_;
  auto transfer_cycles = [&](int64_t requests) {
    const int64_t bytes = requests * rb + bpc - 1;
    return bpc_shift >= 0 ? bytes >> bpc_shift : bytes / bpc;
  };
  // Per-channel worst bank, from the banks this descriptor touched; the
  // per-descriptor counters are cleared as they are read.
  std::vector<int64_t>& worst = worst_;
  // A channel's requests are its banks' (summed here, not per request).
  // With one word of channel bits and a power-of-two bus, each touched
  // bank's channels from its lowest touched to its highest are taken
  // without branches: an untouched one counts nothing (no requests, no
  // misses: t = 0, and worst is never negative).
  if (words_ == 1 && bpc_shift >= 0) {
    int64_t* __restrict const worst_of = worst.data();
    int64_t* __restrict const requests_of = channel_req_.data();
    for (int bank = 0; bank < banks_; ++bank) {
      const uint64_t bits = bank_touched_[static_cast<size_t>(bank)];
      if (bits == 0) continue;
      bank_touched_[static_cast<size_t>(bank)] = 0;
      uint64_t* __restrict const counts = &bank_count_[static_cast<size_t>(bank) * static_cast<size_t>(channels_)];
      const int lo = __builtin_ctzll(bits), hi = 64 - __builtin_clzll(bits);
      for (int ch = lo; ch < hi; ++ch) {
        const uint64_t count = counts[ch];
        counts[ch] = 0;
        const auto requests = static_cast<int64_t>(count >> 32);
        const auto misses = static_cast<int64_t>(count & 0xffffffffu);
        const int64_t t = misses * miss_cycles + ((requests * rb + bpc - 1) >> bpc_shift);
        worst_of[ch] = std::max(worst_of[ch], t);
        requests_of[ch] += requests;
      }
    }
  } else {
    for (int bank = 0; bank < banks_; ++bank) {
      uint64_t* const touched = &bank_touched_[static_cast<size_t>(bank) * words_];
      for_each_bit(touched, [&](int ch) {
        const size_t idx = static_cast<size_t>(bank) * static_cast<size_t>(channels_) + static_cast<size_t>(ch);
        const uint64_t count = bank_count_[idx];
        bank_count_[idx] = 0;
        const int64_t requests = static_cast<int64_t>(count >> 32);
        const int64_t misses = static_cast<int64_t>(count & 0xffffffffu);
        const int64_t t = misses * miss_cycles + transfer_cycles(requests);
        if (t > worst[ch]) worst[ch] = t;
        channel_req_[ch] += requests;
      });
      std::fill(touched, touched + words_, uint64_t{0});
    }
  }
  Time finish = arrival;
  // Channels in index order (each is served independently of the others).
  for_each_bit(channel_touched_.data(), [&](int ch) {
    const int64_t svc = std::max(transfer_cycles(channel_req_[ch]), worst[ch]);
    worst[ch] = 0;
    const Time start = std::max(channel_free_[ch], arrival);
    const Time held = service_time(svc);
    // The channel cannot finish before the descriptor's last request reached it.
    const Time end = std::max(start + held, last_arrival + period_);
    channel_free_[ch] = end;
    channel_busy_[ch] += held;
    on_busy(ch, start, held);
    finish = std::max(finish, end);
    (write ? write_bytes_ : read_bytes_) += channel_req_[ch] * rb;
    channel_req_[ch] = 0;
  });
  std::fill(channel_touched_.begin(), channel_touched_.end(), uint64_t{0});
  served_ = true;
  return finish;
}

}  // namespace spool::sim::detail
