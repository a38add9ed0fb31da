#pragma once
// A hash that folds 64-bit words with one multiply each: for hash tables
// that confirm a hit by comparing values, where a hash_combine per field
// would cost more than the collisions it saves.

#include <cstdint>

namespace spool {

struct WordHash {
  uint64_t h = 0;
  void add(uint64_t v) { h = (h ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull; }
};

}  // namespace spool
