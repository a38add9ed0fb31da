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
}

void DramModel::begin() {
  for (int idx : touched_banks_) bank_req_[idx] = bank_miss_[idx] = 0;
  for (int ch : touched_channels_) channel_req_[ch] = 0;
  touched_banks_.clear();
  touched_channels_.clear();
  cost_ = DmaCost{};
}

void DramModel::touch(int64_t addr, int64_t bytes) {
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
    const int64_t requests = (addr + piece - 1) / rb - addr / rb + 1;
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
    addr += piece;
    bytes -= piece;
  }
}

}  // namespace spool::sim::detail
