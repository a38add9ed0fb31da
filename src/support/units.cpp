#include <spool/support/units.hpp>

#include <fmt/format.h>

namespace spool {

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  return fmt::format("{:.2f} MiB", b / (1 << 20));
}

}  // namespace spool
