// The HLIR parser: a hand-written lexer and recursive descent over the
// grammar in text.hpp. Every error is a Diagnostic with file:line:col;
// nothing a user can type makes it crash.

#include <spool/ir/text.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

namespace spool {
namespace {

class ParseError {
 public:
  ParseError(SourceLoc loc, std::string message) : diagnostic{std::move(loc), std::move(message), {}} {}
  Diagnostic diagnostic;
};

class Parser {
 public:
  Parser(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  Graph parse() {
    Graph graph;
    expect_word("graph");
    skip_space();
    graph.set_name(at('"') ? string_literal() : identifier("graph name"));
    expect('{');
    std::map<uint32_t, SourceLoc> defined;
    for (;;) {
      skip_space();
      if (at('}')) break;
      if (pos_ >= text_.size()) error("expected '}' to close the graph");
      const SourceLoc loc = here();
      if (at('%')) {
        node(graph, defined, loc);
      } else if (peek_word() == "output") {
        output(graph, loc);
      } else {
        error(fmt::format("expected a node '%ID = ...' or 'output', found {}", describe_here()));
      }
    }
    expect('}');
    skip_space();
    if (pos_ < text_.size()) error(fmt::format("unexpected {} after the graph", describe_here()));
    return graph;
  }

 private:
  // ---- statements ----
  void node(Graph& graph, std::map<uint32_t, SourceLoc>& defined, const SourceLoc& loc) {
    const NodeId id = node_ref();
    if (auto it = defined.find(id.value); it != defined.end()) {
      ParseError e(loc, fmt::format("node %{} is defined twice", id.value));
      e.diagnostic.notes.push_back({it->second, "first defined here"});
      throw e;
    }
    expect('=');
    skip_space();
    const SourceLoc op_loc = here();
    const std::string op_text = identifier("op name");
    const std::optional<Op> op = parse_op(op_text);
    if (!op) throw ParseError(op_loc, fmt::format("unknown op '{}'", op_text));
    const OpInfo& info = op_info(*op);

    std::vector<Edge> inputs;
    skip_space();
    if (info.cls != OpClass::Source) {
      expect('(');
      skip_space();
      if (!at(')')) {
        for (;;) {
          inputs.push_back(operand(graph));
          skip_space();
          if (at(')')) break;
          expect(',');
        }
      }
      expect(')');
      if (info.arity == kVariadic ? inputs.empty() : static_cast<int>(inputs.size()) != info.arity)
        throw ParseError(op_loc, info.arity == kVariadic
                                     ? fmt::format("{} expects at least one operand", op_text)
                                     : fmt::format("{} expects {} operand{}, got {}", op_text, info.arity,
                                                   info.arity == 1 ? "" : "s", inputs.size()));
    }
    Attr attr = attribute(*op);
    expect(':');
    skip_space();
    const SourceLoc type_loc = here();
    const DType dtype = dtype_token();
    const Shape shape = shape_literal();
    if (info.attr == AttrKind::Scalar) attr = ScalarAttr{scalar_value(pending_scalar_, dtype, pending_scalar_loc_)};
    try {
      graph.add_with_id(id, *op, std::move(inputs), std::move(attr), dtype, shape);
    } catch (const Error& e) {
      throw ParseError(type_loc, e.what());
    }
    defined[id.value] = loc;
  }

  void output(Graph& graph, const SourceLoc& loc) {
    expect_word("output");
    skip_space();
    const std::string name = string_literal();
    expect('=');
    Edge edge = operand(graph);
    try {
      graph.add_output(name, std::move(edge));
    } catch (const Error& e) {
      throw ParseError(loc, e.what());
    }
  }

  Edge operand(const Graph& graph) {
    skip_space();
    const SourceLoc loc = here();
    Edge edge{node_ref(), {}};
    if (!graph.contains(edge.src))
      throw ParseError(loc, fmt::format("%{} is used before it is defined", edge.src.value));
    skip_space();
    if (!at('<')) return edge;
    ++pos_;
    for (;;) {
      skip_space();
      if (at('>')) break;
      const SourceLoc step_loc = here();
      const ViewStep step = view_step();
      try {
        edge.view.append(step, graph.node(edge.src).shape, "view");
      } catch (const Error& e) {
        throw ParseError(step_loc, e.what());
      }
      // append() drops identity steps and merges neighbours; the printer
      // never emits such steps, so a text that has them is not canonical
      // but still means the same view.
    }
    expect('>');
    return edge;
  }

  ViewStep view_step() {
    const SourceLoc loc = here();
    const std::string kind = identifier("view step");
    expect('(');
    ViewStep step;
    if (kind == "permute" || kind == "reshape" || kind == "expand") {
      step.kind = kind == "permute" ? ViewKind::Permute : kind == "reshape" ? ViewKind::Reshape : ViewKind::Expand;
      step.a = int_list(')');
    } else if (kind == "slice") {
      step.kind = ViewKind::Slice;
      skip_space();
      while (!at(')')) {
        step.a.push_back(integer());
        expect(':');
        step.b.push_back(integer());
        expect(':');
        step.c.push_back(integer());
        skip_space();
        if (!at(')')) expect(',');
        skip_space();
      }
    } else if (kind == "pad") {
      step.kind = ViewKind::Pad;
      skip_space();
      while (!at(';')) {
        step.a.push_back(integer());
        expect(':');
        step.b.push_back(integer());
        skip_space();
        if (!at(';')) expect(',');
        skip_space();
      }
      expect(';');
      step.value = real();
    } else {
      throw ParseError(loc, fmt::format("unknown view step '{}' (expected permute, reshape, expand, slice or pad)", kind));
    }
    expect(')');
    return step;
  }

  Attr attribute(Op op) {
    skip_space();
    const AttrKind kind = op_info(op).attr;
    if (!at('{')) {
      if (kind == AttrKind::None) return NoAttr{};
      throw ParseError(here(), fmt::format("{} needs an attribute {{{}=...}}", op_name(op), attr_key(kind)));
    }
    const SourceLoc loc = here();
    if (kind == AttrKind::None) throw ParseError(loc, fmt::format("{} takes no attribute", op_name(op)));
    ++pos_;
    skip_space();
    const SourceLoc key_loc = here();
    const std::string key = identifier("attribute name");
    if (key != attr_key(kind))
      throw ParseError(key_loc, fmt::format("{} has no attribute '{}' (expected '{}')", op_name(op), key, attr_key(kind)));
    expect('=');
    skip_space();
    Attr attr;
    switch (kind) {
      case AttrKind::None: break;
      case AttrKind::Name: attr = NameAttr{string_literal()}; break;
      case AttrKind::Axis: attr = AxisAttr{integer()}; break;
      case AttrKind::TopK: attr = TopKAttr{integer()}; break;
      case AttrKind::Loop: {
        LoopAttr loop;
        loop.loop = integer();
        next_key("trips");
        loop.trips = integer();
        next_key("index");
        loop.index = integer();
        attr = loop;
        break;
      }
      case AttrKind::Program: attr = program(); break;
      case AttrKind::Gemm: {
        GemmAttr gemm;
        gemm.a = program();
        next_key("b");
        gemm.b = program();
        next_key("epilogue");
        gemm.epilogue = program();
        next_key("a_inputs");
        gemm.a_inputs = integer();
        next_key("b_inputs");
        gemm.b_inputs = integer();
        attr = gemm;
        break;
      }
      case AttrKind::Reduce: {
        ReduceAttr reduce;
        skip_space();
        const SourceLoc kind_loc = here();
        const std::optional<Op> reduce_op = parse_op(identifier("reduce kind"));
        if (!reduce_op || (*reduce_op != Op::SumReduce && *reduce_op != Op::MaxReduce))
          throw ParseError(kind_loc, "reduce kind must be sum_reduce or max_reduce");
        reduce.kind = *reduce_op;
        next_key("axis");
        reduce.axis = integer();
        next_key("prologue");
        reduce.prologue = program();
        next_key("epilogue");
        reduce.epilogue = program();
        attr = reduce;
        break;
      }
      case AttrKind::Norm: {
        NormAttr norm;
        norm.eps = real();
        next_key("unit_offset");
        skip_space();
        const SourceLoc flag_loc = here();
        const std::string flag = identifier("true or false");
        if (flag != "true" && flag != "false") throw ParseError(flag_loc, "expected true or false");
        norm.unit_offset = flag == "true";
        attr = norm;
        break;
      }
      case AttrKind::DType: attr = DTypeAttr{dtype_token()}; break;
      case AttrKind::Scalar:
        // The scalar's dtype is the node's, declared after the attribute:
        // keep the text; node() converts it once the dtype is known.
        pending_scalar_loc_ = here();
        pending_scalar_ = scalar_token();
        attr = ScalarAttr{};
        break;
    }
    expect('}');
    return attr;
  }

  static const char* attr_key(AttrKind kind) {
    switch (kind) {
      case AttrKind::None: return "";
      case AttrKind::Name: return "name";
      case AttrKind::Scalar: return "value";
      case AttrKind::Axis: return "axis";
      case AttrKind::DType: return "to";
      case AttrKind::TopK: return "k";
      case AttrKind::Loop: return "loop";
      case AttrKind::Program: return "program";
      case AttrKind::Gemm: return "a";
      case AttrKind::Reduce: return "kind";
      case AttrKind::Norm: return "eps";
    }
    return "";
  }

  // `, KEY =` between the fields of a multi-field attribute (fixed order).
  void next_key(const char* key) {
    expect(',');
    skip_space();
    const SourceLoc loc = here();
    const std::string found = identifier("attribute name");
    if (found != key) throw ParseError(loc, fmt::format("expected attribute '{}', found '{}'", key, found));
    expect('=');
  }

  // `[instr; instr; ...]`, each `op(ARGS)`, `cast[DTYPE](ARG)`,
  // `constant[VALUE:DTYPE]` or `iota[AXIS:DTYPE]`; ARGS are `$N`.
  ProgramAttr program() {
    ProgramAttr program;
    expect('[');
    skip_space();
    while (!at(']')) {
      const SourceLoc loc = here();
      const std::string name = identifier("program instruction");
      const std::optional<Op> op = parse_op(name);
      if (!op) throw ParseError(loc, fmt::format("unknown op '{}' in program", name));
      ProgramInstr instr;
      instr.op = *op;
      if (*op == Op::Constant || *op == Op::Iota) {
        expect('[');
        skip_space();
        const SourceLoc value_loc = here();
        const std::string value = scalar_token();
        expect(':');
        instr.dtype = dtype_token();
        expect(']');
        if (*op == Op::Constant) {
          instr.value = scalar_value(value, instr.dtype, value_loc);
        } else {
          int64_t axis = 0;
          auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), axis);
          if (ec != std::errc() || end != value.data() + value.size())
            throw ParseError(value_loc, fmt::format("bad iota axis '{}'", value));
          instr.axis = axis;
        }
      } else {
        if (*op == Op::Cast) {
          expect('[');
          instr.dtype = dtype_token();
          expect(']');
        }
        expect('(');
        const int arity = op_info(*op).arity;
        for (int a = 0; a < arity; ++a) {
          if (a) expect(',');
          skip_space();
          if (!at('$')) error(fmt::format("expected a value '$N', found {}", describe_here()));
          ++pos_;
          const SourceLoc arg_loc = here();
          const int64_t v = integer();
          if (v < 0 || v > 65535) throw ParseError(arg_loc, fmt::format("value ${} is out of range", v));
          instr.args[static_cast<size_t>(a)] = static_cast<uint16_t>(v);
        }
        expect(')');
      }
      program.instrs.push_back(instr);
      skip_space();
      if (!at(']')) expect(';');
      skip_space();
    }
    expect(']');
    return program;
  }

  Scalar scalar_value(const std::string& text, DType dtype, const SourceLoc& loc) {
    if (dtype == DType::Bool) {
      if (text == "true") return Scalar::of(dtype, 1);
      if (text == "false") return Scalar::of(dtype, 0);
      throw ParseError(loc, fmt::format("bad bool constant '{}' (expected true or false)", text));
    }
    if (is_integer(dtype)) {
      int64_t value = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size())
        throw ParseError(loc, fmt::format("bad {} constant '{}'", dtype_name(dtype), text));
      if (wrap_to_int(dtype, value) != value)
        throw ParseError(loc, fmt::format("constant {} does not fit in {}", text, dtype_name(dtype)));
      Scalar s;
      s.dtype = dtype;
      s.i = value;
      return s;
    }
    const std::optional<double> value = parse_double(text);
    if (!value) throw ParseError(loc, fmt::format("bad {} constant '{}'", dtype_name(dtype), text));
    if (round_to_float(dtype, *value) != *value && !std::isnan(*value))
      throw ParseError(loc, fmt::format("constant {} is not exactly representable in {}", text, dtype_name(dtype)));
    return Scalar::of(dtype, *value);
  }

  static std::optional<double> parse_double(const std::string& text) {
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text.empty()) return std::nullopt;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return std::nullopt;
    return value;
  }

  // ---- tokens ----
  NodeId node_ref() {
    skip_space();
    if (!at('%')) error(fmt::format("expected a node reference '%ID', found {}", describe_here()));
    ++pos_;
    const SourceLoc loc = here();
    const int64_t value = integer();
    if (value < 0 || value >= std::numeric_limits<uint32_t>::max() / 2)
      throw ParseError(loc, fmt::format("node id {} is out of range", value));
    // Ids may be sparse, but the graph holds a slot for every id below the
    // largest: bounded by the text's size, a short text cannot claim gigabytes.
    const int64_t bound = std::max<int64_t>(int64_t{1} << 16, 64 * static_cast<int64_t>(text_.size()));
    if (value >= bound)
      throw ParseError(loc, fmt::format("node id {} is out of range (a text of {} bytes has ids below {})", value,
                                        text_.size(), bound));
    return NodeId{static_cast<uint32_t>(value)};
  }

  DType dtype_token() {
    skip_space();
    const SourceLoc loc = here();
    const std::string name = identifier("dtype");
    const std::optional<DType> dtype = parse_dtype(name);
    if (!dtype) throw ParseError(loc, fmt::format("unknown dtype '{}'", name));
    return *dtype;
  }

  Shape shape_literal() {
    expect('[');
    Shape shape = int_list(']');
    expect(']');
    for (int64_t d : shape)
      if (d < 0) error("negative dimension");
    return shape;
  }

  // Comma-separated integers up to (not including) `close`.
  Shape int_list(char close) {
    Shape values;
    skip_space();
    while (!at(close)) {
      values.push_back(integer());
      skip_space();
      if (!at(close)) expect(',');
      skip_space();
    }
    return values;
  }

  int64_t integer() {
    skip_space();
    const SourceLoc loc = here();
    size_t end = pos_;
    if (end < text_.size() && (text_[end] == '-' || text_[end] == '+')) ++end;
    while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
    int64_t value = 0;
    const char* first = text_.data() + pos_ + (pos_ < text_.size() && text_[pos_] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(first, text_.data() + end, value);
    if (ec == std::errc::result_out_of_range) throw ParseError(loc, "integer out of range");
    if (ec != std::errc() || ptr != text_.data() + end || end == pos_)
      throw ParseError(loc, fmt::format("expected an integer, found {}", describe_here()));
    pos_ = end;
    return value;
  }

  double real() {
    skip_space();
    const SourceLoc loc = here();
    const std::string text = scalar_token();
    const std::optional<double> value = parse_double(text);
    if (!value) throw ParseError(loc, fmt::format("expected a number, found '{}'", text));
    return *value;
  }

  // A number-like token: sign, digits, letters, '.', '+' after an exponent.
  std::string scalar_token() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const bool exponent_sign = (c == '+' || c == '-') && pos_ > start && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || (c == '-' && pos_ == start) || exponent_sign)
        ++pos_;
      else
        break;
    }
    if (pos_ == start) error(fmt::format("expected a number, found {}", describe_here()));
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string identifier(const char* what) {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.' ||
            (text_[pos_] == '-' && pos_ > start)))
      ++pos_;
    if (pos_ == start) error(fmt::format("expected {}, found {}", what, describe_here()));
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string string_literal() {
    skip_space();
    if (!at('"')) error(fmt::format("expected a string in double quotes, found {}", describe_here()));
    const SourceLoc loc = here();
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      // Not even an escaped newline: the printers write one as it is.
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '\n') ++pos_;
      out += text_[pos_++];
    }
    if (pos_ >= text_.size() || text_[pos_] != '"') throw ParseError(loc, "unterminated string");
    ++pos_;
    return out;
  }

  std::string_view peek_word() {
    size_t end = pos_;
    while (end < text_.size() && std::isalpha(static_cast<unsigned char>(text_[end]))) ++end;
    return text_.substr(pos_, end - pos_);
  }

  void expect_word(std::string_view word) {
    skip_space();
    if (peek_word() != word) error(fmt::format("expected '{}', found {}", word, describe_here()));
    pos_ += word.size();
  }

  void expect(char c) {
    skip_space();
    if (!at(c)) error(fmt::format("expected '{}', found {}", c, describe_here()));
    ++pos_;
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    size_t end = pos_;
    while (end < text_.size() && end - pos_ < 12 && !std::isspace(static_cast<unsigned char>(text_[end]))) ++end;
    return fmt::format("'{}'", text_.substr(pos_, std::max<size_t>(end - pos_, 1)));
  }

  // Line and column of the current position, counted on from the last
  // position asked for (the parser only moves forward).
  SourceLoc here() const {
    if (pos_ < loc_pos_) loc_pos_ = 0, loc_line_ = 1, loc_col_ = 1;
    for (; loc_pos_ < pos_ && loc_pos_ < text_.size(); ++loc_pos_) {
      if (text_[loc_pos_] == '\n') {
        ++loc_line_;
        loc_col_ = 1;
      } else {
        ++loc_col_;
      }
    }
    return SourceLoc{file_, loc_line_, loc_col_};
  }

  [[noreturn]] void error(std::string message) const { throw ParseError(here(), std::move(message)); }

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  mutable size_t loc_pos_ = 0;
  mutable int loc_line_ = 1;
  mutable int loc_col_ = 1;
  std::string pending_scalar_;
  SourceLoc pending_scalar_loc_;
};

}  // namespace

Result<Graph> parse_graph(std::string_view text, const std::string& file) {
  try {
    return Parser(text, file).parse();
  } catch (const ParseError& e) {
    return e.diagnostic;
  }
}

}  // namespace spool
