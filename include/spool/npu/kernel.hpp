#pragma once
// The NPU program: the contract between the compiler and the simulator.
// A program is a list of DRAM buffers (root buffers and aliases,
// for views) and kernels in order. A kernel is a tile loop nest of DMA
// transfers (DRAM <-> scratchpad, up to 4-D strided), systolic-array matmul
// tile steps, vector steps with typed SSA bodies, and DMA-completion waits,
// over scratchpad buffers that the kernel allocates at fixed offsets.
//
// Index arithmetic is affine in the loop variables; tile extents may be the
// minimum of affine forms so ragged edge tiles need no special code. A
// scratchpad buffer may hold several slots (double buffering): every use names
// its slot with an affine expression, taken modulo the slot count.

#include <spool/ir/dtype.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace spool::npu {

// Scalar types of vector-step bodies. bf16 values are computed in f32 and
// rounded when stored; `index` is the type of loop and element indices.
enum class ScalarType : uint8_t { F32, BF16, I32, I64, I1, Index };

std::string_view scalar_type_name(ScalarType type);
std::optional<ScalarType> parse_scalar_type(std::string_view name);
bool is_float(ScalarType type);
bool is_int(ScalarType type);  // i32, i64, index (not i1)
int scalar_bits(ScalarType type);
// The register type a stored element of this dtype is loaded as (and must be
// stored from): f32/f16 -> f32, bf16 -> bf16, i32, i64, bool -> i1.
ScalarType register_type(DType dtype);

enum class VecOp : uint8_t {
#define SPOOL_VOP(e, text, arity, kind, cls) e,
#include <spool/npu/vector_ops.def>
};
enum class VecOpKind : uint8_t { Load, Const, Iota, FloatUnary, Arith, Compare, Logic, Select, Cast, Reduce, Gather };

std::string_view vec_op_name(VecOp op);
std::optional<VecOp> parse_vec_op(std::string_view name);
int vec_op_arity(VecOp op);
VecOpKind vec_op_kind(VecOp op);
// The config's vector timing class for this op ("add", "exp", ...).
std::string_view vec_op_timing_class(VecOp op);
// A reduction down the rows (one value per column) rather than across the columns.
bool vec_op_reduces_rows(VecOp op);

// c + sum(coeff * loop variable). Terms are sorted by variable id, with no zero
// coefficients, so equal forms compare equal.
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<int, int64_t>> terms;  // (loop variable id, coefficient)

  static Affine of(int64_t value) { return Affine{value, {}}; }
  static Affine var(int id, int64_t coeff = 1);
  Affine operator+(const Affine& other) const;
  Affine operator*(int64_t factor) const;
  bool is_constant() const { return terms.empty(); }
  int64_t eval(const int64_t* vars) const {
    int64_t value = constant;
    for (const auto& [id, coeff] : terms) value += coeff * vars[id];
    return value;
  }
  bool operator==(const Affine&) const = default;
};

// min(a, b, ...) of affine forms: a tile extent, ragged at the edge.
struct Extent {
  std::vector<Affine> options;  // at least one

  static Extent of(int64_t value) { return Extent{{Affine::of(value)}}; }
  static Extent min(Affine a, Affine b) { return Extent{{std::move(a), std::move(b)}}; }
  int64_t eval(const int64_t* vars) const {
    int64_t value = options[0].eval(vars);
    for (size_t i = 1; i < options.size(); ++i) value = std::min(value, options[i].eval(vars));
    return value;
  }
  bool operator==(const Extent&) const = default;
};

enum class BufferKind : uint8_t { Input, Weight, Output, Temp };
std::string_view buffer_kind_name(BufferKind kind);

// A DRAM buffer. A root buffer owns `num_elements(shape)` elements; an alias
// is a view of a root buffer (same dtype) starting `alias_offset` elements in.
struct DramBuffer {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  BufferKind kind = BufferKind::Temp;
  int alias_of = -1;  // index of the root buffer, or -1
  int64_t alias_offset = 0;
  bool operator==(const DramBuffer&) const = default;
};

// A scratchpad buffer of `slots` slots of `elements` elements each, at byte
// `offset` of the core's scratchpad. Its footprint is slots * elements * size.
struct SpadBuffer {
  std::string name;
  DType dtype = DType::F32;
  int64_t elements = 0;
  int slots = 1;
  int64_t offset = 0;
  int64_t footprint_bytes() const { return slots * elements * dtype_bytes(dtype); }
  bool operator==(const SpadBuffer&) const = default;
};

// A use of a scratchpad buffer: slot (mod slots), first element within the
// slot, and the row stride (leading dimension) for 2-D tiles.
struct SpadRef {
  int buffer = -1;
  Affine slot;
  Affine offset;
  int64_t ld = 0;  // compute steps only; DMA refs give strides per dimension
  bool operator==(const SpadRef&) const = default;
};

// A DMA transfer of a dims[0] x ... x dims[n-1] block (n <= 4), row-major,
// between DRAM (element strides dram_strides from dram_offset) and the
// scratchpad (element strides spad_strides from the ref's offset).
//
// Indirect (gather/scatter) addressing, when index.buffer >= 0: element
// (i0, ..., in-1) moves index_scale * x elements further in DRAM, where x is
// the i32/i64 value at element index.offset + sum(i_k * index_strides[k]) of
// the index buffer's slot (loaded earlier by a plain DMA) and must lie in
// [0, index_limit). A row gather has index_strides 1 on the row dimension and
// 0 elsewhere, so each index moves one whole contiguous row.
struct DmaOp {
  bool load = true;  // DRAM -> scratchpad; false: scratchpad -> DRAM
  int dram = -1;
  Affine dram_offset;
  std::vector<int64_t> dram_strides;
  SpadRef spad;
  std::vector<int64_t> spad_strides;
  std::vector<Extent> dims;
  int tag = 0;
  SpadRef index;                       // buffer -1: a direct transfer
  std::vector<int64_t> index_strides;  // indirect only, one per dimension
  int64_t index_scale = 0;             // DRAM elements per index unit
  int64_t index_limit = 0;             // indices lie in [0, index_limit)
  bool indirect() const { return index.buffer >= 0; }
  bool operator==(const DmaOp&) const = default;
};

// One systolic-array tile step: C[m x n] (+)= A[m x k] * B[k x n]. A streams
// through the array, B is the stationary weight tile. `trans_a` means A is
// stored k x m in the scratchpad, `trans_b` that B is stored n x k.
struct MatmulOp {
  SpadRef c, a, b;
  Extent m, k, n;
  bool accumulate = false;
  bool trans_a = false;
  bool trans_b = false;
  // The array the step runs on (modulo the core's arrays), as a VLIW bundle
  // names its matrix unit; -1: the array where it can start first.
  int array = -1;
  bool operator==(const MatmulOp&) const = default;
};

// Broadcast of a loaded operand over the step's [rows x cols] domain.
enum class LoadBroadcast : uint8_t { Full, Row, Col };

// A value's shape in a vector step: the full tile; one value per row (a
// reduction across the columns, a per-row load, a constant), broadcast
// across the columns; or one value per column (a reduction down the rows),
// broadcast down the rows.
enum class ValueShape : uint8_t { Full, Row, Col };

struct VecInstr {
  std::string name;  // SSA name without '%'
  VecOp op = VecOp::Add;
  ScalarType type = ScalarType::F32;
  std::vector<int> operands;  // indices of earlier instructions
  SpadRef ref;                // Load and Gather
  LoadBroadcast broadcast = LoadBroadcast::Full;
  double literal = 0.0;       // Const only
  bool operator==(const VecInstr&) const = default;
};

// The shape of `in`'s value, its operands (earlier values of `body`) having
// `shapes`: loads by their broadcast (a per-column load is a full value),
// reductions across the columns per row, down the rows per column; other ops
// the shape their operands share, constants taking the other operands'
// shape, a per-row with a per-column operand a full tile.
ValueShape value_shape(const VecInstr& in, const std::vector<VecInstr>& body, const std::vector<ValueShape>& shapes);

struct VecStore {
  SpadRef ref;
  int value = -1;
  bool operator==(const VecStore&) const = default;
};

// A vector step: the body runs for every element of [rows x cols]; values of
// shape Row are per row, of shape Col per column. Stores write full values
// as rows x cols tiles (row stride ld), row values as `rows` consecutive
// elements and column values as `cols` consecutive elements.
struct VectorOp {
  std::string label;
  Extent rows, cols;
  std::vector<VecInstr> body;
  std::vector<VecStore> stores;
  bool operator==(const VectorOp&) const = default;
};

// Blocks the kernel until every DMA with this tag issued so far has completed.
struct WaitOp {
  int tag = 0;
  bool operator==(const WaitOp&) const = default;
};

// A trip count read at run time: ceil(value / divisor), clamped to
// [0, LoopOp::trips], where value is the integer at `count` (a scratchpad
// element written earlier, e.g. a group's row count). LoopOp::trips is then
// the bound the verifier checks every access against, and `nominal` the
// count a timing-only run (which has no values) assumes.
struct DynamicTrips {
  SpadRef count;
  int64_t divisor = 1;
  int64_t nominal = 0;
  bool operator==(const DynamicTrips&) const = default;
};

struct Stmt;
struct LoopOp {
  int var = -1;  // loop variable id, index into Kernel::loop_vars
  int64_t trips = 0;
  std::vector<Stmt> body;
  std::optional<DynamicTrips> dynamic;  // trips read at run time (trips is then the bound)
};
bool operator==(const LoopOp& a, const LoopOp& b);

struct Stmt {
  std::variant<LoopOp, DmaOp, MatmulOp, VectorOp, WaitOp> node;
};
bool operator==(const Stmt& a, const Stmt& b);

struct Kernel {
  std::string name;
  std::vector<int> deps;  // indices of earlier kernels that must finish first
  std::vector<SpadBuffer> spad;
  std::vector<std::string> loop_vars;  // names, by id
  std::vector<Stmt> body;
  bool operator==(const Kernel&) const = default;
};

struct Program {
  std::string name;
  int64_t spad_bytes = 0;  // scratchpad capacity the kernels were allocated for
  std::vector<DramBuffer> buffers;
  std::vector<Kernel> kernels;
  bool operator==(const Program&) const = default;

  int find_buffer(std::string_view name) const;  // -1 if absent
  int root_of(int buffer) const { return buffers[buffer].alias_of < 0 ? buffer : buffers[buffer].alias_of; }
  // Elements of the buffer's view (its shape's size).
  int64_t buffer_elements(int buffer) const { return num_elements(buffers[buffer].shape); }
};

// Calls f(stmt, depth) for every statement in pre-order.
template <typename F>
void for_each_stmt(const std::vector<Stmt>& body, F&& f) {
  for (const Stmt& stmt : body) {
    f(stmt);
    if (const auto* loop = std::get_if<LoopOp>(&stmt.node)) for_each_stmt(loop->body, f);
  }
}

// Statement lists equal but for the DRAM buffers their DMAs name, compared
// by the caller (`same_dram(a, b)`; `dram_key(b)` is a hash of what it
// compares): the shape of a kernel that repeats across layers on other
// buffers, which the simulator times once (sim's replay) and the verifier
// checks once. A hash equal for equal shapes:
uint64_t body_shape_hash(const std::vector<Stmt>& body, const std::function<uint64_t(int dram)>& dram_key);
bool same_body_shape(const std::vector<Stmt>& a, const std::vector<Stmt>& b,
                     const std::function<bool(int dram_a, int dram_b)>& same_dram);

// Scratchpad liveness: each buffer is live from its first to its last use in
// pre-order statement numbering; a use inside a loop keeps the buffer live
// for the whole loop (the next iteration uses it again).
struct SpadLiveness {
  std::vector<std::pair<int, int>> range;  // per buffer, [first, last]; (-1, -1) if unused
  int64_t peak_bytes = 0;                  // largest sum of live footprints
};
SpadLiveness spad_liveness(const Kernel& kernel);

// The DRAM a program needs: its weights, inputs (a KV cache among them) and
// outputs whole, and the peak of its temporaries, each live from the first
// to the last kernel (in program order) that moves data to or from it.
// Aliases are views of their roots and add nothing.
struct DramFootprint {
  int64_t weight_bytes = 0, input_bytes = 0, output_bytes = 0;
  int64_t temp_peak_bytes = 0;
  int64_t total() const { return weight_bytes + input_bytes + output_bytes + temp_peak_bytes; }
};
DramFootprint dram_footprint(const Program& program);

// Where the simulator places each buffer in DRAM, in bytes: root buffers in
// program order, each 4 KiB aligned; an alias at its root's address plus
// its offset. A buffer's address depends only on the buffers before it.
std::vector<int64_t> dram_addresses(const Program& program);

}  // namespace spool::npu
