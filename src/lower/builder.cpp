// The shared pieces of the lower stage (builder.hpp): strided accesses and
// views, the kernel and vector-step builders, the translation of elementwise
// programs into typed vector instructions, and the program under
// construction with its DRAM dependency tracking.

#include "builder.hpp"

#include <spool/ir/kernel.hpp>
#include <spool/support/error.hpp>
#include <spool/support/fault.hpp>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <set>

namespace spool::lower::detail {

using namespace spool::npu;

Access dense_access(int buffer, DType dtype, const Shape& shape) {
  return Access{buffer, dtype, 0, shape, dense_strides(shape)};
}

bool is_dense(const Access& a) {
  if (a.offset != 0) return false;
  const Shape d = dense_strides(a.shape);
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (a.shape[i] != 1 && a.strides[i] != d[i]) return false;
  return true;
}

namespace {

// Reshape of a strided access: each group of old axes that maps onto a group
// of new axes (equal products) must be contiguous among itself.
bool reshape_strided(Access& a, const Shape& to) {
  Shape old_shape, old_strides;
  for (size_t i = 0; i < a.shape.size(); ++i)
    if (a.shape[i] != 1) {
      old_shape.push_back(a.shape[i]);
      old_strides.push_back(a.strides[i]);
    }
  Shape new_strides(to.size(), 0);
  size_t i = 0, j = 0;
  while (j < to.size() || i < old_shape.size()) {
    if (j < to.size() && to[j] == 1) {
      new_strides[j++] = 0;
      continue;
    }
    if (i >= old_shape.size() || j >= to.size()) return false;
    const size_t i0 = i, j0 = j;
    int64_t po = old_shape[i++], pn = to[j++];
    while (po != pn) {
      if (po < pn) {
        if (i >= old_shape.size()) return false;
        po *= old_shape[i++];
      } else {
        while (j < to.size() && to[j] == 1) new_strides[j++] = 0;
        if (j >= to.size()) return false;
        pn *= to[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (old_strides[k] != old_strides[k + 1] * old_shape[k + 1]) return false;
    // The new axes of the group, from the innermost out.
    int64_t stride = old_strides[i - 1];
    for (size_t k = j; k-- > j0;) {
      if (to[k] == 1) {
        new_strides[k] = 0;
        continue;
      }
      new_strides[k] = stride;
      stride *= to[k];
    }
  }
  a.shape = to;
  a.strides = new_strides;
  return true;
}

}  // namespace

size_t apply_view_steps(Access& a, const View& view, size_t from, size_t to) {
  const auto& steps = view.steps();
  const size_t end = std::min(to, steps.size());
  for (size_t s = from; s < end; ++s) {
    const ViewStep& step = steps[s];
    switch (step.kind) {
      case ViewKind::Permute: {
        Shape shape, strides;
        for (int64_t axis : step.a) {
          shape.push_back(a.shape[static_cast<size_t>(axis)]);
          strides.push_back(a.strides[static_cast<size_t>(axis)]);
        }
        a.shape = shape;
        a.strides = strides;
        break;
      }
      case ViewKind::Slice:
        for (size_t i = 0; i < a.shape.size(); ++i) {
          a.offset += step.a[i] * a.strides[i];
          a.shape[i] = ceil_div(step.b[i] - step.a[i], step.c[i]);
          a.strides[i] *= step.c[i];
        }
        break;
      case ViewKind::Expand:
        for (size_t i = 0; i < a.shape.size(); ++i)
          if (a.shape[i] != step.a[i]) {
            a.shape[i] = step.a[i];
            a.strides[i] = 0;
          }
        break;
      case ViewKind::Reshape: {
        Access copy = a;
        if (!reshape_strided(copy, step.a)) return s;
        a = copy;
        break;
      }
      case ViewKind::Pad: return s;
    }
  }
  return end;
}

Extent ragged(int64_t tile, int64_t total, const Affine& index, int64_t tiles) {
  if (tiles == 1) return Extent::of(std::min(tile, total));
  if (total % tile == 0) return Extent::of(tile);
  if (index.is_constant()) return Extent::of(std::min(tile, total - tile * index.constant));
  return Extent::min(Affine::of(tile), Affine::of(total) + index * -tile);
}

Stmt dma(bool load, int dram, Affine dram_offset, std::vector<int64_t> dram_strides, SpadRef spad,
         std::vector<int64_t> spad_strides, std::vector<Extent> dims, int tag) {
  DmaOp d;
  d.load = load;
  d.dram = dram;
  d.dram_offset = std::move(dram_offset);
  d.dram_strides = std::move(dram_strides);
  if (fault::planted(fault::Fault::DmaStride) && load && d.dram_strides.size() >= 2 && d.dram_strides[0] > 1)
    d.dram_strides[0] -= 1;
  d.spad = std::move(spad);
  d.spad_strides = std::move(spad_strides);
  d.dims = std::move(dims);
  d.tag = tag;
  return Stmt{std::move(d)};
}

// ---- kernel builder ----------------------------------------------------------------

int KernelBuilder::spad(std::string name, DType dtype, int64_t elements, int slots) {
  kernel_.spad.push_back(SpadBuffer{std::move(name), dtype, std::max<int64_t>(elements, 1), slots, 0});
  return static_cast<int>(kernel_.spad.size()) - 1;
}

int KernelBuilder::loop_begin(std::string name, int64_t trips, std::optional<npu::DynamicTrips> dynamic) {
  const int var = static_cast<int>(kernel_.loop_vars.size());
  kernel_.loop_vars.push_back(std::move(name));
  open_.push_back(LoopOp{var, trips, {}, std::move(dynamic)});
  return var;
}

void KernelBuilder::loop_end() {
  LoopOp loop = std::move(open_.back());
  open_.pop_back();
  emit(Stmt{std::move(loop)});
}

void KernelBuilder::emit(Stmt s) { (open_.empty() ? kernel_.body : open_.back().body).push_back(std::move(s)); }

Kernel KernelBuilder::finish(int64_t& footprint) {
  SPOOL_ASSERT(open_.empty(), "kernel '{}' has an open loop", kernel_.name);
  footprint = allocate_kernel_spad(kernel_);
  return std::move(kernel_);
}

void pipelined(KernelBuilder& kb, const std::string& var, int64_t trips, const std::function<void(const Affine&)>& load,
               const std::function<void(const Affine&)>& work) {
  load(Affine::of(0));
  if (trips > 1) {
    const int t = kb.loop_begin(var, trips - 1);
    load(Affine::var(t) + Affine::of(1));
    work(Affine::var(t));
    kb.loop_end();
  }
  work(Affine::of(trips - 1));
}

// ---- vector steps --------------------------------------------------------------------

VecBuilder::VecBuilder(std::string label, Extent rows, Extent cols) {
  v_.label = std::move(label);
  v_.rows = std::move(rows);
  v_.cols = std::move(cols);
}

int VecBuilder::push(VecInstr in) {
  in.name = "v" + std::to_string(v_.body.size());
  shapes_.push_back(value_shape(in, v_.body, shapes_));
  v_.body.push_back(std::move(in));
  return static_cast<int>(v_.body.size()) - 1;
}

int VecBuilder::load(ScalarType type, SpadRef ref, LoadBroadcast broadcast) {
  VecInstr in;
  in.op = VecOp::Load;
  in.type = type;
  in.ref = std::move(ref);
  in.broadcast = broadcast;
  return push(std::move(in));
}

int VecBuilder::constant(ScalarType type, double value) {
  VecInstr in;
  in.op = VecOp::Const;
  in.type = type;
  in.literal = value;
  return push(std::move(in));
}

int VecBuilder::iota(bool col) {
  VecInstr in;
  in.op = col ? VecOp::IotaCol : VecOp::IotaRow;
  in.type = ScalarType::Index;
  return push(std::move(in));
}

int VecBuilder::gather(ScalarType type, int index, SpadRef table) {
  VecInstr in;
  in.op = VecOp::Gather;
  in.type = type;
  in.operands = {index};
  in.ref = std::move(table);
  return push(std::move(in));
}

int VecBuilder::op(VecOp op, ScalarType type, std::vector<int> operands) {
  VecInstr in;
  in.op = op;
  in.type = type;
  in.operands = std::move(operands);
  return push(std::move(in));
}

int VecBuilder::full(int value) {
  if (is_full(value)) return value;
  const int col = iota(true);
  const int mask = op(VecOp::CmpLe, ScalarType::I1, {col, col});
  return op(VecOp::Select, type(value), {mask, value, value});
}

void VecBuilder::store(SpadRef ref, int value) { v_.stores.push_back(VecStore{std::move(ref), value}); }

ScalarType value_type(DType dtype) { return register_type(dtype); }

int emit_program(VecBuilder& vb, const ProgramAttr& program, const std::vector<int>& inputs,
                 const std::map<size_t, int>& iotas) {
  if (program.instrs.empty()) return inputs.at(0);
  std::vector<int> values = inputs;
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const ProgramInstr& instr = program.instrs[i];
    auto arg = [&](int a) { return values[instr.args[static_cast<size_t>(a)]]; };
    int result = -1;
    switch (op_info(instr.op).cls) {
      case OpClass::Source:
        if (instr.op == Op::Constant) {
          result = vb.constant(value_type(instr.value.dtype), instr.value.as_double());
        } else {
          SPOOL_ASSERT(instr.op == Op::Iota && iotas.count(i), "program instruction {} has no value", i);
          result = iotas.at(i);
        }
        break;
      case OpClass::Unary: {
        const int x = arg(0);
        const ScalarType t = vb.type(x);
        switch (instr.op) {
          case Op::Exp2: result = vb.op(VecOp::Exp2, t, {x}); break;
          case Op::Log2: result = vb.op(VecOp::Log2, t, {x}); break;
          case Op::Sin: result = vb.op(VecOp::Sin, t, {x}); break;
          case Op::Sqrt: result = vb.op(VecOp::Sqrt, t, {x}); break;
          case Op::Recip: result = vb.op(VecOp::Recip, t, {x}); break;
          case Op::Neg:
            result = is_float(t) ? vb.op(VecOp::Neg, t, {x}) : vb.op(VecOp::Sub, t, {vb.constant(t, 0.0), x});
            break;
          case Op::Not: result = vb.op(VecOp::CmpEq, ScalarType::I1, {x, vb.constant(ScalarType::I1, 0.0)}); break;
          default: SPOOL_ASSERT(false, "{} is not unary", op_name(instr.op));
        }
        break;
      }
      case OpClass::Cast: result = vb.op(VecOp::Cast, value_type(instr.dtype), {arg(0)}); break;
      case OpClass::Binary: {
        const int a = arg(0), b = arg(1);
        const ScalarType t = vb.type(a);
        const bool logical = t == ScalarType::I1;
        switch (instr.op) {
          case Op::Add: result = vb.op(logical ? VecOp::Or : VecOp::Add, t, {a, b}); break;
          case Op::Mul: result = vb.op(logical ? VecOp::And : VecOp::Mul, t, {a, b}); break;
          case Op::Max: result = vb.op(logical ? VecOp::Or : VecOp::Max, t, {a, b}); break;
          case Op::Mod: result = vb.op(VecOp::Mod, t, {a, b}); break;
          default: SPOOL_ASSERT(false, "{} is not binary", op_name(instr.op));
        }
        break;
      }
      case OpClass::Compare:
        result = vb.op(instr.op == Op::LessThan ? VecOp::CmpLt : VecOp::CmpEq, ScalarType::I1, {arg(0), arg(1)});
        break;
      case OpClass::Select: result = vb.op(VecOp::Select, vb.type(arg(1)), {arg(0), arg(1), arg(2)}); break;
      default: SPOOL_ASSERT(false, "{} is not elementwise", op_name(instr.op));
    }
    if (vb.type(result) == ScalarType::BF16 && instr.op != Op::Cast && instr.op != Op::Constant &&
        instr.op != Op::Iota)
      result = vb.op(VecOp::Cast, ScalarType::BF16, {result});
    values.push_back(result);
  }
  return values.back();
}

// ---- the program under construction ----------------------------------------------------

Emitter::Emitter(const Graph& graph, const target::NpuConfig& cfg, const LowerOptions& opts)
    : config(cfg), options(opts) {
  program.name = graph.name();
  program.spad_bytes = cfg.spad_bytes();
  budget = opts.spad_budget > 0 ? std::min(opts.spad_budget, cfg.spad_bytes()) : cfg.spad_bytes();
}

std::string Emitter::unique_name(const std::string& base) {
  std::string name = base;
  for (int k = 1; names_.count(name); ++k) name = base + "." + std::to_string(k);
  names_[name] = 0;
  return name;
}

int Emitter::add_buffer(const std::string& name, DType dtype, const Shape& shape, BufferKind kind) {
  program.buffers.push_back(DramBuffer{unique_name(name), dtype, shape, kind, -1, 0});
  last_writers_.emplace_back();
  readers_.emplace_back();
  return static_cast<int>(program.buffers.size()) - 1;
}

int Emitter::named_alias(const std::string& name, int root, int64_t offset, const Shape& shape) {
  if (fault::planted(fault::Fault::AliasOffset) && offset > 0) --offset;
  program.buffers.push_back(
      DramBuffer{unique_name(name), program.buffers[root].dtype, shape, program.buffers[root].kind, root, offset});
  last_writers_.emplace_back();
  readers_.emplace_back();
  return static_cast<int>(program.buffers.size()) - 1;
}

Access Emitter::through_alias(const Access& access, const std::string& what) {
  if (access.is_literal) return access;
  const int root = program.root_of(access.buffer);
  int64_t span = 1;
  for (size_t i = 0; i < access.shape.size(); ++i) span += (access.shape[i] - 1) * access.strides[i];
  if (access.index_buffer >= 0) span += (access.index_limit - 1) * access.index_scale;  // any indexed row
  const int64_t root_offset = program.buffers[access.buffer].alias_offset + access.offset;
  if (root_offset == 0 && span == program.buffer_elements(root)) return access;
  const auto key = std::make_tuple(root, root_offset, span);
  auto it = aliases_.find(key);
  if (it == aliases_.end()) {
    const int64_t start = fault::planted(fault::Fault::AliasOffset) && root_offset > 0 ? root_offset - 1 : root_offset;
    DramBuffer alias{unique_name(program.buffers[root].name + "." + what), program.buffers[root].dtype, {span},
                     program.buffers[root].kind, root, start};
    program.buffers.push_back(std::move(alias));
    last_writers_.emplace_back();
    readers_.emplace_back();
    it = aliases_.emplace(key, static_cast<int>(program.buffers.size()) - 1).first;
    ++report.dram_aliases;
  }
  Access out = access;
  out.buffer = it->second;
  out.offset = 0;
  return out;
}

std::vector<std::pair<bool, int>> dma_buffers(const Kernel& kernel) {
  std::set<std::pair<bool, int>> dmas;
  for_each_stmt(kernel.body, [&](const Stmt& s) {
    if (const auto* d = std::get_if<DmaOp>(&s.node)) dmas.emplace(d->load, d->dram);
  });
  return {dmas.begin(), dmas.end()};
}

void Emitter::add_kernels(std::vector<Kernel> kernels, const KernelInfo& info, int64_t footprint) {
  std::vector<std::vector<std::pair<bool, int>>> dmas;
  for (const Kernel& k : kernels) dmas.push_back(dma_buffers(k));
  add_with(std::move(kernels), dmas, nullptr, info, footprint);
}

void Emitter::add_renamed(const BuiltGemm& built, const std::map<int, int>& to, const std::string& name,
                          const KernelInfo& info, int64_t footprint) {
  const std::vector<Kernel>& from = *built.kernels;
  std::vector<Kernel> kernels(from.size());
  for (size_t p = 0; p < from.size(); ++p) {
    kernels[p].name = from.size() == 1 ? name : fmt::format("{}.c{}", name, p);
    kernels[p].spad = from[p].spad;
    kernels[p].loop_vars = from[p].loop_vars;
  }
  const size_t first = program.kernels.size();
  for (size_t p = 0; p < from.size(); ++p) pending_.push_back(Pending{first + p, built.kernels, p, to});
  add_with(std::move(kernels), built.dmas, &to, info, footprint);
}

void Emitter::finish() {
  auto rename = [](std::vector<Stmt>& body, const std::map<int, int>& to, auto&& self) -> void {
    for (Stmt& s : body) {
      if (auto* loop = std::get_if<LoopOp>(&s.node))
        self(loop->body, to, self);
      else if (auto* d = std::get_if<DmaOp>(&s.node))
        d->dram = to.at(d->dram);
    }
  };
  tbb::parallel_for(size_t{0}, pending_.size(), [&](size_t i) {
    const Pending& p = pending_[i];
    std::vector<Stmt>& body = program.kernels[p.kernel].body;
    body = (*p.from)[p.part].body;
    rename(body, p.to, rename);
  });
  pending_.clear();
}

void Emitter::add_with(std::vector<Kernel> kernels, const std::vector<std::vector<std::pair<bool, int>>>& dmas,
                       const std::map<int, int>* to, const KernelInfo& info, int64_t footprint) {
  const int first = static_cast<int>(program.kernels.size());
  std::vector<std::set<int>> reads(kernels.size()), writes(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i)
    for (const auto& [load, buffer] : dmas[i])
      (load ? reads[i] : writes[i]).insert(program.root_of(to ? to->at(buffer) : buffer));
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::set<int> deps;
    for (int b : reads[i])
      for (int w : last_writers_[b]) deps.insert(w);
    for (int b : writes[i]) {
      for (int w : last_writers_[b]) deps.insert(w);
      for (int r : readers_[b]) deps.insert(r);
    }
    kernels[i].deps.assign(deps.begin(), deps.end());
  }
  for (size_t i = 0; i < kernels.size(); ++i)
    for (int b : writes[i]) {
      last_writers_[b].clear();
      readers_[b].clear();
    }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const int k = first + static_cast<int>(i);
    for (int b : writes[i]) last_writers_[b].push_back(k);
    for (int b : reads[i]) readers_[b].push_back(k);
  }
  for (Kernel& k : kernels) program.kernels.push_back(std::move(k));
  KernelInfo entry = info;
  entry.spad_bytes = footprint;
  entry.core_split = static_cast<int>(kernels.size());
  report.per_kernel.push_back(entry);
  report.kernels += static_cast<int>(kernels.size());
  if (info.fused) report.fused_kernels += static_cast<int>(kernels.size());
  if (info.kind == "copy") report.copy_kernels += static_cast<int>(kernels.size());
  report.spad_peak_bytes = std::max(report.spad_peak_bytes, footprint);
}

}  // namespace spool::lower::detail
