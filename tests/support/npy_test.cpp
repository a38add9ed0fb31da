// read_npy and write_npy: arrays round-trip, including empty ones.

#include <spool/support/npy.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace spool;

namespace {

NpyArray round_trip(const NpyArray& array, const std::string& name) {
  const std::string path = std::string(SPOOL_BINARY_DIR) + "/npy_test_" + name + ".npy";
  write_npy(path, array);
  return read_npy(path);
}

}  // namespace

TEST_CASE("npy: an array round-trips") {
  NpyArray array{"<f4", {2, 1}, std::vector<std::byte>(8, std::byte{0x3f})};
  const NpyArray back = round_trip(array, "f4");
  CHECK(back.descr == "<f4");
  CHECK(back.shape == array.shape);
  CHECK(back.data == array.data);
}

TEST_CASE("npy: an empty array with nonzero leading dimensions is read") {
  // Found by fuzz_npy: the shape's byte count was checked against the file
  // before the zero dimension was reached, so (2, 0, 5, 4) was refused.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 0, 5, 4}, {0}, {7, 0}}) {
    const NpyArray back = round_trip(NpyArray{"<f2", shape, {}}, "empty");
    CHECK(back.shape == shape);
    CHECK(back.data.empty());
  }
}
