// libFuzzer target for the NPU program text (spool::npu::parse): any bytes
// are parsed; a program that parses goes through the verifier (which must
// report problems as messages, not crash on them) and must print the same
// text again after a second parse (text.hpp: the form round-trips). A
// parse error is a Diagnostic; anything else is a finding.

#include <spool/npu/text.hpp>
#include <spool/npu/verify.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  spool::Result<spool::npu::Program> program = spool::npu::parse(text, "fuzz.npu");
  if (!program) {
    (void)program.error().render();
    return 0;
  }
  (void)spool::npu::verify(program.value());
  const std::string printed = spool::npu::print(program.value());
  spool::Result<spool::npu::Program> again = spool::npu::parse(printed, "printed.npu");
  if (!again || spool::npu::print(again.value()) != printed) {
    std::fprintf(stderr, "the printed program does not round-trip:\n%s\n%s\n", printed.c_str(),
                 again ? "(it parses to another program)" : again.error().render().c_str());
    std::abort();
  }
  return 0;
}
