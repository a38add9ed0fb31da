// Printer for the NPU program text form (see include/spool/npu/text.hpp).
// The output is canonical: parsing it gives back an equal program.

#include <spool/npu/text.hpp>

#include <fmt/format.h>

namespace spool::npu {

std::string print_affine(const Affine& affine, const std::vector<std::string>& var_names) {
  std::string out;
  auto append = [&](int64_t value, const std::string& var) {
    const bool negative = value < 0;
    const int64_t magnitude = negative ? -value : value;
    std::string term = var.empty() ? fmt::format("{}", magnitude)
                       : magnitude == 1 ? var
                                        : fmt::format("{}*{}", magnitude, var);
    if (out.empty()) {
      out = negative ? "-" + term : term;
    } else {
      out += negative ? " - " : " + ";
      out += term;
    }
  };
  // Terms in variable order, then the constant ("128*m + 64"); a positive
  // constant goes first when the first term is negative ("70 - 16*m").
  const bool constant_first = affine.constant > 0 && !affine.terms.empty() && affine.terms[0].second < 0;
  if (constant_first) append(affine.constant, "");
  for (const auto& [id, coeff] : affine.terms)
    append(coeff, id >= 0 && id < static_cast<int>(var_names.size()) ? var_names[id]
                                                                      : fmt::format("v{}", id));
  if (!constant_first && (affine.constant != 0 || out.empty())) append(affine.constant, "");
  return out;
}

std::string print_extent(const Extent& extent, const std::vector<std::string>& var_names) {
  if (extent.options.size() == 1) return print_affine(extent.options[0], var_names);
  std::string out = "min(";
  for (size_t i = 0; i < extent.options.size(); ++i) {
    if (i) out += ", ";
    out += print_affine(extent.options[i], var_names);
  }
  return out + ")";
}

namespace {

class Printer {
 public:
  explicit Printer(const Program& program) : program_(program) {}

  std::string run() {
    out_ += fmt::format("program \"{}\" spad {}\n", program_.name, program_.spad_bytes);
    for (const DramBuffer& b : program_.buffers) {
      out_ += fmt::format("buffer @{} : {}{}", b.name, dtype_name(b.dtype), shape(b.shape));
      if (b.alias_of >= 0)
        out_ += fmt::format(" alias @{} + {}\n", program_.buffers[b.alias_of].name, b.alias_offset);
      else
        out_ += fmt::format(" {}\n", buffer_kind_name(b.kind));
    }
    for (const Kernel& k : program_.kernels) kernel(k);
    return std::move(out_);
  }

 private:
  static std::string shape(const Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
    return out + "]";
  }

  void indent() { out_.append(static_cast<size_t>(2 * depth_), ' '); }

  std::string affine(const Affine& a) const { return print_affine(a, kernel_->loop_vars); }
  std::string extent(const Extent& e) const { return print_extent(e, kernel_->loop_vars); }

  std::string ref_head(const SpadRef& r) const {
    std::string out = "%" + kernel_->spad.at(r.buffer).name;
    if (!(r.slot == Affine::of(0))) out += "{" + affine(r.slot) + "}";
    return out;
  }
  std::string compute_ref(const SpadRef& r) const {
    return fmt::format("{}[{} : {}]", ref_head(r), affine(r.offset), r.ld);
  }
  static std::string ints(const std::vector<int64_t>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", v[i]);
    return out;
  }

  void kernel(const Kernel& k) {
    kernel_ = &k;
    out_ += fmt::format("kernel \"{}\"", k.name);
    for (size_t i = 0; i < k.deps.size(); ++i)
      out_ += fmt::format("{}\"{}\"", i ? ", " : " after ", program_.kernels.at(k.deps[i]).name);
    out_ += " {\n";
    depth_ = 1;
    for (const SpadBuffer& s : k.spad) {
      indent();
      out_ += fmt::format("spad %{} : {}[{}] x{} at {}\n", s.name, dtype_name(s.dtype), s.elements,
                          s.slots, s.offset);
    }
    for (const Stmt& s : k.body) stmt(s);
    out_ += "}\n";
  }

  void stmt(const Stmt& s) {
    indent();
    if (const auto* loop = std::get_if<LoopOp>(&s.node)) {
      out_ += fmt::format("for {} in 0..{}", kernel_->loop_vars.at(loop->var), loop->trips);
      if (const auto& d = loop->dynamic)
        out_ += fmt::format(" count {}[{}] / {} nominal {}", ref_head(d->count), affine(d->count.offset), d->divisor,
                            d->nominal);
      out_ += " {\n";
      ++depth_;
      for (const Stmt& inner : loop->body) stmt(inner);
      --depth_;
      indent();
      out_ += "}\n";
    } else if (const auto* dma = std::get_if<DmaOp>(&s.node)) {
      std::string dims = "[";
      for (size_t i = 0; i < dma->dims.size(); ++i) dims += (i ? ", " : "") + extent(dma->dims[i]);
      dims += "]";
      const std::string spad =
          fmt::format("{}[{} : {}]", ref_head(dma->spad), affine(dma->spad.offset), ints(dma->spad_strides));
      std::string dram = fmt::format("@{}[{} : {}]", program_.buffers.at(dma->dram).name, affine(dma->dram_offset),
                                     ints(dma->dram_strides));
      if (dma->indirect())
        dram += fmt::format(" index {}[{} : {}] scale {} limit {}", ref_head(dma->index), affine(dma->index.offset),
                            ints(dma->index_strides), dma->index_scale, dma->index_limit);
      if (dma->load)
        out_ += fmt::format("dma.load {} {} <- {} tag {}\n", dims, spad, dram, dma->tag);
      else
        out_ += fmt::format("dma.store {} {} <- {} tag {}\n", dims, dram, spad, dma->tag);
    } else if (const auto* mm = std::get_if<MatmulOp>(&s.node)) {
      out_ += fmt::format("matmul [{}, {}, {}] {} {} {}, {}", extent(mm->m), extent(mm->k), extent(mm->n),
                          compute_ref(mm->c), mm->accumulate ? "+=" : "=", compute_ref(mm->a),
                          compute_ref(mm->b));
      if (mm->trans_a) out_ += " ta";
      if (mm->trans_b) out_ += " tb";
      if (mm->array >= 0) out_ += fmt::format(" on {}", mm->array);
      out_ += "\n";
    } else if (const auto* vec = std::get_if<VectorOp>(&s.node)) {
      out_ += fmt::format("vector \"{}\" [{}, {}] {{\n", vec->label, extent(vec->rows), extent(vec->cols));
      ++depth_;
      for (const VecInstr& in : vec->body) {
        indent();
        out_ += fmt::format("%{} = ", in.name);
        if (in.op == VecOp::Load) {
          out_ += in.broadcast == LoadBroadcast::Row   ? "load.row "
                  : in.broadcast == LoadBroadcast::Col ? "load.col "
                                                       : "load ";
          out_ += compute_ref(in.ref);
        } else if (in.op == VecOp::Gather) {
          out_ += fmt::format("gather %{}, {}", vec->body.at(in.operands.at(0)).name, compute_ref(in.ref));
        } else if (in.op == VecOp::Const) {
          out_ += fmt::format("const {}", in.literal);
        } else {
          out_ += vec_op_name(in.op);
          for (size_t i = 0; i < in.operands.size(); ++i)
            out_ += fmt::format("{}%{}", i ? ", " : " ", vec->body.at(in.operands[i]).name);
        }
        out_ += fmt::format(" : {}\n", scalar_type_name(in.type));
      }
      for (const VecStore& st : vec->stores) {
        indent();
        out_ += fmt::format("store {}, %{}\n", compute_ref(st.ref), vec->body.at(st.value).name);
      }
      --depth_;
      indent();
      out_ += "}\n";
    } else if (const auto* wait = std::get_if<WaitOp>(&s.node)) {
      out_ += fmt::format("wait {}\n", wait->tag);
    }
  }

  const Program& program_;
  const Kernel* kernel_ = nullptr;
  std::string out_;
  int depth_ = 0;
};

}  // namespace

std::string print(const Program& program) { return Printer(program).run(); }

}  // namespace spool::npu
