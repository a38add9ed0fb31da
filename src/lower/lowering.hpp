#pragma once
// Internal to the lower stage: the lowering of an LLIR graph node by node
// (lower::to_npu). lower.cpp runs it and dispatches each node on its op
// class; each family of nodes, and the edges and buffers they share, has a
// file of its own:
//
//   lower_views.cpp        reading edges through their views; copy and fill kernels
//   lower_outputs.cpp      the buffers kernels write; binding the graph outputs
//   lower_concat.cpp       concats (sums of zero-padded parts); inputs updated in place
//   lower_sources.cpp      inputs, weights, constants and iotas
//   lower_elementwise.cpp  elementwise ops and fused programs
//   lower_reduce.cpp       reductions with their prologue and epilogue
//   lower_rows.cpp         ops along one axis of each row: softmax, norms, top-k
//   lower_indexing.cpp     gather and scatter_add
//   lower_gemm.cpp         GEMMs with their prologues, epilogue and a fused softmax
//   lower_grouped.cpp      grouped_matmul: one pass over the groups, run-time row counts

#include "builder.hpp"
#include "gemm.hpp"

#include <spool/ir/graph.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace spool::lower::detail {

struct GemmJob;  // gemm.hpp

struct Piece {
  Edge edge;     // read without its final pad step
  Shape before;  // where the part starts in the output
};

class Lowering {
 public:
  Lowering(const Graph& g, const target::NpuConfig& config, const LowerOptions& options);

  Lowered run();

 private:
  // ---- dispatch (lower.cpp) ----------------------------------------------------------
  std::string name_of(NodeId id) const;
  void lower_node(NodeId id);

  // ---- concat analysis (lower_concat.cpp) --------------------------------------------
  std::optional<std::vector<Piece>> pieces(NodeId id, bool top);
  Shape piece_shape(const Piece& p) const;
  static bool invertible_to_pad(const View& v);
  static std::optional<Access> unview(Access part, const View& v, const Shape& source, size_t n);
  void find_concats(const std::vector<NodeId>& order);
  Access concat_buffer(NodeId id);
  std::optional<Access> updated_input(NodeId id);
  void lower_concat(NodeId id);

  // ---- reading edges (lower_views.cpp) -----------------------------------------------
  Access base(NodeId id) const;
  Access read(const Edge& e, const std::string& consumer, size_t steps = SIZE_MAX);
  Access new_dense(const std::string& name, DType dtype, const Shape& shape,
                   npu::BufferKind kind = npu::BufferKind::Temp);
  static int widest_row_axis(const Shape& shape);
  void copy(const Access& from, const Access& to, const std::string& name);
  Access materialize(const Access& a, const std::string& consumer);
  void fill(const Access& to, double value, const std::string& name);
  Access materialize_pad(const Access& a, const ViewStep& pad, const std::string& consumer);
  void lower_copy(NodeId id);

  // ---- output buffers (lower_outputs.cpp) --------------------------------------------
  Access output_buffer(NodeId id);
  Access producer_buffer(NodeId id);
  Access plain_output_buffer(NodeId id);
  static bool only_permutes_and_reshapes(const View& v);
  static bool stores_strided(Op op);
  void bind_outputs();

  // ---- sources (lower_sources.cpp) ---------------------------------------------------
  void lower_source(NodeId id);
  Access iota(DType dtype, const Shape& shape, int64_t axis, const std::string& name);
  std::vector<std::pair<size_t, Access>> program_iotas(const ProgramAttr& p, const Shape& shape,
                                                       const std::string& name);

  // ---- kernel nodes (lower_elementwise.cpp, lower_reduce.cpp, lower_rows.cpp,
  // lower_indexing.cpp, lower_gemm.cpp) ------------------------------------------------
  void lower_fused(NodeId id, const ProgramAttr& p, bool fused);
  void emit_program_kernel(const std::vector<Access>& ins, const ProgramAttr& p, const Access& out,
                           const std::string& name);
  void lower_reduce(NodeId id, const ReduceAttr& r);
  void lower_rows(NodeId id);
  void lower_topk(NodeId id);
  void lower_grouped(NodeId id);
  void lower_indexing(NodeId id);
  bool gather_into_gemm(NodeId id) const;
  void lower_gather(NodeId id);
  void lower_gemm(NodeId id);
  void lower_gemm_unfused(NodeId id, const GemmJob& job, const Access& out, const std::string& why);
  std::optional<std::pair<NodeId, FusedSoftmax>> softmax_reader(NodeId id);

  const Graph& g_;
  Emitter em_;
  std::vector<std::optional<Access>> values_;
  std::map<uint32_t, std::vector<Piece>> concats_;
  std::set<uint32_t> absorbed_;
  // Output buffers given out before their node was lowered (a softmax a GEMM
  // could not absorb), by node: output_buffer() returns them.
  std::map<uint32_t, Access> claimed_;
  std::vector<uint32_t> inner_;
  std::set<size_t> bound_;
  std::map<uint32_t, Access> concat_out_;                        // concat node -> its buffer
  std::map<uint32_t, std::pair<uint32_t, size_t>> writes_into_;  // producer -> (concat, part)
  std::set<std::pair<uint32_t, size_t>> in_place_;               // parts written by their producer
  std::vector<std::vector<NodeId>> users_;
  bool users_built_ = false;
  std::map<std::pair<int, int64_t>, Access> iotas_;
  std::vector<std::pair<std::string, std::string>> inputs_, outputs_;
};

}  // namespace spool::lower::detail
