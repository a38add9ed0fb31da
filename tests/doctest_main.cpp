// The main of every doctest suite. The pipeline logs each stage at info
// level; tests keep only warnings and errors unless SPOOL_LOG_LEVEL names a
// level (e.g. SPOOL_LOG_LEVEL=debug ./tests/lower/lower_tests).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <spdlog/spdlog.h>

#include <cstdlib>

int main(int argc, char** argv) {
  const char* level = std::getenv("SPOOL_LOG_LEVEL");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
  doctest::Context context(argc, argv);
  return context.run();
}
