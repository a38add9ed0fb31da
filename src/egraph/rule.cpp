// Compiling rule specs: parse the patterns against one variable table,
// compile the left-hand side into a Query, resolve guards and appliers.

#include <spool/egraph/rule.hpp>
#include <spool/support/error.hpp>

namespace spool::egraph {

void Registry::add_guard(std::string name, GuardFn fn) { guards_[std::move(name)] = std::move(fn); }
void Registry::add_applier(std::string name, ApplierFn fn) { appliers_[std::move(name)] = std::move(fn); }
const GuardFn* Registry::guard(std::string_view name) const {
  auto it = guards_.find(name);
  return it == guards_.end() ? nullptr : &it->second;
}
const ApplierFn* Registry::applier(std::string_view name) const {
  auto it = appliers_.find(name);
  return it == appliers_.end() ? nullptr : &it->second;
}

namespace {

Diagnostic diag(const SourceLoc& loc, std::string message) {
  Diagnostic d;
  d.loc = loc;
  d.message = std::move(message);
  return d;
}

ParseOptions at(const ParseOptions& base, const SourceLoc& loc) {
  ParseOptions o = base;
  if (loc.line > 0) o.loc = loc;
  return o;
}

// Variables bound by the left-hand side (every class variable it mentions).
bool bound_in(const Query& q, uint32_t var) { return var < q.var_reg.size() && q.var_reg[var] != UINT32_MAX; }

std::optional<Diagnostic> resolve_args(const std::vector<std::string>& names, const Rule& rule, const SourceLoc& loc,
                                       Rule::Args& out) {
  for (const std::string& n : names) {
    if (auto v = rule.vars.find_class(n); v && bound_in(rule.query, *v)) {
      out.classes.push_back(*v);
    } else if (auto a = rule.vars.find_attr(n)) {
      out.attrs.push_back(*a);
    } else {
      return diag(loc, fmt::format("rule '{}': variable '{}' is not bound by the left-hand side", rule.name, n));
    }
  }
  return std::nullopt;
}

// Checks that every variable of a right-hand pattern is bound on the left.
std::optional<Diagnostic> check_rhs(const Pattern& p, const Rule& rule, const SourceLoc& loc) {
  for (const PatternNode& n : p.nodes) {
    if (n.kind == PatternNode::Kind::Wildcard)
      return diag(loc, fmt::format("rule '{}': a wildcard cannot appear on the right-hand side", rule.name));
    if (n.kind == PatternNode::Kind::Var && !bound_in(rule.query, n.var))
      return diag(loc, fmt::format("rule '{}': variable '{}' is not bound by the left-hand side", rule.name,
                                   rule.vars.classes[n.var]));
    if (n.kind == PatternNode::Kind::Node && n.attr.kind == AttrPattern::Kind::Any)
      return diag(loc, fmt::format("rule '{}': an attribute wildcard cannot appear on the right-hand side",
                                   rule.name));
    if (n.kind == PatternNode::Kind::Node && n.any_children)
      return diag(loc, fmt::format("rule '{}': '...' cannot appear on the right-hand side (it leaves the children "
                                   "unknown); an applier can build such a node",
                                   rule.name));
  }
  return std::nullopt;
}

}  // namespace

Result<Rule> compile_rule(Language& language, const Registry& registry, const RuleSpec& spec,
                          const ParseOptions& options) {
  Rule rule;
  rule.name = spec.name;
  rule.loc = spec.loc;
  rule.reason = spec.loc.line > 0 ? fmt::format("rule '{}' ({}:{})", spec.name, spec.loc.file, spec.loc.line)
                                  : fmt::format("rule '{}'", spec.name);
  if (spec.lhs.empty()) return diag(spec.loc, fmt::format("rule '{}' has no left-hand pattern", spec.name));
  std::vector<std::optional<uint32_t>> binders;
  for (const PatternSpec& ps : spec.lhs) {
    Result<Pattern> p = parse_pattern(language, ps.text, rule.vars, at(options, ps.loc));
    if (!p) return p.error();
    rule.lhs.push_back(p.take());
    binders.push_back(ps.binder.empty() ? std::nullopt : std::optional<uint32_t>(rule.vars.class_var(ps.binder)));
  }
  const size_t lhs_attr_vars = rule.vars.attrs.size();
  {
    Result<Query> q = compile_query(rule.lhs, binders, rule.vars);
    if (!q) return diag(spec.loc, q.error().message);
    rule.query = q.take();
  }
  for (const GuardSpec& g : spec.guards) {
    const GuardFn* fn = registry.guard(g.name);
    if (!fn) return diag(g.loc.line ? g.loc : spec.loc, fmt::format("rule '{}': unknown guard '{}'", spec.name, g.name));
    Rule::Guard guard{g.name, *fn, {}};
    if (auto d = resolve_args(g.args, rule, g.loc.line ? g.loc : spec.loc, guard.args)) return *d;
    rule.guards.push_back(std::move(guard));
  }
  for (const ActionSpec& a : spec.actions) {
    const SourceLoc& loc = a.loc.line ? a.loc : spec.loc;
    Rule::Action action;
    action.kind = a.kind;
    if (!a.target.empty()) {
      auto v = rule.vars.find_class(a.target);
      if (!v || !bound_in(rule.query, *v))
        return diag(loc, fmt::format("rule '{}': variable '{}' is not bound by the left-hand side", spec.name, a.target));
      action.target = *v;
    }
    if (a.kind == ActionSpec::Kind::Union) {
      Result<Pattern> p = parse_pattern(language, a.pattern, rule.vars, at(options, a.loc));
      if (!p) return p.error();
      action.pattern = p.take();
      if (auto d = check_rhs(action.pattern, rule, loc)) return *d;
      action.builder = compile_builder(action.pattern);
      for (uint32_t i = 0; i < action.pattern.nodes.size(); ++i) {
        const PatternNode& n = action.pattern.nodes[i];
        if (n.kind != PatternNode::Kind::Node || n.attr.kind != AttrPattern::Kind::Exact) continue;
        bool leaves = true;
        for (uint32_t k : action.pattern.kids(n))
          leaves &= action.pattern.nodes[k].kind == PatternNode::Kind::Var;
        if (leaves) {
          action.first_lookup = i;
          break;
        }
      }
    } else {
      const ApplierFn* fn = registry.applier(a.applier);
      if (!fn) return diag(loc, fmt::format("rule '{}': unknown applier '{}'", spec.name, a.applier));
      action.applier = *fn;
      if (auto d = resolve_args(a.args, rule, loc, action.args)) return *d;
    }
    rule.actions.push_back(std::move(action));
  }
  if (rule.vars.attrs.size() != lhs_attr_vars)
    return diag(spec.loc, fmt::format("rule '{}': attribute variable '{}' is not bound by the left-hand side",
                                      spec.name, rule.vars.attrs[lhs_attr_vars]));
  if (rule.actions.empty()) return diag(spec.loc, fmt::format("rule '{}' has no action", spec.name));
  return rule;
}

Rule rewrite(Language& language, std::string name, std::string_view lhs, std::string_view rhs,
             const Registry* registry, std::vector<GuardSpec> guards, const ParseOptions& options) {
  RuleSpec spec;
  spec.name = std::move(name);
  spec.lhs.push_back(PatternSpec{"", std::string(lhs), {}});
  spec.guards = std::move(guards);
  ActionSpec a;
  a.pattern = std::string(rhs);
  spec.actions.push_back(std::move(a));
  static const Registry empty;
  return compile_rule(language, registry ? *registry : empty, spec, options).take();
}

std::vector<Rule> birewrite(Language& language, const std::string& name, std::string_view lhs, std::string_view rhs,
                            const ParseOptions& options) {
  std::vector<Rule> rules;
  rules.push_back(rewrite(language, name, lhs, rhs, nullptr, {}, options));
  rules.push_back(rewrite(language, name + "-rev", rhs, lhs, nullptr, {}, options));
  return rules;
}

}  // namespace spool::egraph
