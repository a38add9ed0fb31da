// DRAM model: address mapping, request counting and row-buffer state (see dram.hpp).

#include "dram.hpp"
#include "rows_ahead.hpp"

#include <spool/support/hash.hpp>

#include <algorithm>
#include <cmath>

namespace spool::sim::detail {

DramModel::DramModel(const target::NpuConfig& config)
    : config_(config),
      period_(static_cast<Time>(std::llround(1e9 / config.dram.clock_mhz))),
      refresh_period_(config.dram.t_refi),
      refresh_free_(config.dram.t_refi > 0 ? config.dram.t_refi - config.dram.t_rfc : 0),
      channels_(config.dram.channels),
      banks_(config.dram.banks),
      channel_free_(config.dram.channels, 0),
      channel_busy_(config.dram.channels, 0),
      open_row_(static_cast<size_t>(config.dram.channels) * config.dram.banks, -1),
      bank_count_(open_row_.size(), 0),
      channel_req_(config.dram.channels, 0),
      worst_(config.dram.channels, 0),
      blocks_(open_row_.size()),
      blocks_seen_(open_row_.size() + 1),  // every block, and the slot a revisit writes past them
      pattern_(open_row_.size(), 0),
      pattern_blocks_(open_row_.size()),
      regions_of_(static_cast<size_t>(config.dram.channels)),
      block_regions_(open_row_.size()),
      touched_blocks_(open_row_.size()),
      words_((static_cast<size_t>(config.dram.channels) + 63) / 64),
      bank_touched_(static_cast<size_t>(config.dram.banks) * words_, 0),
      channel_touched_(words_, 0) {
  while ((int64_t{1} << channel_bits_) < config.dram.channels) ++channel_bits_;
  xor_hash_ = config.dram.xor_hash && channels_ > 1;
  auto log2_exact = [](int64_t v, int& bits) {
    bits = 0;
    while ((int64_t{1} << bits) < v) ++bits;
    return v > 0 && (int64_t{1} << bits) == v;
  };
  int unused = 0;
  const auto& d = config.dram;
  if (int bits = 0; log2_exact(d.bytes_per_cycle, bits)) bpc_shift_ = bits;
  pow2_ = log2_exact(d.interleave_bytes, il_shift_) && log2_exact(config.dma.request_bytes, rb_shift_) &&
          log2_exact(d.row_bytes, row_shift_) && log2_exact(d.banks, bank_bits_) && log2_exact(d.channels, unused) &&
          d.row_bytes % d.interleave_bytes == 0 && d.interleave_bytes % config.dma.request_bytes == 0;
}

void DramModel::save(Snapshot& s) const {
  if (ahead_) ahead_->hold();
  s.open_row = open_row_;
  s.channel_free = channel_free_;
  s.channel_busy = channel_busy_;
  s.row_hits = row_hits_;
  s.row_misses = row_misses_;
  s.read_bytes = read_bytes_;
  s.write_bytes = write_bytes_;
}

void DramModel::restore(const Snapshot& s) {
  if (ahead_) ahead_->rewind();
  open_row_ = s.open_row;
  channel_free_ = s.channel_free;
  channel_busy_ = s.channel_busy;
  row_hits_ = s.row_hits;
  row_misses_ = s.row_misses;
  read_bytes_ = s.read_bytes;
  write_bytes_ = s.write_bytes;
}

void DramModel::release_saved() {
  if (ahead_) ahead_->release();
}

bool DramModel::guess_held(const std::vector<int64_t>& guess, const DramModel& later) const {
  for (size_t i = 0; i < open_row_.size(); ++i) {
    const int64_t first = later.first_row_[i];
    if (first != kUntouched && (guess[i] == first) != (open_row_[i] == first)) return false;
  }
  return true;
}

void DramModel::append(const DramModel& later, Time shift) {
  for (size_t i = 0; i < open_row_.size(); ++i)
    if (later.first_row_[i] != kUntouched) open_row_[i] = later.open_row_[i];
  for (size_t ch = 0; ch < channel_free_.size(); ++ch) {
    // A channel the later run served is free after its last service there
    // (never at 0); one it did not is as this run left it.
    if (later.channel_free_[ch] > 0) channel_free_[ch] = later.channel_free_[ch] + shift;
    channel_busy_[ch] += later.channel_busy_[ch];
  }
  row_hits_ += later.row_hits_;
  row_misses_ += later.row_misses_;
  read_bytes_ += later.read_bytes_;
  write_bytes_ += later.write_bytes_;
}

void DramModel::begin() {
  cost_ = DmaCost{};
  // serve() clears what it reads; only a descriptor touched and never
  // served (a replay refused at its counts) leaves counters behind.
  if (served_) {
    served_ = false;
    return;
  }
  const size_t channels = static_cast<size_t>(channels_);
  for (int bank = 0; bank < banks_; ++bank) {
    uint64_t* touched = &bank_touched_[static_cast<size_t>(bank) * words_];
    for_each_bit(touched, [&](int ch) {
      const size_t idx = static_cast<size_t>(bank) * channels + static_cast<size_t>(ch);
      bank_count_[idx] = 0;
    });
    std::fill(touched, touched + words_, uint64_t{0});
  }
  for_each_bit(channel_touched_.data(), [&](int ch) { channel_req_[ch] = 0; });
  std::fill(channel_touched_.begin(), channel_touched_.end(), uint64_t{0});
}

// Reads members only, not config_: its integers could alias the counters
// touch_rows() writes, which would reload them for every row.
namespace {

// The XOR of every `bits`-wide group of g, in its low `bits` bits, by
// doubling: after the shift by w * bits, group i holds the XOR of groups
// i .. i + 2w - 1. With `bits` a constant the loop unrolls.
inline uint64_t xor_fold(uint64_t g, int bits) {
  for (int shift = bits; shift < 64; shift *= 2) g ^= g >> shift;
  return g & ((uint64_t{1} << bits) - 1);
}

}  // namespace

int DramModel::channel_of(int64_t granule) const {
  const uint64_t mask = static_cast<uint64_t>(channels_ - 1);
  if (!xor_hash_) return static_cast<int>(static_cast<uint64_t>(granule) & mask);
  return static_cast<int>(xor_fold(static_cast<uint64_t>(granule), channel_bits_) & mask);
}

void DramModel::account(int ch, int bank, int64_t row, int64_t requests) {
  const size_t idx = static_cast<size_t>(bank) * static_cast<size_t>(channels_) + static_cast<size_t>(ch);
  const uint64_t bit = uint64_t{1} << (ch & 63);
  bank_touched_[static_cast<size_t>(bank) * words_ + static_cast<size_t>(ch >> 6)] |= bit;
  channel_touched_[static_cast<size_t>(ch >> 6)] |= bit;
  if (!first_row_.empty()) note_first(idx, row);
  int64_t misses = 0;
  if (open_row_[idx] != row) {
    open_row_[idx] = row;
    misses = 1;
  }
  bank_count_[idx] += count_of(requests, misses);
  row_misses_ += misses;
  row_hits_ += requests - misses;
  cost_.requests += requests;
}

// Power-of-two geometry only. Every granule of a stripe (channels *
// row_bytes bytes) lies in the same local row, so one bank and one row serve
// the part of the run inside a stripe. The channel of granule g is
// (g mod channels) XOR the channel of its aligned group's first granule (the
// hash XORs the higher bit groups into the low ones), so an aligned block of
// 2^m whole granules of one group maps onto the aligned block of 2^m
// channels that holds (first granule's channel); such blocks are accounted
// at once, partial granules one by one.
void DramModel::touch_granules(int64_t addr, int64_t bytes) {
  const int64_t low = (int64_t{1} << channel_bits_) - 1;
  const int64_t il = int64_t{1} << il_shift_;
  const int stripe_shift = channel_bits_ + row_shift_;
  const int64_t full = int64_t{1} << (il_shift_ - rb_shift_);  // requests of a whole granule
  const int64_t end = addr + bytes;
  while (addr < end) {
    const int64_t stripe = addr >> stripe_shift;
    const int bank = static_cast<int>(stripe & (banks_ - 1));
    const int64_t row = stripe >> bank_bits_;
    const int64_t stripe_stop = std::min(end, (stripe + 1) << stripe_shift);
    while (addr < stripe_stop) {
      const int64_t group = (addr >> il_shift_) & ~low;  // first granule of the group
      const int hash = channel_of(group);
      const int64_t stop = std::min(stripe_stop, (group + low + 1) << il_shift_);
      while (addr < stop) {
        const int64_t granule = addr >> il_shift_;
        if ((addr & (il - 1)) != 0 || stop - addr < il) {  // a partial granule
          const int64_t next = std::min(stop, (granule + 1) << il_shift_);
          account(static_cast<int>(granule & low) ^ hash, bank, row,
                  ((next - 1) >> rb_shift_) - (addr >> rb_shift_) + 1);
          addr = next;
          continue;
        }
        // Whole granules j0 .. j1 - 1 of the group, in aligned power-of-two blocks.
        int64_t j0 = granule & low;
        const int64_t j1 = j0 + ((stop - addr) >> il_shift_);
        addr += (j1 - j0) << il_shift_;
        while (j0 < j1) {
          int64_t size = j0 == 0 ? low + 1 : (j0 & -j0);
          while (j0 + size > j1) size >>= 1;
          account_block(static_cast<int>((j0 ^ hash) & ~(size - 1)), static_cast<int>(size), bank, row, full);
          j0 += size;
        }
      }
    }
  }
}

// Stripes [first, first + count) of channels * row_bytes bytes each. Stripe
// S holds granules S * G * channels .. (S + 1) * G * channels - 1 (G = row_bytes /
// interleave_bytes granules per channel); each aligned group of `channels`
// granules maps onto every channel once (the hash XORs the group's higher
// bits into the low ones: a permutation), always at local row S, so bank
// S % banks, row S / banks: every channel gets G granules' requests there.
void DramModel::touch_stripes(int64_t first, int64_t count) {
  const int64_t per_row = config_.dram.row_bytes >> rb_shift_;  // requests per channel per stripe
  for (int64_t s = first; s < first + count; ++s)
    account_block(0, channels_, static_cast<int>(s & (banks_ - 1)), s >> bank_bits_, per_row);
}

void DramModel::touch(int64_t addr, int64_t bytes) {
  if (!pow2_) {
    touch_reference(addr, bytes);
    return;
  }
  cost_.useful_bytes += bytes;
  const int shift = channel_bits_ + row_shift_;  // stripe = channels * row_bytes bytes
  const int64_t stripe = int64_t{1} << shift;
  if (bytes < stripe) {
    touch_granules(addr, bytes);
    return;
  }
  const int64_t end = addr + bytes;
  const int64_t first = (addr + stripe - 1) >> shift, last = end >> shift;  // whole stripes [first, last)
  if (first >= last) {
    touch_granules(addr, bytes);
    return;
  }
  touch_granules(addr, first * stripe - addr);
  touch_stripes(first, last - first);
  touch_granules(last * stripe, end - last * stripe);
}

namespace {

// Marks channels [first, first + n) of `bank` touched (n a power of two,
// first a multiple of it: one word holds the bits, or whole words do).
inline void mark_block(uint64_t* bank_touched, uint64_t* channel_touched, size_t words, size_t bank, int first, int n) {
  const uint64_t bits = n >= 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << (first & 63);
  if (words == 1) {
    bank_touched[bank] |= bits;
    channel_touched[0] |= bits;
    return;
  }
  for (int w = first >> 6; w < ((first + n + 63) >> 6); ++w) {
    bank_touched[bank * words + static_cast<size_t>(w)] |= bits;
    channel_touched[w] |= bits;
  }
}

}  // namespace

size_t RowsKeyHash::operator()(const RowsKey& k) const {
  WordHash h;
  h.add(static_cast<uint64_t>(k.addr));
  h.add(static_cast<uint64_t>(k.bytes));
  h.add(static_cast<uint64_t>(k.count));
  h.add(static_cast<uint64_t>(k.stride));
  return static_cast<size_t>(h.h ^ (h.h >> 29));
}

void DramModel::apply_rows(const std::vector<RowsVisit>& visits, int n, int64_t per_row, int64_t total) {
  const uint64_t hit = count_of(per_row, 0);
  const size_t channels = static_cast<size_t>(channels_);
  int64_t misses = 0;
  for (const RowsVisit& v : visits) {
    const size_t base = v.bank * channels + static_cast<size_t>(v.first);
    int64_t* const open = &open_row_[base];
    uint64_t* const count = &bank_count_[base];
    const uint64_t later = static_cast<uint64_t>(v.hits + v.misses) * hit + static_cast<uint64_t>(v.misses);
    if (!first_row_.empty())
      for (int j = 0; j < n; ++j) note_first(base + static_cast<size_t>(j), v.first_row);
    for (int j = 0; j < n; ++j) {
      const int64_t miss = open[j] != v.first_row ? 1 : 0;
      open[j] = v.last_row;
      count[j] += hit + static_cast<uint64_t>(miss) + later;
      misses += miss;
    }
    misses += v.misses * n;
    mark_block(bank_touched_.data(), channel_touched_.data(), words_, v.bank, v.first, n);
  }
  row_misses_ += misses;
  row_hits_ += total - misses;
  cost_.requests += total;
}

// Rows shorter than a granule (power-of-two geometry): consecutive rows in
// one granule go to one channel, bank and row, so they are accounted at
// once (the first may miss, the others hit: as one by one); a row across
// two granules is walked as touch() walks it.
void DramModel::touch_small_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride) {
  cost_.useful_bytes += bytes * count;
  const int stripe_shift = channel_bits_ + row_shift_;
  int64_t granule = -1, requests = 0;  // the rows accounted next: their granule and requests
  auto flush = [&] {
    if (requests == 0) return;
    const int64_t stripe = granule >> (stripe_shift - il_shift_);
    account(channel_of(granule), static_cast<int>(stripe & (banks_ - 1)), stripe >> bank_bits_, requests);
    requests = 0;
  };
  // Rows each inside one cell of `stride` bytes, where the stride divides
  // the request size (a RoPE pair's half: 2 bytes every 4): no row crosses
  // a request or granule boundary, so each is one request, and the rows of
  // one granule are counted at once.
  const int64_t rb = int64_t{1} << rb_shift_;
  if (stride > 0 && rb % stride == 0 && addr % stride + bytes <= stride) {
    for (int64_t i = 0; i < count;) {
      const int64_t a = addr + i * stride;
      const int64_t g = a >> il_shift_;
      const int64_t n = std::min(count - i, (((g + 1) << il_shift_) - a + stride - 1) / stride);
      granule = g;
      requests = n;
      flush();
      i += n;
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i, addr += stride) {
    const int64_t last = addr + bytes - 1;
    const int64_t g = addr >> il_shift_;
    if ((last >> il_shift_) != g) {
      flush();
      touch_granules(addr, bytes);
      continue;
    }
    if (g != granule) {
      flush();
      granule = g;
    }
    requests += (last >> rb_shift_) - (addr >> rb_shift_) + 1;
  }
  flush();
}

bool DramModel::block_rows(int64_t addr, int64_t bytes, int64_t stride) const {
  const int64_t il = int64_t{1} << il_shift_;
  const int64_t granules = bytes >> il_shift_;
  const int64_t group_bytes = il << channel_bits_;
  // Rows of 2^m whole granules, each aligned to its own size, lie in one
  // group of one stripe and map onto one aligned block of 2^m channels.
  if (pow2_ && (bytes & (il - 1)) == 0 && granules > 0 && (granules & (granules - 1)) == 0 && bytes <= group_bytes &&
      (addr & (bytes - 1)) == 0 && (stride & (bytes - 1)) == 0)
    return true;
  // Rows inside one granule each, whole granules apart (each in a granule
  // of its own, at one offset in it): blocks of one channel, as many
  // requests per row as the first row makes.
  return pow2_ && bytes > 0 && bytes < il && stride > 0 && (stride & (il - 1)) == 0 && (addr & (il - 1)) + bytes <= il;
}

void DramModel::touch_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride) {
  if (!block_rows(addr, bytes, stride)) {
    if (pow2_ && bytes < (int64_t{1} << il_shift_) && count > 1) {
      touch_small_rows(addr, bytes, count, stride);
      return;
    }
    for (int64_t i = 0; i < count; ++i) touch(addr + i * stride, bytes);
    return;
  }
  cost_.useful_bytes += bytes * count;
  const int64_t granules = std::max<int64_t>(1, bytes >> il_shift_);
  // Requests per row and channel: a whole granule's, or a row's inside one.
  const int64_t per_row = bytes >> il_shift_ > 0 ? int64_t{1} << (il_shift_ - rb_shift_)
                                                 : ((addr + bytes - 1) >> rb_shift_) - (addr >> rb_shift_) + 1;
  const int64_t total = per_row * granules * count;
  const int n = static_cast<int>(granules);
  RowsMemo* keep = nullptr;  // a call seen once before: keep what this one does
  if (count >= kMemoRows) {
    const RowsKey key{addr, bytes, count, stride};
    if (ahead_) {
      if (const std::vector<RowsVisit>* walked = ahead_->take(key)) {
        apply_rows(*walked, n, per_row, total);
        return;
      }
    }
    if (rows_memo_.size() >= kMemoCalls) rows_memo_.clear();
    const auto [it, fresh] = rows_memo_.try_emplace(key);
    if (!fresh && it->second.kept) {
      apply_rows(it->second.visits, n, per_row, total);
      return;
    }
    if (!fresh) keep = &it->second;
  }
  walk_rows(addr, bytes, count, stride, visits_);
  apply_rows(visits_, n, per_row, total);
  if (keep) {
    keep->visits = visits_;
    keep->kept = true;
  }
}

namespace {

// The address mapping's shifts as walk_rows() reads them: as members of the
// model (any geometry), or as constants for the shipped configs' geometry,
// where the compiler folds them into the row walk (the same walk, about
// half the instructions per row).
struct RuntimeGeometry {
  int il, cb, stripe, bank_bits;
  bool xor_hash;
  int64_t fold(int64_t granule) const {
    const uint64_t g = static_cast<uint64_t>(granule);
    return static_cast<int64_t>(xor_hash ? xor_fold(g, cb) : g & ((uint64_t{1} << cb) - 1));
  }
};

template <int IL, int CB, int RowShift, int BankBits>
struct FixedGeometry {
  static constexpr int il = IL, cb = CB, stripe = CB + RowShift, bank_bits = BankBits;
  static int64_t fold(int64_t granule) { return static_cast<int64_t>(xor_fold(static_cast<uint64_t>(granule), CB)); }
};

}  // namespace

// The walk of walk_rows(), row by row: per block, the row of its first and
// last visit and the later visits that hit and missed. Adds the blocks it
// visits first to `seen` (nseen of them there already); returns their count.
template <typename Geometry>
size_t DramModel::walk_blocks(const Geometry& g, int64_t addr, int64_t granules, int64_t count, int64_t stride,
                              uint64_t call, size_t nseen) {
  const int64_t bank_mask = (int64_t{1} << g.bank_bits) - 1;
  BlockVisits* const visits = blocks_.data();
  size_t* const seen = blocks_seen_.data();
  for (int64_t i = 0; i < count; ++i, addr += stride) {
    // The hash XORs every channel-bits group of the granule, its low group
    // included: the channel of the row's first granule.
    const int64_t first = g.fold(addr >> g.il) & ~(granules - 1);
    const int64_t stripe = addr >> g.stripe;
    const int64_t row = stripe >> g.bank_bits;
    const size_t base = (static_cast<size_t>(stripe & bank_mask) << g.cb) + static_cast<size_t>(first);
    BlockVisits& block = visits[base];
    // All ones on a block's first visit in this call, else zero (masks,
    // not branches: the compiler would branch on a conditional).
    const int64_t fresh = -static_cast<int64_t>(block.call != call);
    const int64_t same = block.row == row ? 1 : 0;
    seen[nseen] = base;
    nseen += static_cast<size_t>(fresh & 1);
    block.call = call;
    block.first_row = (row & fresh) | (block.first_row & ~fresh);
    block.hits = (block.hits + same) & ~fresh;
    block.misses = (block.misses + 1 - same) & ~fresh;
    block.row = row;
  }
  return nseen;
}

// The same for `m` whole regions from region `region1` (a region is one row
// of every bank and channel: 2^(stripe + bank bits) bytes, one DRAM row
// number), of a call whose stride divides the region: every region holds
// q = region / stride rows, at the same offsets (`offset` + k * stride).
// A row's bank comes from its offset alone, and its channel is the hash of
// its offset's granule XOR the hash of the region's first granule (the
// hash XORs bit groups: it is linear, and the two have no bit in common).
// So each region visits one pattern of (bank, channel) blocks, shifted by
// its region's hash value: the regions with one value visit the same
// blocks. A block's first visit in a region misses (the row is new: the
// regions come in order) and its others in the region hit. Per block, the
// regions that visit it, its visits, and its first and last region follow
// from the pattern and, per hash value, its regions' count, first and
// last, without a walk of the rows.
template <typename Geometry>
size_t DramModel::walk_regions(const Geometry& g, int64_t offset, int64_t region1, int64_t m, int64_t granules,
                               int64_t stride, uint64_t call, size_t nseen) {
  const int region_shift = g.stripe + g.bank_bits;
  const int64_t q = (int64_t{1} << region_shift) / stride;
  const int64_t bank_mask = (int64_t{1} << g.bank_bits) - 1;
  const int64_t block_mask = ~(granules - 1);
  const size_t low = (size_t{1} << g.cb) - 1;
  // The pattern: rows per block, for a region whose hash value is 0.
  int64_t* const pattern = pattern_.data();
  size_t* const entries = pattern_blocks_.data();
  size_t nentries = 0;
  for (int64_t k = 0; k < q; ++k) {
    const int64_t at = offset + k * stride;
    const size_t key = (static_cast<size_t>((at >> g.stripe) & bank_mask) << g.cb) +
                       static_cast<size_t>(g.fold(at >> g.il) & block_mask);
    if (pattern[key]++ == 0) entries[nentries++] = key;
  }
  // The regions by hash value: how many, the first and the last.
  RegionsOf* const values = regions_of_.data();
  for (int64_t j = 0; j < m; ++j) {
    RegionsOf& v = values[g.fold((region1 + j) << (region_shift - g.il)) & block_mask];
    if (v.count++ == 0) v.first = j;
    v.last = j;
  }
  // Per block: the regions and visits, the first and last region.
  RegionsOf* const mid = block_regions_.data();
  size_t* const touched = touched_blocks_.data();
  size_t ntouched = 0;
  for (size_t value = 0; value <= low; ++value) {
    RegionsOf& v = values[value];
    if (v.count == 0) continue;
    for (size_t e = 0; e < nentries; ++e) {
      const size_t block = (entries[e] & ~low) | ((entries[e] & low) ^ value);
      RegionsOf& b = mid[block];
      if (b.count == 0) {
        touched[ntouched++] = block;
        b.first = v.first;
        b.last = v.last;
      } else {
        b.first = std::min(b.first, v.first);
        b.last = std::max(b.last, v.last);
      }
      b.count += v.count;
      b.visits += pattern[entries[e]] * v.count;
    }
    v = RegionsOf{};
  }
  for (size_t e = 0; e < nentries; ++e) pattern[entries[e]] = 0;
  BlockVisits* const visits = blocks_.data();
  size_t* const seen = blocks_seen_.data();
  for (size_t t = 0; t < ntouched; ++t) {
    RegionsOf& r = mid[touched[t]];
    BlockVisits& block = visits[touched[t]];
    if (block.call == call) {  // visited before these regions, at an earlier row
      block.misses += r.count;
    } else {
      block.call = call;
      block.first_row = region1 + r.first;
      block.misses = r.count - 1;
      block.hits = 0;
      seen[nseen++] = touched[t];
    }
    block.hits += r.visits - r.count;
    block.row = region1 + r.last;
    r = RegionsOf{};
  }
  return nseen;
}

void DramModel::walk_rows(int64_t addr, int64_t bytes, int64_t count, int64_t stride, std::vector<RowsVisit>& out) {
  const int64_t granules = std::max<int64_t>(1, bytes >> il_shift_);
  const int64_t low = (int64_t{1} << channel_bits_) - 1;
  // The blocks of one call are disjoint or equal (all n channels wide,
  // aligned to n), and a block's channels share one row once it is
  // visited: a later visit hits on all of them if it reads the row the
  // block was left at, else misses on all of them. So the walk only notes,
  // per block, the row of its first and last visit and the later visits
  // that hit and missed (without a branch on which: a weight tile's rows
  // revisit a few blocks in no predictable order), and apply_rows() then
  // compares each block's first visit with the rows earlier descriptors
  // left open.
  const uint64_t call = ++rows_call_;
  // A stride that divides a region: the rows before the first region
  // boundary, the whole regions after it (walk_regions), the rest.
  auto walk = [&](const auto& g) {
    const int region_shift = g.stripe + g.bank_bits;
    const int64_t region = int64_t{1} << region_shift;
    if (stride > 0 && stride <= region && region % stride == 0) {
      const int64_t q = region / stride;
      const int64_t boundary = ((addr + region - 1) >> region_shift) << region_shift;
      const int64_t head = std::min(count, (boundary - addr + stride - 1) / stride);
      const int64_t m = (count - head) / q;
      if (m >= 4 && m * q >= 256) {
        size_t n = walk_blocks(g, addr, granules, head, stride, call, 0);
        const int64_t middle = addr + head * stride;
        n = walk_regions(g, middle & (region - 1), middle >> region_shift, m, granules, stride, call, n);
        return walk_blocks(g, middle + m * q * stride, granules, count - head - m * q, stride, call, n);
      }
    }
    return walk_blocks(g, addr, granules, count, stride, call, 0);
  };
  size_t nseen = 0;
  if (xor_hash_ && il_shift_ == 8 && row_shift_ == 10 && bank_bits_ == 4 && channel_bits_ == 4)
    nseen = walk(FixedGeometry<8, 4, 10, 4>{});  // tpuv3
  else if (xor_hash_ && il_shift_ == 8 && row_shift_ == 10 && bank_bits_ == 4 && channel_bits_ == 5)
    nseen = walk(FixedGeometry<8, 5, 10, 4>{});  // tpuv4
  else
    nseen = walk(RuntimeGeometry{il_shift_, channel_bits_, channel_bits_ + row_shift_, bank_bits_, xor_hash_});
  const BlockVisits* const visits = blocks_.data();
  const size_t* const seen = blocks_seen_.data();
  out.clear();
  for (size_t k = 0; k < nseen; ++k) {
    const BlockVisits& block = visits[seen[k]];
    out.push_back(RowsVisit{seen[k] >> channel_bits_, static_cast<int>(seen[k] & static_cast<size_t>(low)),
                            block.first_row, block.row, block.hits, block.misses});
  }
}

void DramModel::touch_reference(int64_t addr, int64_t bytes) {
  const int64_t il = config_.dram.interleave_bytes;
  const int64_t rb = config_.dma.request_bytes;
  const int64_t channels = config_.dram.channels;
  const int64_t banks = config_.dram.banks;
  cost_.useful_bytes += bytes;
  while (bytes > 0) {
    const int64_t in_granule = addr % il;
    const int64_t piece = std::min(bytes, il - in_granule);
    const int64_t granule = addr / il;
    int ch = 0;
    if (config_.dram.xor_hash && channels > 1) {
      // XOR-fold every log2(channels)-bit group of the granule index, so
      // strides that are multiples of channels * interleave_bytes (rows of a
      // power-of-two matrix) still spread over all channels.
      uint64_t g = static_cast<uint64_t>(granule), x = 0;
      while (g != 0) {
        x ^= g & static_cast<uint64_t>(channels - 1);
        g >>= channel_bits_;
      }
      ch = static_cast<int>(x);
    } else {
      ch = static_cast<int>(granule % channels);
    }
    const int64_t local = (granule / channels) * il + in_granule;
    const int64_t row_global = local / config_.dram.row_bytes;
    account(ch, static_cast<int>(row_global % banks), row_global / banks, (addr + piece - 1) / rb - addr / rb + 1);
    addr += piece;
    bytes -= piece;
  }
}

}  // namespace spool::sim::detail
