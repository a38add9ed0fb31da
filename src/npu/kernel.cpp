// NPU kernel IR: names of types and ops, affine arithmetic, and scratchpad
// liveness (shared by the verifier and the simulator's report).

#include <spool/npu/kernel.hpp>
#include <spool/support/hash.hpp>

#include <algorithm>
#include <array>
#include <map>

namespace spool::npu {

std::string_view scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::F32: return "f32";
    case ScalarType::BF16: return "bf16";
    case ScalarType::I32: return "i32";
    case ScalarType::I64: return "i64";
    case ScalarType::I1: return "i1";
    case ScalarType::Index: return "index";
  }
  return "?";
}

std::optional<ScalarType> parse_scalar_type(std::string_view name) {
  for (ScalarType t : {ScalarType::F32, ScalarType::BF16, ScalarType::I32, ScalarType::I64,
                       ScalarType::I1, ScalarType::Index})
    if (scalar_type_name(t) == name) return t;
  return std::nullopt;
}

bool is_float(ScalarType type) { return type == ScalarType::F32 || type == ScalarType::BF16; }
bool is_int(ScalarType type) {
  return type == ScalarType::I32 || type == ScalarType::I64 || type == ScalarType::Index;
}

int scalar_bits(ScalarType type) {
  switch (type) {
    case ScalarType::F32: return 32;
    case ScalarType::BF16: return 32;  // computed in f32 lanes
    case ScalarType::I32: return 32;
    case ScalarType::I64: return 64;
    case ScalarType::I1: return 32;     // predicates occupy a 32-bit lane
    case ScalarType::Index: return 32;  // addresses are 32-bit on the vector unit
  }
  return 32;
}

ScalarType register_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ScalarType::F32;
    case DType::F16: return ScalarType::F32;
    case DType::BF16: return ScalarType::BF16;
    case DType::I32: return ScalarType::I32;
    case DType::I64: return ScalarType::I64;
    case DType::Bool: return ScalarType::I1;
  }
  return ScalarType::F32;
}

namespace {
struct VecOpInfo {
  std::string_view name;
  int arity;
  VecOpKind kind;
  std::string_view timing_class;
};
constexpr VecOpInfo kVecOps[] = {
#define SPOOL_VOP(e, text, arity, kind, cls) {text, arity, VecOpKind::kind, cls},
#include <spool/npu/vector_ops.def>
};
}  // namespace

std::string_view vec_op_name(VecOp op) { return kVecOps[static_cast<int>(op)].name; }
int vec_op_arity(VecOp op) { return kVecOps[static_cast<int>(op)].arity; }
VecOpKind vec_op_kind(VecOp op) { return kVecOps[static_cast<int>(op)].kind; }
std::string_view vec_op_timing_class(VecOp op) { return kVecOps[static_cast<int>(op)].timing_class; }

bool vec_op_reduces_rows(VecOp op) { return op == VecOp::ReduceSumRows || op == VecOp::ReduceMaxRows; }

ValueShape value_shape(const VecInstr& in, const std::vector<VecInstr>& body, const std::vector<ValueShape>& shapes) {
  switch (vec_op_kind(in.op)) {
    case VecOpKind::Load: return in.broadcast == LoadBroadcast::Row ? ValueShape::Row : ValueShape::Full;
    case VecOpKind::Gather: return ValueShape::Full;
    case VecOpKind::Const: return ValueShape::Row;
    case VecOpKind::Iota: return in.op == VecOp::IotaRow ? ValueShape::Row : ValueShape::Full;
    case VecOpKind::Reduce: return vec_op_reduces_rows(in.op) ? ValueShape::Col : ValueShape::Row;
    case VecOpKind::FloatUnary:
    case VecOpKind::Arith:
    case VecOpKind::Compare:
    case VecOpKind::Logic:
    case VecOpKind::Select:
    case VecOpKind::Cast: break;
  }
  bool full = false, row = false, col = false;
  for (const int o : in.operands) {
    if (body[static_cast<size_t>(o)].op == VecOp::Const) continue;  // the same value everywhere
    const ValueShape s = shapes[static_cast<size_t>(o)];
    full = full || s == ValueShape::Full;
    row = row || s == ValueShape::Row;
    col = col || s == ValueShape::Col;
  }
  if (full || (row && col)) return ValueShape::Full;
  return col ? ValueShape::Col : ValueShape::Row;
}

std::optional<VecOp> parse_vec_op(std::string_view name) {
  for (size_t i = 0; i < std::size(kVecOps); ++i)
    if (kVecOps[i].name == name) return static_cast<VecOp>(i);
  return std::nullopt;
}

std::string_view buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::Input: return "input";
    case BufferKind::Weight: return "weight";
    case BufferKind::Output: return "output";
    case BufferKind::Temp: return "temp";
  }
  return "?";
}

Affine Affine::var(int id, int64_t coeff) {
  Affine a;
  if (coeff != 0) a.terms.push_back({id, coeff});
  return a;
}

Affine Affine::operator+(const Affine& other) const {
  Affine out;
  out.constant = constant + other.constant;
  std::map<int, int64_t> sum;
  for (const auto& [id, c] : terms) sum[id] += c;
  for (const auto& [id, c] : other.terms) sum[id] += c;
  for (const auto& [id, c] : sum)
    if (c != 0) out.terms.push_back({id, c});
  return out;
}

Affine Affine::operator*(int64_t factor) const {
  Affine out;
  out.constant = constant * factor;
  if (factor != 0)
    for (const auto& [id, c] : terms) out.terms.push_back({id, c * factor});
  return out;
}

bool operator==(const LoopOp& a, const LoopOp& b) {
  return a.var == b.var && a.trips == b.trips && a.body == b.body && a.dynamic == b.dynamic;
}
bool operator==(const Stmt& a, const Stmt& b) { return a.node == b.node; }

int Program::find_buffer(std::string_view name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

void collect_uses(const std::vector<Stmt>& body, int& counter, std::vector<std::pair<int, int>>& range) {
  auto use = [&](int buffer, int first, int last) {
    if (buffer < 0 || buffer >= static_cast<int>(range.size())) return;
    auto& r = range[buffer];
    if (r.first < 0) r = {first, last};
    r.first = std::min(r.first, first);
    r.second = std::max(r.second, last);
  };
  for (const Stmt& stmt : body) {
    const int here = counter++;
    if (const auto* loop = std::get_if<LoopOp>(&stmt.node)) {
      if (loop->dynamic) use(loop->dynamic->count.buffer, here, here);
      // Every buffer used in the loop is live across the whole loop.
      std::vector<std::pair<int, int>> inner(range.size(), {-1, -1});
      collect_uses(loop->body, counter, inner);
      const int end = counter - 1;
      for (size_t b = 0; b < inner.size(); ++b)
        if (inner[b].first >= 0) use(static_cast<int>(b), here, end);
    } else if (const auto* dma = std::get_if<DmaOp>(&stmt.node)) {
      use(dma->spad.buffer, here, here);
      if (dma->indirect()) use(dma->index.buffer, here, here);
    } else if (const auto* mm = std::get_if<MatmulOp>(&stmt.node)) {
      use(mm->a.buffer, here, here);
      use(mm->b.buffer, here, here);
      use(mm->c.buffer, here, here);
    } else if (const auto* vec = std::get_if<VectorOp>(&stmt.node)) {
      for (const VecInstr& in : vec->body)
        if (in.op == VecOp::Load || in.op == VecOp::Gather) use(in.ref.buffer, here, here);
      for (const VecStore& st : vec->stores) use(st.ref.buffer, here, here);
    }
  }
}

// The largest sum of bytes live at once, each buffer live over its [first,
// last] range (first < 0: never). A sweep of the interval endpoints, ends
// after starts at equal points.
int64_t peak_live_bytes(const std::vector<std::pair<int, int>>& range, const std::vector<int64_t>& bytes) {
  std::vector<std::pair<int, int64_t>> events;  // (point, +/- bytes)
  for (size_t b = 0; b < range.size(); ++b) {
    if (range[b].first < 0 || bytes[b] == 0) continue;
    events.push_back({2 * range[b].first, bytes[b]});
    events.push_back({2 * range[b].second + 1, -bytes[b]});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [point, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

SpadLiveness spad_liveness(const Kernel& kernel) {
  SpadLiveness out;
  out.range.assign(kernel.spad.size(), {-1, -1});
  int counter = 0;
  collect_uses(kernel.body, counter, out.range);
  std::vector<int64_t> bytes;
  for (const SpadBuffer& b : kernel.spad) bytes.push_back(b.footprint_bytes());
  out.peak_bytes = peak_live_bytes(out.range, bytes);
  return out;
}

std::vector<int64_t> dram_addresses(const Program& program) {
  const size_t n = program.buffers.size();
  std::vector<int64_t> base(n, 0);
  int64_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (program.buffers[i].alias_of >= 0) continue;
    base[i] = next;
    const int64_t bytes = program.buffer_elements(static_cast<int>(i)) * dtype_bytes(program.buffers[i].dtype);
    next += (bytes + 4095) / 4096 * 4096;
  }
  for (size_t i = 0; i < n; ++i) {
    const DramBuffer& b = program.buffers[i];
    if (b.alias_of >= 0) base[i] = base[static_cast<size_t>(b.alias_of)] + b.alias_offset * dtype_bytes(b.dtype);
  }
  return base;
}

DramFootprint dram_footprint(const Program& program) {
  DramFootprint out;
  const size_t n = program.buffers.size();
  std::vector<std::pair<int, int>> range(n, {-1, -1});
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for_each_stmt(program.kernels[k].body, [&](const Stmt& stmt) {
      const auto* dma = std::get_if<DmaOp>(&stmt.node);
      if (!dma || dma->dram < 0) return;
      auto& r = range[static_cast<size_t>(program.root_of(dma->dram))];
      if (r.first < 0) r.first = static_cast<int>(k);
      r.second = static_cast<int>(k);
    });
  std::vector<int64_t> temp_bytes(n, 0);
  for (size_t b = 0; b < n; ++b) {
    const DramBuffer& buffer = program.buffers[b];
    if (buffer.alias_of >= 0) continue;
    const int64_t bytes = program.buffer_elements(static_cast<int>(b)) * dtype_bytes(buffer.dtype);
    switch (buffer.kind) {
      case BufferKind::Weight: out.weight_bytes += bytes; break;
      case BufferKind::Input: out.input_bytes += bytes; break;
      case BufferKind::Output: out.output_bytes += bytes; break;
      case BufferKind::Temp: temp_bytes[b] = bytes; break;
    }
  }
  out.temp_peak_bytes = peak_live_bytes(range, temp_bytes);
  return out;
}

// ---- kernel shapes -------------------------------------------------------------

namespace {

void add_affine(WordHash& h, const Affine& a) {
  h.add(static_cast<uint64_t>(a.constant));
  h.add(a.terms.size());
  for (const auto& [var, coeff] : a.terms) {
    h.add(static_cast<uint64_t>(var));
    h.add(static_cast<uint64_t>(coeff));
  }
}
void add_extent(WordHash& h, const Extent& e) {
  h.add(e.options.size());
  for (const Affine& a : e.options) add_affine(h, a);
}
void add_ref(WordHash& h, const SpadRef& r) {
  h.add(static_cast<uint64_t>(r.buffer));
  add_affine(h, r.slot);
  add_affine(h, r.offset);
  h.add(static_cast<uint64_t>(r.ld));
}
void add_ints(WordHash& h, const std::vector<int64_t>& v) {
  h.add(v.size());
  for (int64_t x : v) h.add(static_cast<uint64_t>(x));
}

void add_body(WordHash& h, const std::vector<Stmt>& body, const std::function<uint64_t(int)>& dram_key) {
  h.add(body.size());
  for (const Stmt& s : body) {
    h.add(s.node.index());
    if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
      h.add(static_cast<uint64_t>(loop->var));
      h.add(static_cast<uint64_t>(loop->trips));
      h.add(loop->dynamic ? static_cast<uint64_t>(loop->dynamic->nominal) : ~uint64_t{0});
      add_body(h, loop->body, dram_key);
    } else if (const auto* d = std::get_if<DmaOp>(&s.node)) {
      h.add(d->load);
      h.add(dram_key(d->dram));
      add_affine(h, d->dram_offset);
      add_ints(h, d->dram_strides);
      add_ref(h, d->spad);
      add_ints(h, d->spad_strides);
      for (const Extent& e : d->dims) add_extent(h, e);
      h.add(static_cast<uint64_t>(d->tag));
    } else if (const auto* m = std::get_if<MatmulOp>(&s.node)) {
      add_ref(h, m->a);
      add_ref(h, m->b);
      add_ref(h, m->c);
      add_extent(h, m->m);
      add_extent(h, m->k);
      add_extent(h, m->n);
    } else if (const auto* v = std::get_if<VectorOp>(&s.node)) {
      add_extent(h, v->rows);
      add_extent(h, v->cols);
      h.add(v->body.size());
      for (const VecInstr& in : v->body) {
        h.add(static_cast<uint64_t>(in.op));
        add_ref(h, in.ref);
      }
    } else if (const auto* w = std::get_if<WaitOp>(&s.node)) {
      h.add(static_cast<uint64_t>(w->tag));
    }
  }
}

bool same_stmt_shape(const Stmt& a, const Stmt& b, const std::function<bool(int, int)>& same_dram) {
  if (a.node.index() != b.node.index()) return false;
  if (const auto* la = std::get_if<LoopOp>(&a.node)) {
    const auto& lb = std::get<LoopOp>(b.node);
    return la->var == lb.var && la->trips == lb.trips && la->dynamic == lb.dynamic &&
           same_body_shape(la->body, lb.body, same_dram);
  }
  if (const auto* da = std::get_if<DmaOp>(&a.node)) {
    DmaOp db = std::get<DmaOp>(b.node);
    if (!same_dram(da->dram, db.dram)) return false;
    db.dram = da->dram;
    return *da == db;
  }
  return a == b;
}

}  // namespace

uint64_t body_shape_hash(const std::vector<Stmt>& body, const std::function<uint64_t(int dram)>& dram_key) {
  WordHash h;
  add_body(h, body, dram_key);
  return h.h;
}

bool same_body_shape(const std::vector<Stmt>& a, const std::vector<Stmt>& b,
                     const std::function<bool(int dram_a, int dram_b)>& same_dram) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_stmt_shape(a[i], b[i], same_dram)) return false;
  return true;
}

}  // namespace spool::npu
