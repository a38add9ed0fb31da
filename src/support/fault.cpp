// Planted faults (fault.hpp); compiled only into fault-injection builds.

#include <spool/support/fault.hpp>

#ifdef SPOOL_FAULT_INJECTION

#include <spool/support/error.hpp>

#include <atomic>
#include <string>

namespace spool::fault {
namespace {
constexpr int kNone = -1;
std::atomic<int> current{kNone};
}  // namespace

const std::vector<FaultInfo>& all() {
  static const std::vector<FaultInfo> faults = {
#define X(id, name, stage, what) FaultInfo{Fault::id, name, stage, what},
#include <spool/support/faults.def>
#undef X
  };
  return faults;
}

void plant(std::string_view name) {
  for (const FaultInfo& f : all())
    if (f.name == name) {
      current = static_cast<int>(f.fault);
      return;
    }
  std::string known;
  for (const FaultInfo& f : all()) known += (known.empty() ? "" : ", ") + std::string(f.name);
  fail("no planted fault is named '{}' (known: {})", name, known);
}

void clear() { current = kNone; }

bool planted(Fault fault) { return current.load(std::memory_order_relaxed) == static_cast<int>(fault); }

}  // namespace spool::fault

#endif
