// The rule-file parser: S-expressions (sexp.cpp) to rule, ruleset, schedule
// and check declarations, with includes followed and checked for cycles.

#include <spool/rules/rule_file.hpp>
#include <spool/rules/sexp.hpp>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace spool::rules {
namespace {

class ParseError {
 public:
  explicit ParseError(Diagnostic d) : diagnostic(std::move(d)) {}
  ParseError(const SourceLoc& loc, std::string message) : diagnostic{loc, std::move(message), {}} {}
  Diagnostic diagnostic;
};

std::string describe(const Sexp& s) {
  switch (s.kind) {
    case Sexp::Kind::Atom: return "'" + s.text + "'";
    case Sexp::Kind::String: return "a string";
    case Sexp::Kind::List: return "a list";
  }
  return "?";
}

// Rule files are text written by people: anything larger is refused before
// it is read.
constexpr uintmax_t kMaxRuleFileBytes = uintmax_t{64} << 20;

class FileParser {
 public:
  explicit FileParser(RuleFile& out) : out_(out) {}

  void parse_file(const std::string& path, const SourceLoc* included_from) {
    const std::string canonical = std::filesystem::weakly_canonical(path).string();
    for (size_t i = 0; i < include_stack_.size(); ++i) {
      if (include_stack_[i] != canonical) continue;
      std::string chain;
      for (size_t j = i; j < include_stack_.size(); ++j) chain += include_stack_[j] + " -> ";
      throw ParseError(*included_from, "include cycle: " + chain + canonical);
    }
    auto fail_at = [&](const std::string& message) {
      if (included_from) throw ParseError(*included_from, fmt::format("included file '{}': {}", path, message));
      throw ParseError(SourceLoc{path, 0, 0}, message);
    };
    // Only regular files of a sane size: a directory would read as empty,
    // a device such as /dev/zero would never end.
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      fail_at(std::filesystem::is_directory(status) ? "is a directory, not a rule file" : "is not a regular file");
    std::ifstream in(path);
    if (!in) {
      if (included_from) throw ParseError(*included_from, fmt::format("cannot open included file '{}'", path));
      throw ParseError(SourceLoc{path, 0, 0}, "cannot open rule file");
    }
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxRuleFileBytes)
      fail_at(fmt::format("is {} bytes; rule files are limited to {} bytes", size, kMaxRuleFileBytes));
    std::stringstream buffer;
    buffer << in.rdbuf();
    parse_text(buffer.str(), path, canonical);
  }

  void parse_text(const std::string& text, const std::string& file, const std::string& canonical) {
    include_stack_.push_back(canonical);
    out_.files.push_back(file);
    Result<std::vector<Sexp>> forms = read_sexps(text, file);
    if (!forms) throw ParseError(forms.error());
    for (const Sexp& form : forms.value()) top_level(form, text, file);
    include_stack_.pop_back();
  }

  void finish() {
    // Rulesets named by rules and the schedule must be declared somewhere.
    std::set<std::string> declared;
    for (const auto& [name, loc] : out_.rulesets) declared.insert(name);
    for (const auto& [name, loc] : ruleset_uses_)
      if (!declared.count(name)) throw ParseError(loc, fmt::format("unknown ruleset '{}'", name));
  }

 private:
  void top_level(const Sexp& form, const std::string& text, const std::string& file) {
    if (!form.is_list() || form.items.empty() || form.items[0].kind != Sexp::Kind::Atom)
      throw ParseError(form.loc, fmt::format("expected a declaration like (rewrite ...), found {}", describe(form)));
    const std::string& head = form.items[0].text;
    if (head == "ruleset") return ruleset(form);
    if (head == "rewrite" || head == "birewrite") return rewrite(form, text, head == "birewrite");
    if (head == "rule") return rule(form, text);
    if (head == "include") return include(form, file);
    if (head == "schedule") return schedule(form);
    if (head == "check") return check(form, text);
    throw ParseError(form.items[0].loc,
                     fmt::format("unknown declaration '{}' (expected ruleset, rewrite, birewrite, rule, include, "
                                 "schedule or check)",
                                 head));
  }

  const std::string& name_at(const Sexp& form, size_t index, const char* what) {
    if (index >= form.items.size() || form.items[index].kind != Sexp::Kind::Atom)
      throw ParseError(index < form.items.size() ? form.items[index].loc : form.loc,
                       fmt::format("{} expects a name", what));
    return form.items[index].text;
  }

  void ruleset(const Sexp& form) {
    const std::string& name = name_at(form, 1, "ruleset");
    if (form.items.size() != 2) throw ParseError(form.items[2].loc, "ruleset takes only a name");
    for (const auto& [existing, loc] : out_.rulesets)
      if (existing == name) {
        ParseError e(form.items[1].loc, fmt::format("ruleset '{}' is declared twice", name));
        e.diagnostic.notes.push_back({loc, "first declared here"});
        throw e;
      }
    out_.rulesets.push_back({name, form.items[1].loc});
  }

  // Constants in a pattern, `constant[value=V : T[...]]`, must hold V exactly
  // in T: an integer that does not fit would wrap, a float that is not
  // representable would round, and the rule would mean another constant.
  static void check_constants(const Sexp& s) {
    if (s.is_list()) {
      for (const Sexp& item : s.items) check_constants(item);
      return;
    }
    if (s.kind != Sexp::Kind::Atom) return;
    const std::string_view prefix = "constant[value=";
    const std::string_view text = s.text;
    if (text.substr(0, prefix.size()) != prefix) return;
    const size_t colon = text.rfind(" : ");
    if (colon == std::string_view::npos || colon < prefix.size()) return;  // the pattern parser reports it
    const std::string_view value = text.substr(prefix.size(), colon - prefix.size());
    const std::string_view type = text.substr(colon + 3);
    const std::optional<DType> dtype = parse_dtype(type.substr(0, type.find('[')));
    if (!dtype) return;
    const std::string_view name = dtype_name(*dtype);
    if (*dtype == DType::Bool) {
      if (value != "true" && value != "false" && value != "0" && value != "1")
        throw ParseError(s.loc, fmt::format("bad bool constant '{}' (expected true or false)", value));
      return;
    }
    if (is_integer(*dtype)) {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == value.data() + value.size() &&
                                                   wrap_to_int(*dtype, v) != v))
        throw ParseError(s.loc, fmt::format("constant {} does not fit in {}", value, name));
      if (ec != std::errc() || end != value.data() + value.size())
        throw ParseError(s.loc, fmt::format("bad {} constant '{}' (expected an integer)", name, value));
      return;
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size())
      throw ParseError(s.loc, fmt::format("bad {} constant '{}'", name, value));
    if (!std::isnan(v) && round_to_float(*dtype, v) != v)
      throw ParseError(s.loc, fmt::format("constant {} is not exactly representable in {} (it would round to {})",
                                          value, name, round_to_float(*dtype, v)));
  }

  egraph::PatternSpec pattern(const Sexp& s, const std::string& text) {
    check_constants(s);
    return egraph::PatternSpec{"", text.substr(s.begin, s.end - s.begin), s.loc};
  }

  void declare_rule(const std::string& name, const SourceLoc& loc) {
    const auto [it, fresh] = rule_locs_.emplace(name, loc);
    if (!fresh) {
      ParseError e(loc, fmt::format("rule '{}' is defined twice", name));
      e.diagnostic.notes.push_back({it->second, "first defined here"});
      throw e;
    }
  }

  // Options after the fixed part of a form: `:ruleset R`, `:when (...)`.
  // `extra` handles any other keyword of the form (returns false if unknown).
  template <typename Extra>
  std::string options(const Sexp& form, size_t first, std::vector<egraph::GuardSpec>& guards,
                      std::optional<Approximation>& approx, Extra extra) {
    std::string ruleset_name = "default";
    for (size_t i = first; i < form.items.size(); i += 2) {
      const Sexp& key = form.items[i];
      if (key.kind != Sexp::Kind::Atom || key.text.empty() || key.text[0] != ':')
        throw ParseError(key.loc, fmt::format("expected an option like :ruleset or :when, found {}", describe(key)));
      if (i + 1 >= form.items.size()) throw ParseError(key.loc, fmt::format("option {} has no value", key.text));
      const Sexp& value = form.items[i + 1];
      if (key.text == ":ruleset") {
        if (value.kind != Sexp::Kind::Atom) throw ParseError(value.loc, ":ruleset expects a ruleset name");
        ruleset_name = value.text;
        ruleset_uses_.push_back({value.text, value.loc});
      } else if (key.text == ":when") {
        if (!value.is_list() || value.items.empty() || value.items[0].kind != Sexp::Kind::Atom)
          throw ParseError(value.loc, ":when expects a guard call like (nonzero ?x)");
        egraph::GuardSpec guard{value.items[0].text, {}, value.loc};
        for (size_t a = 1; a < value.items.size(); ++a) {
          if (value.items[a].kind != Sexp::Kind::Atom || value.items[a].text.empty() || value.items[a].text[0] != '?')
            throw ParseError(value.items[a].loc, fmt::format("guard arguments are variables like ?x, found {}",
                                                             describe(value.items[a])));
          guard.args.push_back(value.items[a].text);
        }
        guards.push_back(std::move(guard));
      } else if (key.text == ":approx") {
        if (approx) throw ParseError(key.loc, ":approx is given twice");
        approx = approximation(value);
      } else if (!extra(key, value)) {
        throw ParseError(key.loc, fmt::format("unknown option '{}'", key.text));
      }
    }
    return ruleset_name;
  }

  // `(f32 1e-5 bf16 1e-2 ...)`: a relative tolerance per floating dtype.
  static Approximation approximation(const Sexp& value) {
    const char* usage = ":approx expects a list of floating dtypes and tolerances, like (f32 1e-5 bf16 1e-2)";
    if (!value.is_list() || value.items.empty() || value.items.size() % 2 != 0) throw ParseError(value.loc, usage);
    Approximation approx;
    approx.loc = value.loc;
    for (size_t i = 0; i < value.items.size(); i += 2) {
      const Sexp& d = value.items[i];
      const Sexp& t = value.items[i + 1];
      if (d.kind != Sexp::Kind::Atom || t.kind != Sexp::Kind::Atom) throw ParseError(d.loc, usage);
      const std::optional<DType> dtype = parse_dtype(d.text);
      if (!dtype || !is_float(*dtype))
        throw ParseError(d.loc, fmt::format(":approx: '{}' is not a floating dtype (f32, bf16 or f16); integers "
                                            "and bool are always compared exactly",
                                            d.text));
      if (approx.of(*dtype)) throw ParseError(d.loc, fmt::format(":approx: {} is given twice", d.text));
      double tol = 0;
      const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), tol);
      if (ec != std::errc() || end != t.text.data() + t.text.size() || !std::isfinite(tol) || tol <= 0 || tol >= 1)
        throw ParseError(t.loc, fmt::format(":approx: bad tolerance '{}' for {} (expected a relative tolerance "
                                            "greater than 0 and below 1, like 1e-5)",
                                            t.text, d.text));
      approx.tolerance.emplace_back(*dtype, tol);
    }
    return approx;
  }

  void rewrite(const Sexp& form, const std::string& text, bool both_ways) {
    const char* what = both_ways ? "birewrite" : "rewrite";
    const std::string& name = name_at(form, 1, what);
    if (form.items.size() < 4)
      throw ParseError(form.loc, fmt::format("{} expects ({} NAME LHS RHS [options])", what, what));
    egraph::RuleSpec spec;
    spec.name = name;
    spec.loc = form.items[1].loc;
    std::optional<Approximation> approx;
    const std::string ruleset_name =
        options(form, 4, spec.guards, approx, [](const Sexp&, const Sexp&) { return false; });
    spec.lhs.push_back(pattern(form.items[2], text));
    egraph::ActionSpec action;
    action.pattern = pattern(form.items[3], text).text;
    action.loc = form.items[3].loc;
    spec.actions.push_back(action);
    declare_rule(name, spec.loc);
    if (both_ways) {
      egraph::RuleSpec reverse = spec;
      reverse.name = name + "-rev";
      reverse.lhs = {pattern(form.items[3], text)};
      reverse.actions[0].pattern = pattern(form.items[2], text).text;
      reverse.actions[0].loc = form.items[2].loc;
      declare_rule(reverse.name, spec.loc);
      out_.rules.push_back({ruleset_name, std::move(spec), approx});
      out_.rules.push_back({ruleset_name, std::move(reverse), approx});
      return;
    }
    out_.rules.push_back({ruleset_name, std::move(spec), approx});
  }

  void rule(const Sexp& form, const std::string& text) {
    const std::string& name = name_at(form, 1, "rule");
    egraph::RuleSpec spec;
    spec.name = name;
    spec.loc = form.items[1].loc;
    bool has_match = false, has_actions = false;
    std::optional<Approximation> approx;
    const std::string ruleset_name = options(form, 2, spec.guards, approx, [&](const Sexp& key, const Sexp& value) {
      if (key.text == ":match") {
        if (!value.is_list() || value.items.empty())
          throw ParseError(value.loc, ":match expects a list of patterns");
        for (const Sexp& p : value.items) {
          if (p.is_list() && !p.items.empty() && p.items[0].is_atom("=")) {
            if (p.items.size() != 3 || p.items[1].kind != Sexp::Kind::Atom || p.items[1].text[0] != '?')
              throw ParseError(p.loc, "a named pattern is (= ?name PATTERN)");
            egraph::PatternSpec ps = pattern(p.items[2], text);
            ps.binder = p.items[1].text;
            spec.lhs.push_back(std::move(ps));
          } else {
            spec.lhs.push_back(pattern(p, text));
          }
        }
        has_match = true;
        return true;
      }
      if (key.text == ":actions") {
        if (!value.is_list() || value.items.empty())
          throw ParseError(value.loc, ":actions expects a list of actions");
        for (const Sexp& a : value.items) spec.actions.push_back(action(a, text));
        has_actions = true;
        return true;
      }
      return false;
    });
    if (!has_match) throw ParseError(form.loc, fmt::format("rule '{}' has no :match", name));
    if (!has_actions) throw ParseError(form.loc, fmt::format("rule '{}' has no :actions", name));
    declare_rule(name, spec.loc);
    out_.rules.push_back({ruleset_name, std::move(spec), std::move(approx)});
  }

  egraph::ActionSpec action(const Sexp& a, const std::string& text) {
    if (!a.is_list() || a.items.empty() || a.items[0].kind != Sexp::Kind::Atom)
      throw ParseError(a.loc, "an action is (union ?x PATTERN) or (apply APPLIER ?x ...)");
    egraph::ActionSpec spec;
    spec.loc = a.loc;
    if (a.items[0].text == "union") {
      if (a.items.size() != 3 || a.items[1].kind != Sexp::Kind::Atom || a.items[1].text[0] != '?')
        throw ParseError(a.loc, "union expects (union ?x PATTERN)");
      spec.kind = egraph::ActionSpec::Kind::Union;
      spec.target = a.items[1].text;
      spec.pattern = pattern(a.items[2], text).text;
      spec.loc = a.items[2].loc;
      return spec;
    }
    if (a.items[0].text == "apply") {
      if (a.items.size() < 2 || a.items[1].kind != Sexp::Kind::Atom)
        throw ParseError(a.loc, "apply expects (apply APPLIER ?x ...)");
      spec.kind = egraph::ActionSpec::Kind::Apply;
      spec.applier = a.items[1].text;
      for (size_t i = 2; i < a.items.size(); ++i) {
        if (a.items[i].kind != Sexp::Kind::Atom || a.items[i].text.empty() || a.items[i].text[0] != '?')
          throw ParseError(a.items[i].loc, fmt::format("applier arguments are variables like ?x, found {}",
                                                       describe(a.items[i])));
        spec.args.push_back(a.items[i].text);
      }
      return spec;
    }
    throw ParseError(a.items[0].loc, fmt::format("unknown action '{}' (expected union or apply)", a.items[0].text));
  }

  void include(const Sexp& form, const std::string& file) {
    if (form.items.size() != 2 || form.items[1].kind != Sexp::Kind::String)
      throw ParseError(form.loc, "include expects (include \"path\")");
    const std::filesystem::path base = std::filesystem::path(file).parent_path();
    parse_file((base / form.items[1].text).string(), &form.items[1].loc);
  }

  size_t number(const Sexp& s) {
    size_t value = 0;
    if (s.kind == Sexp::Kind::Atom) {
      const auto [end, ec] = std::from_chars(s.text.data(), s.text.data() + s.text.size(), value);
      if (ec == std::errc() && end == s.text.data() + s.text.size()) return value;
    }
    throw ParseError(s.loc, fmt::format("bad number {} (expected a non-negative integer)", describe(s)));
  }

  egraph::Schedule schedule_expr(const Sexp& s) {
    if (!s.is_list() || s.items.empty() || s.items[0].kind != Sexp::Kind::Atom)
      throw ParseError(s.loc, "a schedule is (run R [N]), (repeat N S...), (saturate S...) or (seq S...)");
    const std::string& head = s.items[0].text;
    auto children = [&](size_t first) {
      std::vector<egraph::Schedule> out;
      for (size_t i = first; i < s.items.size(); ++i) out.push_back(schedule_expr(s.items[i]));
      if (out.empty()) throw ParseError(s.loc, fmt::format("{} needs at least one schedule inside", head));
      return out.size() == 1 ? out.front() : egraph::Schedule::seq(std::move(out));
    };
    if (head == "run") {
      if (s.items.size() < 2 || s.items.size() > 3 || s.items[1].kind != Sexp::Kind::Atom)
        throw ParseError(s.loc, "run expects (run RULESET [N])");
      ruleset_uses_.push_back({s.items[1].text, s.items[1].loc});
      return egraph::Schedule::run(s.items[1].text, s.items.size() == 3 ? number(s.items[2]) : 1);
    }
    if (head == "repeat") {
      if (s.items.size() < 3) throw ParseError(s.loc, "repeat expects (repeat N S...)");
      return egraph::Schedule::repeat(number(s.items[1]), children(2));
    }
    if (head == "saturate") return egraph::Schedule::saturate(children(1));
    if (head == "seq") {
      std::vector<egraph::Schedule> parts;
      for (size_t i = 1; i < s.items.size(); ++i) parts.push_back(schedule_expr(s.items[i]));
      if (parts.empty()) throw ParseError(s.loc, "seq needs at least one schedule inside");
      return egraph::Schedule::seq(std::move(parts));
    }
    throw ParseError(s.items[0].loc, fmt::format("unknown schedule '{}' (expected run, repeat, saturate or seq)", head));
  }

  void schedule(const Sexp& form) {
    if (out_.schedule) {
      ParseError e(form.loc, "the schedule is given twice");
      e.diagnostic.notes.push_back({out_.schedule_loc, "first given here"});
      throw e;
    }
    if (form.items.size() != 2) throw ParseError(form.loc, "schedule expects exactly one schedule expression");
    out_.schedule = schedule_expr(form.items[1]);
    out_.schedule_loc = form.loc;
  }

  void check(const Sexp& form, const std::string& text) {
    const std::string& name = name_at(form, 1, "check");
    if (form.items.size() != 5 || !form.items[3].is_atom("=>"))
      throw ParseError(form.loc, "check expects (check NAME INPUT => EXPECTED)");
    out_.checks.push_back(CheckDecl{name, form.items[1].loc, pattern(form.items[2], text), pattern(form.items[4], text)});
  }

  RuleFile& out_;
  std::vector<std::string> include_stack_;
  std::map<std::string, SourceLoc> rule_locs_;
  std::vector<std::pair<std::string, SourceLoc>> ruleset_uses_;
};

}  // namespace

Result<RuleFile> load_rule_file(const std::string& path) {
  RuleFile file;
  file.rulesets.push_back({"default", SourceLoc{path, 0, 0}});
  try {
    FileParser parser(file);
    parser.parse_file(path, nullptr);
    parser.finish();
  } catch (const ParseError& e) {
    return e.diagnostic;
  }
  return file;
}

Result<RuleFile> parse_rule_text(std::string_view text, const std::string& file_name) {
  RuleFile file;
  file.rulesets.push_back({"default", SourceLoc{file_name, 0, 0}});
  try {
    FileParser parser(file);
    parser.parse_text(std::string(text), file_name, std::filesystem::weakly_canonical(file_name).string());
    parser.finish();
  } catch (const ParseError& e) {
    return e.diagnostic;
  }
  return file;
}

Result<std::vector<egraph::RuleSet>> compile_rules(const RuleFile& file, egraph::Language& language,
                                                   const egraph::Registry& registry,
                                                   const egraph::ParseOptions& options) {
  std::vector<egraph::RuleSet> sets;
  std::map<std::string, size_t> index;
  for (const auto& [name, loc] : file.rulesets) {
    index[name] = sets.size();
    sets.push_back(egraph::RuleSet{name, {}});
  }
  for (const RuleDecl& decl : file.rules) {
    Result<egraph::Rule> rule = egraph::compile_rule(language, registry, decl.spec, options);
    if (!rule) return rule.error();
    sets[index.at(decl.ruleset)].rules.push_back(std::move(rule.value()));
  }
  return sets;
}

std::vector<CheckResult> run_checks(const RuleFile& file, std::span<const egraph::RuleSet> rulesets,
                                    const std::function<std::unique_ptr<egraph::EGraph>()>& make_graph,
                                    const egraph::ParseOptions& options, egraph::RunnerConfig config) {
  std::vector<CheckResult> results;
  const egraph::Schedule schedule = schedule_of(file);
  for (const CheckDecl& check : file.checks) {
    CheckResult result{check.name, check.loc, false, {}};
    try {
      std::unique_ptr<egraph::EGraph> graph = make_graph();
      egraph::ParseOptions at_input = options, at_expected = options;
      at_input.loc = check.input.loc;
      at_expected.loc = check.expected.loc;
      const egraph::ClassId input = egraph::add_expr(*graph, check.input.text, at_input);
      const egraph::ClassId expected = egraph::add_expr(*graph, check.expected.text, at_expected);
      config.stop_when = [&](egraph::EGraph& g) { return g.find(input) == g.find(expected); };
      egraph::Runner runner(config);
      const egraph::RunReport report = runner.run(*graph, rulesets, schedule);
      result.passed = graph->find(input) == graph->find(expected);
      if (!result.passed)
        result.message = fmt::format("not proven: stopped ({}) after {} iterations with {} nodes",
                                     egraph::stop_reason_name(report.stop), report.iterations, report.nodes);
    } catch (const Error& e) {
      result.message = e.what();
    }
    results.push_back(std::move(result));
  }
  return results;
}

std::map<std::string, Approximation> approximations(const RuleFile& file) {
  std::map<std::string, Approximation> out;
  for (const RuleDecl& decl : file.rules)
    if (decl.approx) out.emplace(decl.spec.name, *decl.approx);
  return out;
}

egraph::Schedule schedule_of(const RuleFile& file) {
  if (file.schedule) return *file.schedule;
  std::vector<egraph::Schedule> all;
  for (const auto& [name, loc] : file.rulesets) all.push_back(egraph::Schedule::run(name));
  return egraph::Schedule::saturate(egraph::Schedule::seq(std::move(all)));
}

}  // namespace spool::rules
