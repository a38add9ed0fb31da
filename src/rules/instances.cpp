// The random instances the soundness checker runs rules on.

#include "instances.hpp"

#include <spool/nn/nn.hpp>

#include <algorithm>

namespace spool::rules::detail {

using egraph::AttrId;
using egraph::OpId;
using egraph::Pattern;
using egraph::PatternNode;

egraph::ClassId Instantiator::var(const TensorType& t) {
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

AttrId Instantiator::attr(OpId op, const std::vector<TensorType>& kids) {
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

egraph::ClassId Instantiator::var_view(const TensorType& t) {
  Shape source;
  const View v = random_view_to(t.shape, source);
  return view(input({t.dtype, source}), v);
}

egraph::ClassId Instantiator::fused(const std::vector<egraph::ClassId>& kids, DType dtype, size_t /*rank*/) {
  return add(Op::Fused, random_program(kids.size(), dtype), kids);
}

ProgramAttr Instantiator::random_program(size_t k, DType dtype) {
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

View Instantiator::random_view_to(const Shape& target, Shape& source) {
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

View Instantiator::random_view_from(const Shape& source) {
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
        case 0:
          output("y", kernel(Op::Softmax, {xh.cast(DType::F32)}, AxisAttr{static_cast<int64_t>(rng() % 3)}));
          break;
        case 1:
          output("y", kernel(Op::RmsNorm, {xh.cast(DType::F32), f32("w", {n})}, norm));
          break;
        case 2:
          output("y", kernel(Op::RmsNorm, {xh.cast(DType::F32), f32("w", {n}) + 1.0}, norm));
          break;
        default:
          output("y", kernel(Op::LayerNorm, {xh.cast(DType::F32), f32("w", {n}), f32("b", {n})}, norm));
          break;
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

}  // namespace spool::rules::detail
