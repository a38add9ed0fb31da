// build_id(): the NT_GNU_BUILD_ID note of the loaded object whose segments
// hold this function, found with dl_iterate_phdr.

#include <spool/support/build_id.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace spool {
namespace {

struct Search {
  uintptr_t address = 0;
  std::string id;
};

// ELF notes: a header, the name and the descriptor, each padded to 4 bytes.
std::string note_id(const char* p, size_t size) {
  size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) h;
    std::memcpy(&h, p + at, sizeof h);
    const size_t name = at + sizeof h, desc = name + ((h.n_namesz + 3) & ~size_t{3});
    const size_t end = desc + ((h.n_descsz + 3) & ~size_t{3});
    if (end > size) break;
    if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && std::memcmp(p + name, "GNU", 4) == 0) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(p + desc);
      return fmt::format("{:02x}", fmt::join(bytes, bytes + h.n_descsz, ""));
    }
    at = end;
  }
  return {};
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && search->address >= start && search->address < start + ph.p_memsz) holds = true;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    search->id = note_id(reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz);
    if (!search->id.empty()) break;
  }
  return 1;
}

}  // namespace

const std::string& build_id() {
  static const std::string id = [] {
    Search search;
    search.address = reinterpret_cast<uintptr_t>(&build_id);
    dl_iterate_phdr(visit, &search);
    return search.id;
  }();
  return id;
}

}  // namespace spool
