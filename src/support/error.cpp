#include <spool/support/diagnostic.hpp>
#include <spool/support/error.hpp>

#include <cstdio>
#include <cstdlib>

namespace spool {

void assertion_failed(const char* condition, const char* file, int line,
                      const std::string& message) {
  std::fprintf(stderr, "%s:%d: internal compiler error: assertion `%s` failed: %s\n", file, line,
               condition, message.c_str());
  std::abort();
}

namespace {
std::string render_loc(const SourceLoc& loc) {
  if (loc.line == 0) return loc.file.empty() ? std::string("<input>") : loc.file;
  return fmt::format("{}:{}:{}", loc.file.empty() ? "<input>" : loc.file, loc.line, loc.col);
}
}  // namespace

std::string Diagnostic::render() const {
  std::string out = fmt::format("{}: error: {}", render_loc(loc), message);
  for (const auto& [note_loc, text] : notes) out += fmt::format("\n{}: note: {}", render_loc(note_loc), text);
  return out;
}

}  // namespace spool
