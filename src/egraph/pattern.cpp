// The pattern reader, the pattern compiler and the matching machine.
//
// Matching is egg's backtracking machine over registers of class ids: a Bind
// instruction iterates the nodes of one op in one class (a binary search in
// the class's sorted node list), writes their children into registers and
// continues; Compare checks that a repeated variable saw the same class; Scan
// starts a further pattern of a multi-pattern rule. The machine never writes
// to the e-graph, so several rules (and chunks of one rule's candidates) are
// matched in parallel.

#include <spool/egraph/pattern.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>

#include <cctype>
#include <charconv>

namespace spool::egraph {

// ---- variables ------------------------------------------------------------------

uint32_t Vars::class_var(std::string_view name) {
  if (auto v = find_class(name)) return *v;
  classes.emplace_back(name);
  return static_cast<uint32_t>(classes.size() - 1);
}
uint32_t Vars::attr_var(std::string_view name) {
  if (auto v = find_attr(name)) return *v;
  attrs.emplace_back(name);
  return static_cast<uint32_t>(attrs.size() - 1);
}
std::optional<uint32_t> Vars::find_class(std::string_view name) const {
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i] == name) return static_cast<uint32_t>(i);
  return std::nullopt;
}
std::optional<uint32_t> Vars::find_attr(std::string_view name) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i] == name) return static_cast<uint32_t>(i);
  return std::nullopt;
}

// ---- printing -------------------------------------------------------------------

bool Pattern::ground() const {
  for (const PatternNode& n : nodes)
    if (n.kind != PatternNode::Kind::Node || n.attr.kind != AttrPattern::Kind::Exact || n.any_children) return false;
  return true;
}

namespace {

void print_node(const Pattern& p, uint32_t i, const Language& lang, const Vars& vars, std::string& out) {
  const PatternNode& n = p.nodes[i];
  switch (n.kind) {
    case PatternNode::Kind::Var: out += vars.classes[n.var]; return;
    case PatternNode::Kind::Wildcard: out += "_"; return;
    case PatternNode::Kind::Node: break;
  }
  const bool leaf = n.arity == 0 && n.attr.kind == AttrPattern::Kind::Exact &&
                    (n.op == lang.ops.number_op || n.op == lang.ops.symbol_op);
  if (leaf) {
    out += lang.attrs.str(n.attr.id);
    return;
  }
  const bool bare = n.arity == 0 && !n.any_children && n.attr.kind == AttrPattern::Kind::Exact && n.attr.id.value == 0;
  if (!bare) out += "(";
  out += lang.ops.name(n.op);
  switch (n.attr.kind) {
    case AttrPattern::Kind::Any: out += "[_]"; break;
    case AttrPattern::Kind::Var: out += "[" + vars.attrs[n.attr.var] + "]"; break;
    case AttrPattern::Kind::Exact:
      if (n.attr.id.value != 0) out += "[" + lang.attrs.str(n.attr.id) + "]";
      break;
  }
  for (uint32_t k : p.kids(n)) {
    out += " ";
    print_node(p, k, lang, vars, out);
  }
  if (n.any_children) out += " ...";
  if (!bare) out += ")";
}

}  // namespace

std::string Pattern::str(const Language& language, const Vars& vars) const {
  std::string out;
  if (!nodes.empty()) print_node(*this, root(), language, vars, out);
  return out;
}

// ---- reader ---------------------------------------------------------------------

namespace {

struct Token {
  enum Kind { LParen, RParen, Attr, Atom, End } kind;
  std::string_view text;
  int line, col;
};

class Reader {
 public:
  Reader(Language& lang, std::string_view text, Vars& vars, const ParseOptions& options)
      : lang_(lang), text_(text), vars_(vars), options_(options) {
    line_ = options.loc.line > 0 ? options.loc.line : 1;
    col_ = options.loc.col > 0 ? options.loc.col : 1;
  }

  Result<Pattern> read() {
    Token t = next();
    if (t.kind == Token::End) return error(t, "expected a pattern, found the end of the text");
    if (!parse_expr(t)) return *diag_;
    Token rest = next();
    if (rest.kind != Token::End) return error(rest, fmt::format("unexpected '{}' after the pattern", rest.text));
    if (diag_) return *diag_;
    return std::move(pattern_);
  }

 private:
  Diagnostic error(const Token& t, std::string message) {
    Diagnostic d;
    d.loc = SourceLoc{options_.loc.file.empty() ? "<pattern>" : options_.loc.file, t.line, t.col};
    d.message = std::move(message);
    return d;
  }
  bool set_error(const Token& t, std::string message) {
    if (!diag_) diag_ = error(t, std::move(message));
    return false;
  }

  void advance(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (text_[pos_ + i] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
    pos_ += n;
  }

  Token next() {
    // Whitespace and `;` comments.
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        advance(1);
      } else if (c == ';') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance(1);
      } else {
        break;
      }
    }
    Token t{Token::End, {}, line_, col_};
    if (pos_ >= text_.size()) return t;
    const char c = text_[pos_];
    if (c == '(' || c == ')') {
      t.kind = c == '(' ? Token::LParen : Token::RParen;
      t.text = text_.substr(pos_, 1);
      advance(1);
      return t;
    }
    if (c == '[') {
      // Brackets nest: `[name="x" : f32[2,3]]`.
      size_t end = std::string_view::npos;
      int depth = 0;
      for (size_t i = pos_; i < text_.size(); ++i) {
        if (text_[i] == '[') ++depth;
        if (text_[i] == ']' && --depth == 0) {
          end = i;
          break;
        }
      }
      if (end == std::string_view::npos) {
        t.kind = Token::Attr;
        t.text = {};
        set_error(t, "unterminated attribute: missing ']'");
        pos_ = text_.size();
        return Token{Token::End, {}, line_, col_};
      }
      t.kind = Token::Attr;
      t.text = text_.substr(pos_ + 1, end - pos_ - 1);
      advance(end + 1 - pos_);
      return t;
    }
    size_t end = pos_;
    while (end < text_.size()) {
      const char d = text_[end];
      if (std::isspace(static_cast<unsigned char>(d)) || d == '(' || d == ')' || d == '[' || d == ']' || d == ';')
        break;
      ++end;
    }
    if (end == pos_) {  // a stray ']'
      t.kind = Token::Atom;
      t.text = text_.substr(pos_, 1);
      advance(1);
      return t;
    }
    t.kind = Token::Atom;
    t.text = text_.substr(pos_, end - pos_);
    advance(end - pos_);
    return t;
  }

  std::optional<AttrId> parse_number(std::string_view s) {
    if (s.empty()) return std::nullopt;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    const bool looks_float = s.find_first_of(".eEni") != std::string_view::npos;  // inf, nan too
    if (!looks_float && !lang_.ops.float_numbers) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(b, e, v);
      if (ec == std::errc() && p == e) return lang_.attrs.intern_int(v);
    }
    if (!(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
      return std::nullopt;
    double d = 0;
    auto [p, ec] = std::from_chars(b, e, d);
    if (ec == std::errc() && p == e) return lang_.attrs.intern_float(d);
    return std::nullopt;
  }

  uint32_t push(PatternNode node, std::span<const uint32_t> kids) {
    node.first_child = static_cast<uint32_t>(pattern_.children.size());
    node.arity = static_cast<uint32_t>(kids.size());
    pattern_.children.insert(pattern_.children.end(), kids.begin(), kids.end());
    pattern_.nodes.push_back(node);
    return static_cast<uint32_t>(pattern_.nodes.size() - 1);
  }

  bool parse_attr(const Token& t, OpId op, AttrPattern& out) {
    std::string_view s = t.text;
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    if (s == "_") {
      out.kind = AttrPattern::Kind::Any;
      return true;
    }
    if (s.size() > 1 && s[0] == '?') {
      out.kind = AttrPattern::Kind::Var;
      out.var = vars_.attr_var(s);
      return true;
    }
    out.kind = AttrPattern::Kind::Exact;
    if (options_.attr_parser) {
      if (auto id = options_.attr_parser(op, s)) {
        out.id = *id;
        return true;
      }
      return set_error(t, fmt::format("bad attribute '{}' for op '{}'", s, lang_.ops.name(op)));
    }
    if (s.empty()) return set_error(t, "empty attribute");
    if (auto id = parse_number(s)) {
      out.id = *id;
      return true;
    }
    out.id = lang_.attrs.intern_symbol(s);
    return true;
  }

  // Parses one expression starting at token `t`; returns false on error.
  bool parse_expr(const Token& t) {
    if (++depth_ > 10000) return set_error(t, "pattern nested too deeply");
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};
    if (t.kind == Token::Atom) return parse_atom(t);
    if (t.kind == Token::RParen) return set_error(t, "unexpected ')'");
    if (t.kind == Token::Attr) return set_error(t, "an attribute must follow an op name");
    if (t.kind == Token::End) return set_error(t, "unexpected end of the text");
    Token head = next();
    if (head.kind != Token::Atom) return set_error(head, "expected an op name after '('");
    auto op = lang_.ops.find(head.text);
    if (!op) return set_error(head, fmt::format("unknown op '{}'", head.text));
    PatternNode node;
    node.kind = PatternNode::Kind::Node;
    node.op = *op;
    Token tok = next();
    if (tok.kind == Token::Attr) {
      if (!parse_attr(tok, *op, node.attr)) return false;
      tok = next();
    }
    boost::container::small_vector<uint32_t, 4> kids;
    const int arity = lang_.ops[*op].arity;
    if (tok.kind == Token::Atom && tok.text == "...") {
      // Any number of children, none bound: only a variadic op has a
      // number of children to leave open.
      if (arity != kVariadic)
        return set_error(tok, fmt::format("'...' stands for the children of a variadic op; '{}' takes {}", head.text,
                                          arity));
      tok = next();
      if (tok.kind != Token::RParen) return set_error(tok, "'...' stands for all the children: write (op ...)");
      node.any_children = true;
      push(node, {});
      return true;
    }
    while (tok.kind != Token::RParen) {
      if (tok.kind == Token::End) return set_error(t, "unclosed '('");
      if (tok.kind == Token::Atom && tok.text == "...")
        return set_error(tok, "'...' stands for all the children: write (op ...)");
      if (!parse_expr(tok)) return false;
      kids.push_back(pattern_.root());
      tok = next();
    }
    if (arity != kVariadic && static_cast<size_t>(arity) != kids.size())
      return set_error(head, fmt::format("op '{}' takes {} children, got {}", head.text, arity, kids.size()));
    push(node, span_of(kids));
    return true;
  }

  bool parse_atom(const Token& t) {
    std::string_view s = t.text;
    PatternNode node;
    if (s == "_") {
      node.kind = PatternNode::Kind::Wildcard;
      push(node, {});
      return true;
    }
    if (s[0] == '?') {
      if (s.size() == 1) return set_error(t, "a variable needs a name after '?'");
      node.kind = PatternNode::Kind::Var;
      node.var = vars_.class_var(s);
      push(node, {});
      return true;
    }
    if (auto num = parse_number(s)) {
      if (!lang_.ops.number_op.valid()) return set_error(t, fmt::format("numbers are not allowed here: '{}'", s));
      node.op = lang_.ops.number_op;
      node.attr.id = *num;
      push(node, {});
      return true;
    }
    if (auto op = lang_.ops.find(s)) {
      const int arity = lang_.ops[*op].arity;
      if (arity != 0 && arity != kVariadic)
        return set_error(t, fmt::format("op '{}' takes {} children; write ({} ...)", s, arity, s));
      node.op = *op;
      push(node, {});
      return true;
    }
    if (!lang_.ops.symbol_op.valid()) return set_error(t, fmt::format("unknown op '{}'", s));
    node.op = lang_.ops.symbol_op;
    node.attr.id = lang_.attrs.intern_symbol(s);
    push(node, {});
    return true;
  }

  Language& lang_;
  std::string_view text_;
  Vars& vars_;
  const ParseOptions& options_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  int depth_ = 0;
  Pattern pattern_;
  std::optional<Diagnostic> diag_;
};

}  // namespace

Result<Pattern> parse_pattern(Language& language, std::string_view text, Vars& vars, const ParseOptions& options) {
  return Reader(language, text, vars, options).read();
}

ClassId instantiate(EGraph& graph, const Pattern& pattern, const ClassId* classes, const AttrId* attrs,
                    std::vector<ClassId>& scratch) {
  scratch.resize(pattern.nodes.size());
  for (size_t i = 0; i < pattern.nodes.size(); ++i) {
    const PatternNode& n = pattern.nodes[i];
    switch (n.kind) {
      case PatternNode::Kind::Var: scratch[i] = classes[n.var]; break;
      case PatternNode::Kind::Wildcard: SPOOL_ASSERT(false, "a wildcard cannot be instantiated"); break;
      case PatternNode::Kind::Node: {
        ChildBuf kids;
        for (uint32_t k : pattern.kids(n)) kids.push_back(scratch[k]);
        AttrId attr = n.attr.id;
        if (n.attr.kind == AttrPattern::Kind::Var) attr = attrs[n.attr.var];
        SPOOL_ASSERT(n.attr.kind != AttrPattern::Kind::Any, "an attribute wildcard cannot be instantiated");
        SPOOL_ASSERT(!n.any_children, "(op ...) cannot be instantiated");
        scratch[i] = graph.add(n.op, attr, kids.span());
        break;
      }
    }
  }
  return scratch[pattern.root()];
}

namespace {

// Calls f(children) with the children of pattern node `n` taken from
// `built`, on the stack up to four, on the heap past that.
template <typename F>
auto with_kids(const Pattern& pattern, const PatternNode& n, const ClassId* built, F&& f) {
  SPOOL_ASSERT(n.kind == PatternNode::Kind::Node, "a wildcard cannot be instantiated");
  SPOOL_ASSERT(n.attr.kind != AttrPattern::Kind::Any, "an attribute wildcard cannot be instantiated");
  SPOOL_ASSERT(!n.any_children, "(op ...) cannot be instantiated");
  const uint32_t* index = pattern.children.data() + n.first_child;
  if (n.arity <= 4) {
    ClassId k[4];
    for (uint32_t i = 0; i < n.arity; ++i) k[i] = built[index[i]];
    return f(std::span<const ClassId>(k, n.arity));
  }
  std::vector<ClassId> k(n.arity);
  for (uint32_t i = 0; i < n.arity; ++i) k[i] = built[index[i]];
  return f(std::span<const ClassId>(k));
}

}  // namespace

bool instantiate_into(EGraph& graph, const Pattern& pattern, const ClassId* classes, const AttrId* attrs,
                      std::vector<ClassId>& scratch, ClassId target, std::string_view reason) {
  const size_t size = pattern.nodes.size();
  const PatternNode* nodes = pattern.nodes.data();
  const PatternNode& root = nodes[size - 1];
  if (root.kind != PatternNode::Kind::Node)
    return graph.merge(instantiate(graph, pattern, classes, attrs, scratch), target, reason);
  // The classes of the pattern's nodes, on the stack for a small pattern.
  constexpr size_t kSmall = 16;
  ClassId small[kSmall];
  ClassId* built = small;
  if (size > kSmall) {
    scratch.resize(size);
    built = scratch.data();
  }
  for (size_t i = 0; i + 1 < size; ++i) {
    const PatternNode& n = nodes[i];
    if (n.kind == PatternNode::Kind::Var) {
      built[i] = classes[n.var];
      continue;
    }
    const AttrId attr = n.attr.kind == AttrPattern::Kind::Var ? attrs[n.attr.var] : n.attr.id;
    built[i] = with_kids(pattern, n, built, [&](std::span<const ClassId> kids) { return graph.add(n.op, attr, kids); });
  }
  const AttrId attr = root.attr.kind == AttrPattern::Kind::Var ? attrs[root.attr.var] : root.attr.id;
  return with_kids(pattern, root, built, [&](std::span<const ClassId> kids) {
    return graph.add_to_class(root.op, attr, kids, target, reason);
  });
}

Builder compile_builder(const Pattern& pattern) {
  Builder b;
  const PatternNode& root = pattern.root_node();
  if (root.kind == PatternNode::Kind::Var) {
    b.var = root.var;
    return b;
  }
  std::vector<uint32_t> step_of(pattern.nodes.size(), UINT32_MAX);
  for (uint32_t i = 0; i < pattern.nodes.size(); ++i) {
    const PatternNode& n = pattern.nodes[i];
    if (n.kind == PatternNode::Kind::Var) continue;
    if (n.kind == PatternNode::Kind::Wildcard) fail("a wildcard cannot be instantiated");
    if (n.attr.kind == AttrPattern::Kind::Any) fail("an attribute wildcard cannot be instantiated");
    if (n.any_children) fail("(op ...) cannot be instantiated");
    Builder::Step st;
    st.op = n.op;
    st.attr_var = n.attr.kind == AttrPattern::Kind::Var;
    st.attr = st.attr_var ? n.attr.var : n.attr.id.value;
    st.first_kid = static_cast<uint32_t>(b.kids.size());
    st.arity = n.arity;
    for (uint32_t k : pattern.kids(n)) {
      const PatternNode& kid = pattern.nodes[k];
      if (kid.kind == PatternNode::Kind::Wildcard) fail("a wildcard cannot be instantiated");
      b.kids.push_back(kid.kind == PatternNode::Kind::Var ? kid.var : Builder::kStep | step_of[k]);
    }
    step_of[i] = static_cast<uint32_t>(b.steps.size());
    b.steps.push_back(st);
  }
  return b;
}

namespace {

// build_into() with `built` holding a class per step.
inline bool build_steps(EGraph& graph, const Builder& builder, const ClassId* classes, const AttrId* attrs,
                        ClassId target, std::string_view reason, ClassId* built) {
  const uint32_t* all_kids = builder.kids.data();
  // Calls f(children) with the children of step `st`, on the stack up to four.
  auto with_kids = [&](const Builder::Step& st, auto&& f) {
    const uint32_t* src = all_kids + st.first_kid;
    auto kid = [&](uint32_t i) { return src[i] & Builder::kStep ? built[src[i] & ~Builder::kStep] : classes[src[i]]; };
    if (st.arity <= 4) {
      ClassId k[4];
      for (uint32_t i = 0; i < st.arity; ++i) k[i] = kid(i);
      return f(std::span<const ClassId>(k, st.arity));
    }
    std::vector<ClassId> k(st.arity);
    for (uint32_t i = 0; i < st.arity; ++i) k[i] = kid(i);
    return f(std::span<const ClassId>(k));
  };
  const size_t last = builder.steps.size() - 1;
  for (size_t s = 0; s < last; ++s) {
    const Builder::Step& st = builder.steps[s];
    const AttrId attr = st.attr_var ? attrs[st.attr] : AttrId{st.attr};
    built[s] = with_kids(st, [&](std::span<const ClassId> kids) { return graph.add(st.op, attr, kids); });
  }
  const Builder::Step& root = builder.steps[last];
  const AttrId attr = root.attr_var ? attrs[root.attr] : AttrId{root.attr};
  return with_kids(
      root, [&](std::span<const ClassId> kids) { return graph.add_to_class(root.op, attr, kids, target, reason); });
}

// A right-hand side of many steps, its classes on the heap (kept out of
// build_into() so the common case has a small frame).
[[gnu::noinline]] bool build_big(EGraph& graph, const Builder& builder, const ClassId* classes, const AttrId* attrs,
                                 ClassId target, std::string_view reason) {
  std::vector<ClassId> built(builder.steps.size());
  return build_steps(graph, builder, classes, attrs, target, reason, built.data());
}

}  // namespace

bool build_into(EGraph& graph, const Builder& builder, const ClassId* classes, const AttrId* attrs, ClassId target,
                std::string_view reason) {
  if (builder.steps.empty()) return graph.merge(classes[builder.var], target, reason);
  // The classes built so far, on the stack for a small pattern.
  constexpr size_t kSmall = 8;
  if (builder.steps.size() > kSmall) return build_big(graph, builder, classes, attrs, target, reason);
  ClassId built[kSmall];
  return build_steps(graph, builder, classes, attrs, target, reason, built);
}

ClassId add_ground(EGraph& graph, const Pattern& pattern) {
  if (!pattern.ground()) fail("add_ground: the pattern has variables or attribute patterns");
  std::vector<ClassId> scratch;
  return instantiate(graph, pattern, nullptr, nullptr, scratch);
}

ClassId add_expr(EGraph& graph, std::string_view text, const ParseOptions& options) {
  Vars vars;
  Pattern p = parse_pattern(graph.language(), text, vars, options).take();
  return add_ground(graph, p);
}

std::optional<ClassId> lookup_expr(EGraph& graph, std::string_view text, const ParseOptions& options) {
  Vars vars;
  Pattern p = parse_pattern(graph.language(), text, vars, options).take();
  if (!p.ground()) fail("lookup_expr: '{}' is not a ground term", text);
  return lookup_ground(graph, p);
}

std::optional<ClassId> lookup_ground(EGraph& graph, const Pattern& p) {
  if (!p.ground()) fail("lookup_ground: the pattern has variables or attribute patterns");
  boost::container::small_vector<ClassId, 16> scratch(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const PatternNode& n = p.nodes[i];
    ChildBuf kids;
    for (uint32_t k : p.kids(n)) kids.push_back(scratch[k]);
    auto c = graph.lookup(n.op, n.attr.id, kids.span());
    if (!c) return std::nullopt;
    scratch[i] = *c;
  }
  return scratch[p.root()];
}

// ---- compiler -------------------------------------------------------------------

namespace {

constexpr uint32_t kUnset = UINT32_MAX;

struct Compiler {
  const std::vector<Pattern>& patterns;
  const Vars& vars;
  Query q;
  std::vector<bool> attr_bound;

  void node(const Pattern& p, uint32_t i, uint32_t reg) {
    const PatternNode& n = p.nodes[i];
    switch (n.kind) {
      case PatternNode::Kind::Wildcard: return;
      case PatternNode::Kind::Var:
        if (q.var_reg[n.var] == kUnset) {
          q.var_reg[n.var] = reg;
        } else if (q.var_reg[n.var] != reg) {
          Instr c;
          c.kind = Instr::Kind::Compare;
          c.reg = q.var_reg[n.var];
          c.other = reg;
          q.program.push_back(c);
        }
        return;
      case PatternNode::Kind::Node: break;
    }
    Instr b;
    b.kind = Instr::Kind::Bind;
    b.op = n.op;
    b.reg = reg;
    b.other = q.num_regs;
    b.arity = n.arity;
    b.any_arity = n.any_children;
    b.attr_kind = n.attr.kind;
    if (n.attr.kind == AttrPattern::Kind::Exact) b.attr = n.attr.id.value;
    if (n.attr.kind == AttrPattern::Kind::Var) {
      b.attr = n.attr.var;
      b.attr_binds = !attr_bound[n.attr.var];
      attr_bound[n.attr.var] = true;
    }
    q.num_regs += n.arity;
    q.program.push_back(b);
    const uint32_t out = b.other;
    auto kids = p.kids(n);
    for (uint32_t k = 0; k < kids.size(); ++k) node(p, kids[k], out + k);
  }
};

}  // namespace

Result<Query> compile_query(const std::vector<Pattern>& patterns, const std::vector<std::optional<uint32_t>>& binders,
                            const Vars& vars) {
  Compiler c{patterns, vars, {}, std::vector<bool>(vars.attrs.size(), false)};
  c.q.var_reg.assign(vars.classes.size(), kUnset);
  c.q.num_attr_vars = static_cast<uint32_t>(vars.attrs.size());
  if (patterns.empty()) {
    Diagnostic d;
    d.message = "a rule needs at least one pattern";
    return d;
  }
  for (size_t i = 0; i < patterns.size(); ++i) {
    const Pattern& p = patterns[i];
    const PatternNode& root = p.root_node();
    std::optional<uint32_t> binder = i < binders.size() ? binders[i] : std::nullopt;
    uint32_t reg = 0;
    if (i == 0) {
      c.q.root_op = root.kind == PatternNode::Kind::Node ? root.op : OpId{};
      if (binder) c.q.var_reg[*binder] = 0;
    } else if (binder && c.q.var_reg[*binder] != kUnset) {
      reg = c.q.var_reg[*binder];
    } else if (root.kind == PatternNode::Kind::Var && c.q.var_reg[root.var] != kUnset) {
      reg = c.q.var_reg[root.var];
    } else {
      reg = c.q.num_regs++;
      Instr s;
      s.kind = Instr::Kind::Scan;
      s.reg = reg;
      s.op = root.kind == PatternNode::Kind::Node ? root.op : OpId{};
      c.q.program.push_back(s);
      if (binder) c.q.var_reg[*binder] = reg;
    }
    c.q.pattern_roots.push_back(reg);
    c.node(p, p.root(), reg);
  }
  return std::move(c.q);
}

// ---- the matching machine -------------------------------------------------------

std::span<const ClassId> query_candidates(const EGraph& graph, const Query& query) {
  if (query.root_op.valid()) return graph.classes_with_op(query.root_op);
  return graph.classes();
}

namespace {

class Machine {
 public:
  Machine(const EGraph& g, const Query& q, MatchSet& out, ClassId* regs, AttrId* aregs, uint32_t since)
      : g_(g),
        q_(q),
        out_(out),
        regs_(regs),
        aregs_(aregs),
        since_(since),
        node_mark_(since == kAllMatches ? 0 : g.nodes_at(since)),
        var_reg_begin_(q.var_reg.data()),
        var_reg_end_(q.var_reg.data() + q.var_reg.size()) {}

  bool changed(ClassId c) const { return since_ == kAllMatches || g_.class_stamp(c) > since_; }
  bool merged(ClassId c) const { return since_ == kAllMatches || g_.class_merge_stamp(c) > since_; }
  // Whether a match may be new before any node is bound: the candidate
  // root class of a pattern that is a bare variable must have changed; a
  // pattern rooted at an op is decided by the nodes it binds.
  bool fresh_root(ClassId c) const { return q_.root_op.valid() ? since_ == kAllMatches : changed(c); }

  // `fresh`: the match so far visits a class changed after `since_`.
  void run(size_t pc, bool fresh) {
    if (aborted_) return;
    if (pc == q_.program.size()) {
      if (fresh) emit();
      return;
    }
    const Instr& in = q_.program[pc];
    switch (in.kind) {
      case Instr::Kind::Compare:
        // Two uses of one variable meet in one class: new if it was unioned since.
        if (regs_[in.reg] == regs_[in.other]) run(pc + 1, fresh || merged(regs_[in.reg]));
        return;
      case Instr::Kind::Scan: {
        std::span<const ClassId> cands = in.op.valid() ? g_.classes_with_op(in.op) : g_.classes();
        for (ClassId c : cands) {
          regs_[in.reg] = c;
          run(pc + 1, fresh || changed(c));
          if (aborted_) return;
        }
        return;
      }
      case Instr::Kind::Bind: {
        // A node bound in a child's class: new if the node is, or if the
        // class was unioned since (the node may have been elsewhere then).
        // The root's class may have been unioned: its old nodes matched
        // (in their class then) all the same.
        const bool now_fresh = fresh || (in.reg != 0 && merged(regs_[in.reg]));
        // The last instruction emits directly (one call less per match).
        const bool last = pc + 1 == q_.program.size();
        for (NodeId n : g_.sorted_class_nodes(regs_[in.reg], in.op)) {
          const ENodeRef node = g_.node(n);
          if (!in.any_arity && node.children.size() != in.arity) continue;
          switch (in.attr_kind) {
            case AttrPattern::Kind::Any: break;
            case AttrPattern::Kind::Exact:
              if (node.attr.value != in.attr) continue;
              break;
            case AttrPattern::Kind::Var:
              if (in.attr_binds)
                aregs_[in.attr] = node.attr;
              else if (aregs_[in.attr] != node.attr)
                continue;
              break;
          }
          for (uint32_t k = 0; k < in.arity; ++k) regs_[in.other + k] = node.children[k];
          const bool f = now_fresh || n.value >= node_mark_;
          if (!last)
            run(pc + 1, f);
          else if (f)
            emit();
          if (aborted_) return;
        }
        return;
      }
    }
  }

  // Matches emitted so far; the run aborts once they exceed `cap`.
  size_t count = 0;
  size_t cap = SIZE_MAX;
  bool aborted() const { return aborted_; }

 private:
  void emit() {
    // One capacity check per match, then the row written in place.
    ClassId* row = out_.classes.extend(1 + static_cast<size_t>(var_reg_end_ - var_reg_begin_));
    *row++ = regs_[0];
    for (const uint32_t* r = var_reg_begin_; r != var_reg_end_; ++r) *row++ = *r == kUnset ? ClassId{} : regs_[*r];
    if (q_.num_attr_vars != 0) std::copy(aregs_, aregs_ + q_.num_attr_vars, out_.attrs.extend(q_.num_attr_vars));
    if (++count > cap) aborted_ = true;
  }

  bool aborted_ = false;
  const EGraph& g_;
  const Query& q_;
  MatchSet& out_;
  ClassId* regs_;
  AttrId* aregs_;
  uint32_t since_;
  uint32_t node_mark_;  // nodes from this id on are new since `since_`
  const uint32_t* var_reg_begin_;
  const uint32_t* var_reg_end_;
};

}  // namespace

bool search(const EGraph& graph, const Query& query, std::span<const ClassId> candidates, MatchSet& out,
            const std::atomic<bool>* stop, uint32_t since, MatchBudget* budget) {
  out.num_vars = static_cast<uint32_t>(query.var_reg.size());
  out.num_attr_vars = query.num_attr_vars;
  // Room for a few matches up front: a buffer filled from empty would
  // otherwise be regrown at 1, 2, 4, 8 and 16 matches.
  if (out.classes.capacity() == 0 && !candidates.empty())
    out.classes.reserve(std::min<size_t>(candidates.size(), 16) * (query.var_reg.size() + 1));
  boost::container::small_vector<ClassId, 32> regs(query.num_regs);
  boost::container::small_vector<AttrId, 8> aregs(query.num_attr_vars);
  Machine m(graph, query, out, regs.data(), aregs.data(), since);
  bool complete = true;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (stop && (i & 63) == 0 && stop->load(std::memory_order_relaxed)) {
      complete = false;
      break;
    }
    if (budget) {
      // Over the limit once this search's matches and those of the
      // finished searches sharing the budget exceed it.
      const size_t others = budget->found.load(std::memory_order_relaxed);
      if (others > budget->limit) {
        complete = false;
        break;
      }
      m.cap = budget->limit - others;
    }
    regs[0] = candidates[i];
    m.run(0, m.fresh_root(candidates[i]));
    if (m.aborted()) {
      complete = false;
      break;
    }
  }
  if (budget) budget->found.fetch_add(m.count, std::memory_order_relaxed);
  return complete;
}

}  // namespace spool::egraph
