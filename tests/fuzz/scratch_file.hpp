#pragma once
// For fuzz targets whose reader takes a path: the input is written to an
// anonymous in-memory file (memfd_create) and read back through its
// /proc/self/fd path. A file under /tmp would do as well, but rewriting one
// on disk for every input makes a fuzzer some forty times slower, and a
// crash would leave it behind.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace spool::fuzz {

class ScratchFile {
 public:
  // `name` names the file in /proc/self/fd's link, e.g. "config.json".
  explicit ScratchFile(const char* name) : fd_(::memfd_create(name, 0)) {
    if (fd_ < 0) die("memfd_create");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~ScratchFile() { ::close(fd_); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with the input; returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) die("ftruncate");
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) die("pwrite");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void die(const char* what) {
    std::perror(what);
    std::abort();
  }

  int fd_;
  std::string path_;
};

}  // namespace spool::fuzz
