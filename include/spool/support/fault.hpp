#pragma once
// Planted faults: deliberate bugs at chosen points of the pipeline, which
// the tests in tests/faults plant one at a time to show that the pipeline's
// own check (the simulated outputs against the reference interpreter) and
// `spool run`'s exit status catch each of them.
//
// They exist only in a build configured with -DSPOOL_FAULT_INJECTION=ON
// (scripts/test makes one in build/faults). In every other build `planted`
// is a constant false, so the fault code compiles away and the tool has no
// way to plant one.

#include <cstdint>
#include <string_view>
#include <vector>

namespace spool::fault {

enum class Fault : uint8_t {
#define X(id, name, stage, what) id,
#include <spool/support/faults.def>
#undef X
};

struct FaultInfo {
  Fault fault;
  std::string_view name, stage, what;
};

#ifdef SPOOL_FAULT_INJECTION
inline constexpr bool kEnabled = true;
// Every fault, in faults.def order.
const std::vector<FaultInfo>& all();
// Plants the fault named `name` (an error for an unknown name); at most one
// is planted at a time.
void plant(std::string_view name);
void clear();
bool planted(Fault fault);
#else
inline constexpr bool kEnabled = false;
constexpr bool planted(Fault) { return false; }
#endif

}  // namespace spool::fault
