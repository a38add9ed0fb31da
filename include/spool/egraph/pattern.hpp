#pragma once
// Patterns: terms with variables, wildcards and attribute patterns; their
// S-expression reader; and their compiled form for matching.
//
// Text form (the rules language of issue 4 builds on this reader):
//   (op child...)        an op node; `op` is a name from the OpTable
//   (op[ATTR] child...)  with an attribute pattern: `[?k]` binds or compares
//                        an attribute variable, `[_]` matches any attribute,
//                        anything else is parsed into an exact attribute (by
//                        the client's parser, else as int/float/symbol)
//   (op[ATTR] ...)       a variadic op with any number of children, none
//                        bound (left-hand sides only: an applier reads them)
//   ?x                   a class variable (same name = same e-class)
//   _                    a wildcard (any e-class, binds nothing)
//   12, 1.5              a number leaf (OpTable::number_op)
//   name                 a zero-arity op, else a symbol leaf (OpTable::symbol_op)
//
// A rule's patterns share one variable table (Vars). A compiled Query
// matches all the patterns of a (multi-pattern) rule with a small
// backtracking machine, egg-style: Bind walks the nodes of one class that
// hold one op (class node lists are sorted by op, so it is a binary search),
// Compare checks a repeated variable, Scan starts a further pattern of a
// multi-pattern rule. The machine only reads the e-graph.

#include <spool/egraph/egraph.hpp>
#include <spool/support/diagnostic.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace spool::egraph {

// The variables of one rule: class variables and attribute variables.
struct Vars {
  std::vector<std::string> classes;
  std::vector<std::string> attrs;
  uint32_t class_var(std::string_view name);  // get or add
  uint32_t attr_var(std::string_view name);   // get or add
  std::optional<uint32_t> find_class(std::string_view name) const;
  std::optional<uint32_t> find_attr(std::string_view name) const;
};

struct AttrPattern {
  enum class Kind : uint8_t { Any, Exact, Var };
  Kind kind = Kind::Exact;  // Exact with AttrId{0}: "no attribute"
  AttrId id;
  uint32_t var = 0;
};

struct PatternNode {
  enum class Kind : uint8_t { Var, Wildcard, Node };
  Kind kind = Kind::Node;
  uint32_t var = 0;  // Var
  OpId op;           // Node
  AttrPattern attr;  // Node
  uint32_t first_child = 0;  // Node: index into Pattern::children
  uint32_t arity = 0;
  bool any_children = false;  // Node: written (op ...), matches any arity (arity 0 here)
};

// A pattern in post-order: children come before their parent, the root last.
struct Pattern {
  std::vector<PatternNode> nodes;
  std::vector<uint32_t> children;  // indices into nodes
  uint32_t root() const { return static_cast<uint32_t>(nodes.size() - 1); }
  const PatternNode& root_node() const { return nodes.back(); }
  std::span<const uint32_t> kids(const PatternNode& n) const {
    return std::span<const uint32_t>(children.data() + n.first_child, n.arity);
  }
  bool ground() const;  // no variables, wildcards, attribute patterns or `...`
  std::string str(const Language& language, const Vars& vars) const;
};

// Parses an attribute written between brackets for `op`; nullopt = not
// understood (the reader then reports an error at the attribute).
using AttrParser = std::function<std::optional<AttrId>(OpId op, std::string_view text)>;

struct ParseOptions {
  AttrParser attr_parser;  // consulted before the int/float/symbol fallback
  SourceLoc loc;           // where the text starts (for diagnostics); file "" = "<pattern>"
};

[[nodiscard]] Result<Pattern> parse_pattern(Language& language, std::string_view text, Vars& vars,
                                            const ParseOptions& options = {});

// A ground term parsed and added to the graph (variables are an error).
ClassId add_expr(EGraph& graph, std::string_view text, const ParseOptions& options = {});
// Adds a ground pattern (throws spool::Error if it is not ground).
ClassId add_ground(EGraph& graph, const Pattern& pattern);
// The class of a ground term if the graph already holds it; never adds.
std::optional<ClassId> lookup_expr(EGraph& graph, std::string_view text, const ParseOptions& options = {});
// The same for a ground pattern parsed once (throws spool::Error if it is
// not ground).
std::optional<ClassId> lookup_ground(EGraph& graph, const Pattern& pattern);

// Builds `pattern` in the graph with the given variable bindings; `scratch`
// is reused between calls so instantiation does not allocate once warm.
ClassId instantiate(EGraph& graph, const Pattern& pattern, const ClassId* classes, const AttrId* attrs,
                    std::vector<ClassId>& scratch);
// Builds `pattern` and merges it with `target` (the right-hand side of a
// rewrite); the root node goes straight into `target` when it is new.
// Returns whether the graph changed.
bool instantiate_into(EGraph& graph, const Pattern& pattern, const ClassId* classes, const AttrId* attrs,
                      std::vector<ClassId>& scratch, ClassId target, std::string_view reason);

// A right-hand side compiled for building (what a rule's union action runs
// per match): its op nodes in post-order, the root last, each child a class
// variable or an earlier step; a pattern that is a bare variable has no
// steps.
struct Builder {
  static constexpr uint32_t kStep = 0x8000'0000u;  // a child `kStep | s` is step s
  struct Step {
    OpId op;
    bool attr_var = false;
    uint32_t attr = 0;  // AttrId, or the attribute variable when attr_var
    uint32_t first_kid = 0, arity = 0;
  };
  std::vector<Step> steps;
  std::vector<uint32_t> kids;  // a class variable, or kStep | step
  uint32_t var = UINT32_MAX;   // no steps: the class variable the pattern is
};
// Throws spool::Error if the pattern cannot be built (a wildcard, an
// attribute wildcard, `(op ...)`).
Builder compile_builder(const Pattern& pattern);
// What instantiate_into() does, from the compiled form.
bool build_into(EGraph& graph, const Builder& builder, const ClassId* classes, const AttrId* attrs, ClassId target,
                std::string_view reason);

// ---- compiled matching ------------------------------------------------------

struct Instr {
  enum class Kind : uint8_t { Bind, Compare, Scan };
  Kind kind = Kind::Bind;
  AttrPattern::Kind attr_kind = AttrPattern::Kind::Any;
  bool attr_binds = false;  // Var: first occurrence binds, later ones compare
  OpId op;                  // Bind, Scan (invalid op in Scan: every class)
  uint32_t reg = 0;         // Bind: class register read; Compare: first; Scan: register written
  uint32_t other = 0;       // Bind: first output register; Compare: second register
  uint32_t arity = 0;       // Bind
  bool any_arity = false;   // Bind: (op ...), any number of children, none bound
  uint32_t attr = 0;        // AttrId (Exact) or attribute register (Var)
};

// All the patterns of one rule compiled into one program. Register 0 holds
// the candidate class of the first pattern's root.
struct Query {
  OpId root_op;  // invalid: the first pattern is a bare variable, every class is a candidate
  std::vector<Instr> program;
  uint32_t num_regs = 1;
  std::vector<uint32_t> var_reg;  // class variable -> register
  uint32_t num_attr_vars = 0;
  std::vector<uint32_t> pattern_roots;  // register of each pattern's root
};

// `binders[i]` (may be empty) names the root of pattern i; a name already
// bound by an earlier pattern starts that pattern from its class.
[[nodiscard]] Result<Query> compile_query(const std::vector<Pattern>& patterns,
                                          const std::vector<std::optional<uint32_t>>& binders,
                                          const Vars& vars);

// A growable array of ids that appends a row of `n` values in place (one
// capacity check per row, a block copy when it grows): what the matcher
// writes its matches into. Its storage is not initialised up front, so
// the capacity it grows into costs no memory until rows are written.
// (boost::container::vector with resize(n, default_init) does the same
// through its generic insert path: 2-4 % slower on assoc-add-7, egg-math
// and egg-lambda in egraph_bench.)
template <typename T>
class RowBuf {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  RowBuf() = default;
  RowBuf(const RowBuf& o) { *this = o; }
  RowBuf(RowBuf&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  RowBuf& operator=(const RowBuf& o) {
    if (this != &o) {
      size_ = 0;
      reserve(o.size_);
      if (o.size_ != 0) std::memcpy(data_, o.data_, o.size_ * sizeof(T));
      size_ = o.size_;
    }
    return *this;
  }
  RowBuf& operator=(RowBuf&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~RowBuf() { release(); }

  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  const T* data() const { return data_; }
  const T& operator[](size_t i) const { return data_[i]; }
  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) regrow(n);
  }
  void push_back(T v) { *extend(1) = v; }
  // Appends `n` slots for the caller to fill and returns the first.
  T* extend(size_t n) {
    if (cap_ - size_ < n) regrow(std::max(2 * cap_, size_ + n));
    T* p = data_ + size_;
    size_ += n;
    return p;
  }

 private:
  void regrow(size_t n) {
    T* d = std::allocator<T>().allocate(n);
    if (size_ != 0) std::memcpy(d, data_, size_ * sizeof(T));
    release();
    data_ = d;
    cap_ = n;
  }
  void release() {
    if (data_) std::allocator<T>().deallocate(data_, cap_);
    data_ = nullptr;
    cap_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0, cap_ = 0;
};

// Matches found by one search: for each match, the classes of every class
// variable and the values of every attribute variable, plus the root class.
struct MatchSet {
  uint32_t num_vars = 0;
  uint32_t num_attr_vars = 0;
  RowBuf<ClassId> classes;  // (1 + num_vars) per match: root, then variables
  RowBuf<AttrId> attrs;     // num_attr_vars per match
  size_t size() const { return num_vars + 1 == 0 ? 0 : classes.size() / (num_vars + 1); }
  void clear() {
    classes.clear();
    attrs.clear();
  }
  ClassId root(size_t i) const { return classes[i * (num_vars + 1)]; }
  const ClassId* vars(size_t i) const { return classes.data() + i * (num_vars + 1) + 1; }
  const AttrId* attr_vars(size_t i) const { return attrs.data() + i * num_attr_vars; }
};

// Candidate root classes of a query (requires a clean graph).
std::span<const ClassId> query_candidates(const EGraph& graph, const Query& query);

// Appends to `out` every match whose first root is in `candidates`, in
// candidate order. Read-only on the graph; safe to run concurrently. Stops
// early (returning false) when `stop` becomes true; checks it every few
// candidates. With `since` set, only matches that may be new since
// generation `since` are reported: those binding a node added after it, or
// whose classes that must meet (a child and the node bound in it, two uses
// of one variable) were unioned after it, or, for a pattern that is a bare
// variable, whose class changed after it (the others were already there at
// that generation).
//
// With a `budget`, the search stops as soon as more than `budget->limit`
// matches were found by this call and the calls sharing the budget that
// finished before it (each adds its count to `found` when it returns): the
// chunks of one rule's candidates share one budget, so a rule over its
// limit is known to be over it, whatever the number of threads, without
// finding all its matches. A search that stays within the limit finds every
// match.
struct MatchBudget {
  size_t limit = SIZE_MAX;
  std::atomic<size_t> found{0};
  bool exceeded() const { return found.load(std::memory_order_relaxed) > limit; }
};
inline constexpr uint32_t kAllMatches = UINT32_MAX;
bool search(const EGraph& graph, const Query& query, std::span<const ClassId> candidates, MatchSet& out,
            const std::atomic<bool>* stop = nullptr, uint32_t since = kAllMatches, MatchBudget* budget = nullptr);

}  // namespace spool::egraph
