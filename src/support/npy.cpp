// .npy reader and writer. The header is a Python dict literal; we parse the
// three keys numpy writes ('descr', 'fortran_order', 'shape') and nothing else.

#include <spool/support/error.hpp>
#include <spool/support/npy.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace spool {
namespace {

size_t element_size(const std::string& descr, const std::string& path) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    fail("{}: unsupported npy dtype '{}' (only little-endian is supported)", path, descr);
  const std::string kind = descr.substr(1);
  if (kind == "f4" || kind == "i4" || kind == "u4") return 4;
  if (kind == "f8" || kind == "i8" || kind == "u8") return 8;
  if (kind == "f2" || kind == "i2" || kind == "u2") return 2;
  if (kind == "b1" || kind == "i1" || kind == "u1") return 1;
  fail("{}: unsupported npy dtype '{}'", path, descr);
}

// Returns the text after `'key':` in the header dict, or fails.
std::string header_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::string quoted = "'" + key + "'";
  size_t pos = header.find(quoted);
  if (pos == std::string::npos) fail("{}: npy header has no '{}' key", path, key);
  pos = header.find(':', pos + quoted.size());
  if (pos == std::string::npos) fail("{}: malformed npy header", path);
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  return header.substr(pos);
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("{}: cannot open", path);
  // Every length read from the file is checked against the bytes it has
  // before anything is allocated for it.
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail("{}: not an npy file", path);
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!in.read(reinterpret_cast<char*>(len), 2)) fail("{}: truncated npy header", path);
    header_len = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char*>(len), 4)) fail("{}: truncated npy header", path);
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t(len[3]) << 24);
  } else {
    fail("{}: unsupported npy version {}", path, major);
  }
  if (header_len > file_size - static_cast<uint64_t>(in.tellg()))
    fail("{}: truncated npy header ({} bytes declared, the file has {})", path, header_len, file_size);
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail("{}: truncated npy header", path);

  NpyArray array;
  std::string descr = header_value(header, "descr", path);
  if (descr.empty() || descr[0] != '\'') fail("{}: malformed npy descr", path);
  array.descr = descr.substr(1, descr.find('\'', 1) - 1);
  if (header_value(header, "fortran_order", path).rfind("False", 0) != 0)
    fail("{}: Fortran-order npy arrays are not supported", path);
  std::string shape = header_value(header, "shape", path);
  if (shape.empty() || shape[0] != '(') fail("{}: malformed npy shape", path);
  if (shape.find(')') == std::string::npos) fail("{}: malformed npy shape", path);
  shape = shape.substr(0, shape.find(')') + 1);  // "(3, 256)" without the rest of the header
  std::istringstream dims(shape.substr(1, shape.size() - 2));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    const size_t first = dim.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const size_t last = dim.find_last_not_of(' ');
    const std::string_view digits = std::string_view(dim).substr(first, last - first + 1);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end != digits.data() + digits.size() || value < 0)
      fail("{}: npy shape {} has a dimension '{}' that is not a non-negative integer", path, shape, digits);
    array.shape.push_back(value);
  }
  const uint64_t available = file_size - static_cast<uint64_t>(in.tellg());
  const uint64_t element = element_size(array.descr, path);
  uint64_t bytes = element;
  // A zero dimension means no data, however large the other dimensions are.
  if (std::find(array.shape.begin(), array.shape.end(), 0) != array.shape.end()) bytes = 0;
  for (int64_t d : array.shape) {
    if (bytes == 0) break;
    const uint64_t next = bytes * static_cast<uint64_t>(d);
    if (next / static_cast<uint64_t>(d) != bytes || next > available)
      fail("{}: truncated npy data (shape {} needs more than the file's {} data bytes)", path, shape, available);
    bytes = next;
  }
  array.data.resize(bytes);
  if (!in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(array.data.size())))
    fail("{}: truncated npy data ({} bytes expected)", path, array.data.size());
  return array;
}

void write_npy(const std::string& path, const NpyArray& array) {
  size_t count = 1;
  for (int64_t d : array.shape) count *= static_cast<size_t>(d);
  if (count * element_size(array.descr, path) != array.data.size())
    fail("{}: npy data size does not match its shape", path);
  // numpy's tuple spelling: "()", "(2,)", "(2, 3)".
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  shape += array.shape.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + array.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("{}: cannot open for writing", path);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
  out.flush();
  if (!out) fail("{}: write failed", path);
}

}  // namespace spool
