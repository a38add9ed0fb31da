// The NPU program verifier (see include/spool/npu/verify.hpp).
//
// Bounds are checked exactly: an access's lowest and highest element are
// evaluated at every point of the loop variables the access mentions (tile
// loops have few trips, and edge tiles are ragged through min(), so corner
// evaluation alone would be wrong). Above kMaxPoints points only the corners
// of the loop box are evaluated, which is exact for accesses without min().

#include <spool/npu/verify.hpp>

#include <spool/npu/text.hpp>
#include <spool/support/error.hpp>
#include <spool/support/hash.hpp>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <set>
#include <unordered_map>

namespace spool::npu {
namespace {

constexpr int64_t kMaxPoints = int64_t{1} << 18;

struct Range {
  int64_t lo = INT64_MAX;
  int64_t hi = INT64_MIN;
  void add(int64_t l, int64_t h) {
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  }
};

class Verifier {
 public:
  explicit Verifier(const Program& p) : p_(p) {}

  std::vector<std::string> run() {
    buffers();
    // Each kernel is checked on its own (its loops, scratchpad and
    // accesses): a program of many kernels in parallel, each by a verifier
    // of its own, the errors reported in kernel order. Kernels that differ
    // only in the DRAM buffers they name, where those have one dtype and
    // one size (a layer's kernels in every layer), pass or fail those
    // checks alike: each such shape is checked by its first kernel, and a
    // later one again only if the first had errors (for its own messages).
    const size_t n = p_.kernels.size();
    const std::vector<size_t> first = first_of_shape();
    std::vector<std::vector<std::string>> kernel_errors(n);
    std::vector<char> body_failed(n, 0);
    auto check = [&](size_t i, bool whole) {
      Verifier one(p_);
      body_failed[i] = one.kernel(static_cast<int>(i), whole);
      kernel_errors[i] = std::move(one.errors_);
    };
    // Checks kernels `which`, each whole if `whole` or if it is the first of its shape.
    auto for_kernels = [&](const std::vector<size_t>& which, bool whole) {
      auto one = [&](size_t i) { check(i, whole || first[i] == i); };
      constexpr size_t kParallelKernels = 16;
      if (which.size() < kParallelKernels) {
        for (const size_t i : which) one(i);
      } else {
        tbb::parallel_for(size_t{0}, which.size(), [&](size_t w) { one(which[w]); });
      }
    };
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    for_kernels(all, false);
    std::vector<size_t> again;
    for (size_t i = 0; i < n; ++i)
      if (first[i] != i && body_failed[first[i]]) again.push_back(i);
    for_kernels(again, true);
    for (std::vector<std::string>& errors : kernel_errors)
      errors_.insert(errors_.end(), std::make_move_iterator(errors.begin()), std::make_move_iterator(errors.end()));
    dependencies();
    return std::move(errors_);
  }

 private:
  template <typename... Args>
  void error(fmt::format_string<Args...> format, Args&&... args) {
    errors_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void kerror(fmt::format_string<Args...> format, Args&&... args) {
    errors_.push_back(fmt::format("kernel '{}': ", k_->name) + fmt::format(format, std::forward<Args>(args)...));
  }

  void buffers() {
    std::set<std::string> names;
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const DramBuffer& b = p_.buffers[i];
      if (!names.insert(b.name).second) error("buffer '@{}': defined twice", b.name);
      for (int64_t d : b.shape)
        if (d <= 0) error("buffer '@{}': shape {} has a non-positive dimension", b.name, shape_str(b.shape));
      if (b.alias_of < 0) continue;
      if (b.alias_of >= static_cast<int>(i) || p_.buffers[b.alias_of].alias_of >= 0) {
        error("buffer '@{}': aliases must name an earlier root buffer", b.name);
        continue;
      }
      const DramBuffer& root = p_.buffers[b.alias_of];
      if (root.dtype != b.dtype)
        error("buffer '@{}': alias of {} buffer '@{}' has dtype {}", b.name, dtype_name(root.dtype), root.name,
              dtype_name(b.dtype));
      const int64_t end = b.alias_offset + num_elements(b.shape);
      if (b.alias_offset < 0 || end > num_elements(root.shape))
        error("buffer '@{}': alias covers elements [{}, {}) outside '@{}' ({} elements)", b.name, b.alias_offset, end,
              root.name, num_elements(root.shape));
    }
  }

  // ---- evaluation over the loop domain ------------------------------------
  static void vars_of(const Affine& a, std::set<int>& out) {
    for (const auto& [id, c] : a.terms) out.insert(id);
  }
  static void vars_of(const Extent& e, std::set<int>& out) {
    for (const Affine& a : e.options) vars_of(a, out);
  }

  // Calls f(vars) at every point of the given loop variables (others at 0).
  void for_each_point(const std::set<int>& used, const std::function<void(const int64_t*)>& f) {
    std::vector<int> ids;
    int64_t points = 1;
    for (int id : used) {
      ids.push_back(id);
      points = std::min(kMaxPoints + 1, points * std::max<int64_t>(1, trips_[id]));
    }
    std::fill(vars_.begin(), vars_.end(), 0);
    const bool corners = points > kMaxPoints;
    // Odometer over the variables; in corner mode each variable takes 0 and trips-1.
    std::vector<int64_t> pos(ids.size(), 0);
    for (;;) {
      for (size_t i = 0; i < ids.size(); ++i)
        vars_[ids[i]] = corners ? (pos[i] ? trips_[ids[i]] - 1 : 0) : pos[i];
      f(vars_.data());
      size_t i = 0;
      for (; i < ids.size(); ++i) {
        const int64_t limit = corners ? 2 : trips_[ids[i]];
        if (++pos[i] < limit) break;
        pos[i] = 0;
      }
      if (i == ids.size()) break;
    }
  }

  bool in_scope(const Affine& a, const char* op) {
    for (const auto& [id, c] : a.terms) {
      if (id < 0 || id >= static_cast<int>(k_->loop_vars.size())) {
        kerror("op '{}' uses an unknown loop variable", op);
        return false;
      }
      if (std::find(scope_.begin(), scope_.end(), id) == scope_.end()) {
        kerror("op '{}' uses loop variable '{}' outside its loop", op, k_->loop_vars[id]);
        return false;
      }
    }
    return true;
  }
  bool in_scope(const Extent& e, const char* op) {
    for (const Affine& a : e.options)
      if (!in_scope(a, op)) return false;
    return true;
  }

  // Checks an extent is at least 1 everywhere.
  void positive(const Extent& e, const char* op, const char* what) {
    std::set<int> used;
    vars_of(e, used);
    int64_t lo = INT64_MAX;
    for_each_point(used, [&](const int64_t* v) { lo = std::min(lo, e.eval(v)); });
    if (lo < 1) kerror("op '{}': {} extent {} can be {}", op, what, print_extent(e, k_->loop_vars), lo);
  }

  bool valid_spad(const SpadRef& r, const char* op) {
    if (r.buffer < 0 || r.buffer >= static_cast<int>(k_->spad.size())) {
      kerror("op '{}' uses an unknown scratchpad buffer", op);
      return false;
    }
    if (!in_scope(r.slot, op) || !in_scope(r.offset, op)) return false;
    std::set<int> used;
    vars_of(r.slot, used);
    int64_t lo = INT64_MAX;
    for_each_point(used, [&](const int64_t* v) { lo = std::min(lo, r.slot.eval(v)); });
    if (lo < 0) {
      kerror("op '{}': slot of %{} can be negative ({})", op, k_->spad[r.buffer].name, lo);
      return false;
    }
    return true;
  }

  // Checks the elements [offset + lo_fn, offset + hi_fn] of a scratchpad ref
  // are inside one slot of the buffer. `span(vars)` returns the last element
  // touched relative to the offset.
  void spad_bounds(const SpadRef& r, const char* op, const std::set<int>& extra_vars,
                   const std::function<int64_t(const int64_t*)>& span) {
    std::set<int> used = extra_vars;
    vars_of(r.offset, used);
    Range range;
    for_each_point(used, [&](const int64_t* v) {
      const int64_t off = r.offset.eval(v);
      range.add(off, off + span(v));
    });
    const SpadBuffer& b = k_->spad[r.buffer];
    if (range.lo < 0 || range.hi >= b.elements)
      kerror("op '{}' accesses elements [{}, {}) of %{} outside its {} elements", op, range.lo, range.hi + 1, b.name,
             b.elements);
  }

  // A 2-D tile of rows x cols at row stride ld.
  void tile_bounds(const SpadRef& r, const char* op, const Extent& rows, const Extent& cols) {
    if (!valid_spad(r, op)) return;
    if (r.ld < 1) {
      kerror("op '{}': row stride of %{} must be positive", op, k_->spad[r.buffer].name);
      return;
    }
    std::set<int> used;
    vars_of(rows, used);
    vars_of(cols, used);
    spad_bounds(r, op, used, [&](const int64_t* v) { return (rows.eval(v) - 1) * r.ld + cols.eval(v) - 1; });
    if (k_->spad[r.buffer].elements > 0 && r.ld > 0) {
      std::set<int> cused;
      vars_of(cols, cused);
      int64_t widest = 0;
      for_each_point(cused, [&](const int64_t* v) { widest = std::max(widest, cols.eval(v)); });
      if (widest > r.ld && rows.options.size() == 1 && !(rows.options[0] == Affine::of(1)))
        kerror("op '{}': tile rows of {} elements overlap at row stride {} in %{}", op, widest, r.ld,
               k_->spad[r.buffer].name);
    }
  }

  // ---- kernels ---------------------------------------------------------------
  // Per kernel, the first kernel of its shape (itself if none before it).
  std::vector<size_t> first_of_shape() const {
    const size_t n = p_.kernels.size();
    auto valid = [&](int b) { return b >= 0 && b < static_cast<int>(p_.buffers.size()); };
    auto dram_key = [&](int b) -> uint64_t {
      if (!valid(b)) return ~uint64_t{0};
      WordHash h;
      h.add(static_cast<uint64_t>(p_.buffers[b].dtype));
      h.add(static_cast<uint64_t>(p_.buffer_elements(b)));
      return h.h;
    };
    auto same_dram = [&](int a, int b) {
      return valid(a) && valid(b) && p_.buffers[a].dtype == p_.buffers[b].dtype &&
             p_.buffer_elements(a) == p_.buffer_elements(b);
    };
    auto same_shape = [&](size_t i, size_t j) {
      const Kernel &k = p_.kernels[i], &o = p_.kernels[j];
      return o.spad == k.spad && o.loop_vars.size() == k.loop_vars.size() &&
             same_body_shape(o.body, k.body, same_dram);
    };
    // The hashes, and each kernel against the first kernel of its hash, in
    // parallel; the rest in order. The first kernel of a hash is the first
    // of its shape, and the first one a later kernel is compared with: a
    // kernel of its shape gets it either way.
    std::vector<uint64_t> hash(n);
    tbb::parallel_for(size_t{0}, n, [&](size_t i) {
      const Kernel& k = p_.kernels[i];
      WordHash h;
      h.add(k.spad.size());
      for (const SpadBuffer& b : k.spad) {
        h.add(static_cast<uint64_t>(b.elements));
        h.add(static_cast<uint64_t>(b.offset));
      }
      h.add(k.loop_vars.size());
      h.add(body_shape_hash(k.body, dram_key));
      hash[i] = h.h;
    });
    std::unordered_map<uint64_t, size_t> first_of_hash;
    for (size_t i = 0; i < n; ++i) first_of_hash.emplace(hash[i], i);
    std::vector<size_t> first(n);
    tbb::parallel_for(size_t{0}, n, [&](size_t i) {
      const size_t j = first_of_hash.at(hash[i]);
      first[i] = j == i || same_shape(i, j) ? j : i;
    });
    std::unordered_map<uint64_t, std::vector<size_t>> by_hash;
    for (size_t i = 0; i < n; ++i) {
      std::vector<size_t>& same = by_hash[hash[i]];
      if (first[i] == i) {
        for (const size_t j : same)
          if (j != same.front() && same_shape(i, j)) {  // same.front() was compared above
            first[i] = j;
            break;
          }
      }
      if (first[i] == i) same.push_back(i);
    }
    return first;
  }

  // Checks kernel `index`: its dependencies, and if `whole` everything
  // else. Whether those other checks found errors.
  bool kernel(int index, bool whole) {
    k_ = &p_.kernels[index];
    trips_.assign(k_->loop_vars.size(), 1);
    vars_.assign(k_->loop_vars.size(), 0);
    scope_.clear();
    for (int d : k_->deps)
      if (d < 0 || d >= index) kerror("depends on a kernel that does not come before it");
    if (!whole) return false;
    const size_t before = errors_.size();

    std::set<std::string> names;
    for (const SpadBuffer& s : k_->spad) {
      if (!names.insert(s.name).second) kerror("scratchpad buffer %{} is defined twice", s.name);
      if (s.elements < 1 || s.slots < 1) kerror("scratchpad buffer %{} is empty", s.name);
      if (s.offset < 0 || s.offset + s.footprint_bytes() > p_.spad_bytes)
        kerror("scratchpad buffer %{} at bytes [{}, {}) is outside the {}-byte scratchpad", s.name, s.offset,
               s.offset + s.footprint_bytes(), p_.spad_bytes);
    }
    const SpadLiveness live = spad_liveness(*k_);
    for (size_t a = 0; a < k_->spad.size(); ++a) {
      for (size_t b = a + 1; b < k_->spad.size(); ++b) {
        const SpadBuffer& x = k_->spad[a];
        const SpadBuffer& y = k_->spad[b];
        const int64_t lo = std::max(x.offset, y.offset);
        const int64_t hi = std::min(x.offset + x.footprint_bytes(), y.offset + y.footprint_bytes());
        const auto& rx = live.range[a];
        const auto& ry = live.range[b];
        const bool both_live = rx.first >= 0 && ry.first >= 0 && rx.first <= ry.second && ry.first <= rx.second;
        if (lo < hi && both_live)
          kerror("scratchpad buffers %{} and %{} overlap at bytes [{}, {}) while both are live", x.name, y.name, lo,
                 hi);
      }
    }
    // Loop trip counts are needed before any body is checked.
    for_each_stmt(k_->body, [&](const Stmt& s) {
      if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
        if (loop->var < 0 || loop->var >= static_cast<int>(k_->loop_vars.size())) return;
        trips_[loop->var] = loop->trips;
      }
    });
    body(k_->body);
    return errors_.size() != before;
  }

  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
        if (loop->var < 0 || loop->var >= static_cast<int>(k_->loop_vars.size())) {
          kerror("loop with an unknown variable");
          continue;
        }
        if (std::find(scope_.begin(), scope_.end(), loop->var) != scope_.end())
          kerror("loop variable '{}' is reused by a nested loop", k_->loop_vars[loop->var]);
        if (loop->trips < 1) kerror("loop '{}' has {} trips", k_->loop_vars[loop->var], loop->trips);
        if (loop->dynamic) check_dynamic_trips(*loop);
        scope_.push_back(loop->var);
        body(loop->body);
        scope_.pop_back();
      } else if (const auto* dma = std::get_if<DmaOp>(&s.node)) {
        check_dma(*dma);
      } else if (const auto* mm = std::get_if<MatmulOp>(&s.node)) {
        check_matmul(*mm);
      } else if (const auto* vec = std::get_if<VectorOp>(&s.node)) {
        check_vector(*vec);
      }
    }
  }

  // A trip count read at run time: an integer element in bounds, read in the
  // enclosing loops' scope; a positive divisor; a nominal count within the bound.
  void check_dynamic_trips(const LoopOp& loop) {
    const DynamicTrips& d = *loop.dynamic;
    const std::string& var = k_->loop_vars[loop.var];
    if (d.divisor < 1) kerror("loop '{}' divides its count by {}", var, d.divisor);
    if (d.nominal < 0 || d.nominal > loop.trips)
      kerror("loop '{}' has nominal trips {} outside [0, {}]", var, d.nominal, loop.trips);
    if (!valid_spad(d.count, "for")) return;
    const SpadBuffer& b = k_->spad[d.count.buffer];
    if (b.dtype != DType::I32 && b.dtype != DType::I64)
      kerror("loop '{}' reads its count from %{} of dtype {} (i32 or i64)", var, b.name, dtype_name(b.dtype));
    spad_bounds(d.count, "for", {}, [](const int64_t*) { return int64_t{0}; });
  }

  void check_dma(const DmaOp& d) {
    const char* op = d.load ? "dma.load" : "dma.store";
    if (d.dram < 0 || d.dram >= static_cast<int>(p_.buffers.size())) {
      kerror("op '{}' uses an unknown DRAM buffer", op);
      return;
    }
    const DramBuffer& buf = p_.buffers[d.dram];
    if (d.dims.empty() || d.dims.size() > 4) {
      kerror("op '{}' on '@{}' has {} dimensions (1 to 4 allowed)", op, buf.name, d.dims.size());
      return;
    }
    if (d.dram_strides.size() != d.dims.size() || d.spad_strides.size() != d.dims.size()) {
      kerror("op '{}' on '@{}' needs one DRAM and one scratchpad stride per dimension", op, buf.name);
      return;
    }
    for (const Extent& e : d.dims)
      if (!in_scope(e, op)) return;
    if (!in_scope(d.dram_offset, op) || !valid_spad(d.spad, op)) return;
    for (size_t i = 0; i < d.dims.size(); ++i) {
      if (d.dram_strides[i] < 0 || d.spad_strides[i] < 0) {
        kerror("op '{}' on '@{}' has a negative stride", op, buf.name);
        return;
      }
    }
    for (const Extent& e : d.dims) positive(e, op, "dimension");
    const SpadBuffer& sb = k_->spad[d.spad.buffer];
    if (sb.dtype != buf.dtype)
      kerror("op '{}' moves {} '@{}' {} {} %{}", op, dtype_name(buf.dtype), buf.name, d.load ? "into" : "from",
             dtype_name(sb.dtype), sb.name);
    std::set<int> dim_vars;
    for (const Extent& e : d.dims) vars_of(e, dim_vars);
    auto span = [&](const std::vector<int64_t>& strides) {
      return [&d, &strides](const int64_t* v) {
        int64_t last = 0;
        for (size_t i = 0; i < d.dims.size(); ++i) last += (d.dims[i].eval(v) - 1) * strides[i];
        return last;
      };
    };
    spad_bounds(d.spad, op, dim_vars, span(d.spad_strides));
    if (d.indirect() && !check_index(d, op, buf, dim_vars, span)) return;
    std::set<int> used = dim_vars;
    vars_of(d.dram_offset, used);
    Range range;
    auto dram_span = span(d.dram_strides);
    // An indirect transfer may reach any index in [0, index_limit).
    const int64_t index_span = d.indirect() ? (d.index_limit - 1) * d.index_scale : 0;
    for_each_point(used, [&](const int64_t* v) {
      const int64_t off = d.dram_offset.eval(v);
      range.add(off, off + dram_span(v) + index_span);
    });
    const int64_t size = p_.buffer_elements(d.dram);
    if (range.lo < 0 || range.hi >= size)
      kerror("op '{}' accesses elements [{}, {}) of '@{}' outside its {} elements", op, range.lo, range.hi + 1,
             buf.name, size);
  }

  // The index operand of an indirect DMA: an i32/i64 scratchpad buffer read
  // in bounds, one stride per dimension, a positive limit and scale.
  template <typename Span>
  bool check_index(const DmaOp& d, const char* op, const DramBuffer& buf, const std::set<int>& dim_vars, Span span) {
    if (!valid_spad(d.index, op)) return false;
    const SpadBuffer& ib = k_->spad[d.index.buffer];
    if (ib.dtype != DType::I32 && ib.dtype != DType::I64) {
      kerror("op '{}' on '@{}' is indexed by %{} of dtype {} (an index buffer holds i32 or i64)", op, buf.name, ib.name,
             dtype_name(ib.dtype));
      return false;
    }
    if (d.index_strides.size() != d.dims.size()) {
      kerror("op '{}' on '@{}' needs one index stride per dimension", op, buf.name);
      return false;
    }
    for (int64_t s : d.index_strides)
      if (s < 0) {
        kerror("op '{}' on '@{}' has a negative index stride", op, buf.name);
        return false;
      }
    if (d.index_limit < 1 || d.index_scale < 0) {
      kerror("op '{}' on '@{}' has index limit {} and scale {} (limit >= 1, scale >= 0)", op, buf.name, d.index_limit,
             d.index_scale);
      return false;
    }
    spad_bounds(d.index, op, dim_vars, span(d.index_strides));
    return true;
  }

  void check_matmul(const MatmulOp& m) {
    const char* op = "matmul";
    if (!in_scope(m.m, op) || !in_scope(m.k, op) || !in_scope(m.n, op)) return;
    positive(m.m, op, "m");
    positive(m.k, op, "k");
    positive(m.n, op, "n");
    for (const SpadRef* r : {&m.a, &m.b, &m.c}) {
      if (r->buffer < 0 || r->buffer >= static_cast<int>(k_->spad.size())) continue;
      const SpadBuffer& b = k_->spad[r->buffer];
      if (!spool::is_float(b.dtype)) kerror("op 'matmul' operand %{} has non-float dtype {}", b.name, dtype_name(b.dtype));
    }
    if (m.trans_a) {
      tile_bounds(m.a, op, m.k, m.m);
    } else {
      tile_bounds(m.a, op, m.m, m.k);
    }
    if (m.trans_b) {
      tile_bounds(m.b, op, m.n, m.k);
    } else {
      tile_bounds(m.b, op, m.k, m.n);
    }
    tile_bounds(m.c, op, m.m, m.n);
  }

  // Long because it is one pass over the body, each instruction checked
  // against those before it (arity, definition order, dtypes, value shapes,
  // broadcasts, reductions), each error naming the value: the checks share
  // the shapes inferred so far.
  void check_vector(const VectorOp& v) {
    const char* op = "vector";
    if (!in_scope(v.rows, op) || !in_scope(v.cols, op)) return;
    positive(v.rows, op, "rows");
    positive(v.cols, op, "cols");
    std::vector<ValueShape> shapes(v.body.size(), ValueShape::Full);
    const Extent one = Extent::of(1);
    for (size_t i = 0; i < v.body.size(); ++i) {
      const VecInstr& in = v.body[i];
      const std::string_view name = vec_op_name(in.op);
      const std::string opname(name);
      auto verror = [&](const std::string& message) {
        kerror("value %{}: op '{}' {}", in.name, name, message);
      };
      if (static_cast<int>(in.operands.size()) != vec_op_arity(in.op)) {
        verror(fmt::format("takes {} operands, got {}", vec_op_arity(in.op), in.operands.size()));
        continue;
      }
      bool operands_ok = true;
      for (int o : in.operands)
        if (o < 0 || o >= static_cast<int>(i)) operands_ok = false;
      if (!operands_ok) {
        verror("uses a value before it is defined");
        continue;
      }
      auto type_of = [&](int o) { return v.body[o].type; };
      auto tname = [](ScalarType t) { return scalar_type_name(t); };
      const ValueShape shape = value_shape(in, v.body, shapes);
      switch (vec_op_kind(in.op)) {
        case VecOpKind::Load: {
          if (!valid_spad(in.ref, opname.c_str())) break;
          const SpadBuffer& b = k_->spad[in.ref.buffer];
          if (register_type(b.dtype) != in.type)
            verror(fmt::format("has type {} but %{} holds {} (loaded as {})", tname(in.type), b.name,
                               dtype_name(b.dtype), tname(register_type(b.dtype))));
          if (in.broadcast == LoadBroadcast::Full)
            tile_bounds(in.ref, opname.c_str(), v.rows, v.cols);
          else if (in.broadcast == LoadBroadcast::Row)
            tile_bounds(in.ref, opname.c_str(), one, v.rows);
          else
            tile_bounds(in.ref, opname.c_str(), one, v.cols);
          break;
        }
        case VecOpKind::Gather: {
          if (!valid_spad(in.ref, opname.c_str())) break;
          const SpadBuffer& b = k_->spad[in.ref.buffer];
          if (register_type(b.dtype) != in.type)
            verror(fmt::format("has type {} but %{} holds {} (loaded as {})", tname(in.type), b.name,
                               dtype_name(b.dtype), tname(register_type(b.dtype))));
          if (type_of(in.operands[0]) != ScalarType::Index)
            verror(fmt::format("needs an index operand, got {} (cast it explicitly)", tname(type_of(in.operands[0]))));
          if (in.ref.ld < 1) verror("needs a row stride of at least 1");
          else tile_bounds(in.ref, opname.c_str(), v.rows, Extent::of(in.ref.ld));
          break;
        }
        case VecOpKind::Const:
          if (in.type == ScalarType::I1 && in.literal != 0.0 && in.literal != 1.0)
            verror(fmt::format("literal {} is not an i1", in.literal));
          else if (is_int(in.type) && in.literal != static_cast<double>(static_cast<int64_t>(in.literal)))
            verror(fmt::format("literal {} is not an integer", in.literal));
          break;
        case VecOpKind::Iota:
          if (in.type != ScalarType::Index) verror(fmt::format("has type {}, expected index", tname(in.type)));
          break;
        case VecOpKind::FloatUnary:
          if (!is_float(type_of(in.operands[0])))
            verror(fmt::format("needs a float operand, got {}", tname(type_of(in.operands[0]))));
          else if (type_of(in.operands[0]) != in.type)
            verror(fmt::format("of {} is annotated {}", tname(type_of(in.operands[0])), tname(in.type)));
          break;
        case VecOpKind::Arith: {
          const ScalarType a = type_of(in.operands[0]), b = type_of(in.operands[1]);
          if (a != b)
            verror(fmt::format("mixes {} with {} without an explicit cast", tname(a), tname(b)));
          else if (a == ScalarType::I1)
            verror("needs numeric operands, got i1");
          else if (a != in.type)
            verror(fmt::format("of {} is annotated {}", tname(a), tname(in.type)));
          break;
        }
        case VecOpKind::Compare: {
          const ScalarType a = type_of(in.operands[0]), b = type_of(in.operands[1]);
          if (a != b)
            verror(fmt::format("compares {} with {} without an explicit cast", tname(a), tname(b)));
          else if (in.type != ScalarType::I1)
            verror(fmt::format("yields i1, annotated {}", tname(in.type)));
          break;
        }
        case VecOpKind::Logic:
          if (type_of(in.operands[0]) != ScalarType::I1 || type_of(in.operands[1]) != ScalarType::I1 ||
              in.type != ScalarType::I1)
            verror("needs i1 operands and result");
          break;
        case VecOpKind::Select: {
          const ScalarType c = type_of(in.operands[0]), a = type_of(in.operands[1]), b = type_of(in.operands[2]);
          if (c != ScalarType::I1)
            verror(fmt::format("needs an i1 condition, got {}", tname(c)));
          else if (a != b)
            verror(fmt::format("mixes {} with {} without an explicit cast", tname(a), tname(b)));
          else if (a != in.type)
            verror(fmt::format("of {} is annotated {}", tname(a), tname(in.type)));
          break;
        }
        case VecOpKind::Cast:
          break;
        case VecOpKind::Reduce: {
          const ScalarType a = type_of(in.operands[0]);
          if (a == ScalarType::I1)
            verror("needs numeric operands, got i1");
          else if (a != in.type)
            verror(fmt::format("of {} is annotated {}", tname(a), tname(in.type)));
          if (shapes[in.operands[0]] != ValueShape::Full)
            verror(fmt::format("reduces %{}, which is already one value per {}", v.body[in.operands[0]].name,
                               shapes[in.operands[0]] == ValueShape::Row ? "row" : "column"));
          break;
        }
      }
      shapes[i] = shape;
    }
    for (const VecStore& st : v.stores) {
      if (st.value < 0 || st.value >= static_cast<int>(v.body.size())) {
        kerror("op 'store' stores an unknown value");
        continue;
      }
      if (!valid_spad(st.ref, "store")) continue;
      const VecInstr& val = v.body[st.value];
      const SpadBuffer& b = k_->spad[st.ref.buffer];
      if (register_type(b.dtype) != val.type)
        kerror("value %{}: op 'store' writes {} into %{}, which holds {} (stored from {})", val.name,
               scalar_type_name(val.type), b.name, dtype_name(b.dtype), scalar_type_name(register_type(b.dtype)));
      if (shapes[st.value] == ValueShape::Full)
        tile_bounds(st.ref, "store", v.rows, v.cols);
      else if (shapes[st.value] == ValueShape::Row)
        tile_bounds(st.ref, "store", one, v.rows);
      else
        tile_bounds(st.ref, "store", one, v.cols);
    }
  }

  // ---- cross-kernel DRAM dependencies -----------------------------------------
  // Each DMA touches a window of its root buffer: [lo, hi] bounds its
  // elements over every value of the loop variables. Two kernels conflict
  // when one writes a window the other reads or writes; kernels that write
  // disjoint windows of one buffer (the tiles of a kernel split over cores)
  // need no order.
  struct Window {
    int root = -1;
    int64_t lo = 0, hi = 0;
    bool write = false;
  };

  static void collect_windows(const Program& p, const std::vector<Stmt>& body, std::vector<int64_t>& trips,
                              std::vector<Window>& out) {
    for (const Stmt& s : body) {
      if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
        if (loop->var >= 0 && static_cast<size_t>(loop->var) < trips.size()) trips[loop->var] = loop->trips;
        collect_windows(p, loop->body, trips, out);
      } else if (const auto* d = std::get_if<DmaOp>(&s.node)) {
        if (d->dram < 0 || d->dram >= static_cast<int>(p.buffers.size())) continue;
        auto bounds = [&](const Affine& a, int64_t& lo, int64_t& hi) {
          lo = hi = a.constant;
          for (const auto& [var, coeff] : a.terms) {
            const int64_t t = var >= 0 && static_cast<size_t>(var) < trips.size() ? std::max<int64_t>(trips[var], 1) : 1;
            (coeff < 0 ? lo : hi) += coeff * (t - 1);
          }
        };
        int64_t lo = 0, hi = 0;
        bounds(d->dram_offset, lo, hi);
        for (size_t i = 0; i < d->dims.size() && i < d->dram_strides.size(); ++i) {
          int64_t extent = INT64_MAX;
          for (const Affine& option : d->dims[i].options) {
            int64_t olo = 0, ohi = 0;
            bounds(option, olo, ohi);
            extent = std::min(extent, ohi);
          }
          const int64_t span = (std::max<int64_t>(extent, 1) - 1) * d->dram_strides[i];
          (span < 0 ? lo : hi) += span;
        }
        if (d->indirect()) hi += std::max<int64_t>(d->index_limit - 1, 0) * d->index_scale;
        const int64_t base = p.buffers[d->dram].alias_of >= 0 ? p.buffers[d->dram].alias_offset : 0;
        out.push_back(Window{p.root_of(d->dram), lo + base, hi + base, !d->load});
      }
    }
  }

  void dependencies() {
    const size_t n = p_.kernels.size();
    std::vector<std::vector<Window>> windows(n);
    for (size_t i = 0; i < n; ++i) {
      std::vector<int64_t> trips(p_.kernels[i].loop_vars.size(), 1);
      collect_windows(p_, p_.kernels[i].body, trips, windows[i]);
    }
    // Row i of `ancestors`: the kernels that finish before kernel i starts,
    // one bit each (a row is the union of its dependencies' rows).
    const size_t words = (n + 63) / 64;
    std::vector<uint64_t> ancestors(n * words, 0);
    auto is_ancestor = [&](size_t i, size_t j) { return (ancestors[i * words + j / 64] >> (j % 64)) & 1; };
    for (size_t i = 0; i < n; ++i) {
      uint64_t* row = &ancestors[i * words];
      for (int d : p_.kernels[i].deps) {
        if (d < 0 || d >= static_cast<int>(i)) continue;
        row[static_cast<size_t>(d) / 64] |= uint64_t{1} << (static_cast<size_t>(d) % 64);
        const uint64_t* of_d = &ancestors[static_cast<size_t>(d) * words];
        for (size_t w = 0; w < words; ++w) row[w] |= of_d[w];
      }
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (is_ancestor(i, j)) continue;
        bool reported = false;
        for (const Window& a : windows[i]) {
          for (const Window& b : windows[j]) {
            if (reported || a.root != b.root || (!a.write && !b.write) || a.hi < b.lo || b.hi < a.lo) continue;
            if (!a.write)
              error("kernel '{}': reads '@{}' written by kernel '{}' but does not depend on it", p_.kernels[i].name,
                    p_.buffers[a.root].name, p_.kernels[j].name);
            else
              error("kernel '{}': writes '@{}' used by kernel '{}' but does not depend on it", p_.kernels[i].name,
                    p_.buffers[a.root].name, p_.kernels[j].name);
            reported = true;
          }
        }
      }
    }
  }

  const Program& p_;
  const Kernel* k_ = nullptr;
  std::vector<int64_t> trips_;
  std::vector<int64_t> vars_;
  std::vector<int> scope_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> verify(const Program& program) { return Verifier(program).run(); }

void verify_or_throw(const Program& program) {
  const std::vector<std::string> errors = verify(program);
  if (!errors.empty()) fail("invalid NPU program '{}': {}", program.name, errors.front());
}

}  // namespace spool::npu
