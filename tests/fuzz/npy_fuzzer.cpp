// libFuzzer target for .npy files (spool::read_npy): any bytes are read as
// a file; a spool::Error is the answer to a malformed one. An array that is
// read has exactly the data its shape and dtype need, and writing it and
// reading it back gives it again. Anything else is a finding.

#include "scratch_file.hpp"

#include <spool/support/error.hpp>
#include <spool/support/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static spool::fuzz::ScratchFile input("input.npy"), copy("copy.npy");
  spool::NpyArray array;
  try {
    array = spool::read_npy(input.write(data, size));
  } catch (const spool::Error&) {
    return 0;
  }
  const size_t element = array.descr.size() == 3 ? static_cast<size_t>(array.descr[2] - '0') : 0;
  size_t count = 1;
  for (const int64_t d : array.shape) count *= static_cast<size_t>(d);
  if (count * element != array.data.size()) {
    std::fprintf(stderr, "read_npy: %zu data bytes for dtype %s and %zu elements\n", array.data.size(),
                 array.descr.c_str(), count);
    std::abort();
  }
  spool::write_npy(copy.path(), array);
  const spool::NpyArray back = spool::read_npy(copy.path());
  if (back.descr != array.descr || back.shape != array.shape || back.data != array.data) {
    std::fprintf(stderr, "write_npy then read_npy changed the array (dtype %s)\n", array.descr.c_str());
    std::abort();
  }
  return 0;
}
