// Type inference of the kernel ops and of their elementwise programs.
//
// An instruction of a program is typed exactly as the HLIR op would be on
// scalars (infer_type on shape []), so a program and the elementwise graph
// it was fused from agree on every dtype.

#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>

namespace spool {
namespace {

bool program_op_allowed(Op op) {
  switch (op_info(op).cls) {
    case OpClass::Unary:
    case OpClass::Cast:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Select: return true;
    case OpClass::Source: return op == Op::Constant || op == Op::Iota;
    case OpClass::Reduce:
    case OpClass::Gather:
    case OpClass::Scatter:
    case OpClass::TopK:
    case OpClass::Grouped:
    case OpClass::Kernel:
    case OpClass::LoopMarker: return false;
  }
  return false;
}

void expect_same_shapes(std::string_view op, const std::vector<TensorType>& in, size_t first, size_t last,
                        const char* what) {
  for (size_t i = first + 1; i < last; ++i)
    if (in[i].shape != in[first].shape)
      fail("{}: {} inputs must share one shape: input {} is {} but input {} is {}", op, what, first,
           shape_str(in[first].shape), i, shape_str(in[i].shape));
}

std::vector<DType> dtypes(const std::vector<TensorType>& in, size_t first, size_t last) {
  std::vector<DType> out;
  for (size_t i = first; i < last; ++i) out.push_back(in[i].dtype);
  return out;
}

}  // namespace

std::vector<DType> program_types(const ProgramAttr& program, std::span<const DType> inputs, size_t rank,
                                 std::string_view op) {
  std::vector<DType> types(inputs.begin(), inputs.end());
  if (program.instrs.empty() && inputs.empty()) fail("{}: an empty program needs an input", op);
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const ProgramInstr& instr = program.instrs[i];
    if (!program_op_allowed(instr.op))
      fail("{}: instruction {} ({}) is not elementwise", op, i, op_name(instr.op));
    if (instr.op == Op::Constant) {
      types.push_back(instr.value.dtype);
      continue;
    }
    if (instr.op == Op::Iota) {
      if (instr.axis < 0 || instr.axis >= static_cast<int64_t>(rank))
        fail("{}: instruction {} (iota) axis {} is out of range for rank {}", op, i, instr.axis, rank);
      if (!is_numeric(instr.dtype)) fail("{}: instruction {} (iota) is not numeric", op, i);
      types.push_back(instr.dtype);
      continue;
    }
    std::vector<TensorType> args;
    for (int a = 0; a < op_info(instr.op).arity; ++a) {
      const uint16_t v = instr.args[static_cast<size_t>(a)];
      if (v >= types.size())
        fail("{}: instruction {} ({}) reads ${} before it is defined", op, i, op_name(instr.op), v);
      args.push_back({types[v], {}});
    }
    const Attr attr = instr.op == Op::Cast ? Attr{DTypeAttr{instr.dtype}} : Attr{NoAttr{}};
    try {
      types.push_back(infer_type(instr.op, args, attr).dtype);
    } catch (const Error& e) {
      fail("{}: instruction {}: {}", op, i, e.what());
    }
  }
  return types;
}

DType program_result(const ProgramAttr& program, std::span<const DType> inputs, size_t rank, std::string_view op) {
  return program_types(program, inputs, rank, op).back();
}

bool is_sum_program(const ProgramAttr& p, size_t inputs) {
  std::vector<int> uses(inputs + p.instrs.size(), 0);
  for (const ProgramInstr& in : p.instrs) {
    if (in.op != Op::Add && in.op != Op::Max) return false;
    ++uses[in.args[0]];
    ++uses[in.args[1]];
  }
  for (size_t i = 0; i + 1 < inputs + p.instrs.size(); ++i)
    if (uses[i] != 1) return false;
  return !p.instrs.empty();
}

bool is_sum_of_parts(Op op, DType dtype, const Attr& attr, size_t inputs) {
  if (op == Op::Add) return dtype != DType::Bool;
  if (op == Op::Max) return dtype == DType::Bool;
  return op == Op::Fused && is_sum_program(std::get<ProgramAttr>(attr), inputs);
}

TensorType infer_kernel_type(Op op, const std::vector<TensorType>& in, const Attr& attr) {
  const std::string_view name = op_name(op);
  switch (op) {
    case Op::Fused: {
      expect_same_shapes(name, in, 0, in.size(), "all");
      const ProgramAttr& program = std::get<ProgramAttr>(attr);
      return {program_result(program, dtypes(in, 0, in.size()), in[0].shape.size(), name), in[0].shape};
    }
    case Op::Gemm: {
      const GemmAttr& g = std::get<GemmAttr>(attr);
      const size_t na = static_cast<size_t>(g.a_inputs), nb = static_cast<size_t>(g.b_inputs);
      if (g.a_inputs < 1 || g.b_inputs < 1 || na + nb > in.size())
        fail("gemm: {} inputs cannot hold {} A and {} B operands", in.size(), g.a_inputs, g.b_inputs);
      expect_same_shapes(name, in, 0, na, "A");
      expect_same_shapes(name, in, na, na + nb, "B");
      const Shape& a = in[0].shape;
      const Shape& b = in[na].shape;
      if (a.size() < 2 || b.size() != a.size())
        fail("gemm: operands must have the same rank of at least 2, got A {} and B {}", shape_str(a), shape_str(b));
      const DType ta = program_result(g.a, dtypes(in, 0, na), a.size(), "gemm A");
      const DType tb = program_result(g.b, dtypes(in, na, na + nb), b.size(), "gemm B");
      if (ta != tb) fail("gemm: dtypes differ: A {} vs B {}", dtype_name(ta), dtype_name(tb));
      if (!is_numeric(ta)) fail("gemm: not defined on bool");
      const size_t r = a.size();
      if (a[r - 1] != b[r - 2]) fail("gemm: inner dimensions differ: A {} vs B {}", shape_str(a), shape_str(b));
      for (size_t i = 0; i + 2 < r; ++i)
        if (a[i] != b[i]) fail("gemm: batch dimensions differ: A {} vs B {}", shape_str(a), shape_str(b));
      Shape out(a.begin(), a.end() - 1);
      out.push_back(b[r - 1]);
      std::vector<DType> epilogue_inputs{ta};
      for (size_t i = na + nb; i < in.size(); ++i) {
        if (in[i].shape != out)
          fail("gemm: epilogue input {} is {} but the product is {}", i, shape_str(in[i].shape), shape_str(out));
        epilogue_inputs.push_back(in[i].dtype);
      }
      return {program_result(g.epilogue, epilogue_inputs, out.size(), "gemm epilogue"), out};
    }
    case Op::Reduce: {
      const ReduceAttr& r = std::get<ReduceAttr>(attr);
      if (r.kind != Op::SumReduce && r.kind != Op::MaxReduce)
        fail("reduce: kind must be sum_reduce or max_reduce, got {}", op_name(r.kind));
      expect_same_shapes(name, in, 0, in.size(), "all");
      const DType value = program_result(r.prologue, dtypes(in, 0, in.size()), in[0].shape.size(), "reduce prologue");
      const TensorType reduced = infer_type(r.kind, {{value, in[0].shape}}, AxisAttr{r.axis});
      const DType out = program_result(r.epilogue, std::vector<DType>{reduced.dtype}, reduced.shape.size(),
                                       "reduce epilogue");
      return {out, reduced.shape};
    }
    case Op::Softmax: {
      if (!is_float(in[0].dtype)) fail("softmax: expects a floating dtype, got {}", dtype_name(in[0].dtype));
      const int64_t axis = std::get<AxisAttr>(attr).axis;
      if (axis < 0 || axis >= static_cast<int64_t>(in[0].shape.size()))
        fail("softmax: axis {} is out of range for {}", axis, shape_str(in[0].shape));
      if (in[0].shape[static_cast<size_t>(axis)] == 0) fail("softmax: axis {} is empty", axis);
      return in[0];
    }
    case Op::RmsNorm:
    case Op::LayerNorm: {
      const TensorType& x = in[0];
      if (!is_float(x.dtype)) fail("{}: expects a floating dtype, got {}", name, dtype_name(x.dtype));
      if (x.shape.empty()) fail("{}: input must have at least one axis", name);
      for (size_t i = 1; i < in.size(); ++i)
        if (in[i].shape != Shape{x.shape.back()} || in[i].dtype != x.dtype)
          fail("{}: parameter {} must be {}[{}], got {}{}", name, i, dtype_name(x.dtype), x.shape.back(),
               dtype_name(in[i].dtype), shape_str(in[i].shape));
      if (op == Op::LayerNorm && std::get<NormAttr>(attr).unit_offset)
        fail("layer_norm: unit_offset applies to rms_norm only");
      return x;
    }
    case Op::Copy: return in[0];
    default: SPOOL_ASSERT(false, "{} is not a kernel op", name);
  }
}

}  // namespace spool
