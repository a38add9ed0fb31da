// libFuzzer target for .safetensors files (spool::models::read_safetensors):
// any bytes are read as a file; a spool::Error naming the file is the answer
// to a malformed one. Every value of every tensor read is then touched, so
// that a tensor whose data is not all inside the file is a sanitizer report.
// Anything else is a finding.

#include "scratch_file.hpp"

#include <spool/models/hf_weights.hpp>
#include <spool/support/error.hpp>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static spool::fuzz::ScratchFile file("model.safetensors");
  spool::models::Checkpoint checkpoint;
  try {
    checkpoint = spool::models::read_safetensors(file.write(data, size));
  } catch (const spool::Error&) {
    return 0;
  }
  double sum = 0;
  for (const auto& [name, tensor] : checkpoint)
    for (int64_t i = 0; i < tensor.value.size(); ++i) sum += tensor.value.get(i);
  volatile double sink = sum;
  (void)sink;
  return 0;
}
