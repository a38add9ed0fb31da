// The appliers that turn nn's softmax and norm composites into one kernel
// each, in the precision spool::nn computes them (rules/norms.rules). The
// rules match a composite's shape; these check what a pattern cannot say:
// the constants, and that the views are nn's keepdim and broadcast views.

#include "applier_detail.hpp"

#include <spool/support/fault.hpp>

#include <numbers>

namespace spool::hlir::detail {
namespace {

// The view nn's keepdim reductions put between a reduced value of shape
// `reduced` (the input `full` without `axis`) and an elementwise op on
// `full`: unsqueeze(axis), then broadcast to `full`.
View keepdim_broadcast(const Shape& reduced, size_t axis, const Shape& full) {
  Shape keep = reduced;
  keep.insert(keep.begin() + static_cast<ptrdiff_t>(axis), 1);
  View v;
  v.append(reshape_step(keep), reduced, "keepdim");
  v.append(expand_step(full), reduced, "keepdim");
  return v;
}

// Tensor::broadcast_to of a [n] parameter to `full` (rank >= 2).
View parameter_broadcast(int64_t n, const Shape& full) {
  Shape padded(full.size() - 1, 1);
  padded.push_back(n);
  View v;
  v.append(reshape_step(padded), Shape{n}, "broadcast");
  v.append(expand_step(full), Shape{n}, "broadcast");
  return v;
}

// The view of a view attribute; the identity for any other attribute (a
// rule that binds a non-view there then simply does not match the checks).
const View& view_of(const HlirLanguage& lang, AttrId id) {
  static const View kIdentity;
  if (id == AttrId{}) return kIdentity;
  const std::optional<View>& v = lang.payload(id).view;
  return v ? *v : kIdentity;
}

// Whether `c` is known to hold `value` rounded to its dtype everywhere.
bool is_constant(EGraph& g, ClassId c, double value) {
  const ClassData& d = data(g, c);
  return d.constant && *d.constant == Scalar::of(d.type.dtype, value);
}

// Whether views `inner` then `outer` read a reduced value of `reduced`
// shape exactly as keepdim_broadcast does.
bool is_keepdim_broadcast(const View& inner, const View& outer, const Shape& reduced, size_t axis, const Shape& full) {
  return compose_views(inner, outer, reduced) == keepdim_broadcast(reduced, axis, full);
}

}  // namespace

// softmax-kernel ?r ?x ?axis ?log2e ?v1 ?v2 ?v3 ?v4 (see rules/norms.rules):
// nn::softmax(x, axis) as built by spool::nn, checked here for the constant
// and the keepdim views; the softmax kernel's semantics is that composite.
std::optional<ClassId> softmax_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], log2e = m.args[2];
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  const ClassData& xd = data(g, x);
  if (!axis_attr || !is_float(xd.type.dtype)) return std::nullopt;
  const int64_t axis = axis_attr->axis;
  const Shape& full = xd.type.shape;
  if (axis < 0 || axis >= static_cast<int64_t>(full.size())) return std::nullopt;
  Shape reduced = full;
  reduced.erase(reduced.begin() + axis);
  const size_t a = static_cast<size_t>(axis);
  if (!is_constant(g, log2e, std::numbers::log2e)) return std::nullopt;
  // m.attr_args: axis, v1 (recip broadcast), v2 (sum keepdim), v3 (neg broadcast), v4 (max keepdim)
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), reduced, a, full) ||
      !is_keepdim_broadcast(view_of(lang, m.attr_args[4]), view_of(lang, m.attr_args[3]), reduced, a, full))
    return std::nullopt;
  return add_kernel(g, lang, Op::Softmax, AxisAttr{axis}, {g.find(x)});
}

namespace {

// What the norm kernels' patterns share: x floating with at least two axes,
// normalised over its last (n elements), the mean's 1/n a constant, eps a
// floating constant. nullopt: the match is not a norm over the last axis.
struct LastAxisNorm {
  Shape full, reduced;  // x's shape, and without its last axis
  int64_t n = 0;
  NormAttr attr;
};
std::optional<LastAxisNorm> last_axis_norm(EGraph& g, HlirLanguage& lang, const MatchView& m, ClassId x, ClassId inv,
                                           ClassId eps) {
  const ClassData& xd = data(g, x);
  const auto* axis_attr = std::get_if<AxisAttr>(&attr_of(lang, m.attr_args[0]));
  LastAxisNorm out;
  out.full = xd.type.shape;
  if (!axis_attr || !is_float(xd.type.dtype) || out.full.size() < 2 ||
      axis_attr->axis != static_cast<int64_t>(out.full.size()) - 1)
    return std::nullopt;
  out.n = out.full.back();
  if (!is_constant(g, inv, 1.0 / static_cast<double>(out.n))) return std::nullopt;
  const ClassData& ed = data(g, eps);
  if (!ed.constant || !is_float(ed.constant->dtype)) return std::nullopt;
  out.reduced.assign(out.full.begin(), out.full.end() - 1);
  out.attr.eps = ed.constant->f;  // already rounded to the dtype: rounding it again is exact
  if (fault::planted(fault::Fault::ApplierConstant)) out.attr.eps += 1.0;
  return out;
}

}  // namespace

// rms-norm-kernel ?r ?x ?w ?inv ?eps ?axis ?vb ?vk ?vw: nn::rms_norm(x, w, eps)
// with w read as is (gemma's `1 + w` is then the class computing it).
std::optional<ClassId> rms_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2];
  const std::optional<LastAxisNorm> norm = last_axis_norm(g, lang, m, x, m.args[3], m.args[4]);
  if (!norm || data(g, w).type != TensorType{data(g, x).type.dtype, {norm->n}}) return std::nullopt;
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), norm->reduced,
                            norm->full.size() - 1, norm->full) ||
      view_of(lang, m.attr_args[3]) != parameter_broadcast(norm->n, norm->full))
    return std::nullopt;
  return add_kernel(g, lang, Op::RmsNorm, norm->attr, {g.find(x), g.find(w)});
}

// layer-norm-kernel ?r ?x ?w ?b ?inv ?eps ?axis ?v1 ?v2 ?v3 ?v4 ?vw ?vb:
// nn::layer_norm(x, w, b, eps).
std::optional<ClassId> layer_norm_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2], b = m.args[3];
  const std::optional<LastAxisNorm> norm = last_axis_norm(g, lang, m, x, m.args[4], m.args[5]);
  if (!norm) return std::nullopt;
  const TensorType param{data(g, x).type.dtype, {norm->n}};
  if (data(g, w).type != param || data(g, b).type != param) return std::nullopt;
  const Shape& full = norm->full;
  const size_t a = full.size() - 1;
  // attr_args: axis, v1 (recip broadcast), v2 (variance keepdim), v3 (neg mean broadcast), v4 (mean keepdim), vw, vb
  if (!is_keepdim_broadcast(view_of(lang, m.attr_args[2]), view_of(lang, m.attr_args[1]), norm->reduced, a, full) ||
      !is_keepdim_broadcast(view_of(lang, m.attr_args[4]), view_of(lang, m.attr_args[3]), norm->reduced, a, full) ||
      view_of(lang, m.attr_args[5]) != parameter_broadcast(norm->n, full) ||
      view_of(lang, m.attr_args[6]) != parameter_broadcast(norm->n, full))
    return std::nullopt;
  return add_kernel(g, lang, Op::LayerNorm, norm->attr, {g.find(x), g.find(w), g.find(b)});
}

// half-softmax ?r ?x, half-rms-norm ?r ?x ?w, half-layer-norm ?r ?x ?w ?b for (cast[?t] (K[?k] (cast[?f] ?x) ...)), K a
// softmax, rms_norm (two inputs) or layer_norm (three): a half-precision
// (bf16, f16) kernel K over the uncast sources. Exact: spool::nn computes a
// half-precision softmax or norm by casting its inputs to f32, computing
// there and rounding the result once to the input's dtype, and a kernel's
// semantics is its composite in its inputs' dtype.
std::optional<ClassId> half_kernel(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const size_t sources = m.args.size() - 1;
  if (m.attr_args.size() != sources + 2) return std::nullopt;
  const auto* to = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[0]));
  if (!to || (to->to != DType::BF16 && to->to != DType::F16)) return std::nullopt;
  for (size_t i = 0; i < sources; ++i) {
    const auto* inner = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[2 + i]));
    if (!inner || inner->to != DType::F32 || data(g, m.args[1 + i]).type.dtype != to->to) return std::nullopt;
  }
  const Attr& kernel_attr = attr_of(lang, m.attr_args[1]);
  Op op;
  if (sources == 1 && std::holds_alternative<AxisAttr>(kernel_attr))
    op = Op::Softmax;
  else if (sources == 2 && std::holds_alternative<NormAttr>(kernel_attr))
    op = Op::RmsNorm;
  else if (sources == 3 && std::holds_alternative<NormAttr>(kernel_attr))
    op = Op::LayerNorm;
  else
    return std::nullopt;
  std::vector<ClassId> kids;
  for (size_t i = 0; i < sources; ++i) kids.push_back(g.find(m.args[1 + i]));
  return add_kernel(g, lang, op, kernel_attr, kids);
}

// half-rms-norm-offset ?r ?x ?w ?one ?t ?n ?f ?g ?v for
// (cast[?t] (rms_norm[?n] (cast[?f] ?x) (add (cast[?g] ?w) (view[?v] ?one)))):
// gemma's half-precision rms_norm(x, w, eps, unit_offset), whose f32 kernel
// the norms rules found with `1 + w` as its weight.
std::optional<ClassId> half_rms_norm_offset(EGraph& g, HlirLanguage& lang, const MatchView& m) {
  const ClassId x = m.args[1], w = m.args[2], one = m.args[3];
  const auto* to = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[0]));
  const auto* norm = std::get_if<NormAttr>(&attr_of(lang, m.attr_args[1]));
  const auto* fx = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[2]));
  const auto* fw = std::get_if<DTypeAttr>(&attr_of(lang, m.attr_args[3]));
  if (!to || !norm || !fx || !fw || norm->unit_offset) return std::nullopt;
  if ((to->to != DType::BF16 && to->to != DType::F16) || fx->to != DType::F32 || fw->to != DType::F32)
    return std::nullopt;
  if (data(g, x).type.dtype != to->to || data(g, w).type.dtype != to->to) return std::nullopt;
  if (!is_constant(g, one, 1.0) || data(g, one).type.dtype != DType::F32 || has_pad(view_of(lang, m.attr_args[4])))
    return std::nullopt;
  NormAttr attr = *norm;
  attr.unit_offset = true;
  return add_kernel(g, lang, Op::RmsNorm, attr, {g.find(x), g.find(w)});
}

}  // namespace spool::hlir::detail
