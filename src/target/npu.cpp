// Strict JSON config reader: every key of the schema in npu.hpp is
// required, checked for type and range, and keys not in the schema are
// errors. Messages are `SOURCE: ...` with the dotted key path.

#include <spool/target/npu.hpp>

#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace spool::target {
namespace {

using nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void error(const std::string& message) const { fail("{}: {}", source_, message); }

  // Marks `key` of the object at `path` as known and returns its value.
  const json& get(const json& object, const std::string& path, const std::string& key) {
    const std::string full = path.empty() ? key : path + "." + key;
    known_.insert(full);
    auto it = object.find(key);
    if (it == object.end()) error(fmt::format("missing key '{}'", full));
    return *it;
  }

  const json& object(const json& parent, const std::string& path, const std::string& key) {
    const json& v = get(parent, path, key);
    if (!v.is_object()) error(fmt::format("'{}' must be an object, got {}", join(path, key), type_name(v)));
    return v;
  }

  int64_t integer(const json& parent, const std::string& path, const std::string& key, int64_t lo, int64_t hi) {
    const json& v = get(parent, path, key);
    if (!v.is_number_integer() && !v.is_number_unsigned())
      error(fmt::format("'{}' must be an integer, got {}", join(path, key), type_name(v)));
    const int64_t value = v.get<int64_t>();
    if (value < lo || value > hi)
      error(fmt::format("'{}' must be between {} and {}, got {}", join(path, key), lo, hi, value));
    return value;
  }

  double number(const json& parent, const std::string& path, const std::string& key, double lo, double hi) {
    const json& v = get(parent, path, key);
    if (!v.is_number()) error(fmt::format("'{}' must be a number, got {}", join(path, key), type_name(v)));
    const double value = v.get<double>();
    if (!(value >= lo && value <= hi))
      error(fmt::format("'{}' must be between {} and {}, got {}", join(path, key), lo, hi, value));
    return value;
  }

  std::string string(const json& parent, const std::string& path, const std::string& key) {
    const json& v = get(parent, path, key);
    if (!v.is_string()) error(fmt::format("'{}' must be a string, got {}", join(path, key), type_name(v)));
    return v.get<std::string>();
  }

  // Reports the first key (in document order of a depth-first walk) that the
  // schema did not ask for.
  void check_unknown(const json& object, const std::string& path) const {
    for (auto it = object.begin(); it != object.end(); ++it) {
      const std::string full = join(path, it.key());
      // Any object may say where its numbers come from.
      if (it.key() == "source") {
        if (!it->is_string()) error(fmt::format("'{}' must be a string, got {}", full, type_name(*it)));
        continue;
      }
      if (!known_.count(full)) error(fmt::format("unknown key '{}'", full));
      if (it->is_object()) check_unknown(*it, full);
    }
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string source_;
  std::set<std::string> known_;
};

constexpr int64_t kBig = int64_t{1} << 40;

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

const std::vector<std::string>& vector_timing_classes() {
  static const std::vector<std::string> classes = [] {
    std::vector<std::string> out{"store"};
#define SPOOL_VOP(Enum, text, operands, kind, timing_class) out.emplace_back(timing_class);
#include <spool/npu/vector_ops.def>
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }();
  return classes;
}

NpuConfig parse_config(std::string_view json_text, const std::string& source) {
  Reader r(source);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    r.error(fmt::format("invalid JSON: {}", e.what()));
  }
  if (!root.is_object()) r.error("the config must be a JSON object");

  NpuConfig c;
  c.name = r.string(root, "", "name");
  c.cores = static_cast<int>(r.integer(root, "", "cores", 1, 64));
  c.core_clock_mhz = r.number(root, "", "core_clock_mhz", 1, 100000);
  c.issue_queue_depth = r.integer(root, "", "issue_queue_depth", 1, 4096);

  const json& launch = r.object(root, "", "launch");
  c.launch.fixed_cycles = r.integer(launch, "launch", "fixed_cycles", 0, kBig);
  c.launch.bytes_per_instruction = r.integer(launch, "launch", "bytes_per_instruction", 0, 4096);

  const json& sys = r.object(root, "", "systolic");
  c.systolic.arrays = static_cast<int>(r.integer(sys, "systolic", "arrays", 1, 4));
  c.systolic.rows = r.integer(sys, "systolic", "rows", 1, 4096);
  c.systolic.cols = r.integer(sys, "systolic", "cols", 1, 4096);
  c.systolic.weight_buffers = static_cast<int>(r.integer(sys, "systolic", "weight_buffers", 1, 2));

  const json& vec = r.object(root, "", "vector");
  c.vector.lanes = r.integer(vec, "vector", "lanes", 1, 65536);
  c.vector.vlen_bits = r.integer(vec, "vector", "vlen_bits", 32, 65536);
  if (c.vector.vlen_bits % 64 != 0 && c.vector.vlen_bits != 32)
    r.error(fmt::format("'vector.vlen_bits' must be 32 or a multiple of 64, got {}", c.vector.vlen_bits));
  c.vector.step_overhead_cycles = r.integer(vec, "vector", "step_overhead_cycles", 0, kBig);
  const json& slots = r.object(vec, "vector", "slots");
  for (int u = 0; u < kVectorUnits; ++u) c.vector.slots[u] = r.integer(slots, "vector.slots", kVectorUnitNames[u], 1, 64);
  const json& lane_reduce = r.object(vec, "vector", "lane_reduce");
  c.vector.lane_reduce.latency = r.integer(lane_reduce, "vector.lane_reduce", "latency", 1, 100000);
  c.vector.lane_reduce.interval = r.integer(lane_reduce, "vector.lane_reduce", "interval", 1, 100000);
  c.vector.lane_reduce.unit = VectorUnit::Xlu;
  const json& ops = r.object(vec, "vector", "ops");
  for (const std::string& cls : vector_timing_classes()) {
    const std::string path = "vector.ops." + cls;
    const json& op = r.object(ops, "vector.ops", cls);
    VectorOpTiming t;
    t.latency = r.integer(op, path, "latency", 1, 100000);
    t.interval = r.integer(op, path, "interval", 1, 100000);
    const std::string unit = r.string(op, path, "unit");
    int found = -1;
    for (int u = 0; u < kVectorUnits; ++u)
      if (unit == kVectorUnitNames[u]) found = u;
    if (found < 0)
      r.error(fmt::format("'{}.unit' must be one of alu, eup, xlu, load, store, got \"{}\"", path, unit));
    t.unit = static_cast<VectorUnit>(found);
    c.vector.ops[cls] = t;
  }

  const json& spad = r.object(root, "", "scratchpad");
  c.scratchpad.bytes_per_lane = r.integer(spad, "scratchpad", "bytes_per_lane", 64, kBig);
  c.scratchpad.port_bytes_per_cycle = r.integer(spad, "scratchpad", "port_bytes_per_cycle", 1, 65536);

  const json& dma = r.object(root, "", "dma");
  c.dma.request_bytes = r.integer(dma, "dma", "request_bytes", 1, 4096);
  if (!power_of_two(c.dma.request_bytes))
    r.error(fmt::format("'dma.request_bytes' must be a power of two, got {}", c.dma.request_bytes));
  c.dma.requests_per_cycle = r.integer(dma, "dma", "requests_per_cycle", 1, 1024);
  c.dma.max_outstanding = r.integer(dma, "dma", "max_outstanding", 1, 1 << 20);
  c.dma.setup_cycles = r.integer(dma, "dma", "setup_cycles", 0, kBig);

  const json& dram = r.object(root, "", "dram");
  c.dram.capacity_bytes = r.integer(dram, "dram", "capacity_bytes", 1, int64_t{1} << 56);
  c.dram.clock_mhz = r.number(dram, "dram", "clock_mhz", 1, 100000);
  c.dram.channels = static_cast<int>(r.integer(dram, "dram", "channels", 1, 1024));
  c.dram.bytes_per_cycle = r.integer(dram, "dram", "bytes_per_cycle", 1, 4096);
  c.dram.interleave_bytes = r.integer(dram, "dram", "interleave_bytes", 1, kBig);
  c.dram.latency_cycles = r.integer(dram, "dram", "latency_cycles", 0, 1000000);
  c.dram.banks = static_cast<int>(r.integer(dram, "dram", "banks", 1, 1024));
  c.dram.row_bytes = r.integer(dram, "dram", "row_bytes", 1, kBig);
  c.dram.t_rp = r.integer(dram, "dram", "t_rp", 0, 100000);
  c.dram.t_rcd = r.integer(dram, "dram", "t_rcd", 0, 100000);
  if (dram.contains("t_refi") || dram.contains("t_rfc")) {
    c.dram.t_refi = r.integer(dram, "dram", "t_refi", 1, 100000000);
    c.dram.t_rfc = r.integer(dram, "dram", "t_rfc", 0, 100000000);
    if (c.dram.t_rfc >= c.dram.t_refi)
      r.error(fmt::format("'dram.t_rfc' ({}) must be less than 'dram.t_refi' ({}): the channel would only refresh",
                          c.dram.t_rfc, c.dram.t_refi));
  }
  const std::string hash = r.string(dram, "dram", "address_hash");
  if (hash != "xor" && hash != "none") r.error(fmt::format("'dram.address_hash' must be \"xor\" or \"none\", got \"{}\"", hash));
  c.dram.xor_hash = hash == "xor";
  if (c.dram.xor_hash && !power_of_two(c.dram.channels))
    r.error(fmt::format("'dram.address_hash' \"xor\" needs a power-of-two 'dram.channels', got {}", c.dram.channels));
  if (c.dram.interleave_bytes % c.dma.request_bytes != 0)
    r.error(fmt::format("'dram.interleave_bytes' ({}) must be a multiple of 'dma.request_bytes' ({})",
                        c.dram.interleave_bytes, c.dma.request_bytes));
  if (c.dram.row_bytes % c.dram.interleave_bytes != 0)
    r.error(fmt::format("'dram.row_bytes' ({}) must be a multiple of 'dram.interleave_bytes' ({})",
                        c.dram.row_bytes, c.dram.interleave_bytes));

  const json& noc = r.object(root, "", "noc");
  c.noc.clock_mhz = r.number(noc, "noc", "clock_mhz", 1, 100000);
  c.noc.latency_cycles = r.integer(noc, "noc", "latency_cycles", 0, 1000000);
  c.noc.ports_per_core = r.integer(noc, "noc", "ports_per_core", 1, 1024);
  c.noc.port_bytes_per_cycle = r.integer(noc, "noc", "port_bytes_per_cycle", 1, 65536);

  r.check_unknown(root, "");
  return c;
}

std::string to_json(const NpuConfig& c) {
  json j;
  j["name"] = c.name;
  j["cores"] = c.cores;
  j["core_clock_mhz"] = c.core_clock_mhz;
  j["issue_queue_depth"] = c.issue_queue_depth;
  j["launch"] = {{"fixed_cycles", c.launch.fixed_cycles}, {"bytes_per_instruction", c.launch.bytes_per_instruction}};
  j["systolic"] = {{"arrays", c.systolic.arrays},
                   {"rows", c.systolic.rows},
                   {"cols", c.systolic.cols},
                   {"weight_buffers", c.systolic.weight_buffers}};
  json vec = {
      {"lanes", c.vector.lanes},
      {"vlen_bits", c.vector.vlen_bits},
      {"step_overhead_cycles", c.vector.step_overhead_cycles},
      {"lane_reduce", {{"latency", c.vector.lane_reduce.latency}, {"interval", c.vector.lane_reduce.interval}}}};
  for (int u = 0; u < kVectorUnits; ++u) vec["slots"][kVectorUnitNames[u]] = c.vector.slots[u];
  vec["ops"] = json::object();
  for (const auto& [cls, t] : c.vector.ops)
    vec["ops"][cls] = {
        {"latency", t.latency}, {"interval", t.interval}, {"unit", kVectorUnitNames[static_cast<int>(t.unit)]}};
  j["vector"] = std::move(vec);
  j["scratchpad"] = {{"bytes_per_lane", c.scratchpad.bytes_per_lane},
                     {"port_bytes_per_cycle", c.scratchpad.port_bytes_per_cycle}};
  j["dma"] = {{"request_bytes", c.dma.request_bytes},
              {"requests_per_cycle", c.dma.requests_per_cycle},
              {"max_outstanding", c.dma.max_outstanding},
              {"setup_cycles", c.dma.setup_cycles}};
  j["dram"] = {{"capacity_bytes", c.dram.capacity_bytes},
               {"clock_mhz", c.dram.clock_mhz},
               {"channels", c.dram.channels},
               {"bytes_per_cycle", c.dram.bytes_per_cycle},
               {"interleave_bytes", c.dram.interleave_bytes},
               {"latency_cycles", c.dram.latency_cycles},
               {"banks", c.dram.banks},
               {"row_bytes", c.dram.row_bytes},
               {"t_rp", c.dram.t_rp},
               {"t_rcd", c.dram.t_rcd},
               {"address_hash", c.dram.xor_hash ? "xor" : "none"}};
  if (c.dram.t_refi > 0) {
    j["dram"]["t_refi"] = c.dram.t_refi;
    j["dram"]["t_rfc"] = c.dram.t_rfc;
  }
  j["noc"] = {{"clock_mhz", c.noc.clock_mhz},
              {"latency_cycles", c.noc.latency_cycles},
              {"ports_per_core", c.noc.ports_per_core},
              {"port_bytes_per_cycle", c.noc.port_bytes_per_cycle}};
  return j.dump(2);
}

NpuConfig load_config(const std::string& name_or_path) {
  std::string path = name_or_path;
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (!is_path) path = std::string(SPOOL_CONFIG_DIR) + "/" + name_or_path + ".json";
  std::ifstream in(path);
  if (!in) {
    if (is_path) fail("cannot open NPU config '{}'", path);
    fail("unknown NPU config '{}' (no file {})", name_or_path, path);
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), is_path ? path : name_or_path + ".json");
}

}  // namespace spool::target
