#pragma once
// Internal to the GEMM generator: a tile, a kernel's share of a node's tiles,
// and the kernel under construction. gemm.cpp chooses the tile;
// gemm_kernel.cpp builds the kernel's buffers and loops over batches, column
// blocks and m blocks; gemm_block.cpp builds one block: its loads, prologues,
// array steps and epilogue.

#include "gemm.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spool::lower::detail {

struct GemmTile {
  int64_t TM = 0, TN = 0, TK = 0;
  double cost = 0;
  // Operand slots; 0: three for a block of few rows with three or more k
  // tiles, or one k tile and three or more column blocks; else two.
  int64_t slots = 0;
  // Loop order over the blocks: false, column blocks outer (m blocks
  // inner); true, m blocks outer (KernelChoice::order 2).
  bool rows_outer = false;
};

int64_t operand_slots(const GemmTile& t, int64_t K, int64_t N);

// A kernel's share of the m blocks (or of batch axis 0) when the tiles are
// spread over cores.
struct GemmSplit {
  bool batch = false;
  int64_t lo = 0, hi = -1;  // hi < 0: all
};

class GemmKernel {
 public:
  GemmKernel(const GemmJob& job, const target::NpuConfig& c, const GemmTile& t, GemmSplit split = GemmSplit{},
             std::string name = {});

  npu::Kernel build(int64_t& footprint);

 private:
  enum class OperandLoad : uint8_t { Direct, Transposed, Prologue };
  enum class EpiKind : uint8_t { Full, PerCol, PerRow, Literal };

  // What compute() emits: a block's loads and its steps, or one of them (a
  // block of one k tile whose loads are issued a block early, see columns).
  enum class Part : uint8_t { All, Loads, Steps };

  // The block compute() works on: W columns from n0 (column block `blk`) of
  // m block `mt`.
  struct Block {
    Affine n0;
    int64_t W = 0;
    Affine blk, mt;
    Affine cslot;  // its slot of C: blk * MT + mt
    Affine m0;     // its first row
    Extent me;     // its rows (ragged at the end)
  };

  // ---- buffers and loops (gemm_kernel.cpp) -------------------------------------------
  OperandLoad operand_mode(const std::vector<Access>& ins, const ProgramAttr& p, size_t outer_axis, size_t inner_axis);
  void batches(size_t axis);
  bool pipelines_across_batches() const;
  void batches_pipelined(size_t axis, int64_t lo, int64_t n);
  Affine base(const Access& a) const;
  void columns();
  void rows_outer();
  // The slot of C (and of the block's operand tiles) of column block `blk`
  // of m block `mt`: consecutive blocks of the loop order alternate.
  Affine slot_of(const Affine& blk, const Affine& mt) const { return t_.rows_outer ? mt * NB_ + blk : blk * MT_ + mt; }
  void load_per_col(const Affine& n0, int64_t W, const Affine& blk);
  void load_indices(int var, int64_t lo);
  void store(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt);

  // ---- one block (gemm_block.cpp) ----------------------------------------------------
  void load_tile(const Access& a, size_t ra, size_t ca, const Affine& r0, const Affine& c0, const Extent& re,
                 const Extent& ce, int buf, const Affine& slot, int64_t ld);
  bool row_broadcast(const Access& a) const;
  void prologue(const std::vector<int>& in_bufs, const std::vector<Access>& ins, const ProgramAttr& p, int dst,
                const Affine& slot, const Extent& re, const Extent& ce, int64_t ld, const char* label);
  void compute(const Affine& n0, int64_t W, const Affine& blk, const Affine& mt, Part part = Part::All);
  void load_epilogue_operands(const Block& b);
  void k_load(const Block& b, const Affine& kidx, const Affine& slot);
  void k_run(const Block& b, const Affine& kidx, bool accumulate, const Affine& slot);
  void array_steps(const Block& b, const Affine& kidx, const Extent& ke, bool accumulate, const Affine& slot);
  void add_split_k(const Block& b);
  void epilogue(const Block& b);

  const GemmJob& j_;
  const target::NpuConfig& c_;
  const GemmTile t_;
  const GemmSplit split_;
  KernelBuilder kb_;
  size_t rank_ = 2;
  int64_t M_ = 0, K_ = 0, N_ = 0, Nr_ = 0, Nc_ = 0, MT_ = 0, KT_ = 0, NB_ = 0;
  OperandLoad a_mode_ = OperandLoad::Direct, b_mode_ = OperandLoad::Direct;
  bool b_prologue_t_ = false;  // B's prologue runs on [n, k] tiles (see build)
  int A_ = -1, B_ = -1, C_ = -1, O_ = -1;
  std::vector<int> a_in_, b_in_, epi_buf_;
  std::vector<EpiKind> epi_kind_;
  bool has_epilogue_ = false, in_place_ = true;
  bool split_k_ = false;  // k chunks alternate between C_ and C2_ (see build)
  int64_t slots_ = 2;     // operand slots (see build)
  int C2_ = -1;
  std::vector<std::tuple<size_t, int, int64_t>> batch_vars_;  // (axis, loop variable or -1, first index)
  std::map<std::pair<int, int64_t>, int> index_bufs_;         // (index buffer, offset) -> scratchpad buffer
};

}  // namespace spool::lower::detail
