#pragma once
// Reading and writing NumPy .npy files (format versions 1.0-3.0, C order,
// little-endian). Used for reference data in tests and for dumping outputs.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spool {

struct NpyArray {
  std::string descr;           // numpy dtype string, e.g. "<f4", "<i8", "|b1"
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::vector<std::byte> data; // raw little-endian element bytes, C order
};

// Throws spool::Error naming the file on a malformed or unsupported file.
NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& array);

}  // namespace spool
