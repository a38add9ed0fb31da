#pragma once
// A small arithmetic language on the generic engine: the workload of the
// engine's tests and benchmark (the same language, rules and goals as egg's
// math suite, so the two engines can be compared on equal terms).
//
//   + - * / pow d i (binary), ln sqrt sin cos (unary), numbers, symbols
//
// Its analysis folds constants (+ - * / of known numbers) and refuses to
// merge two classes holding different constants; with pruning (as egg's
// math suite does) a class with a known value keeps only its leaves. As in
// egg's suite, the guard `is-not-zero` holds for every class not known to
// be the constant 0, so symbols are assumed non-zero where a rule cancels
// them.

#include <spool/egraph/egraph.hpp>
#include <spool/egraph/rule.hpp>
#include <spool/egraph/runner.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace spool::egraph::math {

struct MathLanguage {
  Language language;
  OpId add, sub, mul, div, pow, d, integral, ln, sqrt, sin, cos, num, sym;
};

// A language with the ops registered (numbers are floats).
std::unique_ptr<MathLanguage> make_language();

// The constant-folding analysis; `constant(c)` is the class's known value.
class ConstantFold : public Analysis {
 public:
  // `prune`: a class with a known value keeps only its leaves (egg's math
  // suite: `egraph[id].nodes.retain(|n| n.is_leaf())` in its modify).
  explicit ConstantFold(const MathLanguage& lang, bool prune = false) : lang_(lang), prune_(prune) {}
  std::optional<double> constant(ClassId c) const { return data_[c.value]; }

  void make(const EGraph& graph, ClassId c, NodeId n) override;
  std::string check_merge(const EGraph& graph, ClassId a, ClassId b) const override;
  MergeChange merge(ClassId into, ClassId from) override;
  bool remake(const EGraph& graph, ClassId c, NodeId n) override;
  void modify(EGraph& graph, ClassId c) override;
  std::string check(const EGraph& graph, ClassId c) const override;
  size_t memory_bytes() const override { return data_.capacity() * sizeof(data_[0]); }
  std::string describe(ClassId c) const override;

 private:
  std::optional<double> fold(const EGraph& graph, NodeId n) const;
  const MathLanguage& lang_;
  bool prune_;
  std::vector<std::optional<double>> data_;
  // The number attribute of each value modify() added, by bit pattern (so a
  // class's constant is interned once per graph, not per rebuild).
  std::unordered_map<uint64_t, AttrId> number_attr_;
};

// An e-graph over `lang` with the constant-folding analysis.
std::unique_ptr<EGraph> make_egraph(MathLanguage& lang, bool prune = false);

// Guards: is-not-zero ?x, is-sym ?x, is-const ?x, is-const-or-distinct-var ?c ?x.
Registry make_registry(const MathLanguage& lang);

// The two rules of the associativity workloads: comm-add and assoc-add.
std::vector<Rule> assoc_comm_rules(MathLanguage& lang);
// The simplification suite: commutativity, associativity, distribute/factor,
// identities, guarded cancellation, power rules, derivative rules.
std::vector<Rule> simplify_rules(MathLanguage& lang);

// `(+ 1 (+ 2 (+ ... (+ n-1 n))))` and its mirror `(+ n (+ n-1 ... (+ 2 1)))`.
std::string sum_chain(int n);
std::string reversed_sum_chain(int n);

struct Goal {
  std::string name;
  std::string lhs;
  std::string rhs;
};
// The goals the simplification suite proves.
const std::vector<Goal>& goals();

// ---- egg's math suite -------------------------------------------------------------
//
// egg 0.9.5's tests/math.rs (https://github.com/egraphs-good/egg, tag
// v0.9.5): its rules (egg_rules: the simplification rules above plus the
// seven integration rules), its constant folding with pruning, and every
// test_fn! goal with the runner settings the test gives it.

std::vector<Rule> egg_rules(MathLanguage& lang);

struct EggGoal {
  std::string name;
  std::string start;
  std::vector<std::string> goals;
  // Terms egg's runner is given before `start` (`with_expr`).
  std::vector<std::string> extra;
  size_t iter_limit = 30;
  size_t node_limit = 10'000;
  double time_limit_ms = 5'000;
  bool backoff = true;   // else egg's SimpleScheduler
  bool assoc_only = false;  // math_associate_adds: comm-add and assoc-add, no analysis
  bool provable = true;     // math_fail: egg expects "Could not prove goal 0"
};
const std::vector<EggGoal>& egg_goals();

struct EggResult {
  bool proven = false;  // every goal is in the start term's class
  RunReport report;     // report.iterations: iterations that searched and applied
  size_t classes = 0;
  size_t nodes = 0;        // hashcons entries (egg's total_size, its node limit)
  size_t class_nodes = 0;  // nodes listed in classes (egg's total_number_of_nodes)
};
// Runs one goal as egg's test_fn! does: the extra terms, then the start
// term; the goal checked after every iteration (egg's hook checks it
// before the next, counting one more iteration than the ones that ran).
// `check`: the e-graph's invariants checked after every rebuild.
EggResult run_egg_goal(MathLanguage& lang, const EggGoal& goal, std::span<const Rule> rules, int threads = 1,
                       bool check = false);

}  // namespace spool::egraph::math
