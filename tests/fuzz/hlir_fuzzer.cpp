// libFuzzer target for the HLIR text form (spool::parse_graph): any bytes
// are parsed; a graph that parses must verify, print, draw, and print the
// same text again after a second parse (text.hpp: the form round-trips).
// A parse error is a Diagnostic, as it should be; anything else (another
// exception, an assertion, a sanitizer report) is a finding.

#include <spool/ir/text.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  spool::Result<spool::Graph> graph = spool::parse_graph(text, "fuzz.hlir");
  if (!graph) {
    (void)graph.error().render();
    return 0;
  }
  graph.value().verify();  // the parser checked every node: a spool::Error here is a finding
  (void)spool::graph_to_dot(graph.value());
  const std::string printed = spool::print_graph(graph.value());
  spool::Result<spool::Graph> again = spool::parse_graph(printed, "printed.hlir");
  if (!again || spool::print_graph(again.value()) != printed) {
    std::fprintf(stderr, "the printed graph does not round-trip:\n%s\n%s\n", printed.c_str(),
                 again ? "(it parses to another graph)" : again.error().render().c_str());
    std::abort();
  }
  return 0;
}
