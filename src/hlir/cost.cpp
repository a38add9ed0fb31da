// The kernel-time estimate used to extract programs from HLIR e-graphs.
//
// Bytes are what a kernel moves to and from DRAM: a view is read in place,
// so a broadcast input costs the bytes of its (smaller) source and a slice
// the bytes of the slice; a known constant is one scalar. A padded view is
// the exception: the lowering copies it for each reader (see pad_copies).
// The estimate only has to rank alternatives of one class, so it is simple
// and deterministic.

#include <spool/hlir/cost.hpp>
#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace spool::hlir {

using egraph::ClassVec;
using egraph::Extractor;
using egraph::span_of;
namespace {

const ClassData& data_of(const EGraph& graph, ClassId c) {
  const auto* analysis = dynamic_cast<const HlirAnalysis*>(graph.analysis());
  SPOOL_ASSERT(analysis, "HlirCost needs an e-graph with the HLIR analysis");
  return analysis->data(graph.find_const(c));
}

double bytes(const spool::TensorType& t) {
  return static_cast<double>(spool::num_elements(t.shape)) * spool::dtype_bytes(t.dtype);
}

double elements(const spool::TensorType& t) { return static_cast<double>(spool::num_elements(t.shape)); }

// What a reader pays for the pads of `view` over a `source`-shaped value of
// `dtype`: the lowering reads every other view step in place, but copies a
// padded view into a buffer of its padded shape (a fill of the pad value,
// then the interior copied in) once per reader. Bytes moved and kernels
// launched. A pad that is the last step, with value 0, read by a sum of
// parts is a concat's part, copied into the concat's buffer as its own
// value would be: free here.
struct PadCopies {
  double bytes = 0, kernels = 0;
};
PadCopies pad_copies(const spool::View& view, const spool::Shape& source, spool::DType dtype, bool reader_sums_parts) {
  PadCopies out;
  const std::vector<spool::ViewStep>& steps = view.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != spool::ViewKind::Pad) continue;
    if (reader_sums_parts && i + 1 == steps.size() && steps[i].value == 0.0) continue;
    const double interior = bytes({dtype, view.apply(source, i)});
    const double padded = bytes({dtype, view.apply(source, i + 1)});
    out.bytes += padded + 2 * interior;  // the fill's writes, the copy's reads and writes
    out.kernels += 2;
  }
  return out;
}

}  // namespace

// The issue slots of one pass of `program` over an element, its inputs of
// dtypes `inputs`: each instruction weighed by its op's interval and its
// value's width against an f32 add's.
// The value types are read off the instructions (the e-graph's programs are
// typed when built; spool::program_types checks them, at several times the cost).
double HlirCost::program_slots(const spool::ProgramAttr& program, std::span<const spool::DType> inputs) const {
  if (program.instrs.empty()) return 0;
  boost::container::small_vector<spool::DType, 32> types(inputs.begin(), inputs.end());
  double slots = 0;
  for (const spool::ProgramInstr& in : program.instrs) {
    spool::DType t;
    if (in.op == spool::Op::Constant)
      t = in.value.dtype;
    else if (in.op == spool::Op::Iota || in.op == spool::Op::Cast)
      t = in.dtype;
    else if (spool::op_info(in.op).cls == spool::OpClass::Compare)
      t = spool::DType::Bool;
    else
      t = types[in.args[spool::op_info(in.op).cls == spool::OpClass::Select ? 1 : 0]];
    types.push_back(t);
    slots += op_slots(in.op, t);
  }
  return slots;
}

double HlirCost::op_slots(spool::Op op, spool::DType dtype) const {
  double slots = 1;
  switch (op) {
    case spool::Op::Sin: slots = config_.sin_slots; break;
    case spool::Op::Exp2:
    case spool::Op::Log2:
    case spool::Op::Sqrt:
    case spool::Op::Recip:
    case spool::Op::Mod: slots = config_.slow_slots; break;
    default: break;
  }
  return slots * static_cast<double>(spool::dtype_bytes(dtype)) / 4.0;
}

double HlirCost::cost(const EGraph& graph, NodeId node, std::span<const double> child_costs) const {
  double total = node_cost(graph, node);
  for (double c : child_costs) total += c;
  return total;
}

// Long because it is one case per kind of node (views, sources, loop markers,
// elementwise ops, kernels, gemm, reductions, gathers): each prices its node
// from the same few figures, and the cases read best side by side.
double HlirCost::node_cost(const EGraph& graph, NodeId n) const {
  const ENodeRef node = graph.node(n);
  if (node.op == lang_.view_op()) return config_.free_node;
  const spool::Op op = *lang_.hlir_op(node.op);
  const spool::OpClass cls = spool::op_info(op).cls;
  if (cls == spool::OpClass::Source || cls == spool::OpClass::LoopMarker) return config_.free_node;

  const ClassData& out = data_of(graph, graph.class_of(n));
  static const spool::Attr kNone{spool::NoAttr{}};
  const spool::Attr& attr = node.attr == AttrId{} ? kNone : lang_.payload(node.attr).attr;
  const bool sums_parts = spool::is_sum_of_parts(op, out.type.dtype, attr, node.children.size());
  // DRAM traffic: every distinct input once, the output once; and the copies
  // of padded inputs that are only padded views (a value with a node of its
  // own, or a view without a pad, may be read in place instead).
  double traffic = bytes(out.type), launches = 1;
  std::vector<ClassId> seen;
  for (ClassId child : node.children) {
    const ClassId c = graph.find_const(child);
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    const ClassData& d = data_of(graph, c);
    if (d.constant) {
      traffic += spool::dtype_bytes(d.type.dtype);
      continue;
    }
    double read = bytes(d.type);
    std::optional<PadCopies> copies;  // the cheapest way to read the class; none: in place
    bool in_place = false;
    for (NodeId m : graph.class_nodes(c)) {
      const ENodeRef v = graph.node(m);
      if (v.op != lang_.view_op()) {
        in_place = true;
        continue;
      }
      if (graph.find_const(v.children[0]) == c) continue;
      const spool::TensorType& source = data_of(graph, v.children[0]).type;
      read = std::min(read, bytes(source));
      const PadCopies p = pad_copies(*lang_.payload(v.attr).view, source.shape, source.dtype, sums_parts);
      if (p.kernels == 0) in_place = true;
      if (!copies || p.bytes < copies->bytes) copies = p;
    }
    traffic += read;
    if (!in_place && copies) {
      traffic += copies->bytes;
      launches += copies->kernels;
    }
  }

  auto in_elements = [&](size_t i) { return elements(data_of(graph, node.children[i]).type); };
  auto in_types = [&](size_t from, size_t to) {
    std::vector<spool::DType> types;
    for (size_t i = from; i < to; ++i) types.push_back(data_of(graph, node.children[i]).type.dtype);
    return types;
  };
  double vector_ops = 0, flops = 0;
  switch (cls) {
    case spool::OpClass::Unary:
    case spool::OpClass::Cast:
    case spool::OpClass::Binary:
    case spool::OpClass::Compare:
    case spool::OpClass::Select:
      vector_ops = elements(out.type) * op_slots(op, out.type.dtype);  // as a one-instruction fused kernel
      break;
    case spool::OpClass::Gather:
      vector_ops = elements(out.type);
      break;
    case spool::OpClass::Reduce:
    case spool::OpClass::Scatter:
      vector_ops = in_elements(node.children.size() - 1);
      break;
    case spool::OpClass::TopK:
      vector_ops = in_elements(0) * (1 + std::log2(1.0 + static_cast<double>(std::get<spool::TopKAttr>(attr).k)));
      break;
    case spool::OpClass::Grouped:
      // Every row against its group's matrix; each matrix read once (traffic above).
      flops = 2 * elements(out.type) * static_cast<double>(data_of(graph, node.children[0]).type.shape.back());
      break;
    case spool::OpClass::Kernel:
      switch (op) {
        case spool::Op::Fused:
          vector_ops =
              elements(out.type) * program_slots(std::get<spool::ProgramAttr>(attr), in_types(0, node.children.size()));
          break;
        case spool::Op::Gemm: {
          const spool::GemmAttr& g = std::get<spool::GemmAttr>(attr);
          const spool::Shape& a = data_of(graph, node.children[0]).type.shape;
          const double k = static_cast<double>(a.back());
          const size_t na = static_cast<size_t>(g.a_inputs), nb = static_cast<size_t>(g.b_inputs);
          flops = 2 * elements(out.type) * k;
          // The epilogue reads the product (f32 accumulators, or the operands' type).
          std::vector<spool::DType> epilogue_types = in_types(na + nb, node.children.size());
          epilogue_types.insert(epilogue_types.begin(), spool::DType::F32);
          vector_ops = in_elements(0) * program_slots(g.a, in_types(0, na)) +
                       in_elements(na) * program_slots(g.b, in_types(na, na + nb)) +
                       elements(out.type) * program_slots(g.epilogue, epilogue_types);
          break;
        }
        case spool::Op::Reduce: {
          const spool::ReduceAttr& r = std::get<spool::ReduceAttr>(attr);
          const std::vector<spool::DType> types = in_types(0, node.children.size());
          // The reduction and its epilogue run on the dtype of the output.
          vector_ops = in_elements(0) * (program_slots(r.prologue, types) + op_slots(r.kind, out.type.dtype)) +
                       elements(out.type) * program_slots(r.epilogue, std::vector<spool::DType>{out.type.dtype});
          break;
        }
        case spool::Op::Softmax:
          vector_ops = 6 * elements(out.type);
          break;
        case spool::Op::RmsNorm:
          vector_ops = 5 * elements(out.type);
          break;
        case spool::Op::LayerNorm:
          vector_ops = 8 * elements(out.type);
          break;
        case spool::Op::Copy:
          break;
        default:
          SPOOL_ASSERT(false, "{} is not a kernel", spool::op_name(op));
      }
      break;
    case spool::OpClass::Source:
    case spool::OpClass::LoopMarker:
      SPOOL_ASSERT(false, "handled above");
  }
  return config_.launch_cycles * launches + traffic / config_.dram_bytes_per_cycle +
         flops / config_.matmul_flops_per_cycle + vector_ops / config_.vector_ops_per_cycle;
}

double program_cost(const spool::Graph& program) {
  HlirLanguage lang;
  const std::unique_ptr<EGraph> eg = make_egraph(lang);
  const std::vector<ClassId> roots = add_graph(*eg, lang, program);
  eg->rebuild();
  const HlirCost cost(lang);
  return Extractor(*eg, cost).extract(roots).dag_cost;
}

HlirCostConfig cost_config(const target::NpuConfig& npu) {
  HlirCostConfig c;
  const double cores = npu.cores;
  c.launch_cycles = static_cast<double>(npu.launch.fixed_cycles);
  c.dram_bytes_per_cycle = npu.dram_sustained_bytes_per_second() / (npu.core_clock_mhz * 1e6);
  c.matmul_flops_per_cycle =
      cores * npu.systolic.arrays * 2.0 * static_cast<double>(npu.systolic.rows * npu.systolic.cols);
  // The slow ops' slot time (interval over the slots of their unit) against
  // an add's, and vector work at one ALU slot's rate: the cost does not see
  // that a GEMM prologue's vector step shrinks the GEMM's tiles, and priced
  // at both slots' rate it fuses every RMSNorm into the next GEMM's prologue,
  // which simulates slower (llama-3-8B prefill on tpuv3: 149.30 -> 152.58 ms).
  auto slot_time = [&](const char* cls) {
    const target::VectorOpTiming& t = npu.vector.ops.at(cls);
    return static_cast<double>(t.interval) / static_cast<double>(npu.vector.slots[static_cast<int>(t.unit)]);
  };
  const double register_elements = static_cast<double>(npu.vector.lanes * std::max<int64_t>(1, npu.vector.vlen_bits / 32));
  c.vector_ops_per_cycle = cores * register_elements / static_cast<double>(npu.vector.ops.at("add").interval);
  c.sin_slots = slot_time("sin") / slot_time("add");
  c.slow_slots = slot_time("exp") / slot_time("add");
  return c;
}

}  // namespace spool::hlir
