// Distributed evaluation of the extraction search (mpi_search.hpp): the
// batch protocol over MPI collectives.
//
// Per batch, rank 0 broadcasts a header {command, exact, bytes, count} and
// then the candidates as one byte string; every rank measures candidates
// i = rank, rank + N, ... and the figures meet on rank 0 by an MPI_MAX
// reduction (a rank leaves the others' slots at INT64_MIN). Command 0 stops
// the other ranks.

#include "mpi_search.hpp"

#include <spool/ir/text.hpp>
#include <spool/search/fitness.hpp>
#include <spool/search/space.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#ifdef SPOOL_HAVE_MPI
#include <mpi.h>
#endif

namespace spool::cli {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// ---- candidates as bytes -------------------------------------------------------------

void put_number(std::string& out, int64_t v) { out += fmt::format("{} ", v); }

void put_text(std::string& out, std::string_view text) {
  put_number(out, static_cast<int64_t>(text.size()));
  out += text;
}

std::string encode(std::span<const search::Candidate> batch) {
  std::string out;
  for (const search::Candidate& c : batch) {
    put_text(out, print_graph(*c.program));
    put_number(out, static_cast<int64_t>(c.lowering->size()));
    for (const auto& [key, ch] : *c.lowering) {
      put_text(out, key);
      for (int64_t v : {ch.tile_m, ch.tile_n, ch.tile_k, ch.slots, int64_t{ch.order}, int64_t{ch.cores}})
        put_number(out, v);
    }
  }
  return out;
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  int64_t number() {
    const size_t end = bytes_.find(' ', pos_);
    if (end == std::string_view::npos) fail("mpi: a truncated batch");
    const int64_t v = std::stoll(std::string(bytes_.substr(pos_, end - pos_)));
    pos_ = end + 1;
    return v;
  }
  std::string_view text() {
    const int64_t n = number();
    if (n < 0 || static_cast<size_t>(n) > bytes_.size() - pos_) fail("mpi: a truncated batch");
    const std::string_view t = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return t;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

struct Decoded {
  Graph program;
  search::LoweringChoices lowering;
};

std::vector<Decoded> decode(std::string_view bytes, size_t count) {
  Reader r(bytes);
  std::vector<Decoded> out;
  for (size_t i = 0; i < count; ++i) {
    Decoded d{parse_graph(r.text(), "<mpi batch>").take(), {}};
    const int64_t choices = r.number();
    for (int64_t k = 0; k < choices; ++k) {
      std::string key(r.text());
      lower::KernelChoice ch;
      ch.tile_m = r.number();
      ch.tile_n = r.number();
      ch.tile_k = r.number();
      ch.slots = r.number();
      ch.order = static_cast<int>(r.number());
      ch.cores = static_cast<int>(r.number());
      d.lowering.emplace(std::move(key), ch);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

bool launched_by_mpirun() { return env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_RANK"); }

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = env(name)) return std::atoi(v);
  return 0;
}

#ifdef SPOOL_HAVE_MPI

struct MpiSearch::State {
  int rank = 0, size = 1;
  bool stopped = false;
  std::unique_ptr<search::SimulatedCycles> cycles;

  // This rank's share of a batch, measured on its threads; the other slots INT64_MIN.
  std::vector<int64_t> measure_share(const std::vector<const Graph*>& programs,
                                     const std::vector<const search::LoweringChoices*>& lowerings, bool exact) const {
    std::vector<int64_t> out(programs.size(), std::numeric_limits<int64_t>::min());
    std::vector<size_t> mine;
    for (size_t i = static_cast<size_t>(rank); i < programs.size(); i += static_cast<size_t>(size)) mine.push_back(i);
    tbb::parallel_for(size_t{0}, mine.size(), [&](size_t j) {
      const size_t i = mine[j];
      try {
        out[i] = exact ? cycles->whole(*programs[i], *lowerings[i]) : cycles->kernels(*programs[i], *lowerings[i]);
      } catch (const Error&) {
        out[i] = search::kUnmeasured;
      }
    });
    return out;
  }
};

MpiSearch::MpiSearch() : state_(std::make_unique<State>()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &state_->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &state_->size);
}

MpiSearch::~MpiSearch() {
  if (state_->rank == 0 && !state_->stopped) {
    int64_t header[4] = {0, 0, 0, 0};
    MPI_Bcast(header, 4, MPI_INT64_T, 0, MPI_COMM_WORLD);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int MpiSearch::rank() const { return state_->rank; }
int MpiSearch::size() const { return state_->size; }

search::BatchFn MpiSearch::batch(const target::NpuConfig& config, const lower::LowerOptions& options) {
  state_->cycles = std::make_unique<search::SimulatedCycles>(config, options);
  State* st = state_.get();
  return [st](std::span<const search::Candidate> batch, bool exact) {
    std::string bytes = encode(batch);
    SPOOL_ASSERT(bytes.size() < static_cast<size_t>(std::numeric_limits<int>::max()), "an MPI batch over 2 GiB");
    int64_t header[4] = {1, exact ? 1 : 0, static_cast<int64_t>(bytes.size()), static_cast<int64_t>(batch.size())};
    MPI_Bcast(header, 4, MPI_INT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    std::vector<const Graph*> programs;
    std::vector<const search::LoweringChoices*> lowerings;
    for (const search::Candidate& c : batch) {
      programs.push_back(c.program);
      lowerings.push_back(c.lowering);
    }
    const std::vector<int64_t> mine = st->measure_share(programs, lowerings, exact);
    std::vector<int64_t> all(batch.size());
    MPI_Reduce(mine.data(), all.data(), static_cast<int>(batch.size()), MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    return all;
  };
}

void MpiSearch::serve(const target::NpuConfig& config, const lower::LowerOptions& options) {
  state_->cycles = std::make_unique<search::SimulatedCycles>(config, options);
  for (;;) {
    int64_t header[4];
    MPI_Bcast(header, 4, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (header[0] == 0) break;
    std::string bytes(static_cast<size_t>(header[2]), '\0');
    MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    const size_t count = static_cast<size_t>(header[3]);
    std::vector<int64_t> mine(count, std::numeric_limits<int64_t>::min());
    try {
      const std::vector<Decoded> decoded = decode(bytes, count);
      std::vector<const Graph*> programs;
      std::vector<const search::LoweringChoices*> lowerings;
      for (const Decoded& d : decoded) {
        programs.push_back(&d.program);
        lowerings.push_back(&d.lowering);
      }
      mine = state_->measure_share(programs, lowerings, header[1] != 0);
    } catch (const std::exception&) {
      // A batch this rank cannot read: its share counts as unmeasured.
      for (size_t i = static_cast<size_t>(state_->rank); i < count; i += static_cast<size_t>(state_->size))
        mine[i] = search::kUnmeasured;
    }
    MPI_Reduce(mine.data(), nullptr, static_cast<int>(count), MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
  }
  state_->stopped = true;
}

#else

struct MpiSearch::State {};

MpiSearch::MpiSearch() {
  fail("this spool was built without MPI (install libopenmpi-dev and reconfigure) but was started by mpirun");
}
MpiSearch::~MpiSearch() = default;
int MpiSearch::rank() const { return 0; }
int MpiSearch::size() const { return 1; }
search::BatchFn MpiSearch::batch(const target::NpuConfig&, const lower::LowerOptions&) { return {}; }
void MpiSearch::serve(const target::NpuConfig&, const lower::LowerOptions&) {}

#endif

}  // namespace spool::cli
