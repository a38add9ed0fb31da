// GEMM/BMM tile selection; the kernel of a tile is built by gemm_kernel.cpp
// and gemm_block.cpp.
//
// Every candidate (TM, TN, TK) is scored by an analytic form of the timing
// model (timing.cpp: array steps, DRAM bytes at the channels' bandwidth, DMA
// descriptor setup, launch); in that order, the first few whose generated
// kernels fit the budget by the scratchpad allocator are run through the tile
// timer (LowerOptions::tile_cycles) and the fastest wins (ties within 0.5% go
// to the longest k tiles), so the footprint that chose it is the footprint
// that runs. Candidates are built in parallel, and those timed after the
// first wave stop once they cannot win (fastest_fit()). Choices are cached
// by the GEMM's signature, so repeated layers cost one selection; so are
// the kernels built, so that a repeat on other buffers renames the last
// ones' DMA buffers instead of building them again (renaming()).
// Tiles timed before (LowerOptions::tuned, a tile cache) are taken by
// tuning key (tuning_key()) without timing (known_fit()).

#include "gemm.hpp"
#include "gemm_kernel.hpp"

#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

namespace spool::lower::detail {
namespace {

using namespace spool::npu;

bool has_iota(const ProgramAttr& p) {
  for (const ProgramInstr& in : p.instrs)
    if (in.op == Op::Iota) return true;
  return false;
}

// The analytic cost of a tiling, in core cycles: the arrays' steps (timing.cpp's
// chain formula), DRAM bytes at the channels' peak, DMA descriptor setup, and
// the vector work of prologues and epilogue; the arrays and DMA overlap.
double estimate(const GemmJob& job, const target::NpuConfig& c, const GemmTile& t) {
  const Shape& as = job.a[0].shape;
  const size_t r = as.size();
  const double M = double(as[r - 2]), K = double(as[r - 1]), N = double(job.b[0].shape[r - 1]);
  double batches = 1;
  for (size_t i = 0; i + 2 < r; ++i) batches *= double(as[i]);
  const double R = double(c.systolic.rows), Cc = double(c.systolic.cols);
  const double MT = std::ceil(M / double(t.TM)), NT = std::ceil(N / double(t.TN)), KT = std::ceil(K / double(t.TK));
  const double tm = std::min(double(t.TM), M);
  const double steps = batches * NT * MT * KT * std::ceil(double(t.TK) / R) * std::ceil(std::min(double(t.TN), N) / Cc);
  const double per_step = c.systolic.weight_buffers >= 2 ? std::max(tm, R) : 2 * R + tm + Cc;
  const double array_cycles = steps * per_step / double(c.systolic.arrays);
  const double eb = double(dtype_bytes(job.dtype));
  double bytes = batches * (NT * M * K * eb * double(job.a.size()) + MT * K * N * eb * double(job.b.size()) +
                            M * N * double(dtype_bytes(job.out.dtype)) * (1.0 + double(job.epilogue.size())));
  const double dram_per_cycle = c.dram_sustained_bytes_per_second() / (c.core_clock_mhz * 1e6);
  const double dram_cycles = bytes / dram_per_cycle;
  const double descriptors = batches * NT * MT * (KT * double(job.a.size() + job.b.size()) + 1.0 + double(job.epilogue.size()));
  const double setup = descriptors * double(c.dma.setup_cycles);
  const double lanes_elems = double(c.vector.lanes * c.vector.vlen_bits / 32);
  const double vector_cycles = batches * NT * MT * (double(c.vector.step_overhead_cycles) + tm * double(t.TN) / lanes_elems);
  return std::max({array_cycles, dram_cycles, vector_cycles}) + setup + double(c.launch.fixed_cycles);
}

std::vector<GemmTile> candidates(const GemmJob& job, const target::NpuConfig& c) {
  const Shape& as = job.a[0].shape;
  const size_t r = as.size();
  const int64_t M = as[r - 2], K = as[r - 1], N = job.b[0].shape[r - 1];
  const int64_t R = c.systolic.rows, Cc = c.systolic.cols;
  std::vector<int64_t> tks, tns, tms;
  if (K <= R) {
    tks.push_back(K);
  } else {
    // Any multiple of R up to 8R (the last k tile may be ragged).
    for (int64_t tk = R; tk <= 8 * R && (tks.empty() || tks.back() < K); tk *= 2)
      tks.push_back(std::min(tk, ceil_div(K, R) * R));
  }
  const int64_t unit = std::min(N, Cc * c.systolic.arrays);
  if (job.softmax == FusedSoftmax::Rows) {
    tns.push_back(N);  // the softmax needs whole rows in one tile
  } else {
    for (int64_t tn = unit;; tn *= 2) {
      tns.push_back(std::min(tn, N));
      if (tn >= N || tn >= 64 * unit) break;
    }
  }
  if (job.softmax == FusedSoftmax::Columns) {
    tms.push_back(M);  // the softmax needs whole columns in one tile
  } else {
    for (int64_t tm = 8; tm < M && tm <= 4096; tm *= 2) tms.push_back(tm);
    if (M <= 4096) tms.push_back(M);
  }
  if (tms.empty()) tms.push_back(4096);
  std::vector<GemmTile> out;
  for (int64_t tk : tks)
    for (int64_t tn : tns)
      for (int64_t tm : tms) {
        GemmTile t{tm, tn, tk, 0};
        t.cost = estimate(job, c, t);
        out.push_back(t);
      }
  std::sort(out.begin(), out.end(), [](const GemmTile& a, const GemmTile& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.TM != b.TM) return a.TM > b.TM;
    if (a.TN != b.TN) return a.TN > b.TN;
    return a.TK > b.TK;
  });
  std::vector<GemmTile> unique;
  for (const GemmTile& t : out)
    if (unique.empty() || t.TM != unique.back().TM || t.TN != unique.back().TN || t.TK != unique.back().TK)
      unique.push_back(t);
  return unique;
}

// What determines the kernel apart from buffer addresses.
std::string signature(const GemmJob& job) {
  std::string s =
      fmt::format("{}|{}|{}|{}|{}|", dtype_name(job.dtype), program_str(job.a_program), program_str(job.b_program),
                  program_str(job.epilogue_program), static_cast<int>(job.softmax));
  auto add = [&](const Access& a) {
    s += fmt::format("{}{}{}{}{};", dtype_name(a.dtype), shape_str(a.shape), shape_str(a.strides),
                     a.is_literal ? fmt::format("={}", a.literal) : "",
                     a.index_buffer >= 0 ? fmt::format("@{}x{}<{}", dtype_name(a.index_dtype), a.index_scale,
                                                       a.index_limit)
                                         : "");
  };
  for (const Access& a : job.a) add(a);
  s += "|";
  for (const Access& b : job.b) add(b);
  s += "|";
  for (const Access& e : job.epilogue) add(e);
  s += "|";
  add(job.out);
  return s;
}

// Cycles of the kernels alone (independent of each other), by the caller's
// tile timer; once above `limit`, any count above it.
int64_t simulated_cycles(const Emitter& em, const std::vector<Kernel>& kernels, int64_t limit) {
  npu::Program p;
  p.name = "tile";
  p.spad_bytes = em.program.spad_bytes;
  p.buffers = em.program.buffers;
  p.kernels = kernels;
  for (Kernel& k : p.kernels) k.deps.clear();
  return em.options.tile_cycles(p, limit);
}

// Batch axes next to M over which every B input is broadcast, folded into
// M: grouped-query attention multiplies [KV heads, group, S, D] by K^T read
// as [KV heads, 1, D, T], and as a batch of group x S-row products each
// query head would load the same keys again; as one product of group * S
// rows per KV head the keys are loaded once (and a decode step's one-row
// products become group-row ones). An axis folds only where every A input,
// epilogue input and the output step over it exactly as over a run of M rows
// (stride = M * the M stride), so the folded kernel reads and writes the same
// elements. Operands read through a fused gather keep their batch axes (the
// index is loaded per batch of axis 0), and so does a product whose columns
// a fused softmax normalises (over its own M rows, not the folded ones).
GemmJob fold_broadcast_batches(GemmJob job) {
  auto gathered = [](const std::vector<Access>& ins) {
    return std::any_of(ins.begin(), ins.end(), [](const Access& a) { return a.index_buffer >= 0; });
  };
  if (gathered(job.a) || gathered(job.b) || job.softmax == FusedSoftmax::Columns) return job;
  for (;;) {
    const size_t r = job.out.shape.size();
    if (r < 3) return job;
    const size_t x = r - 3, m = r - 2;
    const int64_t rows = job.out.shape[m];
    // With one row, any stride over the axis is the folded rows' stride.
    auto follows_rows = [&](const Access& a) {
      return a.shape.size() == r && a.strides.size() == r && a.shape[x] == job.out.shape[x] &&
             (rows == 1 || a.strides[x] == rows * a.strides[m]);
    };
    bool foldable = job.out.shape[x] > 1 && follows_rows(job.out);
    for (const Access& b : job.b) foldable = foldable && b.strides.size() == r && b.strides[x] == 0;
    for (const Access& a : job.a) foldable = foldable && follows_rows(a);
    for (const Access& e : job.epilogue) foldable = foldable && follows_rows(e);
    if (!foldable) return job;
    auto fold = [&](Access& a, bool into_rows) {
      if (into_rows && rows == 1) a.strides[m] = a.strides[x];
      if (into_rows) a.shape[m] *= a.shape[x];
      a.shape.erase(a.shape.begin() + static_cast<std::ptrdiff_t>(x));
      a.strides.erase(a.strides.begin() + static_cast<std::ptrdiff_t>(x));
    };
    for (Access& a : job.a) fold(a, true);
    for (Access& b : job.b) fold(b, false);
    for (Access& e : job.epilogue) fold(e, true);
    fold(job.out, true);
  }
}

// The kernels of a tile: one, or its independent tiles over the cores (the
// m blocks, or batch axis 0: the splits whose DRAM windows are disjoint).
std::vector<Kernel> tile_kernels(const Emitter& em, const GemmJob& job, const GemmTile& t, bool allow_split,
                                 int64_t& peak) {
  const int cores = em.options.multi_core && allow_split ? em.config.cores : 1;
  const Shape& as = job.a[0].shape;
  const int64_t MT = ceil_div(as[as.size() - 2], t.TM);
  int64_t batches = 1;
  for (size_t i = 0; i + 2 < as.size(); ++i) batches *= as[i];
  const bool batch = batches > 1;
  const int64_t units = batch ? (as[0] >= cores ? as[0] : 1) : MT;
  std::vector<Kernel> kernels;
  peak = 0;
  const int64_t parts = cores <= 1 || units < 2 ? 1 : std::min<int64_t>(cores, units);
  for (int64_t p = 0; p < parts; ++p) {
    int64_t fp = 0;
    if (parts == 1) {
      kernels.push_back(GemmKernel(job, em.config, t).build(fp));
    } else {
      const GemmSplit split{batch, units * p / parts, units * (p + 1) / parts};
      kernels.push_back(GemmKernel(job, em.config, t, split, fmt::format("{}.c{}", job.info.name, p)).build(fp));
    }
    peak = std::max(peak, fp);
  }
  return kernels;
}

// A candidate tile whose kernels fit the budget.
struct Fit {
  GemmTile tile;
  std::vector<Kernel> kernels;
  int64_t footprint;
  bool split;
};

// In analytic cost order, the first candidates that fit (shrinking until
// one does); the tile timer picks among them. None: `smallest` is the
// smallest footprint over the budget.
std::vector<Fit> fitting_tiles(const Emitter& em, const GemmJob& job, int64_t& smallest) {
  // Spreading over cores is decided by timing both forms: no timer, no spreading.
  const bool can_split = em.options.multi_core && em.config.cores > 1 && em.options.tile_cycles;
  smallest = -1;
  std::vector<Fit> fits;
  const size_t wanted =
      em.options.tile_cycles ? static_cast<size_t>(std::max(1, em.options.gemm_simulated_candidates)) : 1;
  const int64_t K = job.a[0].shape[job.a[0].shape.size() - 1], N = job.b[0].shape[job.b[0].shape.size() - 1];
  struct Built {
    GemmTile tile;
    std::vector<Kernel> kernels, parts;
    int64_t footprint = 0, split_footprint = 0;
  };
  auto build = [&](GemmTile t, Built& b) {
    b.kernels = tile_kernels(em, job, t, false, b.footprint);
    if (b.footprint > em.budget && operand_slots(t, K, N) > 2) {  // the same tile with two operand slots
      t.slots = 2;
      b.kernels = tile_kernels(em, job, t, false, b.footprint);
    }
    b.tile = t;
    // The same tile spread over the cores, when it splits: the timer
    // weighs the launches against the parallel work.
    if (b.footprint <= em.budget && can_split) b.parts = tile_kernels(em, job, t, true, b.split_footprint);
  };
  // Candidates are built in parallel, as many at a time as could still be
  // needed, and taken in order: the fits and `smallest` are those of
  // building one at a time.
  const std::vector<GemmTile> all = candidates(job, em.config);
  const size_t per = can_split ? 2 : 1, target = wanted * per;
  for (size_t next = 0; next < all.size() && fits.size() < target;) {
    const size_t chunk = std::min(all.size() - next, (target - fits.size() + per - 1) / per);
    std::vector<Built> built(chunk);
    tbb::parallel_for(size_t{0}, chunk, [&](size_t i) { build(all[next + i], built[i]); });
    next += chunk;
    for (Built& b : built) {
      if (b.footprint > em.budget) {
        if (smallest < 0 || b.footprint < smallest) smallest = b.footprint;
        continue;
      }
      fits.push_back(Fit{b.tile, std::move(b.kernels), b.footprint, false});
      if (b.parts.size() > 1) fits.push_back(Fit{b.tile, std::move(b.parts), b.split_footprint, true});
      if (fits.size() >= target) break;
    }
  }
  return fits;
}

// The fit the tile timer picks (the first when there is one).
size_t fastest_fit(const Emitter& em, const std::vector<Fit>& fits) {
  size_t best = 0;
  if (fits.size() < 2) return best;
  // Within kTieTolerance of the fastest, the tile with the longest k
  // tiles wins (then the fastest): its operand rows are longer DMA runs,
  // so fewer descriptors, fewer DRAM rows opened, and a program that is
  // cheaper to simulate — which decides how long the largest models take.
  constexpr double kTieTolerance = 0.005;
  // The candidates are timed independently of each other, in parallel:
  // the first wave (as many as run at once, best estimates first) in
  // full, the others only until they exceed the first wave's fastest by
  // more than the tolerance. Such a candidate is neither the fastest nor
  // tied with it, so it cannot be picked: its count, a lower bound above
  // the limit, decides nothing, and the choice is the one timing every
  // candidate in full would make (an outlier 10x slower than the best no
  // longer holds up the whole GEMM's choice).
  std::vector<int64_t> cycles(fits.size());
  const size_t wave = std::min(fits.size(), static_cast<size_t>(std::max(1, tbb::this_task_arena::max_concurrency())));
  tbb::parallel_for(size_t{0}, wave, [&](size_t i) { cycles[i] = simulated_cycles(em, fits[i].kernels, INT64_MAX); });
  const int64_t first = *std::min_element(cycles.begin(), cycles.begin() + static_cast<std::ptrdiff_t>(wave));
  const auto limit = static_cast<int64_t>(std::ceil(static_cast<double>(first) * (1 + kTieTolerance)));
  tbb::parallel_for(wave, fits.size(), [&](size_t i) { cycles[i] = simulated_cycles(em, fits[i].kernels, limit); });
  const int64_t fastest = *std::min_element(cycles.begin(), cycles.end());
  for (size_t i = 0; i < fits.size(); ++i) {
    if (static_cast<double>(cycles[i]) > static_cast<double>(fastest) * (1 + kTieTolerance)) continue;
    const bool tied_best = static_cast<double>(cycles[best]) <= static_cast<double>(fastest) * (1 + kTieTolerance);
    if (!tied_best || fits[i].tile.TK > fits[best].tile.TK ||
        (fits[i].tile.TK == fits[best].tile.TK && cycles[i] < cycles[best]))
      best = i;
  }
  return best;
}

// The job's accesses in a fixed order, as (buffer, offsets) slots: what
// the signature leaves out.
void access_slots(const GemmJob& job, std::vector<int>& buffers, std::vector<int64_t>& offsets) {
  auto add = [&](const Access& a) {
    buffers.push_back(a.buffer);
    buffers.push_back(a.index_buffer);
    offsets.push_back(a.offset);
    offsets.push_back(a.index_offset);
    offsets.push_back(a.index_stride);
  };
  for (const Access& a : job.a) add(a);
  for (const Access& b : job.b) add(b);
  for (const Access& e : job.epilogue) add(e);
  add(job.out);
}

// The tuning key (lower.hpp's TunedTiles). The tile timer times the
// candidates' kernels in a program of the buffers so far: the kernels are
// the signature's, on the job's buffers at its offsets (renaming()), and
// the timer reads those buffers' DRAM addresses and layouts. So the key
// holds, per access slot, which earlier slot names the same buffer, and
// that buffer's address, dtype, shape and kind, with the offsets.
std::string tuning_key(const Emitter& em, const GemmJob& job, const std::string& signature) {
  std::vector<int> buffers;
  std::vector<int64_t> offsets;
  access_slots(job, buffers, offsets);
  const std::vector<int64_t> address = npu::dram_addresses(em.program);
  std::string key = signature + "#";
  std::map<int, size_t> first;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int b = buffers[i];
    if (b < 0) {
      key += "-;";
      continue;
    }
    const auto [it, added] = first.emplace(b, i);
    const DramBuffer& d = em.program.buffers[static_cast<size_t>(b)];
    if (added)
      key += fmt::format("@{}:{}{}k{};", address[static_cast<size_t>(b)], dtype_name(d.dtype), shape_str(d.shape),
                         static_cast<int>(d.kind));
    else
      key += fmt::format("={};", it->second);
  }
  key += "#";
  for (int64_t o : offsets) key += fmt::format("{},", o);
  return key;
}

// The tile LowerOptions::tuned holds for this key, if it is one of the
// job's candidates (with its own operand slots, or two), spread over the
// cores only where the tuner could spread it, and its kernels fit.
std::optional<Fit> known_fit(const Emitter& em, const GemmJob& job, const std::string& tkey) {
  if (!em.options.tuned) return std::nullopt;
  const auto it = em.options.tuned->find(tkey);
  if (it == em.options.tuned->end()) return std::nullopt;
  const TunedTile& k = it->second;
  const int64_t K = job.a[0].shape[job.a[0].shape.size() - 1], N = job.b[0].shape[job.b[0].shape.size() - 1];
  const std::vector<GemmTile> all = candidates(job, em.config);
  const auto c = std::find_if(all.begin(), all.end(),
                              [&](const GemmTile& t) { return t.TM == k.tm && t.TN == k.tn && t.TK == k.tk; });
  if (c == all.end() || (k.slots != operand_slots(*c, K, N) && k.slots != 2)) return std::nullopt;
  if (k.split && !(em.options.multi_core && em.config.cores > 1 && em.options.tile_cycles)) return std::nullopt;
  Fit fit{*c, {}, 0, k.split};
  fit.tile.slots = k.slots == operand_slots(*c, K, N) ? 0 : k.slots;
  fit.kernels = tile_kernels(em, job, fit.tile, k.split, fit.footprint);
  if (fit.footprint > em.budget || (k.split && fit.kernels.size() < 2)) return std::nullopt;
  return fit;
}

// The renaming of DRAM buffers that turns the kernels built for an earlier
// job of the same signature into this job's: the generator reads a job's
// buffers only as DMA targets and compares them only with each other, so
// when this job's offsets are the earlier job's and its buffers are the
// earlier ones renamed one to one, the kernels it would build are the
// earlier ones with each DMA's buffer renamed (and the kernels named after
// this node). Nothing otherwise.
std::optional<std::map<int, int>> renaming(const Emitter::BuiltGemm& built, const GemmJob& job) {
  std::vector<int> buffers;
  std::vector<int64_t> offsets;
  access_slots(job, buffers, offsets);
  if (offsets != built.offsets || buffers.size() != built.buffers.size()) return std::nullopt;
  std::map<int, int> to, from;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int old = built.buffers[i], now = buffers[i];
    if ((old < 0) != (now < 0)) return std::nullopt;
    if (old < 0) continue;
    const auto [t, t_new] = to.emplace(old, now);
    const auto [f, f_new] = from.emplace(now, old);
    if (t->second != now || f->second != old) return std::nullopt;
  }
  for (const auto& dmas : built.dmas)
    for (const auto& [load, buffer] : dmas)
      if (!to.count(buffer)) return std::nullopt;
  return to;
}

void remember(Emitter& em, const std::string& key, const GemmJob& job, const std::vector<Kernel>& kernels,
              int64_t footprint) {
  Emitter::BuiltGemm built;
  access_slots(job, built.buffers, built.offsets);
  built.kernels = std::make_shared<const std::vector<Kernel>>(kernels);
  for (const Kernel& k : kernels) built.dmas.push_back(dma_buffers(k));
  built.footprint = footprint;
  em.gemm_kernels[key] = std::move(built);
}

}  // namespace

// The tuner's tile `t` (spread over cores or not) with the fields the
// job's choice sets, each clamped to what the generator takes: rows up to
// M (M itself with a column softmax), columns whole multiples of the
// arrays' columns up to N (N itself with a row softmax), k whole multiples
// of the array's rows up to K.
std::pair<GemmTile, bool> chosen_tile(const Emitter& em, const GemmJob& job, GemmTile t, bool split) {
  const KernelChoice& ch = job.choice;
  const Shape& as = job.a[0].shape;
  const int64_t M = as[as.size() - 2], K = as[as.size() - 1], N = job.b[0].shape[job.b[0].shape.size() - 1];
  const int64_t R = em.config.systolic.rows, unit = std::min(N, em.config.systolic.cols * em.config.systolic.arrays);
  if (ch.tile_m > 0 && job.softmax != FusedSoftmax::Columns) t.TM = std::min(ch.tile_m, M);
  if (ch.tile_n > 0 && job.softmax != FusedSoftmax::Rows) t.TN = std::min(N, ceil_div(ch.tile_n, unit) * unit);
  if (ch.tile_k > 0) t.TK = K <= R ? K : std::min(ceil_div(ch.tile_k, R) * R, ceil_div(K, R) * R);
  if (ch.tile_m > 0 || ch.tile_n > 0 || ch.tile_k > 0) t.slots = 0;  // the rule for the new shape
  // One (single buffering), two or three.
  if (ch.slots > 0) t.slots = std::clamp<int64_t>(ch.slots, 1, 3);
  if (ch.order > 0) t.rows_outer = ch.order == 2;
  if (ch.cores > 0) split = ch.cores >= 2 && em.options.multi_core && em.config.cores > 1;
  return {t, split};
}

std::optional<std::string> emit_gemm(Emitter& em, const GemmJob& unfolded) {
  const GemmJob job = fold_broadcast_batches(unfolded);
  if (has_iota(job.a_program) || has_iota(job.b_program) || has_iota(job.epilogue_program))
    return std::string("a program reads an iota");
  if (!is_float(job.dtype)) fail("lower: {}: integer GEMMs do not run on the systolic arrays", job.info.name);
  auto emit = [&](const GemmTile& t, std::vector<Kernel> kernels, int64_t footprint) {
    KernelInfo info = job.info;
    info.tile = fmt::format("m{} n{} k{}", t.TM, t.TN, t.TK);
    em.add_kernels(std::move(kernels), info, footprint);
  };
  // A choice that changes the tuner's tile: its kernels if they fit the
  // budget (else the tuner's tile stands).
  auto emit_chosen = [&](const GemmTile& tuned, bool tuned_split) {
    if (job.choice.is_default()) return false;
    const auto [t, split] = chosen_tile(em, job, tuned, tuned_split);
    int64_t footprint = 0;
    std::vector<Kernel> kernels = tile_kernels(em, job, t, split, footprint);
    if (footprint > em.budget) return false;
    emit(t, std::move(kernels), footprint);
    return true;
  };
  const std::string key = signature(job);
  if (auto it = em.gemm_tiles.find(key); it != em.gemm_tiles.end()) {
    const GemmTile t{it->second.tm, it->second.tn, it->second.tk, 0, it->second.slots};
    // A lowering choice builds its own kernels; the tuner's tile reuses
    // an earlier job's, renamed.
    if (emit_chosen(t, it->second.split)) return std::nullopt;
    if (const auto built = em.gemm_kernels.find(key); built != em.gemm_kernels.end())
      if (const std::optional<std::map<int, int>> to = renaming(built->second, job)) {
        KernelInfo info = job.info;
        info.tile = fmt::format("m{} n{} k{}", t.TM, t.TN, t.TK);
        em.add_renamed(built->second, *to, job.info.name, info, built->second.footprint);
        ++em.report.gemms_reused;
        return std::nullopt;
      }
    int64_t footprint = 0;
    std::vector<Kernel> kernels = tile_kernels(em, job, t, it->second.split, footprint);
    SPOOL_ASSERT(footprint <= em.budget, "a cached GEMM tile no longer fits");
    remember(em, key, job, kernels, footprint);
    emit(t, std::move(kernels), footprint);
    return std::nullopt;
  }
  // The tile tuned before for this key, or the fastest candidate.
  const std::string tkey = tuning_key(em, job, key);
  std::optional<Fit> best = known_fit(em, job, tkey);
  if (best) {
    ++em.report.gemm_tiles_known;
  } else {
    int64_t smallest = -1;
    std::vector<Fit> fits = fitting_tiles(em, job, smallest);
    if (fits.empty())
      return fmt::format("the smallest tile needs {} bytes of scratchpad, the budget is {}", smallest, em.budget);
    best = std::move(fits[fastest_fit(em, fits)]);
    if (em.options.tile_cycles) ++em.report.gemm_tiles_timed;
  }
  const int64_t K = job.a[0].shape[job.a[0].shape.size() - 1], N = job.b[0].shape[job.b[0].shape.size() - 1];
  const TunedTile tuned{best->tile.TM, best->tile.TN, best->tile.TK, operand_slots(best->tile, K, N), best->split};
  em.gemm_tiles[key] = tuned;
  if (em.options.tile_cycles) em.tuned[tkey] = tuned;
  remember(em, key, job, best->kernels, best->footprint);
  if (emit_chosen(GemmTile{tuned.tm, tuned.tn, tuned.tk, 0, tuned.slots}, tuned.split)) return std::nullopt;
  emit(best->tile, std::move(best->kernels), best->footprint);
  return std::nullopt;
}

}  // namespace spool::lower::detail
