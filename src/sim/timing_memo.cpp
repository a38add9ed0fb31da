// Kernels of one shape stepped once (the model: timing.cpp).
//
// The layers of a model lower to the same kernels over different DRAM
// buffers. On one core, a kernel's front end starts at T0 = its launch's
// end, after the previous kernel has finished: every unit, issue queue and
// DRAM channel is then free at T0 or earlier (canonical(): checked, not
// assumed), and a time before T0 acts as T0 does, since every use of it is
// a max with a time at or after T0. From such a start, a kernel's timeline
// relative to T0 is a function of its statements (equal for two kernels of
// one shape: equal statements, DRAM buffers compared by element size) and
// of what each DMA descriptor meets in DRAM, which is all the DMA engine
// asks of it: the descriptor's requests and useful bytes (from its
// addresses) and when the channels finish serving it (from the rows left
// open and the channels' queues). By induction over the descriptors in
// issue order: while those are equal, every unit's state is, so the next
// descriptor arrives at the channels at the same relative time.
//
// So the first kernel of a shape that starts canonically is stepped and
// recorded: per descriptor, its requests, useful bytes, the relative times
// its requests reach the channels and the time serve() returned; at its
// end, every state it left. A later kernel of that shape that starts
// canonically is replayed: each descriptor's addresses go through the DRAM
// model in issue order (the same walk stepping does), it is served at the
// recorded arrival times, and its requests, bytes and service time are
// compared with the record. If all are equal, the recorded end state is
// applied at the new T0 (the DRAM model's own state, open rows, channel
// queues and counters, is what the replay left: exact); at the first
// difference the DRAM model is restored and the kernel is stepped (and
// recorded in place of the old memo). Cycles, byte counts and row hits are
// therefore exactly those of stepping every kernel.

#include "timing.hpp"

#include <spool/support/hash.hpp>

#include <chrono>

namespace spool::sim::detail {
namespace {

using namespace spool::npu;

// DMAs' DRAM buffers compared by element size (the replay checks addresses).
bool same_element_size(const Program& p, int a, int b) {
  return dtype_bytes(p.buffers[a].dtype) == dtype_bytes(p.buffers[b].dtype);
}

bool same_shape(const Kernel& a, const Kernel& b, const Program& p) {
  if (a.spad.size() != b.spad.size() || a.loop_vars.size() != b.loop_vars.size()) return false;
  for (size_t i = 0; i < a.spad.size(); ++i)
    if (a.spad[i].slots != b.spad[i].slots) return false;
  return same_body_shape(a.body, b.body, [&p](int x, int y) { return same_element_size(p, x, y); });
}

uint64_t shape_hash(const Kernel& k, const Program& p) {
  WordHash h;
  h.add(k.spad.size());
  for (const SpadBuffer& b : k.spad) h.add(static_cast<uint64_t>(b.slots));
  h.add(k.loop_vars.size());
  h.add(body_shape_hash(k.body, [&p](int b) { return static_cast<uint64_t>(dtype_bytes(p.buffers[b].dtype)); }));
  return h.h;
}

Time rel(Time t, Time t0) { return std::max<Time>(t - t0, 0); }

}  // namespace

bool TimingSim::memo_enabled() const { return replay_ && c_.cores == 1 && trace_ == nullptr; }

// Every unit, queue and channel free at the kernel's T0 (core.issue) or before.
bool TimingSim::canonical(const Core& core) const { return free_by(core, core.issue); }

bool TimingSim::free_by(const Core& core, Time t0) const {
  if (core.vector_free > t0 || core.dma_free > t0 || !core.vector_queue.all_before(t0) ||
      !core.dma_queue.all_before(t0))
    return false;
  for (const ArrayState& a : core.arrays)
    if (a.stream_free > t0 || a.preload_free > t0 || a.drained > t0 || !a.queue.all_before(t0)) return false;
  for (const Time t : dram_.channel_free())
    if (t > t0) return false;
  return true;
}

// Called by start_kernel once the core is set up for kernel k: replays it,
// or starts recording it; true if it was replayed (nothing left to step).
bool TimingSim::begin_memo(Core& core, int k) {
  recording_ = nullptr;
  if (!memo_enabled() || !canonical(core)) return false;
  std::vector<size_t>& same = memo_index_[shape_hash(p_.kernels[k], p_)];
  size_t slot = memos_.size();
  for (const size_t i : same)
    if (same_shape(p_.kernels[memos_[i].kernel], p_.kernels[k], p_)) slot = i;
  int refusals = 0;
  int64_t skips = 0;
  if (slot < memos_.size()) {
    KernelMemo& memo = memos_[slot];
    // A shape whose last replays were refused (its layers meet DRAM
    // differently) is stepped without a replay's walk, but tried again
    // now and then: a refused replay walks the DRAM for nothing.
    if (memo.refusals >= 2 && ++memo.skips % 8 != 0) return false;
    const auto start = std::chrono::steady_clock::now();
    const bool ok = replay(core, k, memo);
    profile().replay_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (ok) {
      memo.refusals = 0;
      ++profile().kernels_replayed;
      return true;
    }
    ++profile().replays_refused;
    refusals = memo.refusals + 1;
    skips = memo.skips;
  } else {
    same.push_back(slot);
    memos_.emplace_back();
  }
  // Record: the memo starts empty, the counters it will subtract are kept.
  KernelMemo& m = memos_[slot];
  m = KernelMemo{};
  m.kernel = k;
  m.refusals = refusals;
  m.skips = skips;
  recording_ = &m;  // memos_ does not grow before end_memo (one core: kernels run one at a time)
  record_t0_ = core.issue;
  KernelMemo& b = record_base_;
  b.vector_busy = core.vector_busy;
  b.dma_busy = core.dma_busy;
  b.arrays.resize(core.arrays.size());
  for (size_t i = 0; i < core.arrays.size(); ++i) b.arrays[i].busy = core.arrays[i].busy;
  b.matmul_flops = report_.matmul_flops;
  b.vector_flops = report_.vector_flops;
  b.vector_element_ops = report_.vector_element_ops;
  b.dram_useful_bytes = report_.dram_useful_bytes;
  return false;
}

// The kernel the core just finished, if it was being recorded.
void TimingSim::end_memo(Core& core) {
  if (!recording_) return;
  KernelMemo& m = *recording_;
  recording_ = nullptr;
  const Time t0 = record_t0_;
  const KernelMemo& b = record_base_;
  m.issue = rel(core.issue, t0);
  m.end = rel(core.end, t0);
  m.vector_free = rel(core.vector_free, t0);
  m.dma_free = rel(core.dma_free, t0);
  m.vector_queue = core.vector_queue.relative(t0);
  m.dma_queue = core.dma_queue.relative(t0);
  m.arrays.resize(core.arrays.size());
  for (size_t i = 0; i < core.arrays.size(); ++i) {
    const ArrayState& a = core.arrays[i];
    KernelMemo::Array& r = m.arrays[i];
    r.stream_free = rel(a.stream_free, t0);
    r.preload_free = rel(a.preload_free, t0);
    r.drained = rel(a.drained, t0);
    r.busy = a.busy - b.arrays[i].busy;
    r.queue = a.queue.relative(t0);
  }
  m.vector_busy = core.vector_busy - b.vector_busy;
  m.dma_busy = core.dma_busy - b.dma_busy;
  m.matmul_flops = report_.matmul_flops - b.matmul_flops;
  m.vector_flops = report_.vector_flops - b.vector_flops;
  m.vector_element_ops = report_.vector_element_ops - b.vector_element_ops;
  m.dram_useful_bytes = report_.dram_useful_bytes - b.dram_useful_bytes;
}

// The kernel's DMA descriptors in issue order through the DRAM model, each
// served at its recorded arrival and compared with the record from `at`;
// false at the first difference.
bool TimingSim::replay_dram(const std::vector<Stmt>& body, std::vector<int64_t>& vars, const KernelMemo& m, size_t& at,
                            Time t0) {
  return for_each_dma(body, vars, [&](const DmaOp& d) {
    if (at >= m.dram.size()) return false;
    const KernelMemo::Descriptor& r = m.dram[at++];
    const DmaCost cost = request_dram(d, vars.data());
    ++profile().descriptors;
    if (cost.requests != r.requests || cost.useful_bytes != r.useful_bytes) return false;
    const Time served = dram_.serve(t0 + r.arrival, t0 + r.last_arrival, !d.load, [](int, Time, Time) {});
    return served - t0 == r.served;
  });
}

bool TimingSim::replay(Core& core, int k, const KernelMemo& m) {
  const Kernel& kernel = p_.kernels[k];
  dram_.save(snapshot_);
  std::vector<int64_t> vars(kernel.loop_vars.size(), 0);
  size_t at = 0;
  if (!replay_dram(kernel.body, vars, m, at, core.issue) || at != m.dram.size()) {
    dram_.restore(snapshot_);
    return false;
  }
  dram_.release_saved();
  const Time t0 = core.issue;
  core.issue = t0 + m.issue;
  core.end = t0 + m.end;
  core.vector_free = t0 + m.vector_free;
  core.dma_free = t0 + m.dma_free;
  core.vector_queue.set_relative(m.vector_queue, t0);
  core.dma_queue.set_relative(m.dma_queue, t0);
  for (size_t i = 0; i < core.arrays.size(); ++i) {
    ArrayState& a = core.arrays[i];
    const KernelMemo::Array& r = m.arrays[i];
    a.stream_free = t0 + r.stream_free;
    a.preload_free = t0 + r.preload_free;
    a.drained = t0 + r.drained;
    a.busy += r.busy;
    a.queue.set_relative(r.queue, t0);
  }
  core.vector_busy += m.vector_busy;
  core.dma_busy += m.dma_busy;
  report_.matmul_flops += m.matmul_flops;
  report_.vector_flops += m.vector_flops;
  report_.vector_element_ops += m.vector_element_ops;
  report_.dram_useful_bytes += m.dram_useful_bytes;
  // Nothing left to step: the kernel ends at max(issue, end).
  core.stack.assign(1, Frame{&kernel.body, kernel.body.size(), -1, 0});
  return true;
}

}  // namespace spool::sim::detail
