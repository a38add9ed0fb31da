// The DRAM model's strided rows walked ahead of a timing run (see rows_ahead.hpp).

#include "rows_ahead.hpp"

#include <algorithm>
#include <limits>

namespace spool::sim::detail {

RowsAhead::RowsAhead(const target::NpuConfig& config, Calls calls, size_t slots, bool patient)
    : walker_(config), calls_(std::move(calls)), slots_(slots), patient_(patient), thread_([this] { run(); }) {}

RowsAhead::~RowsAhead() {
  stop_.store(true);
  // Wakes the thread if it waits for room (it waits for freed_ to change).
  freed_.store(std::numeric_limits<uint64_t>::max());
  freed_.notify_all();
  thread_.join();
}

void RowsAhead::run() {
  try {
    calls_([this](const RowsKey& key) { return offer(key); });
  } catch (const std::exception&) {
    // Out of memory: the run walks the calls the thread did not reach.
  }
  done_.store(true, std::memory_order_release);
}

// The thread: the run's next call in the order, walked into its slot
// (unless the run has asked for it already).
bool RowsAhead::offer(const RowsKey& key) {
  if (key.count < DramModel::kMemoRows || !walker_.block_rows(key.addr, key.bytes, key.stride)) return true;
  const uint64_t seq = next_++;
  for (;;) {
    // freed_ first: the destructor sets stop_, then freed_.
    const uint64_t freed = freed_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return false;
    if (freed > seq || seq - freed < slots_.size()) break;
    waiting_.store(true, std::memory_order_release);
    freed_.wait(freed, std::memory_order_acquire);
    waiting_.store(false, std::memory_order_release);
  }
  Slot& slot = slots_[seq % slots_.size()];
  slot.key = key;
  slot.walked = seq >= asked_.load(std::memory_order_relaxed);  // else the run is past it
  if (slot.walked) {
    if (seen_.size() >= (size_t{1} << 16)) seen_.clear();
    const auto [it, fresh] = seen_.try_emplace(key);
    if (!fresh && it->second.kept) {
      slot.visits = it->second.visits;
    } else {
      walker_.walk_rows(key.addr, key.bytes, key.count, key.stride, slot.visits);
      if (!fresh) {
        it->second.visits = slot.visits;
        it->second.kept = true;
      }
    }
  }
  written_.store(seq + 1, std::memory_order_release);
  return true;
}

// Slots are given back half the ring at a time: a thread that waits for
// room (it is faster than the run) is woken once per half ring, not once
// per call (a wake-up costs the run a system call).
void RowsAhead::free_before(uint64_t seq) {
  const uint64_t freed = freed_.load(std::memory_order_relaxed);
  if (seq <= freed || seq - freed < std::max<size_t>(1, slots_.size() / 2)) return;
  freed_.store(seq, std::memory_order_release);
  freed_.notify_one();
}

const std::vector<RowsVisit>* RowsAhead::take(const RowsKey& key) {
  const uint64_t seq = pos_++;
  asked_.store(seq, std::memory_order_relaxed);  // the calls before it are past
  // Slot `seq` stays unwritten until the next call frees it.
  if (!held_) free_before(seq);
  if (patient_)
    while (seq >= written_.load(std::memory_order_acquire) && !done_.load(std::memory_order_acquire) &&
           !waiting_.load(std::memory_order_acquire))
      std::this_thread::yield();
  if (seq >= written_.load(std::memory_order_acquire)) return nullptr;
  const Slot& slot = slots_[seq % slots_.size()];
  if (!slot.walked || !(slot.key == key)) return nullptr;
  ++taken_;
  return &slot.visits;
}

void RowsAhead::hold() {
  held_ = true;
  mark_ = pos_;
}

void RowsAhead::rewind() {
  pos_ = mark_;
  held_ = false;
}

void RowsAhead::release() { held_ = false; }

}  // namespace spool::sim::detail
