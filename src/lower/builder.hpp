#pragma once
// Internal to the lower stage: the program under construction (DRAM buffers,
// aliases, kernel dependencies from DRAM accesses, the report) and small
// builders for kernels and vector steps. Kernel generators (tiled.cpp,
// gemm*.cpp, ...) and the lowering of nodes (lowering.hpp) share them.

#include <spool/lower/lower.hpp>
#include <spool/lower/spad_alloc.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spool::lower::detail {

using npu::Affine;
using npu::Extent;
using npu::SpadRef;
using npu::Stmt;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A tensor in DRAM as a kernel sees it: element (i0, ..., in-1) lives at
// element `offset + sum(i_k * strides[k])` of `buffer` (a root buffer). A
// stride of 0 is a broadcast axis.
//
// A literal access (a Constant node read through any view without a pad)
// has no buffer: kernels use the value directly, with no load and no kernel
// to write it.
struct Access {
  int buffer = -1;
  DType dtype = DType::F32;
  int64_t offset = 0;
  Shape shape;
  Shape strides;
  bool is_literal = false;
  double literal = 0.0;
  // A gather fused into its reader (indexing.hpp): axis 0 is addressed through
  // an index, element i of axis 0 lying index_scale * idx[i] further, where
  // idx[i] is element index_offset + i * index_stride of DRAM buffer
  // index_buffer (i32/i64, values in [0, index_limit)); strides[0] is 0.
  int index_buffer = -1;
  DType index_dtype = DType::I64;
  int64_t index_offset = 0, index_stride = 0, index_scale = 0, index_limit = 0;
};

Access dense_access(int buffer, DType dtype, const Shape& shape);
bool is_dense(const Access& access);

// Applies the view's steps [from, to) (to = SIZE_MAX: all); returns the index of
// the first step that has no strided form (a pad, or a reshape of axes that
// are not contiguous), or the end index when every step applied.
size_t apply_view_steps(Access& access, const View& view, size_t from, size_t to = SIZE_MAX);

// Extent of tile `index` of `tile` elements out of `total` (ragged at the end).
Extent ragged(int64_t tile, int64_t total, const Affine& index, int64_t tiles);

Stmt dma(bool load, int dram, Affine dram_offset, std::vector<int64_t> dram_strides, SpadRef spad,
         std::vector<int64_t> spad_strides, std::vector<Extent> dims, int tag);

inline constexpr int kLoadTag = 0;
inline constexpr int kStoreTag = 1;

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name) { kernel_.name = std::move(name); }
  int spad(std::string name, DType dtype, int64_t elements, int slots);
  // A loop of `trips` trips, or at most that many read at run time (`dynamic`).
  int loop_begin(std::string name, int64_t trips, std::optional<npu::DynamicTrips> dynamic = std::nullopt);
  void loop_end();
  void emit(Stmt s);
  // Closes the kernel and places its scratchpad buffers; `footprint` gets the allocator's result.
  npu::Kernel finish(int64_t& footprint);

 private:
  npu::Kernel kernel_;
  std::vector<npu::LoopOp> open_;
};

// Software pipelining over `trips` tiles: load(0); for t < trips-1 { load(t+1); work(t) }; work(trips-1).
void pipelined(KernelBuilder& kb, const std::string& var, int64_t trips, const std::function<void(const Affine&)>& load,
               const std::function<void(const Affine&)>& work);

// A vector step under construction; tracks which values are full tiles.
class VecBuilder {
 public:
  VecBuilder(std::string label, Extent rows, Extent cols);
  int load(npu::ScalarType type, SpadRef ref, npu::LoadBroadcast broadcast);
  int constant(npu::ScalarType type, double value);
  int iota(bool col);
  // The element at column `index` (an index value) of each row of the tile.
  int gather(npu::ScalarType type, int index, SpadRef table);
  int op(npu::VecOp op, npu::ScalarType type, std::vector<int> operands);
  // A full-tile copy of a per-row or per-column value (select on an
  // always-true full mask).
  int full(int value);
  void store(SpadRef ref, int value);
  npu::ScalarType type(int value) const { return v_.body[value].type; }
  bool is_full(int value) const { return shapes_[value] == npu::ValueShape::Full; }
  npu::ValueShape shape(int value) const { return shapes_[value]; }
  Stmt done() { return Stmt{std::move(v_)}; }

 private:
  int push(npu::VecInstr in);
  npu::VectorOp v_;
  std::vector<npu::ValueShape> shapes_;
};

// The register type of a stored dtype in a kernel body (bf16 stays bf16).
npu::ScalarType value_type(DType dtype);

// Translates an elementwise program (ProgramAttr) into vector instructions
// over the given input values. Iota instructions read `iotas[i]` (a value
// already loaded for instruction i). Every bf16 result is rounded to bf16 by
// an explicit cast, as the reference rounds every op to the node's dtype.
int emit_program(VecBuilder& vb, const ProgramAttr& program, const std::vector<int>& inputs,
                 const std::map<size_t, int>& iotas);

// The distinct (load, DRAM buffer) pairs of a kernel's DMAs, sorted.
std::vector<std::pair<bool, int>> dma_buffers(const npu::Kernel& kernel);

// The program under construction.
class Emitter {
 public:
  Emitter(const Graph& graph, const target::NpuConfig& config, const LowerOptions& options);

  const target::NpuConfig& config;
  const LowerOptions& options;
  int64_t budget = 0;  // scratchpad bytes per kernel
  npu::Program program;
  LowerReport report;
  // GEMM tiles already chosen, by the job's signature (shapes, strides,
  // dtypes, programs): repeated layers choose once.
  std::map<std::string, TunedTile> gemm_tiles;
  TunedTiles tuned;  // by tuning key (Lowered::tuned)
  // The kernels last built for a GEMM signature, with the DRAM buffers and
  // offsets of the accesses they were built for (gemm.cpp): a repeat on
  // other buffers, at the same offsets, is those kernels with the buffers
  // renamed.
  struct BuiltGemm {
    std::vector<int> buffers;      // per access slot (-1: none)
    std::vector<int64_t> offsets;  // per access slot: offset, index offset and stride
    std::shared_ptr<const std::vector<npu::Kernel>> kernels;
    // Per kernel, the distinct (load, DRAM buffer) pairs of its DMAs.
    std::vector<std::vector<std::pair<bool, int>>> dmas;
    int64_t footprint = 0;
  };
  std::map<std::string, BuiltGemm> gemm_kernels;

  int add_buffer(const std::string& name, DType dtype, const Shape& shape, npu::BufferKind kind);
  std::string unique_name(const std::string& base);
  // Adds kernels that are independent of each other (the core split of one
  // node); dependencies come from the DRAM buffers they read and write.
  void add_kernels(std::vector<npu::Kernel> kernels, const KernelInfo& info, int64_t footprint);
  // Adds the kernels `built` holds with each DMA's DRAM buffer renamed by
  // `to` (which names every one of them), named after `name` as a GEMM's
  // kernels are: as add_kernels would add the renamed copies, except that
  // the bodies are copied by finish(), all at once on every thread.
  void add_renamed(const BuiltGemm& built, const std::map<int, int>& to, const std::string& name,
                   const KernelInfo& info, int64_t footprint);
  // Fills the bodies add_renamed left to copy; the program is whole after it.
  void finish();
  // Rebases a strided access on a DRAM alias of its root covering exactly the
  // elements it may touch (one alias per distinct window), so views are
  // visible in the program as aliases read by strided DMA.
  Access through_alias(const Access& access, const std::string& what);
  // A named alias of exactly `shape` over a dense window of a root buffer.
  int named_alias(const std::string& name, int root, int64_t offset, const Shape& shape);

 private:
  std::map<std::string, int> names_;
  std::map<std::tuple<int, int64_t, int64_t>, int> aliases_;
  std::vector<std::vector<int>> last_writers_;  // per buffer
  std::vector<std::vector<int>> readers_;       // per buffer, since the last write
  struct Pending {
    size_t kernel;  // in program.kernels
    std::shared_ptr<const std::vector<npu::Kernel>> from;
    size_t part;
    std::map<int, int> to;
  };
  std::vector<Pending> pending_;
  // add_kernels' dependencies and bookkeeping, given each kernel's DMA
  // buffers (dma_buffers()), renamed by `to` if given.
  void add_with(std::vector<npu::Kernel> kernels, const std::vector<std::vector<std::pair<bool, int>>>& dmas,
                const std::map<int, int>* to, const KernelInfo& info, int64_t footprint);
};

}  // namespace spool::lower::detail
