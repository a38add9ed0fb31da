// The soundness checker: random types, random tensors, both sides through
// the reference interpreter. Rules written as formulas are evaluated as one
// graph; rules with appliers or attribute variables are run on a small
// e-graph holding a random instance of their left side (instances.cpp).

#include "instances.hpp"

#include <spool/interp/interp.hpp>
#include <spool/rules/soundness.hpp>
#include <spool/support/error.hpp>

#include <spool/egraph/extract.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>

namespace spool::rules {
namespace {

using detail::Instantiator;
using detail::Retry;
using detail::Sampler;
using detail::Unsupported;
using egraph::AttrId;
using egraph::Pattern;
using egraph::PatternNode;

// How a rule's sides are compared: bit for bit, or (a rule declared
// `:approx`) within its relative tolerances.
struct Comparison {
  const Approximation* approx = nullptr;
};

// The special values of `dtype` each input element is drawn from on the
// special samples: signed zeros, infinities, NaN, the smallest denormals,
// the largest finite values and the smallest normal one for floats; the
// extremes and small values for integers. 13 and 7 entries: primes, so the
// rotation below pairs every value of one input with many of another.
std::vector<double> float_specials(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  double denormal = 0, max = 0, min_normal = 0;
  switch (dtype) {
    case DType::F32:
      denormal = std::ldexp(1.0, -149), max = std::numeric_limits<float>::max(), min_normal = std::ldexp(1.0, -126);
      break;
    case DType::BF16:
      denormal = std::ldexp(1.0, -133), max = std::ldexp(255.0, 120), min_normal = std::ldexp(1.0, -126);
      break;
    default:  // f16
      denormal = std::ldexp(1.0, -24), max = 65504.0, min_normal = std::ldexp(1.0, -14);
      break;
  }
  return {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), denormal, -denormal, max, -max,
          1.0, -1.0, min_normal, 0.5};
}
std::vector<int64_t> int_specials(DType dtype) {
  const int64_t lo = dtype == DType::I32 ? INT32_MIN : INT64_MIN;
  const int64_t hi = dtype == DType::I32 ? INT32_MAX : INT64_MAX;
  return {0, 1, -1, lo, hi, 2, -2};
}

// The inputs of special sample `k`: element i of the j-th input (from 1)
// takes entry (k * j + i) of its dtype's specials, so that a scalar input runs
// through all of them over the samples and inputs pair up differently.
// `k` < 0: each element a special value with probability 1/2, drawn from
// `seed`, otherwise the ordinary value.
interp::Env special_inputs(const interp::Env& ordinary, int k, uint64_t seed) {
  interp::Env env = ordinary;
  std::mt19937_64 rng(seed);
  int64_t j = 0;
  for (auto& [name, value] : env) {
    ++j;
    const DType dtype = value.dtype();
    const std::vector<double> floats = is_float(dtype) ? float_specials(dtype) : std::vector<double>{};
    const std::vector<int64_t> ints = is_integer(dtype) ? int_specials(dtype) : std::vector<int64_t>{};
    for (int64_t i = 0; i < value.size(); ++i) {
      const uint64_t draw = rng();
      if (k < 0 && draw % 2 == 0) continue;
      const uint64_t pick = k < 0 ? draw >> 1 : static_cast<uint64_t>(k * j + i);
      if (is_float(dtype))
        value.set(i, floats[pick % floats.size()]);
      else if (dtype == DType::Bool)
        value.set_int(i, static_cast<int64_t>(pick % 2));
      else
        value.set_int(i, ints[pick % ints.size()]);
    }
  }
  return env;
}

// Every input set an instance runs on: the ordinary random values (index
// 0), then, for an exact rule, 13 rotations of the special values and one
// random mixture. An approximate rule is compared on ordinary values only:
// no tolerance bounds a reassociation's difference near overflow.
constexpr int kSpecialSamples = 13;
int sample_count(const Comparison& cmp) { return cmp.approx ? 1 : 2 + kSpecialSamples; }
interp::Env sample_inputs(const Graph& g, uint64_t seed, int index) {
  const interp::Env ordinary = interp::random_inputs(g, seed, 4);
  if (index == 0) return ordinary;
  return special_inputs(ordinary, index <= kSpecialSamples ? index - 1 : -1, seed * 31 + static_cast<uint64_t>(index));
}

bool same_bits(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// The first element where the sides differ, or -1: bit for bit (NaN equal
// to NaN, -0 unequal to +0), or for an approximate rule's floats within its
// tolerance relative to max(1, |left|, |right|) (non-finite values must then
// be the same).
int64_t first_difference(const interp::HostTensor& lhs, const interp::HostTensor& rhs, const Comparison& cmp) {
  const DType dtype = lhs.dtype();
  if (!is_float(dtype)) {
    for (int64_t i = 0; i < lhs.size(); ++i)
      if (lhs.get_int(i) != rhs.get_int(i)) return i;
    return -1;
  }
  const std::optional<double> tol = cmp.approx ? cmp.approx->of(dtype) : std::nullopt;
  for (int64_t i = 0; i < lhs.size(); ++i) {
    const double a = lhs.get(i), b = rhs.get(i);
    if (same_bits(a, b)) continue;
    if (!tol || !std::isfinite(a) || !std::isfinite(b)) return i;
    if (std::abs(a - b) > *tol * std::max({1.0, std::abs(a), std::abs(b)})) return i;
  }
  return -1;
}

// A value as the counterexample shows it: -0, inf, nan, integers in full.
std::string value_str(const interp::HostTensor& t, int64_t i) {
  if (!is_float(t.dtype())) return t.dtype() == DType::Bool ? (t.get_int(i) ? "true" : "false")
                                                            : std::to_string(t.get_int(i));
  return fmt::format("{}", t.get(i));
}

// The inputs (their first 8 elements), and for an input with as many
// elements as the differing output, its element `at`.
std::string inputs_str(const interp::Env& env, int64_t at, int64_t out_size) {
  std::string inputs;
  for (const auto& [name, value] : env) {
    inputs += fmt::format("\n    {} : {}{} = [", name, dtype_name(value.dtype()), shape_str(value.shape()));
    for (int64_t i = 0; i < std::min<int64_t>(value.size(), 8); ++i)
      inputs += fmt::format("{}{}", i ? ", " : "", value_str(value, i));
    inputs += value.size() > 8 ? ", ...]" : "]";
    if (value.size() == out_size && out_size > 1) inputs += fmt::format(", element {}: {}", at, value_str(value, at));
  }
  return inputs;
}

std::string difference_str(const interp::HostTensor& left, const interp::HostTensor& right, int64_t at,
                           const Comparison& cmp) {
  std::string tol;
  if (cmp.approx) {
    const std::optional<double> t = cmp.approx->of(left.dtype());
    tol = t ? fmt::format(" (beyond the declared {} tolerance {})", dtype_name(left.dtype()), *t)
            : fmt::format(" ({} is not listed in :approx, so compared exactly)", dtype_name(left.dtype()));
  }
  return fmt::format("the sides differ at element {} of {}{}: left {} vs right {}{}", at, dtype_name(left.dtype()),
                     shape_str(left.shape()), value_str(left, at), value_str(right, at), tol);
}

// ---- rules written as formulas ------------------------------------------------------

// Builds `pattern` into `g`, reading variable v through `vars[v]`.
Edge build(const Pattern& pattern, const hlir::HlirLanguage& lang, Graph& g, const std::vector<Edge>& vars) {
  std::vector<Edge> value(pattern.nodes.size());
  for (size_t i = 0; i < pattern.nodes.size(); ++i) {
    const PatternNode& n = pattern.nodes[i];
    switch (n.kind) {
      case PatternNode::Kind::Wildcard:
        throw Unsupported{"wildcards"};
      case PatternNode::Kind::Var:
        value[i] = vars[n.var];
        break;
      case PatternNode::Kind::Node: {
        if (n.attr.kind != egraph::AttrPattern::Kind::Exact) throw Unsupported{"attribute variables"};
        // AttrId 0 is "no attribute" (NoAttr), which has no payload.
        static const hlir::HlirAttr kNone{NoAttr{}, {}, {}};
        const hlir::HlirAttr& attr = n.attr.id == egraph::AttrId{} ? kNone : lang.payload(n.attr.id);
        std::vector<Edge> kids;
        for (uint32_t k : pattern.kids(n)) kids.push_back(value[k]);
        const std::optional<Op> op = lang.hlir_op(n.op);
        if (!op) {  // a view node
          SPOOL_ASSERT(attr.view && kids.size() == 1, "view node without a view");
          value[i] = Edge{kids[0].src, compose_views(kids[0].view, *attr.view, g.node(kids[0].src).shape)};
        } else if (op_info(*op).cls == OpClass::Source) {
          SPOOL_ASSERT(attr.type.has_value(), "source without a type");
          value[i] = Edge{g.add_source(*op, attr.attr, attr.type->dtype, attr.type->shape), {}};
        } else {
          value[i] = Edge{g.add(*op, std::move(kids), attr.attr), {}};
        }
      }
    }
  }
  return value[pattern.root()];
}

std::string types_str(const std::vector<std::string>& names, const std::vector<TensorType>& types) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{} : {}{}", i ? ", " : "", names[i], dtype_name(types[i].dtype), shape_str(types[i].shape));
  return out;
}

SoundnessResult check_formula_rule(const egraph::Rule& rule, hlir::HlirLanguage& lang, uint64_t seed, int trials,
                                   const Comparison& cmp) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, 0, {}};
  const size_t num_vars = rule.vars.classes.size();
  Sampler sampler(seed);
  int attempts = 0;
  try {
    // Every dtype in turn as the variables' common one (a few drawn apart):
    // `trials` instances of each dtype the left side accepts.
    for (const DType common : kAllDTypes) {
      int found = 0;
      for (int tries = 0; found < trials && tries < 100; ++tries) {
        ++attempts;
        const std::vector<TensorType> types = sampler.draw(num_vars, common);
        Graph g("check");
        std::vector<Edge> vars;
        for (size_t v = 0; v < num_vars; ++v)
          vars.push_back(
              Edge{g.add_source(Op::Input, NameAttr{rule.vars.classes[v]}, types[v].dtype, types[v].shape), {}});
        Edge lhs;
        try {
          lhs = build(rule.lhs[0], lang, g, vars);
        } catch (const Error&) {
          continue;  // these types do not fit the left side: draw again
        }
        g.add_output("lhs", lhs);
        for (size_t a = 0; a < rule.actions.size(); ++a) {
          try {
            g.add_output("rhs" + std::to_string(a), build(rule.actions[a].pattern, lang, g, vars));
          } catch (const Error& e) {
            result.status = SoundnessResult::Status::Unsound;
            result.detail = fmt::format("the right side does not type-check where the left does ({}): {}",
                                        types_str(rule.vars.classes, types), e.what());
            return result;
          }
        }
        ++found;
        bool ran = false;
        for (int sample = 0; sample < sample_count(cmp); ++sample) {
          const interp::Env env = sample_inputs(g, seed + static_cast<uint64_t>(attempts), sample);
          std::map<std::string, interp::HostTensor> out;
          try {
            out = interp::run(g, env);
          } catch (const Error&) {
            continue;  // e.g. an index out of range on the left side: not a sample
          }
          ran = true;
          ++result.samples;
          const interp::HostTensor& left = out.at("lhs");
          for (size_t a = 0; a < rule.actions.size(); ++a) {
            const interp::HostTensor& right = out.at("rhs" + std::to_string(a));
            if (left.dtype() != right.dtype() || left.shape() != right.shape()) {
              result.status = SoundnessResult::Status::Unsound;
              result.detail = fmt::format("the sides have different types, {}{} vs {}{} ({})",
                                          dtype_name(left.dtype()), shape_str(left.shape()),
                                          dtype_name(right.dtype()), shape_str(right.shape()),
                                          types_str(rule.vars.classes, types));
              return result;
            }
            const int64_t at = first_difference(left, right, cmp);
            if (at >= 0) {
              result.status = SoundnessResult::Status::Unsound;
              result.detail = fmt::format("{} ({}); inputs:{}", difference_str(left, right, at, cmp),
                                          types_str(rule.vars.classes, types), inputs_str(env, at, left.size()));
              return result;
            }
          }
        }
        if (ran) ++result.trials;
      }
    }
  } catch (const Unsupported& u) {
    result.detail = u.why + " are not checked";
    return result;
  }
  if (result.trials == 0) {
    result.detail = "no input types made the left side well-typed";
    return result;
  }
  result.status = cmp.approx ? SoundnessResult::Status::Approximate : SoundnessResult::Status::Sound;
  return result;
}

// ---- rules with appliers or attribute variables -------------------------------------
//
// Such a rule is run, not evaluated as a formula: its left side is built in a
// small e-graph (variables become random inputs or small producers of the
// kinds kernel rules look for: views, fused programs, gemms, reductions;
// attribute variables get random attributes of the op; every fourth
// instance is a small spool::nn graph instead), the rule's query
// finds its matches there, and every action is applied without merging. The
// class each action built and the class it would be merged into are then
// extracted together and run on random tensors.

// (target, built): the class an action built, and the class it would be
// merged into.
using Built = std::vector<std::pair<egraph::ClassId, egraph::ClassId>>;

// A random instance of `rule`'s left side in `g`, or every fourth attempt
// (every one once the left side cannot be drawn at random) a small
// spool::nn graph; false when this attempt gave no instance to try.
bool draw_instance(const egraph::Rule& rule, hlir::HlirLanguage& lang, egraph::EGraph& g, Instantiator& inst,
                   const std::vector<TensorType>& types, std::mt19937_64& rng, int attempt,
                   std::optional<std::string>& unsupported) {
  if (attempt % 4 == 3 || unsupported) {
    // Every fourth instance is an nn composite (a whole small graph).
    hlir::add_graph(g, lang,
                            detail::nn_instance(rng, static_cast<size_t>(unsupported ? attempt : attempt / 4)));
    return true;
  }
  std::vector<egraph::ClassId> vars(rule.vars.classes.size());
  std::vector<std::optional<AttrId>> attrs(rule.vars.attrs.size());
  egraph::ClassId root;
  try {
    root = detail::build_lhs(rule.lhs[0], inst, types, vars, attrs);
  } catch (const Unsupported& u) {
    unsupported = u.why;
    return false;
  } catch (const Retry&) {
    return false;
  } catch (const Error&) {
    return false;  // a random view or attribute that does not fit: draw again
  }
  return inst.data(root).ok;
}

// Every match (the first four), every action, nothing merged. An applier
// that throws is a failure of the rule: `failure` says so, and nothing
// after it is applied.
Built apply_unmerged(const egraph::Rule& rule, egraph::EGraph& g, std::optional<std::string>& failure) {
  egraph::MatchSet ms;
  egraph::search(g, rule.query, egraph::query_candidates(g, rule.query), ms);
  Built built;
  std::vector<egraph::ClassId> scratch;
  std::vector<egraph::ClassId> args;
  std::vector<AttrId> attr_args;
  for (size_t m = 0; m < std::min<size_t>(ms.size(), 4); ++m) {
    const egraph::ClassId* mv = ms.vars(m);
    const AttrId* ma = ms.attr_vars(m);
    auto view = [&](const egraph::Rule::Args& a) {
      args.clear();
      attr_args.clear();
      for (uint32_t v : a.classes) args.push_back(g.find(mv[v]));
      for (uint32_t v : a.attrs) attr_args.push_back(ma[v]);
      return egraph::MatchView{g.find(ms.root(m)), std::span<const egraph::ClassId>(args),
                               std::span<const AttrId>(attr_args)};
    };
    bool pass = true;
    for (const egraph::Rule::Guard& guard : rule.guards) pass = pass && guard.fn(g, view(guard.args));
    if (!pass) continue;
    for (const egraph::Rule::Action& action : rule.actions) {
      const egraph::ClassId target = action.target == UINT32_MAX ? ms.root(m) : mv[action.target];
      std::optional<egraph::ClassId> c;
      if (action.kind == egraph::ActionSpec::Kind::Union) {
        c = egraph::instantiate(g, action.pattern, mv, ma, scratch);
      } else {
        try {
          c = action.applier(g, view(action.args));
        } catch (const Error& e) {
          failure = fmt::format("the applier failed: {}", e.what());
          return built;
        }
      }
      if (c) built.emplace_back(target, *c);
    }
  }
  return built;
}

// Why a built class cannot replace its target (it does not type-check, or
// has another type); nullopt when every one can.
std::optional<std::string> type_mismatch(const Instantiator& inst, const Built& built) {
  for (const auto& [target, c] : built) {
    const hlir::ClassData& want = inst.data(target);
    const hlir::ClassData& got = inst.data(c);
    if (!got.ok) return fmt::format("the right side does not type-check: {}", got.error);
    if (got.type != want.type)
      return fmt::format("the sides have different types, {}{} vs {}{}", dtype_name(want.type.dtype),
                         shape_str(want.type.shape), dtype_name(got.type.dtype), shape_str(got.type.shape));
  }
  return std::nullopt;
}

// Runs of the built classes and their targets on random tensors.
struct Trial {
  int samples = 0;         // input sets that ran (0: the instance could not be run)
  std::string difference;  // where a pair of sides first differs; empty if none does
};

// The built classes and their targets, extracted together and run on
// ordinary and special inputs drawn from `seed`.
Trial run_sides(const egraph::EGraph& g, hlir::HlirLanguage& lang, const Built& built, uint64_t seed,
                const Comparison& cmp) {
  std::vector<egraph::ClassId> roots;
  for (const auto& [target, c] : built) {
    roots.push_back(target);
    roots.push_back(c);
  }
  const egraph::AstSize size;
  const egraph::Extractor extractor(g, size);
  const egraph::Extraction extraction = extractor.extract(roots);
  const Graph both = hlir::to_graph(lang, extraction.term);
  Trial trial;
  for (int sample = 0; sample < sample_count(cmp); ++sample) {
    const interp::Env env = sample_inputs(both, seed, sample);
    std::map<std::string, interp::HostTensor> out;
    try {
      out = interp::run(both, env);
    } catch (const Error&) {
      continue;  // e.g. an integer mod by zero on the left side: not a sample
    }
    ++trial.samples;
    for (size_t i = 0; i < built.size(); ++i) {
      const interp::HostTensor& left = out.at(fmt::format("out{}", 2 * i));
      const interp::HostTensor& right = out.at(fmt::format("out{}", 2 * i + 1));
      const int64_t at = first_difference(left, right, cmp);
      if (at >= 0) {
        trial.difference = fmt::format("{}; left {} => right {}; inputs:{}", difference_str(left, right, at, cmp),
                                       extraction.term.str(lang.language(), 2 * i),
                                       extraction.term.str(lang.language(), 2 * i + 1), inputs_str(env, at, left.size()));
        return trial;
      }
    }
  }
  return trial;
}

SoundnessResult check_applied_rule(const egraph::Rule& rule, hlir::HlirLanguage& lang, uint64_t seed, int trials,
                                   const Comparison& cmp) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, 0, {}};
  const size_t num_vars = rule.vars.classes.size();
  Sampler sampler(seed);
  std::mt19937_64 rng(seed);
  auto unsound = [&](std::string detail) {
    result.status = SoundnessResult::Status::Unsound;
    result.detail = std::move(detail);
    return result;
  };
  int attempts = 0, fired = 0;
  // Set when the left side cannot be drawn at random (an attribute kind
  // without a sampler): then only the nn instances can check the rule.
  std::optional<std::string> unsupported;
  try {
    for (; result.trials < trials && attempts < 4000; ++attempts) {
      std::unique_ptr<egraph::EGraph> g = hlir::make_egraph(lang);
      Instantiator inst(lang, *g, rng);
      // The variables' common dtype runs through every dtype in turn; the last type is for wildcards.
      const std::vector<TensorType> types =
          sampler.draw(num_vars + 1, kAllDTypes[static_cast<size_t>(attempts) % std::size(kAllDTypes)]);
      if (!draw_instance(rule, lang, *g, inst, types, rng, attempts, unsupported)) continue;
      g->rebuild();
      std::optional<std::string> failure;
      const Built built = apply_unmerged(rule, *g, failure);
      if (failure) return unsound(std::move(*failure));
      if (built.empty()) continue;  // the rule did not apply to this instance
      ++fired;
      g->rebuild();
      if (std::optional<std::string> why = type_mismatch(inst, built)) return unsound(std::move(*why));
      const Trial trial = run_sides(*g, lang, built, seed + static_cast<uint64_t>(attempts), cmp);
      if (trial.samples == 0) continue;
      ++result.trials;
      result.samples += trial.samples;
      if (!trial.difference.empty()) return unsound(trial.difference);
    }
  } catch (const Unsupported& u) {
    result.detail = u.why + " are not checked";
    return result;
  }
  if (result.trials == 0) {
    if (unsupported)
      result.detail = *unsupported + " are not checked (and no nn instance matched)";
    else
      result.detail = fired == 0
                          ? fmt::format("the rule never applied to {} random instances of its left side", attempts)
                          : "no instance could be run on tensors";
    return result;
  }
  result.status = cmp.approx ? SoundnessResult::Status::Approximate : SoundnessResult::Status::Sound;
  return result;
}

SoundnessResult check_rule(const egraph::Rule& rule, hlir::HlirLanguage& lang, uint64_t seed, int trials,
                           const Comparison& cmp) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, 0, {}};
  if (rule.lhs.size() != 1) {
    result.detail = "multi-pattern rules are not checked";
    return result;
  }
  // Appliers, unions into other variables, attribute patterns and guards
  // (which look at the e-graph's classes): run the rule.
  bool formula = rule.vars.attrs.empty() && rule.guards.empty();
  for (const egraph::Rule::Action& action : rule.actions)
    formula = formula && action.kind == egraph::ActionSpec::Kind::Union && action.target == UINT32_MAX;
  for (const PatternNode& n : rule.lhs[0].nodes)
    formula = formula && (n.kind != PatternNode::Kind::Node || n.attr.kind == egraph::AttrPattern::Kind::Exact);
  for (const PatternNode& n : rule.lhs[0].nodes)
    if (n.kind == PatternNode::Kind::Node && lang.hlir_op(n.op) &&
        op_info(*lang.hlir_op(n.op)).cls == OpClass::LoopMarker) {
      // Loop markers mean something only in a rolled loop, which roll::unroll
      // defines; the interpreter runs graphs without them.
      result.detail = "loop markers are not checked on tensors (roll::unroll defines them)";
      return result;
    }
  for (const PatternNode& n : rule.lhs[0].nodes)
    if (n.kind == PatternNode::Kind::Node && n.any_children) {
      // No instance of the left side can be drawn without choosing the
      // number of children, which the rule leaves to its applier.
      result.detail = "rules matching (op ...) are not checked";
      return result;
    }
  if (!formula) return check_applied_rule(rule, lang, seed, trials, cmp);
  return check_formula_rule(rule, lang, seed, trials, cmp);
}

}  // namespace

std::vector<SoundnessResult> check_soundness(std::span<const egraph::RuleSet> rulesets,
                                             hlir::HlirLanguage& language, uint64_t seed, int trials,
                                             const std::map<std::string, Approximation>& approx) {
  std::vector<SoundnessResult> results;
  for (const egraph::RuleSet& set : rulesets)
    for (const egraph::Rule& rule : set.rules) {
      const auto it = approx.find(rule.name);
      const Comparison cmp{it == approx.end() ? nullptr : &it->second};
      results.push_back(check_rule(rule, language, seed, trials, cmp));
    }
  return results;
}

}  // namespace spool::rules
