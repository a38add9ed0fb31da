// Op and attribute tables of an e-graph language.

#include <spool/egraph/language.hpp>
#include <spool/support/error.hpp>

#include <bit>
#include <cstring>

namespace spool::egraph {

OpId OpTable::add(std::string name, int arity) {
  if (by_name_.count(name)) fail("op '{}' is registered twice", name);
  if (arity < kVariadic || arity > 255) fail("op '{}' has an invalid arity {}", name, arity);
  if (ops_.size() >= UINT16_MAX) fail("too many ops (op '{}')", name);
  OpId id{static_cast<uint16_t>(ops_.size())};
  by_name_.emplace(name, id);
  ops_.push_back(OpDef{std::move(name), arity});
  return id;
}

std::optional<OpId> OpTable::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

AttrTable::AttrTable() { entries_.push_back(AttrEntry{}); }

AttrTable::AttrTable(const AttrTable& other) {
  std::lock_guard lock(other.mutex_);
  entries_.assign(other.entries_.begin(), other.entries_.end());
  by_key_ = other.by_key_;
}

AttrId AttrTable::intern(AttrEntry entry, std::string key) {
  std::lock_guard lock(mutex_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  const AttrId id = append(std::move(entry));
  by_key_.emplace(std::move(key), id);
  return id;
}

AttrId AttrTable::append(AttrEntry entry) {
  SPOOL_ASSERT(entries_.size() < UINT32_MAX, "attribute table overflow");
  const AttrId id{static_cast<uint32_t>(entries_.size())};
  entries_.push_back(std::move(entry));
  return id;
}

AttrId AttrTable::intern_int(int64_t value) {
  AttrEntry e;
  e.kind = AttrKind::Int;
  e.i = value;
  return intern(std::move(e), fmt::format("i:{}", value));
}

AttrId AttrTable::intern_float(double value) {
  AttrEntry e;
  e.kind = AttrKind::Float;
  e.f = value;
  // By bit pattern: -0.0 and 0.0 differ, a NaN equals itself.
  return intern(std::move(e), fmt::format("f:{:016x}", std::bit_cast<uint64_t>(value)));
}

AttrId AttrTable::intern_symbol(std::string_view name) {
  AttrEntry e;
  e.kind = AttrKind::Symbol;
  e.text = std::string(name);
  return intern(std::move(e), fmt::format("s:{}", name));
}

AttrId AttrTable::add_custom(std::any payload, std::string (*print)(const std::any& payload)) {
  AttrEntry e;
  e.kind = AttrKind::Custom;
  e.payload = std::move(payload);
  e.print = print;
  std::lock_guard lock(mutex_);
  return append(std::move(e));
}

std::string AttrTable::str(AttrId id) const {
  const AttrEntry& e = entries_[id.value];
  switch (e.kind) {
    case AttrKind::None: return "";
    case AttrKind::Int: return fmt::format("{}", e.i);
    case AttrKind::Float: return fmt::format("{}", e.f);
    case AttrKind::Symbol: return e.text;
    case AttrKind::Custom: return e.print(e.payload);
  }
  return "";
}

}  // namespace spool::egraph
