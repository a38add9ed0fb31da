#pragma once
// egg's lambda-calculus suite on the generic engine: egg 0.9.5's
// tests/lambda.rs (https://github.com/egraphs-good/egg, tag v0.9.5) -- the
// language, its analysis (free variables and constants), its rules with
// capture-avoiding substitution, and every test_fn! goal with its runner
// settings.
//
//   var (unary), + = app lam fix (binary), let if (ternary),
//   integers, true, false, symbols
//
// The analysis keeps per class the set of free variables (the symbol
// classes a term reads; a merge keeps the intersection, as egg's does) and
// a known constant (an integer or a boolean; + and = fold), adding the
// constant's leaf to its class.

#include <spool/egraph/egraph.hpp>
#include <spool/egraph/rule.hpp>
#include <spool/egraph/runner.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace spool::egraph::lambda {

struct LambdaLanguage {
  Language language;
  OpId var, add, eq, app, lam, let, fix, if_, num, sym, true_, false_;
};

std::unique_ptr<LambdaLanguage> make_language();

struct Constant {
  bool is_bool = false;
  int64_t value = 0;  // the integer, or 0/1 for false/true
  bool operator==(const Constant&) const = default;
};

class LambdaAnalysis : public Analysis {
 public:
  explicit LambdaAnalysis(const LambdaLanguage& lang) : lang_(lang) {}
  // Free variables (symbol classes), sorted; and the known constant. The
  // set's reference stays valid while the e-graph grows.
  const std::vector<ClassId>& free(ClassId c) const { return sets_[data_[c.value].free]; }
  std::optional<Constant> constant(ClassId c) const { return constant_of(data_[c.value]); }

  void make(const EGraph& graph, ClassId c, NodeId n) override;
  std::string check_merge(const EGraph& graph, ClassId a, ClassId b) const override;
  MergeChange merge(ClassId into, ClassId from) override;
  bool remake(const EGraph& graph, ClassId c, NodeId n) override;
  void modify(EGraph& graph, ClassId c) override;
  size_t memory_bytes() const override;

 private:
  // Per class id: its free-variable set as an index into sets_, and its
  // constant. Most classes share one of a few sets (none, {x}, {x, y}),
  // so each distinct set is kept once: 16 bytes a class id (dead ids
  // included) instead of a vector and an optional of 48 and an allocation.
  enum class Kind : uint8_t { None, Int, Bool };
  struct Data {
    int64_t value = 0;
    uint32_t free = 0;  // sets_[0] is the empty set
    Kind kind = Kind::None;
  };
  static std::optional<Constant> constant_of(const Data& d) {
    if (d.kind == Kind::None) return std::nullopt;
    return Constant{d.kind == Kind::Bool, d.value};
  }
  static void set_constant(Data& d, const std::optional<Constant>& k) {
    d.kind = !k ? Kind::None : k->is_bool ? Kind::Bool : Kind::Int;
    d.value = k ? k->value : 0;
  }
  uint32_t intern(const std::vector<ClassId>& set);
  // `into`'s set keeps the variables also in set `other`; whether it changed.
  bool intersect(Data& into, uint32_t other);
  Data eval(const EGraph& graph, NodeId n);
  const LambdaLanguage& lang_;
  std::vector<Data> data_;
  struct SetHash {
    size_t operator()(const std::vector<ClassId>& set) const;
  };
  std::deque<std::vector<ClassId>> sets_{std::vector<ClassId>{}};  // grows without moving its sets
  std::unordered_map<std::vector<ClassId>, uint32_t, SetHash> set_ids_{{std::vector<ClassId>{}, 0}};
  std::vector<ClassId> scratch_;
};

std::unique_ptr<EGraph> make_egraph(LambdaLanguage& lang);

// egg's rules(): if-true ... let-lam-diff (capture-avoiding).
std::vector<Rule> rules(LambdaLanguage& lang);

struct Goal {
  std::string name;
  std::string start;
  std::vector<std::string> goals;  // patterns (may hold ?variables)
  size_t iter_limit = 30;
  size_t node_limit = 10'000;
  double time_limit_ms = 5'000;
  bool provable = true;  // egg's should_panic tests: the goal must not be proven
  bool slow = false;     // egg runs it in release builds only
};
const std::vector<Goal>& goals();

struct Result {
  bool proven = false;
  RunReport report;
  size_t classes = 0, nodes = 0;
};
// As egg's test_fn!: the goals checked after every iteration (`check`: and
// the e-graph's invariants after every rebuild).
Result run_goal(LambdaLanguage& lang, const Goal& goal, std::span<const Rule> rules, int threads = 1,
                bool check = false);

}  // namespace spool::egraph::lambda
