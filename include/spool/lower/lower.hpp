#pragma once
// lower::to_npu: LLIR (a flat graph of kernel ops) to an NPU program.
//
// Every kernel node becomes one or more NPU kernels (several when its
// independent tiles are spread over the config's cores). Views on edges are
// resolved after fusion, on the final kernels: a view that a consumer can read
// strided becomes a DRAM alias read by strided DMA, never a kernel; a copy
// kernel is emitted only where no strided read exists (a concat's output, a
// pad, a reshape of a non-contiguous view). An output that is an input of the
// same name with parts appended (a concat whose first part is that input,
// each element left at its index, and which nothing else reads: a
// preallocated KV cache and its new rows) updates the input in place: the
// new parts are stored into the input's DRAM buffer, through an alias, and
// the output names that buffer; no kernel copies the cache. GEMM tiles are chosen over
// candidates ranked by an analytic form of the simulator's model, the best
// few timed by the tile timer the caller gives (LowerOptions::tile_cycles:
// sim::tile_timer times them with the simulator); each candidate's footprint is computed
// by the same liveness-aware scratchpad allocator that places the buffers of
// the emitted kernel.

#include <spool/interp/host_tensor.hpp>
#include <spool/ir/graph.hpp>
#include <spool/npu/kernel.hpp>
#include <spool/target/npu.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace spool::lower {

// How one kernel node is lowered, where the lowering has a choice (the
// extraction search's lowering genes). Every field's zero keeps what the
// lowering picks by itself, so a default KernelChoice is today's lowering.
// A choice the kernel cannot take (a tile over the scratchpad budget, a
// field that does not apply to its op) is ignored field by field and the
// lowering's own choice stands: a choice never makes a program fail.
struct KernelChoice {
  // GEMM tile: rows, columns and k of a block (each clamped to the GEMM's
  // shape; columns rounded to whole arrays' columns, k to the array's rows).
  int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  // GEMM operand slots: 1 single (each k tile or column block loads after
  // the previous one's steps are issued), 2 double, 3 triple buffered.
  int64_t slots = 0;
  // GEMM loop order over the blocks, for a GEMM of several m blocks and
  // several column blocks: 1 column blocks outer, m blocks inner (the
  // generator's own order), 2 m blocks outer, column blocks inner.
  int order = 0;
  // Placement over cores: 1 keeps the node's tiles on one core, 2 spreads
  // independent tiles (m blocks or batches) over the config's cores.
  int cores = 0;

  bool is_default() const {
    return tile_m == 0 && tile_n == 0 && tile_k == 0 && slots == 0 && order == 0 && cores == 0;
  }
  // "m256 n512 slots3 m-outer" (only the fields that are set; "default" if none).
  std::string to_string() const;
  bool operator==(const KernelChoice&) const = default;
};

// A GEMM tile the tile timer chose: rows, columns and k of a block, operand
// slots, and whether the blocks were spread over the cores.
struct TunedTile {
  int64_t tm = 0, tn = 0, tk = 0, slots = 0;
  bool split = false;
  bool operator==(const TunedTile&) const = default;
};
// Tuned tiles by tuning key: the GEMM's signature (shapes, strides, dtypes,
// programs), its accesses' offsets, and the DRAM address and layout of
// every buffer its kernels read or write, which with the config and the
// lowering options is everything the tile timer's program depends on. The
// same key on the same config, options and build chooses the same tile.
using TunedTiles = std::map<std::string, TunedTile>;

struct LowerOptions {
  // Place GEMM prologues and epilogues inside the GEMM kernel; false runs
  // them as standalone vector kernels (for comparisons).
  bool fuse = true;
  // Spread independent tiles of a kernel over the config's cores.
  bool multi_core = true;
  // Scratchpad bytes a kernel may use; 0: the config's whole scratchpad.
  int64_t spad_budget = 0;
  // GEMM tiles: the best candidates by the analytic cost are run through the
  // tile timer and the fastest is kept; 1 keeps the analytic choice.
  int gemm_simulated_candidates = 8;
  // Cycles of a program of independent kernels: how tile candidates and
  // spreading tiles over cores are decided (sim::tile_timer: the timing
  // simulator). Empty: the analytic estimate picks GEMM tiles and a kernel's
  // tiles stay on one core. Called from several threads at once (a GEMM's
  // candidates are timed in parallel): it must be safe to. Once the cycles
  // exceed `limit`, it may return any count above it (INT64_MAX: no limit).
  std::function<int64_t(const npu::Program&, int64_t limit)> tile_cycles;
  // Tiles tuned earlier by a lowering with the same config, options and
  // tile timer (a tile cache: lower/tile_cache.hpp). A GEMM whose tuning
  // key is here takes that tile without timing its candidates: the timer
  // would choose it again. An entry that is not one of the GEMM's candidate
  // tiles, or whose kernels do not fit the budget, is ignored and the GEMM
  // tuned as without it.
  const TunedTiles* tuned = nullptr;
  // Per-kernel choices: called with each kernel node of the graph being
  // lowered (empty: every kernel takes the default choice).
  std::function<KernelChoice(const Graph&, NodeId)> choice;
};

struct KernelInfo {
  std::string name;
  std::string kind;     // gemm, fused, reduce, softmax, rms_norm, layer_norm, copy, iota, fill, topk, ...
  bool fused = false;   // a program of more than one op, or a GEMM/reduce with a prologue or epilogue in the kernel
  int64_t spad_bytes = 0;  // the allocator's footprint (equal to the budget the tiles were chosen with)
  std::string tile;     // the chosen tile, e.g. "m128 n256 k128"
  int core_split = 1;   // how many kernels this node's tiles were spread over
};

struct LowerReport {
  int kernels = 0, fused_kernels = 0, copy_kernels = 0;
  int64_t spad_peak_bytes = 0;
  int64_t dram_aliases = 0;       // views read in place through an alias
  int inputs_updated_in_place = 0;  // outputs bound to the input they update (a KV cache)
  int gemms_reused = 0;             // GEMM nodes whose kernels are an earlier node's, on other buffers
  int gemm_tiles_timed = 0;         // distinct GEMMs whose tile the tile timer chose
  int gemm_tiles_known = 0;         // distinct GEMMs whose tile came from LowerOptions::tuned
  std::vector<std::string> notes;  // fusions that fell back to a standalone kernel, and why
  std::vector<KernelInfo> per_kernel;

  std::string to_text() const;
};

struct Lowered {
  npu::Program program;
  LowerReport report;
  // graph input/weight name -> DRAM buffer name; graph output name -> DRAM buffer name
  std::vector<std::pair<std::string, std::string>> inputs, outputs;
  // Every GEMM tile chosen by timing or taken from LowerOptions::tuned, by
  // tuning key (what a tile cache keeps).
  TunedTiles tuned;
};

// Throws spool::Error for an op that cannot be lowered (named, with its shape)
// or a tensor that cannot be tiled into the scratchpad.
Lowered to_npu(const Graph& llir, const target::NpuConfig& config, const LowerOptions& options = {});

}  // namespace spool::lower
