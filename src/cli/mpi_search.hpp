#pragma once
// Distributed evaluation of the extraction search over MPI ranks.
//
// `mpirun -np N spool run MODEL --search G`: every rank parses the same
// command line; rank 0 runs the pipeline and the search, and each batch of
// candidates the search measures is broadcast to every rank, each rank
// measures its share (candidate i on rank i mod N, on its own threads and
// its own per-kernel memo) and rank 0 collects the figures by a reduction.
// The other ranks build no program of their own: they wait for batches
// until rank 0 says stop. Everything travels by MPI collectives (a program
// as its text form, parse_graph(print_graph(g)) == g, and its lowering
// choices), so a candidate's figure is the same on any rank and the search,
// whose decisions rank 0 alone makes, gives the same result for any rank
// count.

#include <spool/lower/lower.hpp>
#include <spool/search/genetic.hpp>
#include <spool/target/npu.hpp>

#include <memory>

namespace spool::cli {

// Whether this process was started by mpirun (Open MPI's or a PMIx
// launcher's environment), and its rank there (0 when not).
bool launched_by_mpirun();
int launcher_rank();

class MpiSearch {
 public:
  // Initialises MPI (once per process). Throws spool::Error when this
  // build has no MPI.
  MpiSearch();
  ~MpiSearch();  // rank 0: tells the other ranks to stop
  MpiSearch(const MpiSearch&) = delete;
  MpiSearch& operator=(const MpiSearch&) = delete;

  int rank() const;
  int size() const;
  // Rank 0: the batch measure that spreads over every rank (rank 0
  // included), measuring with `config` and `options`.
  search::BatchFn batch(const target::NpuConfig& config, const lower::LowerOptions& options);
  // Ranks other than 0: measures batches until rank 0 stops.
  void serve(const target::NpuConfig& config, const lower::LowerOptions& options);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spool::cli
