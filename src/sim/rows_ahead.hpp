#pragma once
// The DRAM model's strided rows walked ahead of a timing run, on a thread
// of their own (internal to spool_sim).
//
// What a block-path touch_rows() call does to the blocks it visits is a
// function of its arguments alone (dram.hpp: RowsVisit); only applying it
// reads the rows earlier descriptors left open. A one-core timing run gives
// the DRAM model its descriptors' rows in program order (kernels in order,
// statements in order, loops at their trip counts, a run-time count at its
// nominal value), so a second thread can walk the calls in that order while
// the run steps its kernels, and the run applies each walked call's visits
// instead of walking it itself.
//
// Nothing here decides a result. take() hands out a call's visits only if
// the call in that place of the order has exactly the arguments asked
// for; they are then the visits the run's own walk would find. Otherwise
// (the thread is behind, or the orders differ) the run walks the call
// itself. A replay the DRAM refuses gives its kernel's calls a second time:
// the DRAM model's save() holds the calls from there, and restore() takes
// the order back to them. The calls in flight are a ring of slots; the
// thread waits while the ring is full (and is woken when half of it is
// free), the run never waits.

#include "dram.hpp"

#include <atomic>
#include <functional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace spool::sim::detail {

class RowsAhead {
 public:
  // Gives every touch_rows() call of the run to `call`, in the run's order,
  // until `call` returns false.
  using Calls = std::function<void(const std::function<bool(const RowsKey&)>& call)>;

  // `patient`: take() waits for the thread to reach the call asked for
  // (unless the thread waits for room or is done), so that what is walked
  // ahead does not depend on how fast the threads run (tests).
  RowsAhead(const target::NpuConfig& config, Calls calls, size_t slots = 1024, bool patient = false);
  ~RowsAhead();
  RowsAhead(const RowsAhead&) = delete;
  RowsAhead& operator=(const RowsAhead&) = delete;

  // The run's thread. The visits of the run's next block-path call of at
  // least DramModel::kMemoRows rows, if it was walked ahead with these
  // arguments (valid until the next call), else nullptr.
  const std::vector<RowsVisit>* take(const RowsKey& key);
  // Keep the calls from here on (DramModel::save()); go back to them
  // (restore()); or let them go (release_saved()).
  void hold();
  void rewind();
  void release();
  // Calls whose visits take() handed out (the run's thread).
  int64_t taken() const { return taken_; }
  // Calls the thread has put in their slots.
  uint64_t reached() const { return written_.load(std::memory_order_acquire); }

 private:
  void run();
  bool offer(const RowsKey& key);
  void free_before(uint64_t seq);

  struct Slot {
    RowsKey key{};
    bool walked = false;  // false: passed over (the run had asked for it already)
    std::vector<RowsVisit> visits;
  };
  DramModel walker_;  // its walk alone: the thread's own scratch
  Calls calls_;
  std::vector<Slot> slots_;  // call `seq` in slot seq % size

  // The thread's: the next call's place in the order, and the calls met
  // twice (as DramModel's rows_memo_ keeps them), copied without a walk
  // from the third time on.
  uint64_t next_ = 0;
  struct Seen {
    bool kept = false;
    std::vector<RowsVisit> visits;
  };
  std::unordered_map<RowsKey, Seen, RowsKeyHash> seen_;

  std::atomic<uint64_t> written_{0};  // calls [0, written_) are in their slots
  std::atomic<uint64_t> freed_{0};    // calls before it are not read again
  std::atomic<uint64_t> asked_{0};    // the run's place: the calls before it are past
  std::atomic<bool> stop_{false};
  std::atomic<bool> waiting_{false};  // the thread waits for room
  std::atomic<bool> done_{false};     // the thread has offered every call
  bool patient_ = false;

  // The run's: its place, the place save() held, and what take() gave.
  uint64_t pos_ = 0, mark_ = 0;
  bool held_ = false;
  int64_t taken_ = 0;

  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace spool::sim::detail
