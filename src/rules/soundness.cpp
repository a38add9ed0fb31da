// The soundness checker: random types, random tensors, both sides through
// the reference interpreter. Rules written as formulas are evaluated as one
// graph; rules with appliers or attribute variables are run on a small
// e-graph holding a random instance of their left side.

#include <spool/interp/interp.hpp>
#include <spool/nn/nn.hpp>
#include <spool/rules/soundness.hpp>
#include <spool/support/error.hpp>

#include <spool/egraph/extract.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>

namespace spool::rules {
namespace {

using egraph::AttrId;
using egraph::OpId;
using egraph::Pattern;
using egraph::PatternNode;

class Unsupported {
 public:
  std::string why;
};
// An instance that does not fit the left side: draw another.
struct Retry {};

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

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 1e-5;
    case DType::BF16:
      return 1e-2;
    case DType::F16:
      return 1e-3;
    case DType::I32:
    case DType::I64:
    case DType::Bool:
      return 0.0;
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

class Instantiator {
 public:
  Instantiator(hlir::HlirLanguage& lang, egraph::EGraph& g, std::mt19937_64& rng)
      : lang_(lang), g_(g), rng_(rng) {}

  const hlir::ClassData& data(egraph::ClassId c) const {
    return dynamic_cast<const hlir::HlirAnalysis&>(*g_.analysis()).data(g_.find_const(c));
  }

  egraph::ClassId input(const TensorType& t) {
    return g_.add_leaf(lang_.op(Op::Input), lang_.source_attr(NameAttr{fmt::format("in{}", inputs_++)}, t));
  }
  egraph::ClassId view(egraph::ClassId c, const View& v) {
    if (v.is_identity()) return c;
    return g_.add(lang_.view_op(), lang_.view_attr(v), std::span<const egraph::ClassId>(&c, 1));
  }

  // A class of type `t`: an input, or a view, fused program, gemm or
  // reduction producing it.
  egraph::ClassId var(const TensorType& t) {
    const int pick = static_cast<int>(rng_() % 100);
    const size_t rank = t.shape.size();
    if (pick < 40) return input(t);
    if (pick < 58) {  // a view of an input
      Shape source;
      const View v = random_view_to(t.shape, source);
      return view(input({t.dtype, source}), v);
    }
    if (pick < 74) {  // a fused program over inputs (or views of inputs)
      std::vector<egraph::ClassId> kids;
      const size_t k = 1 + rng_() % 2;
      for (size_t i = 0; i < k; ++i) kids.push_back(coin(0.7) ? input(t) : var_view(t));
      return fused(kids, t.dtype, rank);
    }
    if (pick < 84 && rank >= 2 && is_numeric(t.dtype)) {  // a gemm
      Shape a = t.shape, b = t.shape;
      const int64_t k = 1 + static_cast<int64_t>(rng_() % 4);
      a[rank - 1] = k;
      b[rank - 2] = k;
      std::vector<egraph::ClassId> kids{input({t.dtype, a}), input({t.dtype, b})};
      GemmAttr attr;
      if (coin(0.3)) {
        kids.push_back(input(t));
        attr.epilogue = random_program(2, t.dtype);
      }
      return add(Op::Gemm, attr, kids);
    }
    if (pick < 92 && is_numeric(t.dtype)) {  // a reduction
      const size_t axis = rng_() % (rank + 1);
      Shape in = t.shape;
      in.insert(in.begin() + static_cast<ptrdiff_t>(axis), 1 + static_cast<int64_t>(rng_() % 4));
      ReduceAttr attr;
      attr.kind = coin(0.5) ? Op::SumReduce : Op::MaxReduce;
      attr.axis = static_cast<int64_t>(axis);
      std::vector<egraph::ClassId> kids{input({t.dtype, in})};
      if (coin(0.5)) attr.prologue = random_program(1, t.dtype);
      return add(Op::Reduce, attr, kids);
    }
    // a view of a fused program
    Shape source;
    const View v = random_view_to(t.shape, source);
    const TensorType st{t.dtype, source};
    return view(fused({input(st), input(st)}, t.dtype, source.size()), v);
  }

  // A random attribute for `op` over children of types `kids`.
  AttrId attr(OpId op, const std::vector<TensorType>& kids) {
    if (op == lang_.view_op()) {
      if (kids.size() != 1) throw Unsupported{"views of several inputs"};
      return lang_.view_attr(random_view_from(kids[0].shape));
    }
    const Op hop = *lang_.hlir_op(op);
    const size_t rank = kids.empty() ? 0 : kids[0].shape.size();
    auto axis = [&] {
      if (rank == 0) throw Retry{};
      return static_cast<int64_t>(rng_() % rank);
    };
    switch (op_info(hop).attr) {
      case AttrKind::None:
        return AttrId{};
      case AttrKind::Axis:
        return lang_.attr(AxisAttr{axis()});
      case AttrKind::DType:
        return lang_.attr(DTypeAttr{kAllDTypes[rng_() % std::size(kAllDTypes)]});
      case AttrKind::TopK:
        if (rank == 0) throw Retry{};
        return lang_.attr(TopKAttr{1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(kids[0].shape.back()))});
      case AttrKind::Program:
        return lang_.attr(random_program(kids.size(), kids.at(0).dtype));
      case AttrKind::Gemm: {
        if (kids.size() < 2) throw Retry{};
        GemmAttr g;
        if (kids.size() > 2 || coin(0.3)) g.epilogue = random_program(kids.size() - 1, kids[0].dtype);
        return lang_.attr(g);
      }
      case AttrKind::Reduce: {
        ReduceAttr r;
        r.kind = coin(0.5) ? Op::SumReduce : Op::MaxReduce;
        r.axis = axis();
        if (kids.size() > 1 || coin(0.5)) r.prologue = random_program(kids.size(), kids.at(0).dtype);
        return lang_.attr(r);
      }
      case AttrKind::Loop:
        return lang_.attr(LoopAttr{0, 1 + static_cast<int64_t>(rng_() % 4), 0});
      case AttrKind::Name:
      case AttrKind::Scalar:
      case AttrKind::Norm:
        break;
    }
    throw Unsupported{fmt::format("random attributes of {}", op_info(hop).name)};
  }

  egraph::ClassId add_node(OpId op, AttrId attr, const std::vector<egraph::ClassId>& kids) {
    return g_.add(op, attr, std::span<const egraph::ClassId>(kids.data(), kids.size()));
  }
  egraph::ClassId add(Op op, const Attr& attr, const std::vector<egraph::ClassId>& kids) {
    return g_.add(lang_.op(op), lang_.attr(attr), std::span<const egraph::ClassId>(kids.data(), kids.size()));
  }

  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

 private:
  egraph::ClassId var_view(const TensorType& t) {
    Shape source;
    const View v = random_view_to(t.shape, source);
    return view(input({t.dtype, source}), v);
  }

  egraph::ClassId fused(const std::vector<egraph::ClassId>& kids, DType dtype, size_t /*rank*/) {
    return add(Op::Fused, random_program(kids.size(), dtype), kids);
  }

  // A program over `k` inputs of `dtype` with a result of `dtype`.
  ProgramAttr random_program(size_t k, DType dtype) {
    std::vector<Op> ops;
    if (dtype == DType::Bool) {
      ops = {Op::Mul, Op::Max, Op::Not};
    } else if (is_float(dtype)) {
      ops = {Op::Add, Op::Mul, Op::Max, Op::Neg, Op::Recip, Op::Exp2};
    } else {
      ops = {Op::Add, Op::Mul, Op::Max, Op::Neg};
    }
    ProgramAttr p;
    const size_t n = 1 + rng_() % 3;
    size_t values = k;
    for (size_t i = 0; i < n; ++i) {
      ProgramInstr instr;
      if (coin(0.15) && dtype != DType::Bool) {
        instr.op = Op::Constant;
        instr.value = Scalar::of(dtype, coin(0.5) ? 0.5 : 2.0);
        p.instrs.push_back(instr);
        ++values;
        continue;
      }
      instr.op = ops[rng_() % ops.size()];
      for (int a = 0; a < op_info(instr.op).arity; ++a)
        instr.args[static_cast<size_t>(a)] = static_cast<uint16_t>(a == 0 && values > k ? values - 1 : rng_() % values);
      p.instrs.push_back(instr);
      ++values;
    }
    if (p.instrs.back().op == Op::Constant) {  // the result reads an input
      ProgramInstr instr;
      instr.op = dtype == DType::Bool ? Op::Max : Op::Add;
      instr.args = {static_cast<uint16_t>(values - 1), 0, 0};
      p.instrs.push_back(instr);
    }
    return p;
  }

  // A view reading a buffer (whose shape it sets in `source`) as `target`:
  // a broadcast of some axes, after a permutation, or a slice of one axis.
  View random_view_to(const Shape& target, Shape& source) {
    const size_t rank = target.size();
    View v;
    if (rank == 0) {
      source = {1};
      v.append(reshape_step({}), source, "check");
      return v;
    }
    const int kind = static_cast<int>(rng_() % 4);
    if (kind == 3) {  // padding of one axis (a concat's input), where it has room
      const size_t a = rng_() % rank;
      if (target[a] >= 2) {
        source = target;
        const int64_t before = static_cast<int64_t>(rng_() % 2);
        const int64_t after = target[a] - 1 - before > 0 ? 1 : 0;
        source[a] = target[a] - before - after;
        Shape befores(rank, 0), afters(rank, 0);
        befores[a] = before;
        afters[a] = after;
        v.append(pad_step(befores, afters, coin(0.5) ? -0.0 : 1.0), source, "check");
        return v;
      }
    }
    if (kind == 2) {  // slice of a larger axis
      const size_t a = rng_() % rank;
      source = target;
      const int64_t extra = 1 + static_cast<int64_t>(rng_() % 3);
      source[a] += extra;
      Shape start(rank, 0), stop = source, step(rank, 1);
      start[a] = static_cast<int64_t>(rng_() % static_cast<uint64_t>(extra + 1));
      stop[a] = start[a] + target[a];
      v.append(slice_step(start, stop, step), source, "check");
      return v;
    }
    // Broadcast: one axis (or a random subset) read from size 1.
    Shape stored = target;
    if (coin(0.6)) {
      stored[rng_() % rank] = 1;
    } else {
      for (int64_t& d : stored)
        if (coin(0.3)) d = 1;
    }
    if (kind == 1 && rank >= 2) {  // stored permuted
      Shape perm(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng_);
      source = Shape(rank);
      for (size_t i = 0; i < rank; ++i) source[i] = stored[static_cast<size_t>(perm[i])];
      Shape inverse(rank);
      for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      v.append(permute_step(inverse), source, "check");
    } else {
      source = stored;
    }
    v.append(expand_step(target), source, "check");
    return v;
  }

  // A random view of a buffer of shape `source`.
  View random_view_from(const Shape& source) {
    const size_t rank = source.size();
    View v;
    const int kind = static_cast<int>(rng_() % 5);
    if (rank >= 1 && kind == 4) {  // pad one axis by one element (a concat's input)
      Shape befores(rank, 0), afters(rank, 0);
      (coin(0.5) ? befores : afters)[rng_() % rank] = 1;
      v.append(pad_step(befores, afters, coin(0.5) ? -0.0 : 1.0), source, "check");
    } else if (rank >= 2 && kind == 0) {
      Shape perm(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng_);
      v.append(permute_step(perm), source, "check");
    } else if (rank >= 1 && kind == 1) {
      const size_t a = rng_() % rank;
      Shape start(rank, 0), stop = source, step(rank, 1);
      start[a] = static_cast<int64_t>(rng_() % static_cast<uint64_t>(source[a]));
      step[a] = 1 + static_cast<int64_t>(rng_() % 2);
      v.append(slice_step(start, stop, step), source, "check");
    } else if (kind == 2) {
      Shape with_unit = source;
      with_unit.insert(with_unit.begin() + static_cast<ptrdiff_t>(rng_() % (rank + 1)), 1);
      v.append(reshape_step(with_unit), source, "check");
      Shape wide = with_unit;
      for (int64_t& d : wide)
        if (d == 1) d = 1 + static_cast<int64_t>(rng_() % 3);
      v.append(expand_step(wide), source, "check");
    } else {
      Shape flat{num_elements(source)};
      v.append(reshape_step(flat), source, "check");
    }
    return v;
  }

  hlir::HlirLanguage& lang_;
  egraph::EGraph& g_;
  std::mt19937_64& rng_;
  int inputs_ = 0;
};

// Builds the left side `pattern` into `inst`'s graph; variables read `vars`
// (made on first use from `types`), attribute variables `attrs`.
egraph::ClassId build_lhs(const Pattern& pattern, Instantiator& inst, const std::vector<TensorType>& types,
                          std::vector<egraph::ClassId>& vars, std::vector<std::optional<AttrId>>& attrs) {
  std::vector<egraph::ClassId> value(pattern.nodes.size());
  for (size_t i = 0; i < pattern.nodes.size(); ++i) {
    const PatternNode& n = pattern.nodes[i];
    switch (n.kind) {
      case PatternNode::Kind::Wildcard:
        value[i] = inst.var(types.back());
        break;
      case PatternNode::Kind::Var:
        if (!vars[n.var].valid()) vars[n.var] = inst.var(types[n.var]);
        value[i] = vars[n.var];
        break;
      case PatternNode::Kind::Node: {
        std::vector<egraph::ClassId> kids;
        std::vector<TensorType> kid_types;
        for (uint32_t k : pattern.kids(n)) {
          kids.push_back(value[k]);
          const hlir::ClassData& d = inst.data(value[k]);
          if (!d.ok) throw Retry{};
          kid_types.push_back(d.type);
        }
        AttrId attr = n.attr.id;
        if (n.attr.kind == egraph::AttrPattern::Kind::Any) attr = inst.attr(n.op, kid_types);
        if (n.attr.kind == egraph::AttrPattern::Kind::Var) {
          if (!attrs[n.attr.var]) attrs[n.attr.var] = inst.attr(n.op, kid_types);
          attr = *attrs[n.attr.var];
        }
        value[i] = inst.add_node(n.op, attr, kids);
      }
    }
  }
  return value[pattern.root()];
}

// Instances of the composites that recognition rules look for, built by
// spool::nn with random shapes and a random floating dtype: their exact
// structure (constants, keepdim views) cannot be drawn at random.
Graph nn_instance(std::mt19937_64& rng, size_t which) {
  static constexpr DType kFloats[] = {DType::F32, DType::F32, DType::BF16, DType::F16};
  const DType dt = kFloats[rng() % std::size(kFloats)];
  auto dim = [&] { return 1 + static_cast<int64_t>(rng() % 4); };
  Graph g("nn");
  const Shape x_shape{dim(), dim() + 1, dim() + 1};
  const Tensor x = input(g, "x", dt, x_shape);
  const int64_t n = x_shape.back();
  switch (which % 7) {
    case 0:
      output("y", nn::softmax(x, static_cast<int64_t>(rng() % 3)));
      break;
    case 6: {  // an f32 softmax or norm kernel between the casts of a half-precision composite
      const DType half = rng() % 2 == 0 ? DType::BF16 : DType::F16;
      const Tensor xh = input(g, "xh", half, x_shape);
      auto f32 = [&](const char* name, const Shape& shape) { return input(g, name, half, shape).cast(DType::F32); };
      auto kernel = [&](Op op, const std::vector<Tensor>& in, Attr attr) {
        std::vector<Edge> edges;
        for (const Tensor& t : in) edges.push_back(t.edge());
        return Tensor(&g, g.add(op, std::move(edges), std::move(attr))).cast(half);
      };
      const NormAttr norm{rng() % 2 == 0 ? 1e-5 : 1e-6, false};
      switch (rng() % 4) {
        case 0: output("y", kernel(Op::Softmax, {xh.cast(DType::F32)}, AxisAttr{static_cast<int64_t>(rng() % 3)})); break;
        case 1: output("y", kernel(Op::RmsNorm, {xh.cast(DType::F32), f32("w", {n})}, norm)); break;
        case 2: output("y", kernel(Op::RmsNorm, {xh.cast(DType::F32), f32("w", {n}) + 1.0}, norm)); break;
        default: output("y", kernel(Op::LayerNorm, {xh.cast(DType::F32), f32("w", {n}), f32("b", {n})}, norm)); break;
      }
      break;
    }
    case 1:
      output("y", nn::rms_norm(x, input(g, "w", dt, {n}), 1e-5, rng() % 2 == 0));
      break;
    case 2:
      output("y", nn::layer_norm(x, input(g, "w", dt, {n}), input(g, "b", dt, {n}), 1e-5));
      break;
    case 3: {  // a linear layer with bias and SiLU, then a batched matmul with a transposed operand
      const Tensor h = nn::silu(nn::linear(x, input(g, "w", dt, {3, n}), input(g, "b", dt, {3})));
      output("y", nn::matmul(h, input(g, "v", dt, {x_shape[0], 2, 3}).transpose(-1, -2)));
      break;
    }
    case 4: {  // llama4's chunked SwiGLU feeding the down projection
      const std::vector<Tensor> gate_up = nn::chunk(nn::linear(x, input(g, "w", dt, {2 * n, n})), 2, -1);
      output("y", nn::linear(nn::swiglu(gate_up[0], gate_up[1]), input(g, "d", dt, {n, n})));
      break;
    }
    default: {  // causal attention with grouped KV heads
      const int64_t s = dim() + 1, d = 2 * dim();
      const Tensor q = input(g, "q", dt, {4, s, d});
      output("y", nn::attention(q, input(g, "k", dt, {2, s, d}), input(g, "v", dt, {2, s, d}), true));
      break;
    }
  }
  return g;
}

SoundnessResult check_applied_rule(const egraph::Rule& rule, hlir::HlirLanguage& lang, uint64_t seed,
                                   int trials) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, {}};
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
      const std::vector<TensorType> types = sampler.draw(num_vars + 1);  // the last for wildcards
      std::vector<egraph::ClassId> vars(num_vars);
      std::vector<std::optional<AttrId>> attrs(rule.vars.attrs.size());
      if (attempts % 4 == 3 || unsupported) {
        // Every fourth instance is an nn composite (a whole small graph).
        hlir::add_graph(*g, lang, nn_instance(rng, static_cast<size_t>(unsupported ? attempts : attempts / 4)));
      } else {
        egraph::ClassId root;
        try {
          root = build_lhs(rule.lhs[0], inst, types, vars, attrs);
        } catch (const Unsupported& u) {
          unsupported = u.why;
          continue;
        } catch (const Retry&) {
          continue;
        } catch (const Error&) {
          continue;  // a random view or attribute that does not fit: draw again
        }
        if (!inst.data(root).ok) continue;
      }
      g->rebuild();

      // Every match, every action, nothing merged: (target, built) pairs.
      egraph::MatchSet ms;
      egraph::search(*g, rule.query, egraph::query_candidates(*g, rule.query), ms);
      std::vector<std::pair<egraph::ClassId, egraph::ClassId>> built;
      std::vector<egraph::ClassId> scratch;
      std::vector<egraph::ClassId> args;
      std::vector<AttrId> attr_args;
      for (size_t m = 0; m < std::min<size_t>(ms.size(), 4); ++m) {
        const egraph::ClassId* mv = ms.vars(m);
        const AttrId* ma = ms.attr_vars(m);
        auto view = [&](const egraph::Rule::Args& a) {
          args.clear();
          attr_args.clear();
          for (uint32_t v : a.classes) args.push_back(g->find(mv[v]));
          for (uint32_t v : a.attrs) attr_args.push_back(ma[v]);
          return egraph::MatchView{g->find(ms.root(m)), std::span<const egraph::ClassId>(args),
                                   std::span<const AttrId>(attr_args)};
        };
        bool pass = true;
        for (const egraph::Rule::Guard& guard : rule.guards) pass = pass && guard.fn(*g, view(guard.args));
        if (!pass) continue;
        for (const egraph::Rule::Action& action : rule.actions) {
          const egraph::ClassId target = action.target == UINT32_MAX ? ms.root(m) : mv[action.target];
          std::optional<egraph::ClassId> c;
          if (action.kind == egraph::ActionSpec::Kind::Union) {
            c = egraph::instantiate(*g, action.pattern, mv, ma, scratch);
          } else {
            try {
              c = action.applier(*g, view(action.args));
            } catch (const Error& e) {
              return unsound(fmt::format("the applier failed: {}", e.what()));
            }
          }
          if (c) built.emplace_back(target, *c);
        }
      }
      if (built.empty()) continue;  // the rule did not apply to this instance
      ++fired;
      g->rebuild();
      for (const auto& [target, c] : built) {
        const hlir::ClassData& want = inst.data(target);
        const hlir::ClassData& got = inst.data(c);
        if (!got.ok) return unsound(fmt::format("the right side does not type-check: {}", got.error));
        if (got.type != want.type)
          return unsound(fmt::format("the sides have different types, {}{} vs {}{}", dtype_name(want.type.dtype),
                                     shape_str(want.type.shape), dtype_name(got.type.dtype),
                                     shape_str(got.type.shape)));
      }
      std::vector<egraph::ClassId> roots;
      for (const auto& [target, c] : built) {
        roots.push_back(target);
        roots.push_back(c);
      }
      const egraph::AstSize size;
      const egraph::Extractor extractor(*g, size);
      const egraph::Extraction extraction = extractor.extract(roots);
      const Graph both = hlir::to_graph(lang, extraction.term);
      const interp::Env env = interp::random_inputs(both, seed + static_cast<uint64_t>(attempts), 4);
      std::map<std::string, interp::HostTensor> out;
      try {
        out = interp::run(both, env);
      } catch (const Error&) {
        continue;  // e.g. an integer mod by zero on the left side: not a sample
      }
      ++result.trials;
      for (size_t i = 0; i < built.size(); ++i) {
        const interp::HostTensor& left = out.at(fmt::format("out{}", 2 * i));
        const interp::HostTensor& right = out.at(fmt::format("out{}", 2 * i + 1));
        const int64_t at = first_difference(left, right);
        if (at >= 0)
          return unsound(fmt::format("the sides differ at element {}: left {} vs right {}; left {} => right {}", at,
                                     left.get(at), right.get(at), extraction.term.str(lang.language(), 2 * i),
                                     extraction.term.str(lang.language(), 2 * i + 1)));
      }
    }
  } catch (const Unsupported& u) {
    result.detail = u.why + " are not checked";
    return result;
  }
  if (result.trials == 0) {
    if (unsupported)
      result.detail = *unsupported + " are not checked (and no nn instance matched)";
    else
      result.detail = fired == 0 ? fmt::format("the rule never applied to {} random instances of its left side", attempts)
                                 : "no instance could be run on tensors";
    return result;
  }
  result.status = SoundnessResult::Status::Sound;
  return result;
}

SoundnessResult check_rule(const egraph::Rule& rule, hlir::HlirLanguage& lang, uint64_t seed, int trials) {
  SoundnessResult result{rule.name, rule.loc, SoundnessResult::Status::NotChecked, 0, {}};
  if (rule.lhs.size() != 1) {
    result.detail = "multi-pattern rules are not checked";
    return result;
  }
  // Appliers, unions into other variables and attribute patterns: run the rule.
  bool formula = rule.vars.attrs.empty();
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
  if (!formula) return check_applied_rule(rule, lang, seed, trials);
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
            for (int64_t i = 0; i < std::min<int64_t>(value.size(), 8); ++i)
              inputs += fmt::format("{}{}", i ? ", " : "", value.get(i));
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
                                             hlir::HlirLanguage& language, uint64_t seed, int trials) {
  std::vector<SoundnessResult> results;
  for (const egraph::RuleSet& set : rulesets)
    for (const egraph::Rule& rule : set.rules) results.push_back(check_rule(rule, language, seed, trials));
  return results;
}

}  // namespace spool::rules
