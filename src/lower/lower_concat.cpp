// Concats (lowering.hpp): sums of zero-padded parts that partition the
// output become copies into one buffer, or none where a part's producer
// stores straight into its place; a concat that appends to an input of the
// output's name (a KV cache) updates that input in place.

#include "lowering.hpp"

#include <spool/ir/kernel.hpp>

#include <fmt/format.h>

namespace spool::lower::detail {

// The parts of a sum of zero-padded tensors, or nullopt.
std::optional<std::vector<Piece>> Lowering::pieces(NodeId id, bool top) {
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
Shape Lowering::piece_shape(const Piece& p) const {
  const Shape padded = g_.edge_type(p.edge).shape;
  const ViewStep& pad = p.edge.view.steps().back();
  Shape s = padded;
  for (size_t i = 0; i < s.size(); ++i) s[i] -= pad.a[i] + pad.b[i];
  return s;
}

// Whether the view is permutes and reshapes, then the concat's pad: a
// producer can store into the concat's buffer through its inverse.
bool Lowering::invertible_to_pad(const View& v) {
  const auto& steps = v.steps();
  if (steps.empty() || steps.back().kind != ViewKind::Pad) return false;
  for (size_t i = 0; i + 1 < steps.size(); ++i)
    if (steps[i].kind != ViewKind::Permute && steps[i].kind != ViewKind::Reshape) return false;
  return true;
}

// The access of a producer of shape `source` that writes `part` (what the
// view's first `n` steps, permutes and reshapes, read) through their
// inverse, or nullopt when a reshape has no strided inverse there.
std::optional<Access> Lowering::unview(Access part, const View& v, const Shape& source, size_t n) {
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

void Lowering::find_concats(const std::vector<NodeId>& order) {
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
Access Lowering::concat_buffer(NodeId id) {
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
std::optional<Access> Lowering::updated_input(NodeId id) {
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

void Lowering::lower_concat(NodeId id) {
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

}  // namespace spool::lower::detail
