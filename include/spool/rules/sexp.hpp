#pragma once
// A small S-expression reader with source locations, for rule files.
//
// Atoms are runs of characters other than whitespace, parentheses and `;`
// (so `?x`, `:when`, `=>`, `mul[axis=1]` and `1e-5` are atoms; brackets
// group: `op[a b]` is one atom); strings are double-quoted with `\` escapes;
// `;` starts a comment to the end of the line. Each node keeps the exact
// span of text it came from, so a pattern can be handed on as text.

#include <spool/support/diagnostic.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace spool::rules {

struct Sexp {
  enum class Kind { Atom, String, List };
  Kind kind = Kind::Atom;
  std::string text;        // Atom: the atom; String: the unescaped contents
  std::vector<Sexp> items;  // List
  SourceLoc loc;           // where it starts
  size_t begin = 0, end = 0;  // its span in the source text

  bool is_atom(std::string_view value) const { return kind == Kind::Atom && text == value; }
  bool is_list() const { return kind == Kind::List; }
};

// Reads every top-level form. Unbalanced parentheses, an unterminated string
// or an unbalanced bracket are diagnostics at the offending character.
[[nodiscard]] Result<std::vector<Sexp>> read_sexps(std::string_view text, const std::string& file);

}  // namespace spool::rules
