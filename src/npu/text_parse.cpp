// Parser for the NPU program text form (see include/spool/npu/text.hpp).
// A hand-written recursive-descent parser over characters; every error is a
// diagnostic `file:line:col: error: ...` at the offending token. Names are
// resolved while parsing: DRAM buffers and kernels must be declared before
// use, loop variables are scoped to their loop, SSA values to their step.

#include <spool/npu/text.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <map>

namespace spool::npu {
namespace {

struct ParseError {
  SourceLoc loc;
  std::string message;
};

class Parser {
 public:
  Parser(std::string_view text, std::string filename) : text_(text), file_(std::move(filename)) {}

  Program run() {
    Program p;
    expect_word("program");
    p.name = string_lit();
    expect_word("spad");
    p.spad_bytes = integer();
    program_ = &p;
    for (;;) {
      skip_ws();
      if (at_end()) break;
      const SourceLoc loc = here();
      std::string word = ident();
      if (word == "buffer") {
        buffer(p);
      } else if (word == "kernel") {
        p.kernels.push_back(kernel(p));
      } else {
        throw ParseError{loc, fmt::format("expected 'buffer' or 'kernel', got '{}'", word)};
      }
    }
    return p;
  }

 private:
  // ---- characters --------------------------------------------------------
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  SourceLoc here() const { return SourceLoc{file_, line_, col_}; }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skip_ws() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(peek()))) {
        advance();
      } else if (peek() == '#') {
        while (!at_end() && peek() != '\n') advance();
      } else {
        break;
      }
    }
  }
  [[noreturn]] void error(const std::string& message) { throw ParseError{here(), message}; }

  bool accept(std::string_view s) {
    skip_ws();
    if (text_.substr(pos_, s.size()) != s) return false;
    for (size_t i = 0; i < s.size(); ++i) advance();
    return true;
  }
  void expect(std::string_view s) {
    if (!accept(s)) error(fmt::format("expected '{}'", s));
  }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }
  std::string ident() {
    skip_ws();
    if (!std::isalpha(static_cast<unsigned char>(peek())) && peek() != '_') error("expected an identifier");
    std::string out;
    while (!at_end() && ident_char(peek())) {
      // `0..4` style ranges never follow an identifier, but stop before "..".
      if (peek() == '.' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '.') break;
      out += peek();
      advance();
    }
    return out;
  }
  bool accept_word(std::string_view word) {
    skip_ws();
    const size_t save = pos_;
    const int line = line_, col = col_;
    if (std::isalpha(static_cast<unsigned char>(peek())) && ident() == word) return true;
    pos_ = save;
    line_ = line;
    col_ = col;
    return false;
  }
  void expect_word(std::string_view word) {
    if (!accept_word(word)) error(fmt::format("expected '{}'", word));
  }
  std::string name_after(char sigil) {
    skip_ws();
    if (peek() != sigil) error(fmt::format("expected a name starting with '{}'", sigil));
    advance();
    std::string out;
    while (!at_end() && ident_char(peek())) {
      out += peek();
      advance();
    }
    if (out.empty()) error("expected a name");
    return out;
  }
  std::string string_lit() {
    skip_ws();
    if (peek() != '"') error("expected a string");
    advance();
    std::string out;
    while (!at_end() && peek() != '"' && peek() != '\n') {
      out += peek();
      advance();
    }
    if (peek() != '"') error("unterminated string");
    advance();
    return out;
  }
  int64_t integer() {
    skip_ws();
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      advance();
    }
    if (!std::isdigit(static_cast<unsigned char>(peek()))) error("expected an integer");
    int64_t value = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek()))) {
      if (value > (INT64_MAX - 9) / 10) error("integer too large");
      value = value * 10 + (peek() - '0');
      advance();
    }
    return negative ? -value : value;
  }

  // ---- expressions ---------------------------------------------------------
  int lookup_var(const std::string& name, const SourceLoc& loc) {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (kernel_->loop_vars[*it] == name) return *it;
    throw ParseError{loc, fmt::format("unknown loop variable '{}'", name)};
  }

  Affine term() {
    skip_ws();
    const SourceLoc loc = here();
    if (std::isdigit(static_cast<unsigned char>(peek()))) {
      const int64_t value = integer();
      if (accept("*")) {
        skip_ws();
        const SourceLoc vloc = here();
        return Affine::var(lookup_var(ident(), vloc), value);
      }
      return Affine::of(value);
    }
    const int var = lookup_var(ident(), loc);
    if (accept("*")) return Affine::var(var, integer());
    return Affine::var(var);
  }

  Affine affine() {
    skip_ws();
    Affine out;
    if (accept("-")) {
      out = term() * -1;
    } else {
      out = term();
    }
    for (;;) {
      skip_ws();
      // A '-' followed by '>' never occurs; '+' followed by '=' is matmul syntax.
      if (peek() == '+' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=') {
        advance();
        out = out + term();
      } else if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '>') {
        advance();
        out = out + term() * -1;
      } else {
        break;
      }
    }
    return out;
  }

  Extent extent() {
    if (accept_word("min")) {
      expect("(");
      Extent e;
      e.options.push_back(affine());
      while (accept(",")) e.options.push_back(affine());
      expect(")");
      return e;
    }
    return Extent{{affine()}};
  }

  std::vector<int64_t> int_list() {
    std::vector<int64_t> out{integer()};
    while (accept(",")) out.push_back(integer());
    return out;
  }

  // ---- declarations --------------------------------------------------------
  static DType dtype_of(const std::string& name, const SourceLoc& loc) {
    if (auto d = parse_dtype(name)) return *d;
    throw ParseError{loc, fmt::format("unknown dtype '{}'", name)};
  }

  void buffer(Program& p) {
    skip_ws();
    const SourceLoc loc = here();
    DramBuffer b;
    b.name = name_after('@');
    if (p.find_buffer(b.name) >= 0) throw ParseError{loc, fmt::format("duplicate buffer '@{}'", b.name)};
    expect(":");
    skip_ws();
    const SourceLoc tloc = here();
    b.dtype = dtype_of(ident(), tloc);
    expect("[");
    skip_ws();
    if (peek() != ']') {
      b.shape.push_back(integer());
      while (accept(",")) b.shape.push_back(integer());
    }
    expect("]");
    skip_ws();
    const SourceLoc kloc = here();
    const std::string kind = ident();
    if (kind == "alias") {
      skip_ws();
      const SourceLoc rloc = here();
      const std::string root = name_after('@');
      b.alias_of = p.find_buffer(root);
      if (b.alias_of < 0) throw ParseError{rloc, fmt::format("unknown buffer '@{}'", root)};
      expect("+");
      b.alias_offset = integer();
      b.kind = p.buffers[b.alias_of].kind;
    } else if (kind == "input") {
      b.kind = BufferKind::Input;
    } else if (kind == "weight") {
      b.kind = BufferKind::Weight;
    } else if (kind == "output") {
      b.kind = BufferKind::Output;
    } else if (kind == "temp") {
      b.kind = BufferKind::Temp;
    } else {
      throw ParseError{kloc, fmt::format("expected a buffer kind or 'alias', got '{}'", kind)};
    }
    p.buffers.push_back(std::move(b));
  }

  Kernel kernel(const Program& p) {
    Kernel k;
    kernel_ = &k;
    scope_.clear();
    k.name = string_lit();
    if (accept_word("after")) {
      do {
        skip_ws();
        const SourceLoc loc = here();
        const std::string dep = string_lit();
        int found = -1;
        for (size_t i = 0; i < p.kernels.size(); ++i)
          if (p.kernels[i].name == dep) found = static_cast<int>(i);
        if (found < 0) throw ParseError{loc, fmt::format("unknown kernel '{}'", dep)};
        k.deps.push_back(found);
      } while (accept(","));
    }
    expect("{");
    while (accept_word("spad")) {
      SpadBuffer s;
      skip_ws();
      const SourceLoc loc = here();
      s.name = name_after('%');
      for (const SpadBuffer& other : k.spad)
        if (other.name == s.name) throw ParseError{loc, fmt::format("duplicate scratchpad buffer '%{}'", s.name)};
      expect(":");
      skip_ws();
      const SourceLoc tloc = here();
      s.dtype = dtype_of(ident(), tloc);
      expect("[");
      s.elements = integer();
      expect("]");
      skip_ws();
      if (peek() != 'x') error("expected 'x' and a slot count");
      advance();
      s.slots = static_cast<int>(integer());
      expect_word("at");
      s.offset = integer();
      k.spad.push_back(std::move(s));
    }
    k.body = block();
    kernel_ = nullptr;
    return k;
  }

  // Statements until the closing '}'.
  std::vector<Stmt> block() {
    std::vector<Stmt> body;
    for (;;) {
      if (accept("}")) return body;
      skip_ws();
      if (at_end()) error("expected '}'");
      body.push_back(stmt());
    }
  }

  SpadRef spad_head() {
    skip_ws();
    const SourceLoc loc = here();
    const std::string name = name_after('%');
    SpadRef r;
    for (size_t i = 0; i < kernel_->spad.size(); ++i)
      if (kernel_->spad[i].name == name) r.buffer = static_cast<int>(i);
    if (r.buffer < 0) throw ParseError{loc, fmt::format("unknown scratchpad buffer '%{}'", name)};
    r.slot = Affine::of(0);
    if (accept("{")) {
      r.slot = affine();
      expect("}");
    }
    return r;
  }
  SpadRef compute_ref() {
    SpadRef r = spad_head();
    expect("[");
    r.offset = affine();
    expect(":");
    r.ld = integer();
    expect("]");
    return r;
  }

  // Long because it is the grammar of a statement: one branch per statement
  // form of the NPU text (for, dma.load/store, matmul, vector, wait).
  Stmt stmt() {
    skip_ws();
    const SourceLoc loc = here();
    const std::string word = ident();
    if (word == "for") {
      LoopOp loop;
      skip_ws();
      const SourceLoc vloc = here();
      const std::string var = ident();
      for (int id : scope_)
        if (kernel_->loop_vars[id] == var) throw ParseError{vloc, fmt::format("loop variable '{}' shadows an enclosing loop", var)};
      expect_word("in");
      const int64_t start = integer();
      if (start != 0) error("loops start at 0");
      expect("..");
      loop.trips = integer();
      if (accept_word("count")) {
        DynamicTrips d;
        d.count = spad_head();
        expect("[");
        d.count.offset = affine();
        expect("]");
        expect("/");
        d.divisor = integer();
        expect_word("nominal");
        d.nominal = integer();
        loop.dynamic = std::move(d);
      }
      loop.var = static_cast<int>(kernel_->loop_vars.size());
      kernel_->loop_vars.push_back(var);
      expect("{");
      scope_.push_back(loop.var);
      loop.body = block();
      scope_.pop_back();
      return Stmt{std::move(loop)};
    }
    if (word == "dma.load" || word == "dma.store") {
      DmaOp d;
      d.load = word == "dma.load";
      expect("[");
      d.dims.push_back(extent());
      while (accept(",")) d.dims.push_back(extent());
      expect("]");
      auto dram_side = [&] {
        skip_ws();
        const SourceLoc bloc = here();
        const std::string name = name_after('@');
        d.dram = program_->find_buffer(name);
        if (d.dram < 0) throw ParseError{bloc, fmt::format("unknown buffer '@{}'", name)};
        expect("[");
        d.dram_offset = affine();
        expect(":");
        d.dram_strides = int_list();
        expect("]");
        if (accept_word("index")) {
          d.index = spad_head();
          expect("[");
          d.index.offset = affine();
          expect(":");
          d.index_strides = int_list();
          expect("]");
          expect_word("scale");
          d.index_scale = integer();
          expect_word("limit");
          d.index_limit = integer();
        }
      };
      auto spad_side = [&] {
        d.spad = spad_head();
        expect("[");
        d.spad.offset = affine();
        expect(":");
        d.spad_strides = int_list();
        expect("]");
      };
      if (d.load) {
        spad_side();
        expect("<-");
        dram_side();
      } else {
        dram_side();
        expect("<-");
        spad_side();
      }
      expect_word("tag");
      d.tag = static_cast<int>(integer());
      return Stmt{std::move(d)};
    }
    if (word == "matmul") {
      MatmulOp m;
      expect("[");
      m.m = extent();
      expect(",");
      m.k = extent();
      expect(",");
      m.n = extent();
      expect("]");
      m.c = compute_ref();
      if (accept("+=")) {
        m.accumulate = true;
      } else {
        expect("=");
      }
      m.a = compute_ref();
      expect(",");
      m.b = compute_ref();
      for (;;) {
        if (accept_word("ta")) {
          m.trans_a = true;
        } else if (accept_word("tb")) {
          m.trans_b = true;
        } else if (accept_word("on")) {
          m.array = static_cast<int>(integer());
          if (m.array < 0) error("an array number is not negative");
        } else {
          break;
        }
      }
      return Stmt{std::move(m)};
    }
    if (word == "vector") return Stmt{vector_step()};
    if (word == "wait") return Stmt{WaitOp{static_cast<int>(integer())}};
    throw ParseError{loc, fmt::format("unknown statement '{}'", word)};
  }

  VectorOp vector_step() {
    VectorOp v;
    v.label = string_lit();
    expect("[");
    v.rows = extent();
    expect(",");
    v.cols = extent();
    expect("]");
    expect("{");
    std::map<std::string, int> values;
    auto value_ref = [&] {
      skip_ws();
      const SourceLoc loc = here();
      const std::string name = name_after('%');
      auto it = values.find(name);
      if (it == values.end()) throw ParseError{loc, fmt::format("unknown value '%{}'", name)};
      return it->second;
    };
    for (;;) {
      if (accept("}")) return v;
      skip_ws();
      if (at_end()) error("expected '}'");
      if (accept_word("store")) {
        VecStore st;
        st.ref = compute_ref();
        expect(",");
        st.value = value_ref();
        v.stores.push_back(std::move(st));
        continue;
      }
      VecInstr in;
      const SourceLoc nloc = here();
      in.name = name_after('%');
      if (values.count(in.name)) throw ParseError{nloc, fmt::format("value '%{}' is defined twice", in.name)};
      expect("=");
      skip_ws();
      const SourceLoc oloc = here();
      const std::string op = ident();
      if (op == "load" || op == "load.row" || op == "load.col") {
        in.op = VecOp::Load;
        in.broadcast = op == "load.row" ? LoadBroadcast::Row : op == "load.col" ? LoadBroadcast::Col : LoadBroadcast::Full;
        in.ref = compute_ref();
      } else if (op == "gather") {
        in.op = VecOp::Gather;
        in.operands.push_back(value_ref());
        expect(",");
        in.ref = compute_ref();
      } else if (op == "const") {
        in.op = VecOp::Const;
        skip_ws();
        const SourceLoc lloc = here();
        std::string literal;
        while (!at_end() && !std::isspace(static_cast<unsigned char>(peek()))) {
          literal += peek();
          advance();
        }
        char* end = nullptr;
        in.literal = std::strtod(literal.c_str(), &end);
        if (literal.empty() || end != literal.c_str() + literal.size())
          throw ParseError{lloc, fmt::format("bad literal '{}'", literal)};
      } else {
        auto parsed = parse_vec_op(op);
        if (!parsed || *parsed == VecOp::Load || *parsed == VecOp::Const || *parsed == VecOp::Gather)
          throw ParseError{oloc, fmt::format("unknown vector op '{}'", op)};
        in.op = *parsed;
        if (vec_op_arity(in.op) > 0) {
          in.operands.push_back(value_ref());
          while (accept(",")) in.operands.push_back(value_ref());
        }
      }
      expect(":");
      skip_ws();
      const SourceLoc tloc = here();
      const std::string type = ident();
      auto t = parse_scalar_type(type);
      if (!t) throw ParseError{tloc, fmt::format("unknown scalar type '{}'", type)};
      in.type = *t;
      values[in.name] = static_cast<int>(v.body.size());
      v.body.push_back(std::move(in));
    }
  }

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
  Program* program_ = nullptr;
  Kernel* kernel_ = nullptr;
  std::vector<int> scope_;
};

}  // namespace

Result<Program> parse(std::string_view text, const std::string& filename) {
  try {
    return Parser(text, filename).run();
  } catch (const ParseError& e) {
    return Diagnostic{e.loc, e.message, {}};
  }
}

}  // namespace spool::npu
