// lower::to_npu, top to bottom: sources become DRAM buffers (constants and
// iotas are written by tiny kernels into buffers read with broadcast
// strides), concats (sums of zero-padded parts that partition the output)
// become copy kernels into one buffer, every other kernel node is emitted by
// its generator, and graph outputs are bound to the buffers that hold them.
// Views are resolved on the final kernels, when an edge is read: strided steps
// compose into a DRAM alias read by strided DMA; only a pad, or a reshape of
// axes that are not contiguous, materialises a copy first.

#include <spool/lower/lower.hpp>

#include "builder.hpp"
#include "gemm.hpp"
#include "indexing.hpp"
#include "topk.hpp"
#include "tiled.hpp"

#include <spool/ir/kernel.hpp>
#include <spool/npu/verify.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <set>

namespace spool::lower {
namespace {

using namespace detail;
using npu::BufferKind;
using npu::ScalarType;
using npu::VecOp;

struct Piece {
  Edge edge;        // read without its final pad step
  Shape before;     // where the part starts in the output
};

class Lowering {
 public:
  Lowering(const Graph& g, const target::NpuConfig& config, const LowerOptions& options)
      : g_(g), em_(g, config, options), values_(g.id_bound()) {}

  Lowered run() {
    const std::vector<NodeId> order = g_.topo_order();
    find_concats(order);
    for (NodeId id : order) {
      if (absorbed_.count(id.value) || values_[id.value]) continue;  // a cache input lowered early (concat_buffer)
      lower_node(id);
    }
    bind_outputs();
    Lowered out;
    out.program = std::move(em_.program);
    out.report = std::move(em_.report);
    out.inputs = std::move(inputs_);
    out.outputs = std::move(outputs_);
    return out;
  }

 private:
  // ---- concat analysis -----------------------------------------------------------
  // The parts of a sum of zero-padded tensors, or nullopt.
  std::optional<std::vector<Piece>> pieces(NodeId id, bool top) {
    const Node& n = g_.node(id);
    if (!is_sum_of_parts(n.op, n.dtype, n.attr, n.inputs.size())) return std::nullopt;
    if (!top && g_.use_count(id) != 1) return std::nullopt;
    std::vector<Piece> out;
    for (const Edge& e : n.inputs) {
      const auto& steps = e.view.steps();
      if (!steps.empty() && steps.back().kind == ViewKind::Pad && steps.back().value == 0.0) {
        out.push_back(Piece{e, steps.back().a});
        continue;
      }
      if (steps.empty() && g_.contains(e.src)) {
        auto inner = pieces(e.src, false);
        if (!inner) return std::nullopt;
        for (Piece& p : *inner) out.push_back(std::move(p));
        inner_.push_back(e.src.value);
        continue;
      }
      return std::nullopt;
    }
    return out;
  }

  // A part's shape: its edge's type without the final pad.
  Shape piece_shape(const Piece& p) const {
    const Shape padded = g_.edge_type(p.edge).shape;
    const ViewStep& pad = p.edge.view.steps().back();
    Shape s = padded;
    for (size_t i = 0; i < s.size(); ++i) s[i] -= pad.a[i] + pad.b[i];
    return s;
  }

  // Whether the view is permutes and reshapes, then the concat's pad: a
  // producer can store into the concat's buffer through its inverse.
  static bool invertible_to_pad(const View& v) {
    const auto& steps = v.steps();
    if (steps.empty() || steps.back().kind != ViewKind::Pad) return false;
    for (size_t i = 0; i + 1 < steps.size(); ++i)
      if (steps[i].kind != ViewKind::Permute && steps[i].kind != ViewKind::Reshape) return false;
    return true;
  }

  // The access of a producer of shape `source` that writes `part` (what the
  // view's first `n` steps, permutes and reshapes, read) through their
  // inverse, or nullopt when a reshape has no strided inverse there.
  static std::optional<Access> unview(Access part, const View& v, const Shape& source, size_t n) {
    const auto& steps = v.steps();
    std::vector<Shape> shapes{source};
    for (size_t i = 0; i < n; ++i) shapes.push_back(view_step_shape(steps[i], shapes.back(), "concat part"));
    for (size_t i = n; i-- > 0;) {
      View inverse;
      if (steps[i].kind == ViewKind::Permute) {
        Shape back(steps[i].a.size());
        for (size_t j = 0; j < back.size(); ++j) back[static_cast<size_t>(steps[i].a[j])] = static_cast<int64_t>(j);
        inverse.append(permute_step(back), shapes[i + 1], "concat part");
      } else {
        inverse.append(reshape_step(shapes[i]), shapes[i + 1], "concat part");
      }
      if (apply_view_steps(part, inverse, 0) < inverse.steps().size()) return std::nullopt;
    }
    return part;
  }

  void find_concats(const std::vector<NodeId>& order) {
    for (size_t i = order.size(); i-- > 0;) {
      const NodeId id = order[i];
      if (absorbed_.count(id.value)) continue;
      inner_.clear();
      auto ps = pieces(id, true);
      if (!ps) continue;
      // The parts must partition the output: disjoint boxes whose sizes add up.
      const Shape& shape = g_.node(id).shape;
      int64_t total = 0;
      bool ok = true;
      std::vector<Shape> sizes;
      for (const Piece& p : *ps) sizes.push_back(piece_shape(p));
      for (size_t a = 0; a < ps->size() && ok; ++a) {
        total += num_elements(sizes[a]);
        for (size_t b = a + 1; b < ps->size() && ok; ++b) {
          bool overlap = true;
          for (size_t d = 0; d < shape.size(); ++d) {
            const int64_t a0 = (*ps)[a].before[d], a1 = a0 + sizes[a][d];
            const int64_t b0 = (*ps)[b].before[d], b1 = b0 + sizes[b][d];
            if (a1 <= b0 || b1 <= a0) overlap = false;
          }
          if (overlap) ok = false;
        }
      }
      if (!ok || total != num_elements(shape)) continue;
      concats_[id.value] = *ps;
      for (uint32_t inner : inner_) absorbed_.insert(inner);
      // A part produced by a kernel that nothing else reads is written by
      // that kernel straight into its place in the concat's buffer.
      for (size_t k = 0; k < ps->size(); ++k) {
        const Edge& e = (*ps)[k].edge;
        if (!invertible_to_pad(e.view) || !g_.contains(e.src) || g_.use_count(e.src) != 1) continue;
        if (!stores_strided(g_.node(e.src).op) || absorbed_.count(e.src.value)) continue;
        writes_into_.emplace(e.src.value, std::make_pair(id.value, k));
      }
    }
  }

  // The buffer a concat's parts are written into: its place in an enclosing
  // concat when it is itself a part written in place (rope's halves inside a
  // KV cache), the input it updates, or its own.
  Access concat_buffer(NodeId id) {
    auto it = concat_out_.find(id.value);
    if (it == concat_out_.end()) {
      Access buffer;
      if (writes_into_.count(id.value)) {
        buffer = producer_buffer(id);
      } else {
        std::optional<Access> in_place = updated_input(id);
        buffer = in_place ? *in_place : plain_output_buffer(id);
      }
      it = concat_out_.emplace(id.value, buffer).first;
    }
    return it->second;
  }

  // An input updated in place (a preallocated KV cache): the graph output `N`
  // reads this concat unchanged, one of its parts is the input `N` read
  // through a view that leaves every element at its index (the cache's first
  // rows), and nothing else reads that input. Then the concat's buffer is the
  // input's own: that part is already in place, the other parts are written
  // into it (their producers store through an alias, or a copy does), and the
  // output is bound to the input's buffer. nullopt otherwise.
  std::optional<Access> updated_input(NodeId id) {
    const Node& n = g_.node(id);
    const auto& outs = g_.outputs();
    const auto& parts = concats_.at(id.value);
    for (size_t o = 0; o < outs.size(); ++o) {
      if (bound_.count(o) || outs[o].edge.src != id || !outs[o].edge.view.is_identity()) continue;
      for (size_t k = 0; k < parts.size(); ++k) {
        const Edge& e = parts[k].edge;
        if (!g_.contains(e.src)) continue;
        const Node& src = g_.node(e.src);
        if (src.op != Op::Input || std::get<NameAttr>(src.attr).name != outs[o].name || src.shape != n.shape ||
            src.dtype != n.dtype || g_.use_count(e.src) != 1)
          continue;
        if (!values_[e.src.value]) lower_source(e.src);
        const Access whole = base(e.src);
        Access part = whole;
        const size_t steps = e.view.steps().size() - 1;  // without the concat's pad
        if (apply_view_steps(part, e.view, 0, steps) < steps || part.buffer != whole.buffer ||
            part.strides != whole.strides)
          continue;
        int64_t offset = whole.offset;
        for (size_t i = 0; i < n.shape.size(); ++i) offset += parts[k].before[i] * whole.strides[i];
        if (part.offset != offset) continue;
        in_place_.insert({id.value, k});
        bound_.insert(o);
        outputs_.push_back({outs[o].name, em_.program.buffers[whole.buffer].name});
        ++em_.report.inputs_updated_in_place;
        return whole;
      }
    }
    return std::nullopt;
  }

  // ---- reading edges ----------------------------------------------------------------
  Access base(NodeId id) const {
    SPOOL_ASSERT(values_[id.value].has_value(), "node {} read before it was lowered", id.value);
    return *values_[id.value];
  }

  // The access through which a consumer reads the edge; copies only where a
  // step has no strided form. `steps` limits the view to its first steps.
  Access read(const Edge& e, const std::string& consumer, size_t steps = SIZE_MAX) {
    Access a = base(e.src);
    const size_t end = std::min(steps, e.view.steps().size());
    size_t at = 0;
    while ((at = apply_view_steps(a, e.view, at, end)) < end) {
      const ViewStep& step = e.view.steps()[at];
      if (step.kind == ViewKind::Pad) {
        if (a.is_literal) a = materialize(a, consumer);
        a = materialize_pad(a, step, consumer);
        ++at;
      } else {
        a = materialize(a, consumer);  // the reshape applies to the dense copy
      }
    }
    return em_.through_alias(a, "view");
  }

  Access new_dense(const std::string& name, DType dtype, const Shape& shape, BufferKind kind = BufferKind::Temp) {
    return dense_access(em_.add_buffer(name, dtype, shape, kind), dtype, shape);
  }

  // The rows of an elementwise, copy or fill tile: the longest axis but the
  // last. Any axis will do for a kernel that reads and writes element for
  // element, and the longest gives the fewest, largest tiles (a head-major
  // [heads, S, D] output read token-major as [S, heads, D] is copied in
  // tiles of S rows, not of one row per head; a decode step's [heads, 1, D]
  // values go in one tile, not one per head).
  static int widest_row_axis(const Shape& shape) {
    const int r = static_cast<int>(shape.size());
    int row = r - 2;
    for (int a = r - 3; a >= 0; --a)
      if (shape[static_cast<size_t>(a)] > shape[static_cast<size_t>(row)]) row = a;
    return row;
  }

  void copy(const Access& from, const Access& to, const std::string& name) {
    TiledSpec s;
    s.info = KernelInfo{em_.unique_name(name), "copy", false, 0, "", 1};
    s.shape = from.shape;
    s.col_axis = std::max<int>(0, static_cast<int>(from.shape.size()) - 1);
    s.row_axis = widest_row_axis(from.shape);
    s.inputs = {from};
    s.outputs = {TiledOutput{to, TileOut::Full, 1}};
    s.body = [](VecBuilder&, const std::vector<int>& in, const SpadRef*) { return std::vector<int>{in[0]}; };
    emit_tiled(em_, s);
  }

  Access materialize(const Access& a, const std::string& consumer) {
    Access dense = new_dense(consumer + ".dense", a.dtype, a.shape);
    if (a.is_literal)
      fill(dense, a.literal, consumer + "_fill");
    else
      copy(em_.through_alias(a, "view"), dense, consumer + "_copy");
    return dense;
  }

  void fill(const Access& to, double value, const std::string& name) {
    TiledSpec s;
    s.info = KernelInfo{em_.unique_name(name), "fill", false, 0, "", 1};
    s.shape = to.shape;
    s.col_axis = std::max<int>(0, static_cast<int>(to.shape.size()) - 1);
    s.row_axis = widest_row_axis(to.shape);
    s.outputs = {TiledOutput{to, TileOut::Full, 1}};
    const ScalarType t = value_type(to.dtype);
    s.body = [t, value](VecBuilder& vb, const std::vector<int>&, const SpadRef*) { return std::vector<int>{vb.constant(t, value)}; };
    emit_tiled(em_, s);
  }

  // A padded view no consumer can read strided: the pad value everywhere,
  // then the interior copied in.
  Access materialize_pad(const Access& a, const ViewStep& pad, const std::string& consumer) {
    Shape shape = a.shape;
    for (size_t i = 0; i < shape.size(); ++i) shape[i] += pad.a[i] + pad.b[i];
    Access out = new_dense(consumer + ".padded", a.dtype, shape);
    const double value = is_float(a.dtype) ? pad.value : static_cast<double>(static_cast<int64_t>(pad.value));
    fill(out, value, consumer + "_pad_fill");
    Access interior = out;
    interior.shape = a.shape;
    for (size_t i = 0; i < shape.size(); ++i) interior.offset += pad.a[i] * out.strides[i];
    copy(em_.through_alias(a, "view"), em_.through_alias(interior, "interior"), consumer + "_pad_copy");
    return out;
  }

  // ---- nodes ----------------------------------------------------------------------
  std::string name_of(NodeId id) const { return fmt::format("{}_{}", op_name(g_.node(id).op), id.value); }

  // The dense buffer a kernel node writes: a graph output's buffer when an
  // output reads it unchanged, else a temporary.
  Access output_buffer(NodeId id) {
    if (concats_.count(id.value)) return concat_buffer(id);
    return producer_buffer(id);
  }

  // A kernel's own output: its place in the concat it is a part of, else a
  // graph output's buffer or a temporary.
  Access producer_buffer(NodeId id) {
    if (auto it = writes_into_.find(id.value); it != writes_into_.end()) {
      const auto [concat, k] = it->second;
      const Access whole = concat_buffer(NodeId{concat});
      const Piece& piece = concats_.at(concat)[k];
      Access part = whole;
      part.shape = piece_shape(piece);
      for (size_t i = 0; i < part.shape.size(); ++i) part.offset += piece.before[i] * whole.strides[i];
      // Back through the part's permutes and reshapes to the producer's own
      // shape: the producer stores each element where the concat reads it.
      if (std::optional<Access> mine =
              unview(part, piece.edge.view, g_.node(id).shape, piece.edge.view.steps().size() - 1)) {
        in_place_.insert({concat, k});
        return em_.through_alias(*mine, "part");
      }
      // Not expressible as strides (a reshape across non-adjacent strides): a copy writes the part.
      writes_into_.erase(it);
    }
    return plain_output_buffer(id);
  }

  Access plain_output_buffer(NodeId id) {
    const Node& n = g_.node(id);
    const auto& outs = g_.outputs();
    for (size_t o = 0; o < outs.size(); ++o) {
      if (bound_.count(o) || outs[o].edge.src != id || !outs[o].edge.view.is_identity()) continue;
      bound_.insert(o);
      Access a = new_dense(outs[o].name, n.dtype, n.shape, BufferKind::Output);
      outputs_.push_back({outs[o].name, em_.program.buffers[a.buffer].name});
      return a;
    }
    // An output that reads the value transposed or reshaped (a KV cache
    // token-major): the kernel stores straight into the output's buffer
    // through the inverse view, and its other readers read it there.
    const bool strided_store = stores_strided(n.op);
    for (size_t o = 0; o < outs.size() && strided_store; ++o) {
      const View& v = outs[o].edge.view;
      if (bound_.count(o) || outs[o].edge.src != id || !only_permutes_and_reshapes(v)) continue;
      const TensorType t = g_.edge_type(outs[o].edge);
      const Access whole = new_dense(outs[o].name, t.dtype, t.shape, BufferKind::Output);
      if (std::optional<Access> mine = unview(whole, v, n.shape, v.steps().size())) {
        bound_.insert(o);
        outputs_.push_back({outs[o].name, em_.program.buffers[whole.buffer].name});
        return em_.through_alias(*mine, "out");
      }
      SPOOL_ASSERT(false, "an output view of permutes and reshapes has no inverse");
    }
    return new_dense(fmt::format("t{}", id.value), n.dtype, n.shape);
  }

  static bool only_permutes_and_reshapes(const View& v) {
    if (v.is_identity()) return false;
    for (const ViewStep& step : v.steps())
      if (step.kind != ViewKind::Permute && step.kind != ViewKind::Reshape) return false;
    return true;
  }

  // Kernels whose generators store through a strided output access.
  static bool stores_strided(Op op) {
    const OpClass cls = op_info(op).cls;
    return cls == OpClass::Unary || cls == OpClass::Cast || cls == OpClass::Binary || cls == OpClass::Compare ||
           cls == OpClass::Select || cls == OpClass::Reduce || cls == OpClass::TopK || cls == OpClass::Kernel;
  }

  void lower_node(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    switch (op_info(n.op).cls) {
      case OpClass::Source: return lower_source(id);
      case OpClass::Unary:
      case OpClass::Cast:
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Select: {
        ProgramAttr p;
        ProgramInstr instr;
        instr.op = n.op;
        for (size_t i = 0; i < n.inputs.size(); ++i) instr.args[i] = static_cast<uint16_t>(i);
        if (n.op == Op::Cast) instr.dtype = std::get<DTypeAttr>(n.attr).to;
        p.instrs.push_back(instr);
        if (concats_.count(id.value)) return lower_concat(id);
        return lower_fused(id, p, false);
      }
      case OpClass::Reduce: {
        ReduceAttr r;
        r.kind = n.op;
        r.axis = std::get<AxisAttr>(n.attr).axis;
        return lower_reduce(id, r);
      }
      case OpClass::TopK: return lower_topk(id);
      case OpClass::Gather:
        return gather_by_dma(n.shape, std::get<AxisAttr>(n.attr).axis) ? lower_indexing(id) : lower_gather(id);
      case OpClass::Scatter: return lower_indexing(id);
      case OpClass::LoopMarker:
        fail("lower: {} is a loop marker; unroll the graph before lowering", name);
      case OpClass::Kernel: break;
    }
    switch (n.op) {
      case Op::Fused: {
        if (concats_.count(id.value)) return lower_concat(id);
        const auto& p = std::get<ProgramAttr>(n.attr);
        return lower_fused(id, p, p.instrs.size() > 1);
      }
      case Op::Gemm: return lower_gemm(id);
      case Op::Reduce: return lower_reduce(id, std::get<ReduceAttr>(n.attr));
      case Op::Softmax:
      case Op::RmsNorm:
      case Op::LayerNorm: return lower_rows(id);
      case Op::Copy: {
        Access out = output_buffer(id);
        copy(read(n.inputs[0], name), out, name);
        values_[id.value] = out;
        return;
      }
      default: SPOOL_ASSERT(false, "{} is not a kernel op", name);
    }
  }

  // Gather / ScatterAdd by indirect DMA (indexing.cpp).
  void lower_indexing(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    std::vector<Access> in;
    for (const Edge& e : n.inputs) in.push_back(read(e, name));
    const int64_t axis = std::get<AxisAttr>(n.attr).axis;
    if (n.op == Op::Gather && gather_into_gemm(id)) {
      if (auto fused = fused_gather(in[0], in[1], n.shape, axis)) {
        values_[id.value] = *fused;  // no kernel: the GEMM reads its operand through the index
        return;
      }
    }
    Access out = output_buffer(id);
    if (n.op == Op::Gather)
      emit_gather(em_, em_.unique_name(name), in[0], in[1], axis, out);
    else
      emit_scatter_add(em_, em_.unique_name(name), in[0], in[1], in[2], axis, out);
    values_[id.value] = out;
  }

  // A gather whose only reader is a batched GEMM taking it, through permutes
  // and reshapes that keep the batch axis first, as its only operand on one side.
  bool gather_into_gemm(NodeId id) const {
    if (!em_.options.fuse || g_.use_count(id) != 1) return false;
    for (const Output& o : g_.outputs())
      if (o.edge.src == id) return false;
    for (NodeId u : g_.live_ids()) {
      const Node& user = g_.node(u);
      for (size_t i = 0; i < user.inputs.size(); ++i) {
        if (user.inputs[i].src != id) continue;
        if (user.op != Op::Gemm || user.shape.size() < 3) return false;
        for (const ViewStep& step : user.inputs[i].view.steps()) {
          const bool keeps = step.kind == ViewKind::Permute   ? step.a.at(0) == 0
                             : step.kind == ViewKind::Reshape ? step.a.at(0) == g_.node(id).shape.at(0)
                                                              : false;
          if (!keeps) return false;
        }
        const GemmAttr& attr = std::get<GemmAttr>(user.attr);
        const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
        if (i < na) return na == 1 && attr.a.instrs.empty();
        if (i < na + nb) return nb == 1 && attr.b.instrs.empty();
        return false;
      }
    }
    return false;
  }

  void lower_source(NodeId id) {
    const Node& n = g_.node(id);
    switch (n.op) {
      case Op::Input:
      case Op::Weight: {
        const std::string& nm = std::get<NameAttr>(n.attr).name;
        const Access a = new_dense(nm, n.dtype, n.shape, n.op == Op::Input ? BufferKind::Input : BufferKind::Weight);
        inputs_.push_back({nm, em_.program.buffers[a.buffer].name});
        values_[id.value] = a;
        return;
      }
      case Op::Constant: {
        // No kernel: readers use the value as a literal.
        Access lit;
        lit.dtype = n.dtype;
        lit.shape = n.shape;
        lit.strides = Shape(n.shape.size(), 0);
        lit.is_literal = true;
        lit.literal = std::get<ScalarAttr>(n.attr).value.as_double();
        values_[id.value] = lit;
        return;
      }
      case Op::Iota: {
        const int64_t axis = std::get<AxisAttr>(n.attr).axis;
        values_[id.value] = iota(n.dtype, n.shape, axis, name_of(id));
        return;
      }
      default: SPOOL_ASSERT(false, "{} is not a source", op_name(n.op));
    }
  }

  // An iota of `shape` along `axis`: a 1-D buffer of the axis's indices, read
  // with stride 0 on every other axis. Written tile by tile with the tile's
  // first index as a literal, so no loop variable enters the body.
  Access iota(DType dtype, const Shape& shape, int64_t axis, const std::string& name) {
    const int64_t len = shape[static_cast<size_t>(axis)];
    auto key = std::make_pair(static_cast<int>(dtype), len);
    auto it = iotas_.find(key);
    if (it == iotas_.end()) {
      const Access buf = new_dense(fmt::format("iota{}", len), dtype, {len});
      const int64_t TC = std::min<int64_t>(len, std::max<int64_t>(1, std::min<int64_t>(4096, em_.budget / 16)));
      KernelBuilder kb(em_.unique_name(name));
      const int out = kb.spad("out", dtype, TC, 2);
      for (int64_t t = 0; t * TC < len; ++t) {
        const int64_t w = std::min(TC, len - t * TC);
        VecBuilder vb("iota", Extent::of(1), Extent::of(w));
        const int col = vb.iota(true);
        const int idx = vb.op(VecOp::Add, ScalarType::Index, {col, vb.constant(ScalarType::Index, double(t * TC))});
        vb.store(SpadRef{out, Affine::of(t), Affine::of(0), w}, vb.op(VecOp::Cast, value_type(dtype), {idx}));
        kb.emit(vb.done());
        kb.emit(dma(false, buf.buffer, Affine::of(t * TC), {1}, SpadRef{out, Affine::of(t), Affine::of(0), 0}, {1},
                    {Extent::of(w)}, kStoreTag));
      }
      kb.emit(Stmt{npu::WaitOp{kStoreTag}});
      int64_t footprint = 0;
      npu::Kernel k = kb.finish(footprint);
      em_.add_kernels({std::move(k)}, KernelInfo{name, "iota", false, 0, fmt::format("cols {}", TC), 1}, footprint);
      it = iotas_.emplace(key, buf).first;
    }
    Access a = it->second;
    a.shape = shape;
    a.strides = Shape(shape.size(), 0);
    a.strides[static_cast<size_t>(axis)] = 1;
    return a;
  }

  // Iota instructions of a program over `shape`: their values as extra inputs.
  std::vector<std::pair<size_t, Access>> program_iotas(const ProgramAttr& p, const Shape& shape,
                                                       const std::string& name) {
    std::vector<std::pair<size_t, Access>> out;
    for (size_t i = 0; i < p.instrs.size(); ++i)
      if (p.instrs[i].op == Op::Iota) out.push_back({i, iota(p.instrs[i].dtype, shape, p.instrs[i].axis, name + "_iota")});
    return out;
  }

  void lower_fused(NodeId id, const ProgramAttr& p, bool fused) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    TiledSpec s;
    s.info = KernelInfo{em_.unique_name(name), n.op == Op::Fused ? "fused" : std::string(op_name(n.op)), fused, 0, "", 1};
    s.shape = n.shape;
    s.col_axis = std::max<int>(0, static_cast<int>(n.shape.size()) - 1);
    s.row_axis = widest_row_axis(n.shape);
    for (const Edge& e : n.inputs) s.inputs.push_back(read(e, name));
    const size_t k = s.inputs.size();
    const auto iotas = program_iotas(p, n.shape, name);
    for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
    Access out = output_buffer(id);
    s.outputs = {TiledOutput{out, TileOut::Full, 1}};
    s.body = [p, k, iotas](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
      std::map<size_t, int> iota_values;
      for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
      return std::vector<int>{emit_program(vb, p, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)),
                                           iota_values)};
    };
    emit_tiled(em_, s);
    values_[id.value] = out;
  }

  void lower_concat(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    Access out = output_buffer(id);
    int part = 0;
    const auto& pieces = concats_.at(id.value);
    for (size_t k = 0; k < pieces.size(); ++k) {
      const Piece& p = pieces[k];
      if (in_place_.count({id.value, k})) continue;  // its producer wrote it in place
      Access src = read(p.edge, name, p.edge.view.steps().size() - 1);
      Access dst = out;
      dst.shape = src.shape;
      for (size_t i = 0; i < n.shape.size(); ++i) dst.offset += p.before[i] * out.strides[i];
      copy(src, em_.through_alias(dst, "part"), fmt::format("{}_part{}", name, part++));
    }
    values_[id.value] = out;
  }

  void lower_reduce(NodeId id, const ReduceAttr& r) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    const Shape& in_shape = g_.edge_type(n.inputs[0]).shape;
    TiledSpec s;
    const bool fused = !r.prologue.instrs.empty() || !r.epilogue.instrs.empty() || n.inputs.size() > 1;
    s.info = KernelInfo{em_.unique_name(name), "reduce", fused, 0, "", 1};
    for (const Edge& e : n.inputs) s.inputs.push_back(read(e, name));
    // Down the rows when DRAM holds another axis contiguous (no transposing
    // load, no cross-lane reduction); across the columns otherwise.
    const int col = contiguous_axis(s.inputs[0], r.axis);
    const bool down = col >= 0 && column_layout(s, in_shape, r.axis, col, em_.budget, dtype_bytes(s.inputs[0].dtype));
    if (!down) row_layout(s, in_shape, r.axis, /*widest=*/true);
    const size_t k = s.inputs.size();
    const auto iotas = program_iotas(r.prologue, in_shape, name);
    for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
    Access out = output_buffer(id);
    Access out_domain = out;  // the output seen over the input's axes (reduced axis: stride 0)
    out_domain.shape = in_shape;
    out_domain.strides.insert(out_domain.strides.begin() + r.axis, 0);
    s.outputs = {TiledOutput{out_domain, down ? TileOut::Col : TileOut::Row, 1}};
    if (!r.epilogue.instrs.empty())
      for (const ProgramInstr& in : r.epilogue.instrs)
        if (in.op == Op::Iota) fail("lower: {}: an iota in a reduce epilogue is not supported", name);
    const bool sum = r.kind == Op::SumReduce;
    const VecOp reduce = down ? (sum ? VecOp::ReduceSumRows : VecOp::ReduceMaxRows) : (sum ? VecOp::ReduceSum : VecOp::ReduceMax);
    s.body = [r, k, iotas, reduce](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
      std::map<size_t, int> iota_values;
      for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
      int v = emit_program(vb, r.prologue, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)), iota_values);
      v = vb.full(v);
      ScalarType t = vb.type(v);
      if (t == ScalarType::I1) fail("lower: reduce of bool values is not supported");
      const bool bf16 = t == ScalarType::BF16;
      if (bf16) v = vb.op(VecOp::Cast, ScalarType::F32, {v});  // accumulate in f32, round once
      int red = vb.op(reduce, vb.type(v), {v});
      if (bf16) red = vb.op(VecOp::Cast, ScalarType::BF16, {red});
      return std::vector<int>{emit_program(vb, r.epilogue, {red}, {})};
    };
    emit_tiled(em_, s);
    values_[id.value] = out;
  }

  void lower_rows(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    TiledSpec s;
    const int64_t axis = n.op == Op::Softmax ? std::get<AxisAttr>(n.attr).axis : static_cast<int64_t>(n.shape.size()) - 1;
    s.info = KernelInfo{em_.unique_name(name), std::string(op_name(n.op)), false, 0, "", 1};
    s.inputs.push_back(read(n.inputs[0], name));
    // A softmax down an axis DRAM does not hold contiguous reduces down the
    // rows (see lower_reduce).
    const int col = n.op == Op::Softmax ? contiguous_axis(s.inputs[0], axis) : -1;
    const bool down = col >= 0 && column_layout(s, n.shape, axis, col, em_.budget, 4);
    if (!down) row_layout(s, n.shape, axis, /*widest=*/true);
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      Access w = read(n.inputs[i], name);  // [C], broadcast over the other axes
      const int64_t stride = w.strides[0];
      w.shape = n.shape;
      w.strides = Shape(n.shape.size(), 0);
      w.strides.back() = stride;
      s.inputs.push_back(w);
    }
    Access out = output_buffer(id);
    s.outputs = {TiledOutput{out, TileOut::Full, 1}};
    const Op op = n.op;
    const double cols = static_cast<double>(n.shape[static_cast<size_t>(axis)]);
    const NormAttr norm = op == Op::Softmax ? NormAttr{} : std::get<NormAttr>(n.attr);
    const VecOp reduce_max = down ? VecOp::ReduceMaxRows : VecOp::ReduceMax;
    const VecOp reduce_sum = down ? VecOp::ReduceSumRows : VecOp::ReduceSum;
    s.body = [op, cols, norm, reduce_max, reduce_sum](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
      const ScalarType F = ScalarType::F32;
      auto f32 = [&](int v) { return vb.type(v) == F ? v : vb.op(VecOp::Cast, F, {v}); };
      // In f32 whatever the stored dtype, rounded once by the store (nn's
      // composites compute half precision in f32).
      const int x = f32(in[0]);
      if (op == Op::Softmax) {
        const int m = vb.op(reduce_max, F, {x});
        const int e = vb.op(VecOp::Exp, F, {vb.op(VecOp::Sub, F, {x, m})});
        const int sum = vb.op(reduce_sum, F, {e});
        return std::vector<int>{vb.op(VecOp::Mul, F, {e, vb.op(VecOp::Recip, F, {sum})})};
      }
      const int inv_n = vb.constant(F, 1.0 / cols);
      const int eps = vb.constant(F, norm.eps);
      if (op == Op::RmsNorm) {
        const int ms = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {vb.op(VecOp::Mul, F, {x, x})}), inv_n});
        const int inv = vb.op(VecOp::Recip, F, {vb.op(VecOp::Sqrt, F, {vb.op(VecOp::Add, F, {ms, eps})})});
        int w = f32(in[1]);
        if (norm.unit_offset) w = vb.op(VecOp::Add, F, {w, vb.constant(F, 1.0)});
        return std::vector<int>{vb.op(VecOp::Mul, F, {vb.op(VecOp::Mul, F, {x, inv}), w})};
      }
      const int mean = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {x}), inv_n});
      const int d = vb.op(VecOp::Sub, F, {x, mean});
      const int var = vb.op(VecOp::Mul, F, {vb.op(VecOp::ReduceSum, F, {vb.op(VecOp::Mul, F, {d, d})}), inv_n});
      const int inv = vb.op(VecOp::Recip, F, {vb.op(VecOp::Sqrt, F, {vb.op(VecOp::Add, F, {var, eps})})});
      const int y = vb.op(VecOp::Mul, F, {vb.op(VecOp::Mul, F, {d, inv}), f32(in[1])});
      return std::vector<int>{vb.op(VecOp::Add, F, {y, f32(in[2])})};
    };
    emit_tiled(em_, s);
    values_[id.value] = out;
  }

  // Top-k along the last axis (topk.cpp).
  void lower_topk(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    const Access in = read(n.inputs[0], name);
    Access out = output_buffer(id);
    emit_topk(em_, em_.unique_name(name), in, out, std::get<TopKAttr>(n.attr).k);
    values_[id.value] = out;
  }

  // out[..i..] = data[..idx[..i..]..] along the axis: the gather axis is the
  // columns; each row tile loads whole rows of the table and the index tile,
  // and the vector unit gathers with the indices cast explicitly to `index`.
  void lower_gather(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    const int64_t axis = std::get<AxisAttr>(n.attr).axis;
    TiledSpec s;
    s.info = KernelInfo{em_.unique_name(name), "gather", false, 0, "", 1};
    row_layout(s, n.shape, axis);
    Access data = read(n.inputs[0], name);
    if (data.is_literal) data = materialize(data, name);
    Access idx = read(n.inputs[1], name);
    s.inputs = {idx};
    s.has_table = true;
    s.table = data;
    Access out = output_buffer(id);
    s.outputs = {TiledOutput{out, TileOut::Full, 1}};
    const DType dtype = n.dtype;
    s.body = [dtype](VecBuilder& vb, const std::vector<int>& in, const SpadRef* table) {
      const int index = vb.op(VecOp::Cast, ScalarType::Index, {in[0]});
      return std::vector<int>{vb.gather(value_type(dtype), index, *table)};
    };
    emit_tiled(em_, s);
    values_[id.value] = out;
  }

  void lower_gemm(NodeId id) {
    const Node& n = g_.node(id);
    const std::string name = name_of(id);
    const GemmAttr& attr = std::get<GemmAttr>(n.attr);
    const size_t na = static_cast<size_t>(attr.a_inputs), nb = static_cast<size_t>(attr.b_inputs);
    GemmJob job;
    job.a_program = attr.a;
    job.b_program = attr.b;
    job.epilogue_program = attr.epilogue;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Access a = read(n.inputs[i], name);
      if (a.is_literal && i < na + nb) a = materialize(a, name);  // operands stream from DRAM
      (i < na ? job.a : i < na + nb ? job.b : job.epilogue).push_back(a);
    }
    std::vector<DType> a_types, b_types;
    for (const Access& a : job.a) a_types.push_back(a.dtype);
    for (const Access& b : job.b) b_types.push_back(b.dtype);
    job.dtype = program_result(attr.a, a_types, job.a[0].shape.size(), "gemm A");
    const bool fused = !attr.a.instrs.empty() || !attr.b.instrs.empty() || !attr.epilogue.instrs.empty() || na > 1 ||
                       nb > 1 || n.inputs.size() > na + nb;
    job.info = KernelInfo{em_.unique_name(name), "gemm", fused, 0, "", 1};
    // A softmax along the rows as the only reader: fused as a row epilogue
    // (when no tile spans the rows, it stays a kernel of its own).
    std::optional<NodeId> softmax = softmax_reader(id);
    Access out = output_buffer(softmax ? *softmax : id);
    job.out = out;
    if (softmax && em_.options.fuse) {
      GemmJob with_softmax = job;
      with_softmax.row_softmax = true;
      with_softmax.info.fused = true;
      if (!emit_gemm(em_, with_softmax)) {
        absorbed_.insert(softmax->value);
        values_[id.value] = out;
        values_[softmax->value] = out;
        return;
      }
      // The softmax stays separate: the GEMM writes its own buffer.
      out = output_buffer(id);
      job.out = out;
    }
    std::optional<std::string> why;
    if (!em_.options.fuse && fused) why = "fusion is disabled";
    if (!why) why = emit_gemm(em_, job);
    if (!why) {
      values_[id.value] = out;
      return;
    }
    // Fallback: the prologues and the epilogue as standalone vector kernels
    // around a plain GEMM.
    const std::string note = fmt::format("{}: prologue/epilogue not fused into the GEMM ({}); standalone kernels", name, why.value());
    spdlog::debug("lower: {}", note);
    em_.report.notes.push_back(note);
    auto standalone = [&](const std::vector<Access>& ins, const ProgramAttr& p, const std::string& what) {
      if (p.instrs.empty() && ins.size() == 1) return ins[0];
      std::vector<DType> types;
      for (const Access& a : ins) types.push_back(a.dtype);
      const DType dt = program_result(p, types, ins[0].shape.size(), what);
      Access dst = new_dense(name + "." + what, dt, ins[0].shape);
      emit_program_kernel(ins, p, dst, name + "_" + what);
      return dst;
    };
    GemmJob plain;
    plain.dtype = job.dtype;
    plain.a = {standalone(job.a, attr.a, "a")};
    plain.b = {standalone(job.b, attr.b, "b")};
    plain.info = KernelInfo{em_.unique_name(name), "gemm", false, 0, "", 1};
    const bool has_epilogue = !attr.epilogue.instrs.empty() || !job.epilogue.empty();
    Shape product_shape = out.shape;
    plain.out = has_epilogue ? new_dense(name + ".product", job.dtype, product_shape) : out;
    if (auto again = emit_gemm(em_, plain))
      fail("lower: {}: no GEMM tile fits the {}-byte scratchpad budget: {}", name, em_.budget, *again);
    if (has_epilogue) {
      std::vector<Access> ins{plain.out};
      for (const Access& e : job.epilogue) ins.push_back(e);
      emit_program_kernel(ins, attr.epilogue, out, name + "_epilogue");
    }
    values_[id.value] = out;
  }

  // The softmax along the last axis that is the only reader of a GEMM's
  // result, read unchanged, or nothing.
  std::optional<NodeId> softmax_reader(NodeId id) {
    if (g_.use_count(id) != 1) return std::nullopt;
    if (!users_built_) {
      users_.assign(g_.id_bound(), {});
      for (NodeId n : g_.live_ids())
        for (const Edge& e : g_.node(n).inputs) users_[e.src.value].push_back(n);
      users_built_ = true;
    }
    if (users_[id.value].size() != 1) return std::nullopt;
    const NodeId u = users_[id.value][0];
    const Node& n = g_.node(u);
    if (n.op != Op::Softmax || !n.inputs[0].view.is_identity()) return std::nullopt;
    if (std::get<AxisAttr>(n.attr).axis != static_cast<int64_t>(n.shape.size()) - 1) return std::nullopt;
    return u;
  }

  void emit_program_kernel(const std::vector<Access>& ins, const ProgramAttr& p, const Access& out,
                           const std::string& name) {
    TiledSpec s;
    s.info = KernelInfo{em_.unique_name(name), "fused", p.instrs.size() > 1, 0, "", 1};
    s.shape = out.shape;
    s.col_axis = std::max<int>(0, static_cast<int>(out.shape.size()) - 1);
    s.row_axis = widest_row_axis(out.shape);
    s.inputs = ins;
    const size_t k = ins.size();
    const auto iotas = program_iotas(p, out.shape, name);
    for (const auto& [instr, access] : iotas) s.inputs.push_back(access);
    s.outputs = {TiledOutput{out, TileOut::Full, 1}};
    s.body = [p, k, iotas](VecBuilder& vb, const std::vector<int>& in, const SpadRef*) {
      std::map<size_t, int> iota_values;
      for (size_t j = 0; j < iotas.size(); ++j) iota_values[iotas[j].first] = in[k + j];
      return std::vector<int>{emit_program(vb, p, std::vector<int>(in.begin(), in.begin() + static_cast<long>(k)),
                                           iota_values)};
    };
    emit_tiled(em_, s);
  }

  void bind_outputs() {
    const auto& outs = g_.outputs();
    for (size_t o = 0; o < outs.size(); ++o) {
      if (bound_.count(o)) continue;
      const TensorType t = g_.edge_type(outs[o].edge);
      Access a = read(outs[o].edge, outs[o].name);
      if (!a.is_literal && is_dense(Access{a.buffer, a.dtype, 0, a.shape, a.strides, false, 0.0})) {
        // A contiguous window of a buffer (a reshape, a leading slice): an alias, no copy.
        const int root = em_.program.root_of(a.buffer);
        const int alias =
            em_.named_alias(outs[o].name, root, em_.program.buffers[a.buffer].alias_offset + a.offset, t.shape);
        outputs_.push_back({outs[o].name, em_.program.buffers[alias].name});
        continue;
      }
      Access dst = new_dense(outs[o].name, t.dtype, t.shape, BufferKind::Output);
      copy(em_.through_alias(a, "view"), dst, outs[o].name + "_copy");
      outputs_.push_back({outs[o].name, em_.program.buffers[dst.buffer].name});
    }
    // In graph output order.
    std::vector<std::pair<std::string, std::string>> ordered;
    for (const Output& o : outs)
      for (const auto& p : outputs_)
        if (p.first == o.name) ordered.push_back(p);
    outputs_ = std::move(ordered);
  }

  const Graph& g_;
  Emitter em_;
  std::vector<std::optional<Access>> values_;
  std::map<uint32_t, std::vector<Piece>> concats_;
  std::set<uint32_t> absorbed_;
  std::vector<uint32_t> inner_;
  std::set<size_t> bound_;
  std::map<uint32_t, Access> concat_out_;                          // concat node -> its buffer
  std::map<uint32_t, std::pair<uint32_t, size_t>> writes_into_;   // producer -> (concat, part)
  std::set<std::pair<uint32_t, size_t>> in_place_;                 // parts written by their producer
  std::vector<std::vector<NodeId>> users_;
  bool users_built_ = false;
  std::map<std::pair<int, int64_t>, Access> iotas_;
  std::vector<std::pair<std::string, std::string>> inputs_, outputs_;
};

}  // namespace

Lowered to_npu(const Graph& llir, const target::NpuConfig& config, const LowerOptions& options) {
  Lowered out = Lowering(llir, config, options).run();
  npu::verify_or_throw(out.program);
  return out;
}

std::string LowerReport::to_text() const {
  std::string s = fmt::format("kernels          {} ({} fused, {} copy)\n", kernels, fused_kernels, copy_kernels);
  s += fmt::format("dram aliases     {}\n", dram_aliases);
  s += fmt::format("spad peak        {} bytes\n", spad_peak_bytes);
  for (const std::string& n : notes) s += fmt::format("note             {}\n", n);
  return s;
}

}  // namespace spool::lower
