#pragma once
// Rewrite rules: named values built from patterns, guards and actions.
//
// A rule has one or more left-hand patterns (a multi-pattern rule matches
// all of them with consistent variables), guards (`:when`, C++ predicates
// registered by name) checked on each match when it is applied, and actions:
// `union` builds a right-hand pattern and merges it with a matched class;
// `apply` calls a custom applier registered by name (for rewrites that
// compute attributes) and merges what it returns. A plain rewrite `l => r`
// is one pattern and one union with the root of `l`.

#include <spool/egraph/pattern.hpp>
#include <spool/support/diagnostic.hpp>

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spool::egraph {

// What a guard or applier sees of a match: the matched root class and its
// arguments as written in the rule, split by kind (class variables in
// `args`, attribute variables in `attr_args`, each in written order).
struct MatchView {
  ClassId root;
  std::span<const ClassId> args;
  std::span<const AttrId> attr_args;
};

using GuardFn = std::function<bool(const EGraph&, const MatchView&)>;
// Returns the class to merge with the action's target, or nullopt for none.
using ApplierFn = std::function<std::optional<ClassId>(EGraph&, const MatchView&)>;

// Guards and appliers by name, for rules written as text.
class Registry {
 public:
  void add_guard(std::string name, GuardFn fn);
  void add_applier(std::string name, ApplierFn fn);
  const GuardFn* guard(std::string_view name) const;
  const ApplierFn* applier(std::string_view name) const;

 private:
  std::map<std::string, GuardFn, std::less<>> guards_;
  std::map<std::string, ApplierFn, std::less<>> appliers_;
};

struct PatternSpec {
  std::string binder;  // "" or "?name": names the pattern's root class
  std::string text;
  SourceLoc loc;       // where `text` starts (diagnostics point into it)
};
struct GuardSpec {
  std::string name;
  std::vector<std::string> args;  // variable names
  SourceLoc loc;
};
struct ActionSpec {
  enum class Kind { Union, Apply };
  Kind kind = Kind::Union;
  std::string target;  // a class variable; "" = the root of the first pattern
  std::string pattern;  // Union: the pattern to build
  std::string applier;  // Apply: a registered applier
  std::vector<std::string> args;
  SourceLoc loc;
};

struct RuleSpec {
  std::string name;
  SourceLoc loc;
  std::vector<PatternSpec> lhs;
  std::vector<GuardSpec> guards;
  std::vector<ActionSpec> actions;
};

struct Rule {
  struct Args {
    std::vector<uint32_t> classes;  // class variable indices
    std::vector<uint32_t> attrs;    // attribute variable indices
  };
  struct Guard {
    std::string name;
    GuardFn fn;
    Args args;
  };
  struct Action {
    ActionSpec::Kind kind = ActionSpec::Kind::Union;
    uint32_t target = UINT32_MAX;  // class variable; UINT32_MAX = the first pattern's root
    Pattern pattern;
    Builder builder;  // Union: `pattern` compiled for building
    ApplierFn applier;
    Args args;
    // Union: the first pattern node whose children are all variables (its
    // lookup can be predicted from the match alone), or UINT32_MAX.
    uint32_t first_lookup = UINT32_MAX;
  };

  std::string name;
  SourceLoc loc;
  std::string reason;  // "rule 'name'" or "rule 'name' (file:line)", for refused merges
  Vars vars;
  std::vector<Pattern> lhs;
  Query query;
  std::vector<Guard> guards;
  std::vector<Action> actions;
};

// Compiles a rule; a bad pattern, an unknown guard/applier or a variable
// used on the right but never bound on the left is a diagnostic.
[[nodiscard]] Result<Rule> compile_rule(Language& language, const Registry& registry, const RuleSpec& spec,
                                        const ParseOptions& options = {});

// Conveniences for rules written in C++ (they throw spool::Error on a bad
// rule). `guards` are (name, args) calls into `registry`.
Rule rewrite(Language& language, std::string name, std::string_view lhs, std::string_view rhs,
             const Registry* registry = nullptr, std::vector<GuardSpec> guards = {},
             const ParseOptions& options = {});
// Both directions: rules `name` and `name-rev`.
std::vector<Rule> birewrite(Language& language, const std::string& name, std::string_view lhs,
                            std::string_view rhs, const ParseOptions& options = {});

}  // namespace spool::egraph
