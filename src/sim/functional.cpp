// The functional model: executes every kernel on real values, in program
// order (kernel dependencies only constrain the order the timing model may
// reorder in, so program order is a valid execution).
//
// Semantics: f32 arithmetic for f32 and bf16 values (bf16 is rounded only
// when stored to a bf16 buffer or cast to bf16); integers wrap to their width
// (i32, and i64/index at 64 bits); i1 is 0 or 1. Every store into the
// scratchpad or DRAM rounds to the destination dtype (f16 and bf16 round to
// nearest even). Matmul accumulates in f32, in k order, starting from C when
// accumulating. Reductions run left to right across the columns.

#include <spool/sim/sim.hpp>

#include <spool/support/error.hpp>
#include <spool/support/fault.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace spool::sim {
namespace {

using namespace spool::npu;

double round_to_dtype(DType dtype, double v) {
  if (is_float(dtype)) return round_to_float(dtype, v);
  if (dtype == DType::Bool) return v != 0.0 ? 1.0 : 0.0;
  return static_cast<double>(wrap_to_int(dtype, static_cast<int64_t>(v)));
}

int64_t wrap_bits(ScalarType type, int64_t v) {
  if (type == ScalarType::I32) return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v)));
  return v;
}

int64_t to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);  // truncates toward zero
}

double cast_to(ScalarType type, double v) {
  switch (type) {
    case ScalarType::F32: return static_cast<float>(v);
    case ScalarType::BF16: return round_to_float(DType::BF16, static_cast<float>(v));
    case ScalarType::I32:
    case ScalarType::I64:
    case ScalarType::Index: return static_cast<double>(wrap_bits(type, to_int(v)));
    case ScalarType::I1: return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

class Functional {
 public:
  Functional(const Program& p, Memory& memory) : p_(p), mem_(memory) {}

  void run() {
    for (const Kernel& k : p_.kernels) {
      k_ = &k;
      spad_.assign(k.spad.size(), {});
      for (size_t b = 0; b < k.spad.size(); ++b)
        spad_[b].assign(static_cast<size_t>(k.spad[b].slots * k.spad[b].elements), 0.0);
      vars_.assign(k.loop_vars.size(), 0);
      body(k.body);
    }
  }

 private:
  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
        int64_t trips = loop->trips;
        if (loop->dynamic) {
          // ceil(count / divisor), clamped to [0, trips].
          const double count = *at(loop->dynamic->count);
          const double chunks = std::ceil(count / static_cast<double>(loop->dynamic->divisor));
          trips = chunks <= 0 ? 0 : std::min(trips, static_cast<int64_t>(std::min(chunks, double(trips))));
        }
        for (int64_t i = 0; i < trips; ++i) {
          vars_[loop->var] = i;
          body(loop->body);
        }
      } else if (const auto* d = std::get_if<DmaOp>(&s.node)) {
        dma(*d);
      } else if (const auto* m = std::get_if<MatmulOp>(&s.node)) {
        matmul(*m);
      } else if (const auto* v = std::get_if<VectorOp>(&s.node)) {
        vector(*v);
      }
      // WaitOp: execution is sequential, every DMA has completed.
    }
  }

  // Element 0 of the ref's slot, plus its offset.
  double* at(const SpadRef& r) {
    const SpadBuffer& b = k_->spad[r.buffer];
    const int64_t slot = r.slot.eval(vars_.data()) % b.slots;
    return spad_[r.buffer].data() + slot * b.elements + r.offset.eval(vars_.data());
  }

  void dma(const DmaOp& d) {
    const int64_t* v = vars_.data();
    double* dram = mem_.data(d.dram) + d.dram_offset.eval(v);
    double* spad = at(d.spad);
    const DType dram_type = p_.buffers[d.dram].dtype;
    const DType spad_type = k_->spad[d.spad.buffer].dtype;
    int64_t dims[4] = {1, 1, 1, 1}, ds[4] = {0, 0, 0, 0}, ss[4] = {0, 0, 0, 0}, is[4] = {0, 0, 0, 0};
    const size_t nd = d.dims.size();
    for (size_t i = 0; i < nd; ++i) {
      dims[4 - nd + i] = d.dims[i].eval(v);
      ds[4 - nd + i] = d.dram_strides[i];
      ss[4 - nd + i] = d.spad_strides[i];
      if (d.indirect()) is[4 - nd + i] = d.index_strides[i];
    }
    if (fault::planted(fault::Fault::DmaStoreDropsRow) && !d.load && nd >= 2 && dims[4 - nd] > 1) --dims[4 - nd];
    const double* index = d.indirect() ? at(d.index) : nullptr;
    // An indirect transfer adds index_scale * (the index value) to each element's DRAM offset.
    auto indexed = [&](int64_t ii) {
      const double x = index[ii];
      if (!(x >= 0.0 && x < static_cast<double>(d.index_limit)))
        fail("kernel '{}': op '{}' on '@{}': index {} (element {} of %{}) is out of range [0, {})", k_->name,
             d.load ? "dma.load" : "dma.store", p_.buffers[d.dram].name, x, d.index.offset.eval(v) + ii,
             k_->spad[d.index.buffer].name, d.index_limit);
      if (fault::planted(fault::Fault::GatherNextRow))
        return (static_cast<int64_t>(x) + 1) % d.index_limit * d.index_scale;
      return static_cast<int64_t>(x) * d.index_scale;
    };
    for (int64_t a = 0; a < dims[0]; ++a)
      for (int64_t b = 0; b < dims[1]; ++b)
        for (int64_t c = 0; c < dims[2]; ++c)
          for (int64_t e = 0; e < dims[3]; ++e) {
            int64_t di = a * ds[0] + b * ds[1] + c * ds[2] + e * ds[3];
            if (index) di += indexed(a * is[0] + b * is[1] + c * is[2] + e * is[3]);
            const int64_t si = a * ss[0] + b * ss[1] + c * ss[2] + e * ss[3];
            if (d.load)
              spad[si] = round_to_dtype(spad_type, dram[di]);
            else
              dram[di] = round_to_dtype(dram_type, spad[si]);
          }
  }

  void matmul(const MatmulOp& mm) {
    const int64_t* v = vars_.data();
    const int64_t m = mm.m.eval(v), k = mm.k.eval(v), n = mm.n.eval(v);
    const double* a = at(mm.a);
    const double* b = at(mm.b);
    double* c = at(mm.c);
    const DType ctype = k_->spad[mm.c.buffer].dtype;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const bool drop = fault::planted(fault::Fault::SystolicDropsK);
        float acc = mm.accumulate && !drop ? static_cast<float>(c[i * mm.c.ld + j]) : 0.0f;
        for (int64_t p = 0; p < k; ++p) {
          const double x = mm.trans_a ? a[p * mm.a.ld + i] : a[i * mm.a.ld + p];
          const double y = mm.trans_b ? b[j * mm.b.ld + p] : b[p * mm.b.ld + j];
          acc += static_cast<float>(x) * static_cast<float>(y);
        }
        c[i * mm.c.ld + j] = round_to_dtype(ctype, acc);
      }
    }
  }

  [[noreturn]] void runtime_error(const VecInstr& in, const std::string& message) {
    fail("kernel '{}': value %{}: op '{}': {}", k_->name, in.name, vec_op_name(in.op), message);
  }

  double unary(const VecInstr& in, double x) {
    const float f = static_cast<float>(x);
    switch (in.op) {
      case VecOp::Exp: return fault::planted(fault::Fault::VectorExp) ? std::exp2(f) : std::exp(f);
      case VecOp::Log: return std::log(f);
      case VecOp::Exp2: return std::exp2(f);
      case VecOp::Log2: return std::log2(f);
      case VecOp::Sqrt: return std::sqrt(f);
      case VecOp::Rsqrt: return 1.0f / std::sqrt(f);
      case VecOp::Recip: return 1.0f / f;
      case VecOp::Sin: return std::sin(f);
      case VecOp::Cos: return std::cos(f);
      case VecOp::Neg: return -f;
      case VecOp::Abs: return std::fabs(f);
      default: break;
    }
    SPOOL_ASSERT(false, "{} is not a float unary op", vec_op_name(in.op));
  }

  double binary(const VecInstr& in, ScalarType type, double x, double y) {
    if (is_float(type)) {
      const float a = static_cast<float>(x), b = static_cast<float>(y);
      switch (in.op) {
        case VecOp::Add: return a + b;
        case VecOp::Sub: return a - b;
        case VecOp::Mul: return a * b;
        case VecOp::Div: return a / b;
        case VecOp::Max: return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::max(a, b);
        case VecOp::Min: return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::min(a, b);
        case VecOp::Mod: {
          // torch.remainder: the result has the sign of the divisor.
          float r = std::fmod(a, b);
          if (r != 0.0f && (r < 0.0f) != (b < 0.0f)) r += b;
          return r;
        }
        case VecOp::CmpEq: return a == b;
        case VecOp::CmpNe: return a != b;
        case VecOp::CmpLt: return a < b;
        case VecOp::CmpLe: return a <= b;
        default: break;
      }
    } else {
      const int64_t a = static_cast<int64_t>(x), b = static_cast<int64_t>(y);
      const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
      switch (in.op) {
        case VecOp::Add: return static_cast<double>(wrap_bits(type, static_cast<int64_t>(ua + ub)));
        case VecOp::Sub: return static_cast<double>(wrap_bits(type, static_cast<int64_t>(ua - ub)));
        case VecOp::Mul: return static_cast<double>(wrap_bits(type, static_cast<int64_t>(ua * ub)));
        case VecOp::Div:
          if (b == 0) runtime_error(in, "integer division by zero");
          if (a == std::numeric_limits<int64_t>::min() && b == -1) return static_cast<double>(wrap_bits(type, a));
          return static_cast<double>(wrap_bits(type, a / b));
        case VecOp::Mod: {
          // torch.remainder on integers: the sign of the divisor.
          if (b == 0) runtime_error(in, "integer mod by zero");
          if (b == -1) return 0.0;
          int64_t r = a % b;
          if (r != 0 && (r < 0) != (b < 0)) r += b;
          return static_cast<double>(wrap_bits(type, r));
        }
        case VecOp::Max: return static_cast<double>(std::max(a, b));
        case VecOp::Min: return static_cast<double>(std::min(a, b));
        case VecOp::CmpEq: return a == b;
        case VecOp::CmpNe: return a != b;
        case VecOp::CmpLt: return a < b;
        case VecOp::CmpLe: return a <= b;
        case VecOp::And: return (a != 0) && (b != 0);
        case VecOp::Or: return (a != 0) || (b != 0);
        default: break;
      }
    }
    SPOOL_ASSERT(false, "{} is not a binary op on {}", vec_op_name(in.op), scalar_type_name(type));
  }

  void vector(const VectorOp& vop) {
    const int64_t* vv = vars_.data();
    const int64_t rows = vop.rows.eval(vv), cols = vop.cols.eval(vv);
    std::vector<std::vector<double>> values(vop.body.size());
    std::vector<ValueShape> shapes;
    shapes.reserve(vop.body.size());
    auto get = [&](int o, int64_t r, int64_t c) {
      switch (shapes[o]) {
        case ValueShape::Full: return values[o][r * cols + c];
        case ValueShape::Row: return values[o][r];
        case ValueShape::Col: return values[o][c];
      }
      return 0.0;
    };
    for (size_t i = 0; i < vop.body.size(); ++i) {
      const VecInstr& in = vop.body[i];
      const VecOpKind kind = vec_op_kind(in.op);
      const ValueShape shape = value_shape(in, vop.body, shapes);
      shapes.push_back(shape);
      const bool is_full = shape == ValueShape::Full;
      std::vector<double>& out = values[i];
      // A per-column value is computed on row 0, a per-row one on column 0.
      const int64_t nrows = shape == ValueShape::Col ? 1 : rows;
      out.assign(static_cast<size_t>(is_full ? rows * cols : shape == ValueShape::Col ? cols : rows), 0.0);
      const int64_t ncols = shape == ValueShape::Row ? 1 : cols;
      for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t c = 0; c < ncols; ++c) {
          double& res = out[r * ncols + c];
          switch (kind) {
            case VecOpKind::Load: {
              const double* base = at(in.ref);
              res = in.broadcast == LoadBroadcast::Full  ? base[r * in.ref.ld + c]
                    : in.broadcast == LoadBroadcast::Row ? base[r]
                                                         : base[c];
              break;
            }
            case VecOpKind::Gather: {
              const double idx = get(in.operands[0], r, c);
              if (idx < 0 || idx >= static_cast<double>(in.ref.ld))
                runtime_error(in, fmt::format("index {} is out of range for a row of {}", idx, in.ref.ld));
              res = at(in.ref)[r * in.ref.ld + static_cast<int64_t>(idx)];
              break;
            }
            case VecOpKind::Const: res = cast_to(in.type, in.literal); break;
            case VecOpKind::Iota: res = static_cast<double>(in.op == VecOp::IotaRow ? r : c); break;
            case VecOpKind::FloatUnary: res = unary(in, get(in.operands[0], r, c)); break;
            case VecOpKind::Arith:
            case VecOpKind::Compare:
            case VecOpKind::Logic:
              res = binary(in, vop.body[in.operands[0]].type, get(in.operands[0], r, c), get(in.operands[1], r, c));
              break;
            case VecOpKind::Select:
              res = get(in.operands[0], r, c) != 0.0 ? get(in.operands[1], r, c) : get(in.operands[2], r, c);
              break;
            case VecOpKind::Cast: res = cast_to(in.type, get(in.operands[0], r, c)); break;
            case VecOpKind::Reduce: {
              const int o = in.operands[0];
              const bool down = vec_op_reduces_rows(in.op);
              double acc = down ? get(o, 0, c) : get(o, r, 0);
              for (int64_t j = 1; j < (down ? rows : cols); ++j) {
                const double x = down ? get(o, j, c) : get(o, r, j);
                if (in.op == VecOp::ReduceSum || in.op == VecOp::ReduceSumRows)
                  acc = binary(VecInstr{"", VecOp::Add, in.type, {}, {}, {}, 0.0}, in.type, acc, x);
                else
                  acc = binary(VecInstr{"", VecOp::Max, in.type, {}, {}, {}, 0.0}, in.type, acc, x);
              }
              res = acc;
              break;
            }
          }
        }
      }
    }
    for (const VecStore& st : vop.stores) {
      double* base = at(st.ref);
      const DType dtype = k_->spad[st.ref.buffer].dtype;
      const std::vector<double>& val = values[st.value];
      if (shapes[st.value] == ValueShape::Full) {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) base[r * st.ref.ld + c] = round_to_dtype(dtype, val[r * cols + c]);
      } else {
        for (size_t j = 0; j < val.size(); ++j) base[j] = round_to_dtype(dtype, val[j]);
      }
    }
  }

  const Program& p_;
  Memory& mem_;
  const Kernel* k_ = nullptr;
  std::vector<std::vector<double>> spad_;
  std::vector<int64_t> vars_;
};

}  // namespace

void execute_functional(const Program& program, Memory& memory) { Functional(program, memory).run(); }

}  // namespace spool::sim
