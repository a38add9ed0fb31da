#pragma once
// The language an e-graph holds: an op table and an attribute table, both
// filled at runtime.
//
// The engine knows nothing about the HLIR: a client registers its ops (name
// and arity) and interns its attributes (axes, views, constants, symbols,
// op-list strings) once, and e-nodes refer to both by dense id. Two
// attributes are the same value exactly when their ids are equal, so
// matching and hashing never look inside an attribute.
//
// Interning is thread-safe (regions are saturated in parallel and share one
// Language); reading an already interned attribute never takes a lock.
//
// SPOOL_EGRAPH_SERIAL builds the engine without oneTBB, for one thread only
// (the e-graph benchmark's static binary, bench/egraph): the attribute
// entries are then a std::deque (appends keep references valid; nothing
// reads while another thread appends) and a runner asked for more than one
// search thread throws. Every translation unit of a program must agree on it.

#include <spool/egraph/ids.hpp>

#ifndef SPOOL_EGRAPH_SERIAL
#define SPOOL_EGRAPH_SERIAL 0
#endif
#if SPOOL_EGRAPH_SERIAL
#include <deque>
#else
#include <tbb/concurrent_vector.h>
#endif

#include <any>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spool::egraph {

inline constexpr int kVariadic = -1;

struct OpDef {
  std::string name;
  int arity = 0;  // kVariadic: any number of children
};

class OpTable {
 public:
  // Registers an op; names are unique. Throws spool::Error on a duplicate.
  OpId add(std::string name, int arity);
  std::optional<OpId> find(std::string_view name) const;
  const OpDef& operator[](OpId op) const { return ops_[op.value]; }
  const std::string& name(OpId op) const { return ops_[op.value].name; }
  size_t size() const { return ops_.size(); }

  // Leaves the S-expression reader builds from bare tokens: a number becomes
  // a `number_op` node whose attribute is the interned value (int or float),
  // any other bare word that is not an op becomes a `symbol_op` node whose
  // attribute is the interned symbol. Unset means "not allowed".
  OpId number_op;
  OpId symbol_op;
  // Whether numerals are interned as floats (1 and 1.0 the same value) or,
  // when written without a point or exponent, as integers.
  bool float_numbers = false;

 private:
  std::vector<OpDef> ops_;
  std::unordered_map<std::string, OpId> by_name_;
};

enum class AttrKind : uint8_t { None, Int, Float, Symbol, Custom };

struct AttrEntry {
  AttrKind kind = AttrKind::None;
  int64_t i = 0;      // Int
  double f = 0.0;     // Float (compared by bit pattern)
  std::string text;   // Symbol: the name
  std::any payload;   // Custom: the client's typed value
  std::string (*print)(const std::any& payload) = nullptr;  // Custom: its printed form (for str())
};

class AttrTable {
 public:
  AttrTable();
  // A copy holds every entry under the same id (explicit: a table is copied
  // only on purpose, e.g. to start a language from one its rules were
  // compiled in).
  explicit AttrTable(const AttrTable& other);
  AttrTable& operator=(const AttrTable&) = delete;

  static constexpr AttrId none() { return AttrId{0}; }
  AttrId intern_int(int64_t value);
  AttrId intern_float(double value);
  AttrId intern_symbol(std::string_view name);
  // A new client value under a new id: the client indexes its values
  // itself (hlir::HlirLanguage finds a value seen before by its printed
  // form) and so knows this one is new. `print` gives its printed form when
  // one is asked for.
  AttrId add_custom(std::any payload, std::string (*print)(const std::any& payload));

  const AttrEntry& operator[](AttrId id) const { return entries_[id.value]; }
  AttrKind kind(AttrId id) const { return entries_[id.value].kind; }
  // The printed form: "5", "2.5", "x", or what a custom entry's print
  // function makes of its payload.
  std::string str(AttrId id) const;
  template <typename T>
  const T& payload(AttrId id) const {
    return std::any_cast<const T&>(entries_[id.value].payload);
  }
  size_t size() const { return entries_.size(); }

 private:
  AttrId intern(AttrEntry entry, std::string key);
  AttrId append(AttrEntry entry);  // under mutex_

#if SPOOL_EGRAPH_SERIAL
  std::deque<AttrEntry> entries_;
#else
  tbb::concurrent_vector<AttrEntry> entries_;
#endif
  mutable std::mutex mutex_;
  std::unordered_map<std::string, AttrId> by_key_;
};

// An op table and an attribute table: what patterns are parsed against and
// what an EGraph refers to (by reference; the Language outlives them).
struct Language {
  OpTable ops;
  AttrTable attrs;
};

}  // namespace spool::egraph
