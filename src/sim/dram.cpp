// DRAM model: address mapping, request counting and row-buffer state (see dram.hpp).

#include "dram.hpp"

#include <cmath>

namespace spool::sim::detail {

DramModel::DramModel(const NpuConfig& config)
    : config_(config),
      period_(static_cast<Time>(std::llround(1e9 / config.dram.clock_mhz))),
      channel_free_(config.dram.channels, 0),
      channel_busy_(config.dram.channels, 0),
      open_row_(static_cast<size_t>(config.dram.channels) * config.dram.banks, -1),
      bank_req_(open_row_.size(), 0),
      bank_miss_(open_row_.size(), 0),
      channel_req_(config.dram.channels, 0),
      worst_(config.dram.channels, 0) {
  while ((int64_t{1} << channel_bits_) < config.dram.channels) ++channel_bits_;
  auto log2_exact = [](int64_t v, int& bits) {
    bits = 0;
    while ((int64_t{1} << bits) < v) ++bits;
    return v > 0 && (int64_t{1} << bits) == v;
  };
  int unused = 0;
  const auto& d = config.dram;
  pow2_ = log2_exact(d.interleave_bytes, il_shift_) && log2_exact(config.dma.request_bytes, rb_shift_) &&
          log2_exact(d.row_bytes, row_shift_) && log2_exact(d.banks, bank_bits_) && log2_exact(d.channels, unused) &&
          d.row_bytes % d.interleave_bytes == 0 && d.interleave_bytes % config.dma.request_bytes == 0;
}

void DramModel::begin() {
  for (int idx : touched_banks_) bank_req_[idx] = bank_miss_[idx] = 0;
  for (int ch : touched_channels_) channel_req_[ch] = 0;
  touched_banks_.clear();
  touched_channels_.clear();
  cost_ = DmaCost{};
}

int DramModel::channel_of(int64_t granule) const {
  const int64_t channels = config_.dram.channels;
  if (!config_.dram.xor_hash || channels == 1) return static_cast<int>(granule & (channels - 1));
  // The XOR of every channel_bits-wide group, by doubling: after the shift
  // by w * channel_bits, group i holds the XOR of groups i .. i + 2w - 1.
  uint64_t g = static_cast<uint64_t>(granule);
  for (int shift = channel_bits_; shift < 64; shift *= 2) g ^= g >> shift;
  return static_cast<int>(g & static_cast<uint64_t>(channels - 1));
}

void DramModel::account(int ch, int idx, int64_t row, int64_t requests) {
  if (channel_req_[ch] == 0) touched_channels_.push_back(ch);
  if (bank_req_[idx] == 0 && bank_miss_[idx] == 0) touched_banks_.push_back(idx);
  int64_t misses = 0;
  if (open_row_[idx] != row) {
    open_row_[idx] = row;
    misses = 1;
  }
  bank_miss_[idx] += misses;
  bank_req_[idx] += requests;
  channel_req_[ch] += requests;
  row_misses_ += misses;
  row_hits_ += requests - misses;
  cost_.requests += requests;
}

// Power-of-two geometry only: the reference walk with shifts for divisions.
void DramModel::touch_granules(int64_t addr, int64_t bytes) {
  const int64_t il = config_.dram.interleave_bytes;
  const int64_t banks = config_.dram.banks;
  while (bytes > 0) {
    const int64_t in_granule = addr & (il - 1);
    const int64_t piece = std::min(bytes, il - in_granule);
    const int64_t granule = addr >> il_shift_;
    const int ch = channel_of(granule);
    const int64_t row_global = (((granule >> channel_bits_) << il_shift_) + in_granule) >> row_shift_;
    account(ch, static_cast<int>(ch * banks + (row_global & (banks - 1))), row_global >> bank_bits_,
            ((addr + piece - 1) >> rb_shift_) - (addr >> rb_shift_) + 1);
    addr += piece;
    bytes -= piece;
  }
}

// Stripes [first, first + count) of channels * row_bytes bytes each. Stripe
// S holds granules S * G * channels .. (S + 1) * G * channels - 1 (G = row_bytes /
// interleave_bytes granules per channel); each aligned group of `channels`
// granules maps onto every channel once (the hash XORs the group's higher
// bits into the low ones: a permutation), always at local row S, so bank
// S % banks, row S / banks. The walk would meet the channels first in the
// order of the stripe's first group, which is the order used here, so even
// the touched lists come out the same.
void DramModel::touch_stripes(int64_t first, int64_t count) {
  const int64_t channels = config_.dram.channels;
  const int64_t banks = config_.dram.banks;
  const int64_t per_row = config_.dram.row_bytes >> rb_shift_;  // requests per channel per stripe
  const int64_t groups = config_.dram.row_bytes >> il_shift_;
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t group = s * groups * channels;  // the stripe's first granule
    const int64_t bank = s & (banks - 1), row = s >> bank_bits_;
    for (int64_t j = 0; j < channels; ++j) {
      const int ch = channel_of(group + j);
      account(ch, static_cast<int>(ch * banks + bank), row, per_row);
    }
  }
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
    const int idx = static_cast<int>(ch * banks + row_global % banks);
    const int64_t row = row_global / banks;
    account(ch, idx, row, (addr + piece - 1) / rb - addr / rb + 1);
    addr += piece;
    bytes -= piece;
  }
}

}  // namespace spool::sim::detail
