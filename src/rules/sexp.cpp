// The S-expression reader of rule files.

#include <spool/rules/sexp.hpp>

#include <fmt/format.h>

#include <cctype>

namespace spool::rules {
namespace {

constexpr size_t kMaxDepth = 10000;

class Reader {
 public:
  Reader(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  Result<std::vector<Sexp>> read_all() {
    std::vector<Sexp> forms;
    std::vector<Sexp> stack;  // lists being read, innermost last
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) break;
      const char c = text_[pos_];
      if (c == '(') {
        // Deeper lists would overflow the stack of the passes that walk them
        // (patterns are limited to this depth anyway).
        if (stack.size() >= kMaxDepth)
          return error(loc(), fmt::format("lists nested deeper than {} levels", kMaxDepth));
        Sexp list;
        list.kind = Sexp::Kind::List;
        list.loc = loc();
        list.begin = pos_;
        advance();
        stack.push_back(std::move(list));
        continue;
      }
      if (c == ')') {
        if (stack.empty()) return error(loc(), "unbalanced ')': no list is open");
        advance();
        Sexp done = std::move(stack.back());
        stack.pop_back();
        done.end = pos_;
        emit(forms, stack, std::move(done));
        continue;
      }
      Result<Sexp> item = c == '"' ? string() : atom();
      if (!item) return item.error();
      emit(forms, stack, std::move(item.value()));
    }
    if (!stack.empty()) {
      Diagnostic d;
      d.loc = loc();
      d.message = "unbalanced '(': end of file inside a list";
      d.notes.push_back({stack.back().loc, "the innermost open list starts here"});
      return d;
    }
    return forms;
  }

 private:
  static void emit(std::vector<Sexp>& forms, std::vector<Sexp>& stack, Sexp item) {
    if (stack.empty())
      forms.push_back(std::move(item));
    else
      stack.back().items.push_back(std::move(item));
  }

  Result<Sexp> atom() {
    Sexp s;
    s.loc = loc();
    s.begin = pos_;
    int brackets = 0;
    SourceLoc bracket_loc;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '[') {
        if (brackets == 0) bracket_loc = loc();
        ++brackets;
      } else if (c == ']') {
        if (brackets == 0) return error(loc(), "unbalanced ']'");
        --brackets;
      } else if (brackets == 0 && (std::isspace(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == ';')) {
        break;
      } else if (c == '\n') {
        break;
      }
      advance();
    }
    if (brackets > 0) return error(bracket_loc, "unbalanced '[': no matching ']' on this line");
    s.end = pos_;
    s.text = std::string(text_.substr(s.begin, s.end - s.begin));
    return s;
  }

  Result<Sexp> string() {
    Sexp s;
    s.kind = Sexp::Kind::String;
    s.loc = loc();
    s.begin = pos_;
    advance();
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\n') break;
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) advance();
      s.text += text_[pos_];
      advance();
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') return error(s.loc, "unterminated string");
    advance();
    s.end = pos_;
    return s;
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      if (text_[pos_] == ';') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else if (std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        advance();
      } else {
        break;
      }
    }
  }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  SourceLoc loc() const { return SourceLoc{file_, line_, col_}; }

  static Diagnostic error(SourceLoc where, std::string message) {
    Diagnostic d;
    d.loc = std::move(where);
    d.message = std::move(message);
    return d;
  }

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace

Result<std::vector<Sexp>> read_sexps(std::string_view text, const std::string& file) {
  return Reader(text, file).read_all();
}

}  // namespace spool::rules
