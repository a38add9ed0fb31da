// The soundness checker: random types, random tensors, both sides through
// the reference interpreter.

#include <spool/interp/interp.hpp>
#include <spool/rules/soundness.hpp>
#include <spool/support/error.hpp>

#include <cmath>
#include <random>

namespace spool::rules {
namespace {

using egraph::Pattern;
using egraph::PatternNode;

class Unsupported {
 public:
  std::string why;
};

// Builds `pattern` into `g`, reading variable v through `vars[v]`.
Edge build(const Pattern& pattern, const egraph::hlir::HlirLanguage& lang, Graph& g, const std::vector<Edge>& vars) {
  std::vector<Edge> value(pattern.nodes.size());
  for (size_t i = 0; i < pattern.nodes.size(); ++i) {
    const PatternNode& n = pattern.nodes[i];
    switch (n.kind) {
      case PatternNode::Kind::Wildcard: throw Unsupported{"wildcards"};
      case PatternNode::Kind::Var: value[i] = vars[n.var]; break;
      case PatternNode::Kind::Node: {
        if (n.attr.kind != egraph::AttrPattern::Kind::Exact) throw Unsupported{"attribute variables"};
        // AttrId 0 is "no attribute" (NoAttr), which has no payload.
        static const egraph::hlir::HlirAttr kNone{NoAttr{}, {}, {}};
        const egraph::hlir::HlirAttr& attr = n.attr.id == egraph::AttrId{} ? kNone : lang.payload(n.attr.id);
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

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F32: return 1e-5;
    case DType::BF16: return 1e-2;
    case DType::F16: return 1e-3;
    case DType::I32:
    case DType::I64:
    case DType::Bool: return 0.0;
  }
  return 0.0;
}

// The first element where the sides differ beyond the tolerance, or -1.
int64_t first_difference(const interp::HostTensor& lhs, const interp::HostTensor& rhs) {
  const double tol = tolerance(lhs.dtype());
  for (int64_t i = 0; i < lhs.size(); ++i) {
    const double a = lhs.get(i), b = rhs.get(i);
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    if (std::isinf(a) || std::isinf(b) || std::isnan(a) || std::isnan(b)) return i;
    if (std::abs(a - b) > tol * std::max(1.0, std::abs(b))) return i;
  }
  return -1;
}

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}

  std::vector<TensorType> draw(size_t count) {
    const DType common = dtype();
    const Shape base = shape();
    std::vector<TensorType> types(count);
    for (TensorType& t : types) {
      t.dtype = coin(0.8) ? common : dtype();
      t.shape = coin(0.8) ? base : shape();
    }
    return types;
  }

 private:
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  DType dtype() {
    static constexpr DType choices[] = {DType::F32, DType::F32, DType::F32, DType::BF16,
                                        DType::F16, DType::I32, DType::I64, DType::Bool};
    return choices[rng_() % std::size(choices)];
  }
  Shape shape() {
    Shape s(rng_() % 4);
    for (int64_t& d : s) d = 1 + static_cast<int64_t>(rng_() % 4);
    return s;
  }
  std::mt19937_64 rng_;
};

std::string types_str(const std::vector<std::string>& names, const std::vector<TensorType>& types) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{} : {}{}", i ? ", " : "", names[i], dtype_name(types[i].dtype), shape_str(types[i].shape));
  return out;
}

SoundnessResult check_rule(const egraph::Rule& rule, const egraph::hlir::HlirLanguage& lang, uint64_t seed,
                           int trials) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, {}};
  if (rule.lhs.size() != 1) {
    result.detail = "multi-pattern rules are not checked";
    return result;
  }
  for (const egraph::Rule::Action& action : rule.actions)
    if (action.kind != egraph::ActionSpec::Kind::Union || action.target != UINT32_MAX) {
      result.detail = "custom appliers and unions into other variables are not checked";
      return result;
    }
  const size_t num_vars = rule.vars.classes.size();
  Sampler sampler(seed);
  int attempts = 0;
  try {
    while (result.trials < trials && attempts < 400) {
      ++attempts;
      const std::vector<TensorType> types = sampler.draw(num_vars);
      Graph g("check");
      std::vector<Edge> vars;
      for (size_t v = 0; v < num_vars; ++v)
        vars.push_back(Edge{g.add_source(Op::Input, NameAttr{rule.vars.classes[v]}, types[v].dtype, types[v].shape), {}});
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
      const interp::Env env = interp::random_inputs(g, seed + static_cast<uint64_t>(attempts), 4);
      std::map<std::string, interp::HostTensor> out;
      try {
        out = interp::run(g, env);
      } catch (const Error&) {
        continue;  // e.g. an index out of range on the left side: not a sample
      }
      ++result.trials;
      const interp::HostTensor& left = out.at("lhs");
      for (size_t a = 0; a < rule.actions.size(); ++a) {
        const interp::HostTensor& right = out.at("rhs" + std::to_string(a));
        if (left.dtype() != right.dtype() || left.shape() != right.shape()) {
          result.status = SoundnessResult::Status::Unsound;
          result.detail = fmt::format("the sides have different types, {}{} vs {}{} ({})", dtype_name(left.dtype()),
                                      shape_str(left.shape()), dtype_name(right.dtype()), shape_str(right.shape()),
                                      types_str(rule.vars.classes, types));
          return result;
        }
        const int64_t at = first_difference(left, right);
        if (at >= 0) {
          std::string inputs;
          for (const auto& [name, value] : env) {
            inputs += fmt::format("\n    {} = [", name);
            for (int64_t i = 0; i < std::min<int64_t>(value.size(), 8); ++i) inputs += fmt::format("{}{}", i ? ", " : "", value.get(i));
            inputs += value.size() > 8 ? ", ...]" : "]";
          }
          result.status = SoundnessResult::Status::Unsound;
          result.detail = fmt::format("the sides differ at element {}: left {} vs right {} ({}); inputs:{}", at,
                                      left.get(at), right.get(at), types_str(rule.vars.classes, types), inputs);
          return result;
        }
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
  result.status = SoundnessResult::Status::Sound;
  return result;
}

}  // namespace

std::vector<SoundnessResult> check_soundness(std::span<const egraph::RuleSet> rulesets,
                                             const egraph::hlir::HlirLanguage& language, uint64_t seed, int trials) {
  std::vector<SoundnessResult> results;
  for (const egraph::RuleSet& set : rulesets)
    for (const egraph::Rule& rule : set.rules) results.push_back(check_rule(rule, language, seed, trials));
  return results;
}

}  // namespace spool::rules
