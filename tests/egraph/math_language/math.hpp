#pragma once
// A small arithmetic language on the generic engine: the workload of the
// engine's tests and benchmark (the same language, rules and goals as egg's
// math suite, so the two engines can be compared on equal terms).
//
//   + - * / pow d (binary), ln sqrt sin cos (unary), numbers, symbols
//
// Its analysis folds constants (+ - * / of known numbers) and refuses to
// merge two classes holding different constants. As in egg's suite, the
// guard `is-not-zero` holds for every class not known to be the constant 0,
// so symbols are assumed non-zero where a rule cancels them.

#include <spool/egraph/egraph.hpp>
#include <spool/egraph/rule.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spool::egraph::math {

struct MathLanguage {
  Language language;
  OpId add, sub, mul, div, pow, d, ln, sqrt, sin, cos, num, sym;
};

// A language with the ops registered (numbers are floats).
std::unique_ptr<MathLanguage> make_language();

// The constant-folding analysis; `constant(c)` is the class's known value.
class ConstantFold : public Analysis {
 public:
  explicit ConstantFold(const MathLanguage& lang) : lang_(lang) {}
  std::optional<double> constant(ClassId c) const { return data_[c.value]; }

  void make(const EGraph& graph, ClassId c, NodeId n) override;
  std::string check_merge(const EGraph& graph, ClassId a, ClassId b) const override;
  bool merge(ClassId into, ClassId from) override;
  bool remake(const EGraph& graph, ClassId c, NodeId n) override;
  void modify(EGraph& graph, ClassId c) override;
  std::string check(const EGraph& graph, ClassId c) const override;
  size_t memory_bytes() const override { return data_.capacity() * sizeof(data_[0]); }
  std::string describe(ClassId c) const override;

 private:
  std::optional<double> fold(const EGraph& graph, NodeId n) const;
  const MathLanguage& lang_;
  std::vector<std::optional<double>> data_;
};

// An e-graph over `lang` with the constant-folding analysis.
std::unique_ptr<EGraph> make_egraph(MathLanguage& lang);

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

}  // namespace spool::egraph::math
