// Reference semantics of the kernel ops, defined to be exactly the HLIR they
// replace: programs run the elementwise ops one by one (elementwise.cpp),
// gemm is nn::matmul's multiply-then-sum (each product rounded to the dtype,
// the sum over K in order in double, rounded once), and softmax and the
// norms run the nn composites themselves, so a rule that rewrites HLIR into
// a kernel is exact by construction.

#include "kernels.hpp"

#include "elementwise.hpp"

#include <spool/interp/interp.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/nn/nn.hpp>
#include <spool/support/error.hpp>

namespace spool::interp::detail {
namespace {

// Runs `program` elementwise over `inputs` (all of shape `shape`).
HostTensor run_program(const ProgramAttr& program, const std::vector<const HostTensor*>& inputs, const Shape& shape,
                       DType result) {
  if (program.instrs.empty()) return *inputs.front();
  HostTensor out(result, shape);
  const Shape strides = dense_strides(shape);
  std::vector<Scalar> values(inputs.size() + program.instrs.size());
  std::array<Scalar, 3> args;
  for (int64_t i = 0; i < out.size(); ++i) {
    for (size_t k = 0; k < inputs.size(); ++k) values[k] = load(*inputs[k], i);
    size_t v = inputs.size();
    for (const ProgramInstr& instr : program.instrs) {
      if (instr.op == Op::Constant) {
        values[v++] = instr.value;
      } else if (instr.op == Op::Iota) {
        const size_t axis = static_cast<size_t>(instr.axis);
        Scalar index;
        index.dtype = DType::I64;
        index.i = (i / strides[axis]) % shape[axis];
        values[v++] = apply(Op::Cast, std::span<const Scalar>(&index, 1), instr.dtype);
      } else {
        const int arity = op_info(instr.op).arity;
        for (int a = 0; a < arity; ++a) args[static_cast<size_t>(a)] = values[instr.args[static_cast<size_t>(a)]];
        values[v++] = apply(instr.op, std::span<const Scalar>(args.data(), static_cast<size_t>(arity)), instr.dtype);
      }
    }
    store(out, i, values[v - 1]);
  }
  return out;
}

std::vector<const HostTensor*> slice_of(const std::vector<HostTensor>& in, size_t first, size_t last) {
  std::vector<const HostTensor*> out;
  for (size_t i = first; i < last; ++i) out.push_back(&in[i]);
  return out;
}

std::vector<DType> dtypes_of(const std::vector<const HostTensor*>& in) {
  std::vector<DType> out;
  for (const HostTensor* t : in) out.push_back(t->dtype());
  return out;
}

HostTensor program_over(const ProgramAttr& program, const std::vector<const HostTensor*>& inputs, const Shape& shape,
                        std::string_view what) {
  const DType result = program_result(program, dtypes_of(inputs), shape.size(), what);
  return run_program(program, inputs, shape, result);
}

HostTensor eval_gemm(const GemmAttr& attr, const std::vector<HostTensor>& in, const Node& node) {
  const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
  const HostTensor a = program_over(attr.a, slice_of(in, 0, na), in[0].shape(), "gemm A");
  const HostTensor b = program_over(attr.b, slice_of(in, na, na + nb), in[na].shape(), "gemm B");
  const size_t r = a.shape().size();
  const int64_t m = a.shape()[r - 2], k = a.shape()[r - 1], n = b.shape()[r - 1];
  const int64_t batches = m * k == 0 ? num_elements(Shape(a.shape().begin(), a.shape().end() - 2)) : a.size() / (m * k);
  Shape product_shape(a.shape().begin(), a.shape().end() - 1);
  product_shape.push_back(n);
  HostTensor product(a.dtype(), product_shape);
  const bool floats = is_float(a.dtype());
  for (int64_t batch = 0; batch < batches; ++batch)
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = 0; col < n; ++col) {
        // Exactly sum_reduce(mul(a, b), K): products rounded, summed in order.
        double acc = 0.0;
        int64_t iacc = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t ia = (batch * m + row) * k + kk, ib = (batch * k + kk) * n + col;
          if (floats) {
            acc += round_to_float(a.dtype(), a.get(ia) * b.get(ib));
          } else {
            const Scalar args[2] = {load(a, ia), load(b, ib)};
            iacc = static_cast<int64_t>(static_cast<uint64_t>(iacc) +
                                        static_cast<uint64_t>(apply(Op::Mul, args, a.dtype()).i));
          }
        }
        const int64_t out_index = (batch * m + row) * n + col;
        if (floats)
          product.set(out_index, acc);
        else
          product.set_int(out_index, iacc);
      }
  std::vector<const HostTensor*> epilogue_inputs{&product};
  for (size_t i = na + nb; i < in.size(); ++i) epilogue_inputs.push_back(&in[i]);
  const HostTensor out = program_over(attr.epilogue, epilogue_inputs, product_shape, "gemm epilogue");
  SPOOL_ASSERT(out.dtype() == node.dtype && out.shape() == node.shape, "gemm result type");
  return out;
}

// Runs `build` (an nn composite) on the inputs through the interpreter.
template <typename Build>
HostTensor via_composite(const std::vector<HostTensor>& in, Build build) {
  Graph g("kernel");
  std::vector<Tensor> args;
  Env env;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    args.push_back(input(g, name, in[i].dtype(), in[i].shape()));
    env.emplace(name, in[i]);
  }
  output("out", build(args));
  return run(g, env).at("out");
}

}  // namespace

HostTensor eval_kernel(const Node& node, const std::vector<HostTensor>& in) {
  switch (node.op) {
    case Op::Fused: return program_over(std::get<ProgramAttr>(node.attr), slice_of(in, 0, in.size()), node.shape, "fused");
    case Op::Gemm: return eval_gemm(std::get<GemmAttr>(node.attr), in, node);
    case Op::Reduce: {
      const ReduceAttr& attr = std::get<ReduceAttr>(node.attr);
      const HostTensor value = program_over(attr.prologue, slice_of(in, 0, in.size()), in[0].shape(), "reduce prologue");
      const TensorType reduced = infer_type(attr.kind, {{value.dtype(), value.shape()}}, AxisAttr{attr.axis});
      const HostTensor r = eval_reduce(attr.kind, value, attr.axis, reduced.shape);
      return program_over(attr.epilogue, {&r}, reduced.shape, "reduce epilogue");
    }
    case Op::Softmax: {
      const int64_t axis = std::get<AxisAttr>(node.attr).axis;
      return via_composite(in, [&](const std::vector<Tensor>& t) { return nn::softmax(t[0], axis); });
    }
    case Op::RmsNorm: {
      const NormAttr& norm = std::get<NormAttr>(node.attr);
      return via_composite(in, [&](const std::vector<Tensor>& t) {
        return nn::rms_norm(t[0], t[1], norm.eps, norm.unit_offset);
      });
    }
    case Op::LayerNorm: {
      const NormAttr& norm = std::get<NormAttr>(node.attr);
      return via_composite(in, [&](const std::vector<Tensor>& t) { return nn::layer_norm(t[0], t[1], t[2], norm.eps); });
    }
    case Op::Copy: return in[0];
    default: SPOOL_ASSERT(false, "{} is not a kernel", op_name(node.op));
  }
}

}  // namespace spool::interp::detail
