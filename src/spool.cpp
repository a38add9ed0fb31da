// libspool: the library users link. It carries every stage library (see
// src/CMakeLists.txt); this file holds the version.
#include <spool/spool.hpp>

namespace spool {
std::string_view version() { return "0.1.0"; }
}  // namespace spool
