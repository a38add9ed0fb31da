#pragma once
// Errors and internal assertions.
//
// A user's mistake (an ill-formed graph, a bad rule file, a bad config) is a
// spool::Error with a message that names what is wrong; the CLI prints it and
// exits 1. A compiler bug is a SPOOL_ASSERT failure: it prints where and why
// and aborts, because continuing would produce a wrong program.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace spool {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws spool::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void assertion_failed(const char* condition, const char* file, int line,
                                   const std::string& message);

}  // namespace spool

// For compiler bugs only, never for bad user input. Always on.
#define SPOOL_ASSERT(cond, ...)                                                           \
  do {                                                                                    \
    if (!(cond)) ::spool::assertion_failed(#cond, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (false)
