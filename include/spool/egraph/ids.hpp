#pragma once
// Dense 32-bit ids of the e-graph engine.
//
// Every id is an index into a flat vector: e-classes (ClassId), e-nodes
// (NodeId), operators of the language (OpId) and interned attributes
// (AttrId). They are strong typedefs so a class id cannot be passed where a
// node id is expected. Ids are never reused.

#include <cstdint>
#include <functional>

namespace spool::egraph {

struct ClassId {
  uint32_t value = UINT32_MAX;
  constexpr bool valid() const { return value != UINT32_MAX; }
  constexpr auto operator<=>(const ClassId&) const = default;
};

struct NodeId {
  uint32_t value = UINT32_MAX;
  constexpr bool valid() const { return value != UINT32_MAX; }
  constexpr auto operator<=>(const NodeId&) const = default;
};

struct OpId {
  uint16_t value = UINT16_MAX;
  constexpr bool valid() const { return value != UINT16_MAX; }
  constexpr auto operator<=>(const OpId&) const = default;
};

// AttrId{0} is "no attribute".
struct AttrId {
  uint32_t value = 0;
  constexpr auto operator<=>(const AttrId&) const = default;
};

// A fast 64-bit mixer (the finaliser of splitmix64); used by every hash in
// the engine so results never depend on the standard library's std::hash.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
constexpr uint64_t hash_combine(uint64_t seed, uint64_t value) {
  return mix64(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

}  // namespace spool::egraph

template <>
struct std::hash<spool::egraph::ClassId> {
  size_t operator()(spool::egraph::ClassId id) const noexcept { return spool::egraph::mix64(id.value); }
};
