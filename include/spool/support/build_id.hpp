#pragma once
// The identity of the running build, for caches of results that only this
// build may reuse.

#include <string>

namespace spool {

// The GNU build ID of the binary that holds Spool's code, in hex: the
// linker's hash of that code, so any change to it gives another ID. Empty
// when the binary carries none (then nothing should be cached).
const std::string& build_id();

}  // namespace spool
