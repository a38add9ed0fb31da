// libFuzzer target for NPU configs (spool::target::parse_config): any bytes
// are read as a config; a spool::Error naming the key is the answer to a
// bad one, anything else (a JSON library exception, a sanitizer report) is
// a finding. A config that is accepted has its derived figures computed.

#include <spool/support/error.hpp>
#include <spool/target/npu.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const spool::target::NpuConfig config = spool::target::parse_config(text, "fuzz.json");
    (void)config.spad_bytes();
    (void)config.dram_bytes_per_second();
  } catch (const spool::Error&) {
  }
  return 0;
}
