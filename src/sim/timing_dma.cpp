// The timing model's DMA engine (the model: timing.cpp).

#include "timing.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace spool::sim::detail {

using namespace spool::npu;

// Walks the descriptor's DRAM addresses into the DRAM model; the cost of
// the requests they make.
DmaCost TimingSim::request_dram(const DmaOp& d, const int64_t* vars) {
  dram_.begin();
  dma_runs(
      p_, base_, d, vars,
      [&](int64_t addr, int64_t bytes, int64_t count, int64_t stride) {
        dram_.touch_rows(addr, bytes, count, stride);
        return true;
      },
      [&](int64_t addr, int64_t bytes) { dram_.touch(addr, bytes); });
  return dram_.cost();
}

void TimingSim::dma(Core& core, const DmaOp& d) {
  const int64_t* vars = core.vars.data();
  const DmaCost cost = request_dram(d, vars);
  ++report_.profile.descriptors;

  // Scratchpad side: a load writes the slot range, a store reads it.
  int64_t spad_last = 0, index_last = 0;  // offsets of the last element
  for (size_t i = 0; i < d.dims.size(); ++i) {
    const int64_t e = d.dims[i].eval(vars);
    spad_last += (e - 1) * d.spad_strides[i];
    if (d.indirect()) index_last += (e - 1) * d.index_strides[i];
  }
  SlotState& st = slot_of(core, d.spad);
  const int64_t lo = d.spad.offset.eval(vars);
  Box box = make_interval(lo, lo + spad_last + 1);
  const size_t nsd = d.dims.size();
  if (nsd >= 2 && d.spad_strides[nsd - 1] == 1) {
    bool outer_unit = true;  // every dimension but the last two has extent 1
    for (size_t i = 0; i + 2 < nsd; ++i) outer_unit = outer_unit && d.dims[i].eval(vars) == 1;
    if (outer_unit)
      box = make_box(lo, d.dims[nsd - 2].eval(vars), d.dims[nsd - 1].eval(vars), d.spad_strides[nsd - 2]);
  }
  Time ready = d.load ? write_ready(st, box) : read_ready(st, box);
  Box index_box;
  if (d.indirect()) {  // the index values must have arrived
    const int64_t ilo = d.index.offset.eval(vars);
    index_box = make_interval(ilo, ilo + index_last + 1);
    ready = std::max(ready, read_ready(slot_of(core, d.index), index_box));
  }

  core.issue = std::max(core.issue, core.dma_queue.slot_free());
  const Time start = std::max({core.issue, core.dma_free, ready});
  const int64_t bus_bytes = cost.requests * c_.dma.request_bytes;
  const Time issue_time = std::max(
      {(c_.dma.setup_cycles + ceil_div(cost.requests, c_.dma.requests_per_cycle)) * core_period_,
       ceil_div(cost.requests * rtt_, c_.dma.max_outstanding),
       ceil_div(bus_bytes, c_.noc.ports_per_core * c_.noc.port_bytes_per_cycle) * noc_period_,
       ceil_div(cost.useful_bytes, c_.vector.lanes * c_.scratchpad.port_bytes_per_cycle) * core_period_});
  const Time issue_end = start + issue_time;
  const Time one_way = c_.noc.latency_cycles * noc_period_;
  const Time served = dram_.serve(start + one_way, issue_end + one_way, !d.load, [&](int ch, Time s, Time dur) {
    if (trace_) record(channel_tracks_[ch], d.load ? "read" : "write", s, dur);
  });
  if (recording_)
    recording_->dram.push_back(KernelMemo::Descriptor{start + one_way - record_t0_, issue_end + one_way - record_t0_,
                                                      served - record_t0_, cost.requests, cost.useful_bytes});
  const Time done = std::max(served, issue_end + one_way) + c_.dram.latency_cycles * dram_.period() + one_way;

  core.dma_queue.push(start);
  core.dma_free = issue_end;
  core.dma_busy += issue_time;
  core.issue += core_period_;
  core.end = std::max(core.end, done);
  if (d.indirect()) record_read(slot_of(core, d.index), index_box, issue_end);
  if (d.load) {
    record_write(st, box, done, -1);
  } else {
    // A store has read its scratchpad data once its last request left.
    record_read(st, box, issue_end);
  }
  bool found = false;
  for (auto& [tag, t] : core.tags) {
    if (tag == d.tag) {
      t = std::max(t, done);
      found = true;
    }
  }
  if (!found) core.tags.push_back({d.tag, done});
  report_.dram_useful_bytes += cost.useful_bytes;
  if (trace_)
    record(core.dma_track, fmt::format("{} @{}", d.load ? "load" : "store", p_.buffers[d.dram].name), start,
           done - start);
}

}  // namespace spool::sim::detail
