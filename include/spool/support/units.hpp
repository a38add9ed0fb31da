#pragma once
// Byte counts as people read them, the same in every report and error.

#include <cstdint>
#include <string>

namespace spool {

// GiB with two decimals from 1 GiB up, MiB below (a small program's
// footprint is not "0.00 GiB"): "16.00 GiB", "0.75 MiB".
std::string format_bytes(int64_t bytes);

}  // namespace spool
