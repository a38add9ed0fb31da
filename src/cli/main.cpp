// The `spool` command-line tool.
//
// A user error (bad model name, ill-formed graph, bad file) is printed as
// `spool: error: ...` with exit status 1, and so is any exception a library
// throws (out of memory included); bad command-line usage is reported by
// CLI11 with exit status 2.

#include "commands.hpp"
#include "mpi_search.hpp"

#include <spool/spool.hpp>

#include <spool/support/fault.hpp>

#include <spdlog/spdlog.h>
#include <tbb/parallel_for.h>

#include <cstdio>
#include <exception>
#include <new>
#include <thread>

namespace spool::cli {
void add_sim_command(CLI::App& app);
void add_text_commands(CLI::App& app);
}  // namespace spool::cli

int main(int argc, char** argv) {
  // Under mpirun only rank 0 reports: the other ranks measure the search's
  // candidates (mpi_search.hpp) and print nothing on standard output.
  if (spool::cli::launched_by_mpirun() && spool::cli::launcher_rank() != 0)
    if (!std::freopen("/dev/null", "w", stdout)) return 1;
  CLI::App app{"Spool: an equality-saturation compiler for transformer models on NPUs", "spool"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  app.add_subcommand("version", "Print the version")->callback([] { std::printf("spool %s\n", spool::version().data()); });
  spool::cli::add_models_command(app);
  spool::cli::add_run_command(app);
  spool::cli::add_rules_command(app);
  spool::cli::add_compile_command(app);
  spool::cli::add_sim_command(app);
  spool::cli::add_text_commands(app);
  spool::cli::add_fuzz_command(app);
  spool::cli::add_onnx_commands(app);

#ifdef SPOOL_FAULT_INJECTION
  // A fault-injection build (fault.hpp): --plant-fault NAME plants one of
  // the faults that `spool faults` lists, for tests/faults.
  std::string fault_name;
  app.add_option("--plant-fault", fault_name, "Plant a fault (a fault-injection build; `spool faults` lists them)");
  app.add_subcommand("faults", "List the faults --plant-fault can plant")->callback([] {
    for (const spool::fault::FaultInfo& f : spool::fault::all())
      std::printf("%-24s %-9s %s\n", f.name.data(), f.stage.data(), f.what.data());
  });
#endif
  spool::cli::install_interrupt_handler();
  // TBB's first parallel call sets up its thread pool (worker threads, the
  // machine's CPU limits read from /proc, its allocator looked up): about
  // 0.8 ms, which the compile's first parallel step would otherwise wait
  // for. A command that compiles, lowers or simulates does it beside its
  // first stage (building a model, reading a file), which runs on one
  // thread; the others never start the pool. Joined when main returns.
  std::jthread tbb_warmup;
  app.parse_complete_callback([&] {
    if (!app.got_subcommand("version") && !app.got_subcommand("models") && !app.got_subcommand("import"))
      tbb_warmup = std::jthread([] { tbb::parallel_for(0, 2, [](int) {}); });
    spdlog::set_level(spdlog::level::from_str(log_level));
#ifdef SPOOL_FAULT_INJECTION
    if (!fault_name.empty()) spool::fault::plant(fault_name);
#endif
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command that already reported its errors
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;
  } catch (const spool::Error& e) {
    std::fprintf(stderr, "spool: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Shapes or counts too large for this machine's memory: an error, never
    // a crash.
    std::fprintf(stderr, "spool: error: out of memory (the shapes, layers or counts asked for are too large)\n");
    return 1;
  } catch (const std::exception& e) {
    // Any other exception a library threw on the way (std::length_error,
    // std::out_of_range, ...): reported, never a crash.
    std::fprintf(stderr, "spool: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
