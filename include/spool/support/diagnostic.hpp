#pragma once
// Diagnostics with source locations, and Result<T> for parsers.
//
// Every text parser in Spool (HLIR text, rule files, configs) reports
// `file:line:col: error: message` followed by `note:` lines, and returns a
// [[nodiscard]] Result<T> instead of throwing, so callers decide how to show
// the error. Tests assert the exact rendered text.

#include <spool/support/error.hpp>

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace spool {

struct SourceLoc {
  std::string file;
  int line = 0;  // 1-based; 0 means "no location"
  int col = 0;   // 1-based
};

struct Diagnostic {
  SourceLoc loc;
  std::string message;
  std::vector<std::pair<SourceLoc, std::string>> notes;

  // `file:line:col: error: message`, then one `file:line:col: note: ...` line per note.
  std::string render() const;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(Diagnostic diagnostic) : value_(std::move(diagnostic)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return ok(); }

  T& value() {
    if (!ok()) throw Error(error().render());
    return std::get<T>(value_);
  }
  const T& value() const {
    if (!ok()) throw Error(error().render());
    return std::get<T>(value_);
  }
  const Diagnostic& error() const { return std::get<Diagnostic>(value_); }

  // The value, or a spool::Error carrying the rendered diagnostic.
  T take() { return std::move(value()); }

 private:
  std::variant<T, Diagnostic> value_;
};

}  // namespace spool
