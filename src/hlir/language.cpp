// The HLIR in the e-graph: op table, attributes, the type/constant analysis,
// and conversion from and to spool::Graph.
//
// Types are derived inside the e-graph with the same infer_type the Graph
// uses, so a rule cannot stamp a type from outside. A node that does not
// type-check does not throw from add() (the graph would be left half-way
// through an insertion); its class records why, and the merge that follows
// (every rule merges what it built) is refused with the rule's name.
// Constant folding covers the ops whose result the interpreter computes
// exactly (correctly rounded to the dtype, integers wrapping), and nothing
// else: every rewrite is exact.

#include <spool/hlir/language.hpp>
#include <spool/support/error.hpp>
#include <spool/support/hash.hpp>

#include <boost/container/small_vector.hpp>

#include <charconv>
#include <cmath>
#include <span>

namespace spool::hlir {

using egraph::ClassVec;
using egraph::Extractor;
using egraph::span_of;

using spool::Attr;
using spool::DType;
using spool::Op;
using spool::OpClass;
using spool::Scalar;
using spool::Shape;
using spool::TensorType;

namespace {

std::string type_str(const TensorType& t) {
  return fmt::format("{}{}", spool::dtype_name(t.dtype), spool::shape_str(t.shape));
}

// The printed form of an attribute: attr_str without its braces. `room`:
// capacity to leave for what the caller appends.
std::string attr_key(const Attr& attr, size_t room = 0) {
  std::string out;
  out.reserve(64 + room);
  spool::append_attr_fields(out, attr);
  return out;
}

// type_str appended to `out`.
void append_type(std::string& out, const TensorType& t) {
  out += spool::dtype_name(t.dtype);
  out += '[';
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) out += ',';
    append_int(out, t.shape[i]);
  }
  out += ']';
}


// The printed form of a payload: its key in the text form (see
// HlirLanguage::attr), what AttrTable::str shows.
std::string print_payload(const std::any& payload) {
  const HlirAttr& a = std::any_cast<const HlirAttr&>(payload);
  if (a.view) return a.view->str();
  std::string out = attr_key(a.attr, a.type ? 8 + 12 * a.type->shape.size() : 0);
  if (a.type) {
    out += " : ";
    append_type(out, *a.type);
  }
  return out;
}

// A well-spread 64-bit hash for linear probing, `salt` separating key spaces.
uint64_t mix(uint64_t h, uint64_t salt) {
  h ^= salt * 0x9e3779b97f4a7c15ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// `f32[2,3]` or `f32` (a scalar).
std::optional<TensorType> parse_type(std::string_view s) {
  s = trim(s);
  const size_t br = s.find('[');
  auto dtype = spool::parse_dtype(trim(s.substr(0, br)));
  if (!dtype) return std::nullopt;
  TensorType t{*dtype, {}};
  if (br == std::string_view::npos) return t;
  if (s.back() != ']') return std::nullopt;
  std::string_view dims = s.substr(br + 1, s.size() - br - 2);
  while (!trim(dims).empty()) {
    const size_t comma = dims.find(',');
    auto d = parse_int(dims.substr(0, comma));
    if (!d || *d < 0) return std::nullopt;
    t.shape.push_back(*d);
    if (comma == std::string_view::npos) break;
    dims.remove_prefix(comma + 1);
  }
  return t;
}

// `key=value` pairs separated by commas (a quoted value may hold commas).
std::optional<std::vector<std::pair<std::string, std::string>>> parse_kv(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  s = trim(s);
  while (!s.empty()) {
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string key(trim(s.substr(0, eq)));
    s.remove_prefix(eq + 1);
    s = trim(s);
    std::string value;
    if (!s.empty() && s.front() == '"') {
      size_t i = 1;
      for (; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        value += s[i];
      }
      if (i >= s.size()) return std::nullopt;
      s.remove_prefix(i + 1);
    } else {
      const size_t comma = s.find(',');
      value = std::string(trim(s.substr(0, comma)));
      s.remove_prefix(comma == std::string_view::npos ? s.size() : comma);
    }
    s = trim(s);
    if (!s.empty()) {
      if (s.front() != ',') return std::nullopt;
      s.remove_prefix(1);
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

}  // namespace

// ---- language -----------------------------------------------------------------------

HlirLanguage::HlirLanguage() {
  for (Op op : spool::kAllOps) {
    const spool::OpInfo& info = spool::op_info(op);
    ops_[static_cast<size_t>(op)] = language_.ops.add(std::string(info.name), info.arity < 0 ? kVariadic : info.arity);
  }
  view_ = language_.ops.add("view", 1);
}

HlirLanguage::HlirLanguage(const HlirLanguage& other)
    : language_(other.language_), ops_(other.ops_), view_(other.view_) {
  const std::lock_guard lock(other.cache_mutex_);
  cache_ = other.cache_;
  cached_ = other.cached_;
}

std::optional<Op> HlirLanguage::hlir_op(OpId op) const {
  if (op == view_ || op.value >= spool::kNumOps) return std::nullopt;
  return spool::kAllOps[op.value];  // registered in ops.def order
}

// Every value interned is in the cache under the hash of its printed form,
// and `same` tells whether an entry prints as the value does (same_text):
// a value is found under the id of the first value that printed like it,
// as if by its printed form, without printing it. A value no entry prints
// like is new, and is added with no key: it is printed only when asked to
// (AttrTable::str).
template <typename Same, typename Make>
AttrId HlirLanguage::intern(uint64_t hash, const Same& same, const Make& make) {
  const std::lock_guard lock(cache_mutex_);
  if (!cache_.empty()) {
    const size_t mask = cache_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& slot = cache_[i];
      if (slot.id == AttrId{}) break;
      if (slot.hash == hash && same(payload(slot.id))) return slot.id;
    }
  }
  const AttrId id = language_.attrs.add_custom(make(), &print_payload);
  remember(hash, id);
  return id;
}

void HlirLanguage::remember(uint64_t hash, AttrId id) {
  if (2 * (cached_ + 1) > cache_.size()) {
    std::vector<Slot> old = std::move(cache_);
    cache_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    cached_ = 0;
    for (const Slot& slot : old)
      if (slot.id != AttrId{}) remember(slot.hash, slot.id);
  }
  const size_t mask = cache_.size() - 1;
  size_t i = hash & mask;
  while (cache_[i].id != AttrId{}) i = (i + 1) & mask;
  cache_[i] = Slot{hash, id};
  ++cached_;
}

AttrId HlirLanguage::attr(const Attr& attr) {
  if (std::holds_alternative<spool::NoAttr>(attr)) return AttrId{};
  const auto same = [&](const HlirAttr& p) { return !p.type && !p.view && spool::same_text(p.attr, attr); };
  const uint64_t hash = mix(spool::text_hash(attr), static_cast<uint64_t>(Entry::Attr));
  return intern(hash, same, [&] { return HlirAttr{attr, {}, {}}; });
}

AttrId HlirLanguage::source_attr(const Attr& attr, const TensorType& type) {
  const auto same = [&](const HlirAttr& p) {
    return p.type && !p.view && *p.type == type && spool::same_text(p.attr, attr);
  };
  spool::WordHash hs;
  hs.add(spool::text_hash(attr));
  hs.add(static_cast<uint64_t>(type.dtype));
  hs.add(type.shape.size());
  for (const int64_t d : type.shape) hs.add(static_cast<uint64_t>(d));
  const uint64_t hash = mix(hs.h, static_cast<uint64_t>(Entry::Source));
  return intern(hash, same, [&] { return HlirAttr{attr, type, {}}; });
}

AttrId HlirLanguage::view_attr(const spool::View& view) {
  const auto same = [&](const HlirAttr& p) {
    return p.view && !p.type && std::holds_alternative<spool::NoAttr>(p.attr) && p.view->same_text(view);
  };
  const uint64_t hash = mix(view.text_hash(), static_cast<uint64_t>(Entry::View));
  return intern(hash, same, [&] { return HlirAttr{spool::NoAttr{}, {}, view}; });
}

std::optional<AttrId> HlirLanguage::parse_attr(OpId op, std::string_view text) {
  const auto hop = hlir_op(op);
  if (!hop) return std::nullopt;  // views are not written in patterns yet
  const spool::OpInfo& info = spool::op_info(*hop);
  std::optional<TensorType> type;
  if (info.cls == OpClass::Source) {
    const size_t colon = text.rfind(" : ");
    if (colon == std::string_view::npos) return std::nullopt;
    type = parse_type(text.substr(colon + 3));
    if (!type) return std::nullopt;
    text = text.substr(0, colon);
  }
  auto kv = parse_kv(text);
  if (!kv) return std::nullopt;
  auto get = [&](const char* key) -> std::optional<std::string> {
    for (const auto& [k, v] : *kv)
      if (k == key) return v;
    return std::nullopt;
  };
  Attr attr;
  switch (info.attr) {
    case spool::AttrKind::None:
      if (!kv->empty()) return std::nullopt;
      attr = spool::NoAttr{};
      break;
    case spool::AttrKind::Name: {
      auto name = get("name");
      if (!name || kv->size() != 1) return std::nullopt;
      attr = spool::NameAttr{*name};
      break;
    }
    case spool::AttrKind::Scalar: {
      auto v = get("value");
      if (!v || !type || kv->size() != 1) return std::nullopt;
      double d = 0;
      if (*v == "true" || *v == "false") {
        d = *v == "true";
      } else {
        auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), d);
        if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;
      }
      // The value must be the constant's exactly: an integer that would wrap
      // (or is not an integer) and a float that would round are refused, not
      // silently changed (rule files name the reason: rules/rule_file.cpp).
      if (spool::is_integer(type->dtype) || type->dtype == DType::Bool) {
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || std::trunc(d) != d) return std::nullopt;
        if (spool::wrap_to_int(type->dtype, static_cast<int64_t>(d)) != static_cast<int64_t>(d)) return std::nullopt;
      } else if (!std::isnan(d) && spool::round_to_float(type->dtype, d) != d) {
        return std::nullopt;
      }
      attr = spool::ScalarAttr{Scalar::of(type->dtype, d)};
      break;
    }
    case spool::AttrKind::Axis: {
      auto v = get("axis");
      auto a = v ? parse_int(*v) : std::nullopt;
      if (!a || kv->size() != 1) return std::nullopt;
      attr = spool::AxisAttr{*a};
      break;
    }
    case spool::AttrKind::DType: {
      auto v = get("to");
      auto d = v ? spool::parse_dtype(*v) : std::nullopt;
      if (!d || kv->size() != 1) return std::nullopt;
      attr = spool::DTypeAttr{*d};
      break;
    }
    case spool::AttrKind::TopK: {
      auto v = get("k");
      auto k = v ? parse_int(*v) : std::nullopt;
      if (!k || kv->size() != 1) return std::nullopt;
      attr = spool::TopKAttr{*k};
      break;
    }
    case spool::AttrKind::Loop: {
      auto l = get("loop"), t = get("trips"), i = get("index");
      auto li = l ? parse_int(*l) : std::nullopt;
      auto ti = t ? parse_int(*t) : std::nullopt;
      auto ii = i ? parse_int(*i) : std::optional<int64_t>(0);
      if (!li || !ti || !ii) return std::nullopt;
      attr = spool::LoopAttr{*li, *ti, *ii};
      break;
    }
    // Kernel attributes (programs, gemm/reduce bodies, norms) are computed by
    // custom appliers, not written in patterns: bind them with `[?a]`.
    case spool::AttrKind::Program:
    case spool::AttrKind::Gemm:
    case spool::AttrKind::Reduce:
    case spool::AttrKind::Norm: return std::nullopt;
  }
  if (type) return source_attr(attr, *type);
  return this->attr(attr);
}

ParseOptions HlirLanguage::parse_options() {
  ParseOptions o;
  o.attr_parser = [this](OpId op, std::string_view text) { return parse_attr(op, text); };
  return o;
}

// ---- constant folding -------------------------------------------------------------------

namespace {

Scalar int_scalar(DType dtype, uint64_t bits) {
  Scalar s;
  s.dtype = dtype;
  s.i = spool::wrap_to_int(dtype, static_cast<int64_t>(bits));
  return s;
}

Scalar bool_scalar(bool v) {
  Scalar s;
  s.dtype = DType::Bool;
  s.i = v;
  return s;
}

// The value of an elementwise op on constants, when the interpreter's result
// is exactly reproducible here; nullopt otherwise.
std::optional<Scalar> fold(Op op, const Attr& attr, DType out, std::span<const ClassData* const> in) {
  for (const ClassData* d : in)
    if (!d->constant) return std::nullopt;
  auto c = [&](size_t i) -> const Scalar& { return *in[i]->constant; };
  switch (op) {
    case Op::Neg:
      if (spool::is_float(out)) return Scalar::of(out, -c(0).f);
      return int_scalar(out, 0 - static_cast<uint64_t>(c(0).i));
    case Op::Not: return bool_scalar(c(0).i == 0);
    // Division and square root of values exact in a double are correctly
    // rounded there, and rounding that double to the dtype again is
    // innocuous (53 >= 2 * 24 + 2 bits).
    case Op::Recip: return Scalar::of(out, 1.0 / c(0).f);
    case Op::Sqrt: return Scalar::of(out, std::sqrt(c(0).f));
    case Op::Cast: {
      const DType from = c(0).dtype;
      const DType to = std::get<spool::DTypeAttr>(attr).to;
      if (to == DType::Bool) return bool_scalar(spool::is_float(from) ? c(0).f != 0.0 : c(0).i != 0);
      if (spool::is_float(to)) {
        if (spool::is_float(from)) return Scalar::of(to, c(0).f);
        // An integer beyond 2^53 would be rounded twice.
        if (c(0).i > (int64_t{1} << 53) || c(0).i < -(int64_t{1} << 53)) return std::nullopt;
        return Scalar::of(to, static_cast<double>(c(0).i));
      }
      if (spool::is_float(from)) {
        // Truncation toward zero, folded only where the value fits the dtype
        // (what an out-of-range conversion yields is not defined here).
        const double t = std::trunc(c(0).f);
        const double limit = to == DType::I32 ? 2147483648.0 : 9223372036854775808.0;
        if (!std::isfinite(t) || t >= limit || t < -limit) return std::nullopt;
        return int_scalar(to, static_cast<uint64_t>(static_cast<int64_t>(t)));
      }
      return int_scalar(to, static_cast<uint64_t>(c(0).i));
    }
    case Op::Add:
      if (spool::is_float(out)) return Scalar::of(out, c(0).f + c(1).f);
      return int_scalar(out, static_cast<uint64_t>(c(0).i) + static_cast<uint64_t>(c(1).i));
    case Op::Mul:
      if (spool::is_float(out)) return Scalar::of(out, c(0).f * c(1).f);
      if (out == DType::Bool) return bool_scalar(c(0).i && c(1).i);
      return int_scalar(out, static_cast<uint64_t>(c(0).i) * static_cast<uint64_t>(c(1).i));
    case Op::Max:
      if (spool::is_float(out)) {
        const double a = c(0).f, b = c(1).f;
        if (std::isnan(a) || std::isnan(b)) return Scalar::of(out, std::nan(""));
        if (a == 0.0 && b == 0.0 && std::signbit(a) != std::signbit(b)) return std::nullopt;
        return Scalar::of(out, std::max(a, b));
      }
      if (out == DType::Bool) return bool_scalar(c(0).i || c(1).i);
      return int_scalar(out, static_cast<uint64_t>(std::max(c(0).i, c(1).i)));
    case Op::LessThan:
      return bool_scalar(spool::is_float(c(0).dtype) ? c(0).f < c(1).f : c(0).i < c(1).i);
    case Op::Equal:
      return bool_scalar(spool::is_float(c(0).dtype) ? c(0).f == c(1).f : c(0).i == c(1).i);
    case Op::MaxReduce:  // the max of equal values is that value (NaN included)
    case Op::Gather:     // any element of a constant tensor
    case Op::LoopInputStatic:
      return c(0);
    default: return std::nullopt;
  }
}

}  // namespace

// ---- analysis --------------------------------------------------------------------------

ClassData HlirAnalysis::compute(const EGraph& graph, NodeId n) const {
  const ENodeRef node = graph.node(n);
  ClassData out;
  boost::container::small_vector<const ClassData*, 4> in;
  // infer_type takes a vector of types: one per thread, kept between calls,
  // so that adding a node allocates nothing here.
  thread_local std::vector<TensorType> types;
  types.clear();
  for (ClassId child : node.children) {
    const ClassData& d = data_[graph.find_const(child).value];
    if (!d.ok) {
      out.ok = false;
      out.error = fmt::format("input c{} is ill-typed: {}", graph.find_const(child).value, d.error);
      return out;
    }
    in.push_back(&d);
    types.push_back(d.type);
  }
  try {
    if (node.op == lang_.view_op()) {
      const spool::View& view = *lang_.payload(node.attr).view;
      out.type = TensorType{types[0].dtype, view.apply(types[0].shape)};
      // Every element still reads the constant unless padding adds another value.
      bool keeps = in[0]->constant.has_value();
      for (const spool::ViewStep& step : view.steps())
        if (step.kind == spool::ViewKind::Pad &&
            !(in[0]->constant && Scalar::of(out.type.dtype, step.value) == *in[0]->constant))
          keeps = false;
      if (keeps) out.constant = in[0]->constant;
      return out;
    }
    const Op op = *lang_.hlir_op(node.op);
    if (spool::op_info(op).cls == OpClass::Source) {
      const HlirAttr& a = lang_.payload(node.attr);
      out.type = *a.type;
      if (op == Op::Constant) out.constant = std::get<spool::ScalarAttr>(a.attr).value;
      return out;
    }
    static const Attr kNoAttr = spool::NoAttr{};
    const Attr& attr = node.attr.value == 0 ? kNoAttr : lang_.payload(node.attr).attr;
    out.type = spool::infer_type(op, types, attr);
    out.constant = fold(op, attr, out.type.dtype, std::span<const ClassData* const>(in.data(), in.size()));
  } catch (const spool::Error& e) {
    out.ok = false;
    out.error = fmt::format("{}: {}", graph.ops().name(node.op), e.what());
  }
  return out;
}

void HlirAnalysis::make(const EGraph& graph, ClassId c, NodeId n) {
  if (data_.size() <= c.value) data_.resize(c.value + 1);
  data_[c.value] = compute(graph, n);
}

std::string HlirAnalysis::check_merge(const EGraph&, ClassId a, ClassId b) const {
  const ClassData& x = data_[a.value];
  const ClassData& y = data_[b.value];
  if (!x.ok) return "it built an ill-typed node: " + x.error;
  if (!y.ok) return "it built an ill-typed node: " + y.error;
  if (x.type != y.type)
    return fmt::format("their shape or dtype differ: {} vs {}", type_str(x.type), type_str(y.type));
  if (x.constant && y.constant && !(*x.constant == *y.constant))
    return fmt::format("they hold different constants {} and {}", spool::scalar_str(*x.constant),
                       spool::scalar_str(*y.constant));
  return {};
}

MergeChange HlirAnalysis::merge(ClassId into, ClassId from) {
  ClassData& x = data_[into.value];
  const ClassData& y = data_[from.value];
  if (x.constant.has_value() == y.constant.has_value()) return {};
  if (!x.constant) {
    x.constant = y.constant;
    return {true, false};
  }
  return {false, true};
}

bool HlirAnalysis::remake(const EGraph& graph, ClassId c, NodeId n) {
  ClassData& d = data_[c.value];
  if (!d.ok || d.constant) return false;
  ClassData fresh = compute(graph, n);
  if (!fresh.ok || !fresh.constant) return false;
  d.constant = fresh.constant;
  return true;
}

void HlirAnalysis::modify(EGraph& graph, ClassId c) {
  const ClassData d = data_[c.value];
  if (!d.ok || !d.constant) return;
  // The canonical form of a constant: a scalar `constant`, broadcast by a view.
  const TensorType scalar{d.type.dtype, {}};
  ClassId k = graph.add_leaf(lang_.op(Op::Constant), lang_.source_attr(spool::ScalarAttr{*d.constant}, scalar));
  if (!d.type.shape.empty()) {
    spool::View view;
    const Shape ones(d.type.shape.size(), 1);
    view.append(spool::reshape_step(ones), Shape{}, "constant folding");
    view.append(spool::expand_step(d.type.shape), Shape{}, "constant folding");
    k = graph.add(lang_.view_op(), lang_.view_attr(view), std::span<const ClassId>(&k, 1));
  }
  graph.merge(c, k, "constant folding");
}

std::string HlirAnalysis::check(const EGraph& graph, ClassId c) const {
  const ClassData& d = data_[c.value];
  if (!d.ok) return {};  // an ill-typed class is only reported when merged
  for (NodeId n : graph.class_nodes(c)) {
    const ClassData fresh = compute(graph, n);
    if (fresh.ok && fresh.type != d.type)
      return fmt::format("node {} has type {} in a class of type {}", graph.node_str(n), type_str(fresh.type),
                         type_str(d.type));
  }
  return {};
}

std::string HlirAnalysis::describe(ClassId c) const {
  const ClassData& d = data_[c.value];
  if (!d.ok) return "ill-typed";
  std::string s = type_str(d.type);
  if (d.constant) s += " = " + spool::scalar_str(*d.constant);
  return s;
}

std::unique_ptr<EGraph> make_egraph(HlirLanguage& lang) {
  auto g = std::make_unique<EGraph>(lang.language());
  g->set_analysis(std::make_unique<HlirAnalysis>(lang));
  return g;
}

// ---- Graph <-> e-graph --------------------------------------------------------------------

std::vector<ClassId> add_graph(EGraph& egraph, HlirLanguage& lang, const spool::Graph& graph) {
  std::vector<ClassId> classes(graph.id_bound());
  auto edge_class = [&](const spool::Edge& e) {
    ClassId c = classes[e.src.value];
    if (!e.view.is_identity()) c = egraph.add(lang.view_op(), lang.view_attr(e.view), std::span<const ClassId>(&c, 1));
    return c;
  };
  spool::TensorType type;
  for (spool::NodeId id : graph.topo_order()) {
    const spool::Node& node = graph.node(id);
    if (spool::op_info(node.op).cls == OpClass::Source) {
      type.dtype = node.dtype;
      type.shape = node.shape;
      classes[id.value] = egraph.add_leaf(lang.op(node.op), lang.source_attr(node.attr, type));
      continue;
    }
    ClassVec kids;
    for (const spool::Edge& e : node.inputs) kids.push_back(edge_class(e));
    classes[id.value] = egraph.add(lang.op(node.op), lang.attr(node.attr), span_of(kids));
  }
  std::vector<ClassId> outputs;
  for (const spool::Output& out : graph.outputs()) outputs.push_back(edge_class(out.edge));
  return outputs;
}

spool::Graph to_graph(const HlirLanguage& lang, const Term& term, const std::vector<std::string>& output_names) {
  spool::Graph graph;
  std::vector<spool::Edge> edges(term.nodes.size());
  for (size_t i = 0; i < term.nodes.size(); ++i) {
    const Term::Node& n = term.nodes[i];
    if (n.op == lang.view_op()) {
      const spool::Edge& inner = edges[n.children.at(0)];
      spool::Edge e = inner;
      const Shape& source = graph.node(inner.src).shape;
      for (const spool::ViewStep& step : lang.payload(n.attr).view->steps()) e.view.append(step, source, "view");
      edges[i] = e;
      continue;
    }
    const Op op = *lang.hlir_op(n.op);
    if (spool::op_info(op).cls == OpClass::Source) {
      const HlirAttr& a = lang.payload(n.attr);
      edges[i] = spool::Edge{graph.add_source(op, a.attr, a.type->dtype, a.type->shape), {}};
      continue;
    }
    std::vector<spool::Edge> inputs;
    for (uint32_t k : n.children) inputs.push_back(edges[k]);
    const Attr attr = n.attr.value == 0 ? Attr{spool::NoAttr{}} : lang.payload(n.attr).attr;
    edges[i] = spool::Edge{graph.add(op, std::move(inputs), attr), {}};
  }
  for (size_t r = 0; r < term.roots.size(); ++r)
    graph.add_output(r < output_names.size() ? output_names[r] : fmt::format("out{}", r), edges[term.roots[r]]);
  return graph;
}

}  // namespace spool::hlir
