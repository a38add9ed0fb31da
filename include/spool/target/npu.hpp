#pragma once
// The target description: an NPU's hardware configuration, read from JSON
// (configs/*.json). One description serves every stage that needs the
// machine: the extraction cost (compile), the lowering's tiles and the
// simulator.
//
// Every key is required and every key is checked: an unknown key, a value of
// the wrong type, or an impossible value is a spool::Error naming the key
// path (`dram.channels`); nothing is silently defaulted. Any object may hold
// a "source" string saying where its numbers come from (not read otherwise). Schema (units in
// brackets; "cycles" are cycles of the clock of that section):
//
//   name                    string
//   cores                   1..64 cores, each with the units below
//   core_clock_mhz          core clock (systolic arrays, vector unit, DMA issue, scratchpad)
//   issue_queue_depth       ops an in-order front end may queue per unit before it stalls
//   launch.fixed_cycles     per-kernel launch: doorbell, unit reset and synchronisation
//   launch.bytes_per_instruction  kernel code size per static statement, fetched from DRAM
//   systolic.arrays         1..4 weight-stationary arrays per core
//   systolic.rows/cols      array size N x N (rows = reduction dim k, cols = output dim n)
//   systolic.weight_buffers 1 or 2: 2 = shadow weight registers, the next weight tile
//                           preloads while the current one streams
//   vector.lanes, vector.vlen_bits   a vector register: lanes x VLEN bits (tpuv3: 128 lanes x
//                           8 sublanes of 32 bits); a tile's columns map to lanes, its rows to
//                           sublanes (VLEN / element bits rows per register)
//   vector.step_overhead_cycles      issue overhead of one vector step (loop setup)
//   vector.slots.{alu,eup,xlu,load,store}  ops of each unit issued per cycle (VLIW slots)
//   vector.lane_reduce.{latency,interval}  one register reduced across its lanes on the
//                           cross-lane unit (xlu)
//   vector.ops.CLASS.{latency,interval,unit}  pipeline latency, cycles a slot is busy per
//                           register, and the unit, for every timing class of vector_ops.def
//                           and "store"
//   scratchpad.bytes_per_lane        capacity per lane (the scratchpad is lanes * this)
//   scratchpad.port_bytes_per_cycle  per-lane bank port width (DMA fill and vector access)
//   dma.request_bytes       DRAM request size (the DMA engine splits descriptors into these)
//   dma.requests_per_cycle  request issue rate of the core's DMA engine
//   dma.max_outstanding     outstanding-request limit (bounds bandwidth by Little's law)
//   dma.setup_cycles        per-descriptor setup of the DMA engine
//   dram.capacity_bytes     bytes of DRAM (HBM) the config's cores share: what a
//                           program's footprint must fit in
//   dram.clock_mhz, dram.channels, dram.bytes_per_cycle (per channel),
//   dram.interleave_bytes   address interleaving granule across channels
//   dram.latency_cycles     access latency (row hit), dram.banks per channel,
//   dram.row_bytes          row-buffer size, dram.t_rp / dram.t_rcd  precharge / activate
//   dram.t_refi, dram.t_rfc refresh interval and all-bank refresh time (optional,
//                           both or neither; a channel serves nothing while it refreshes)
//   dram.address_hash       "xor" (channel = XOR-fold of the granule index; needs
//                           power-of-two channels) or "none" (granule modulo channels)
//   noc.clock_mhz, noc.latency_cycles (one way), noc.ports_per_core, noc.port_bytes_per_cycle

// Where the shipped numbers come from (configs/tpuv3.json):
//  - 940 MHz core, 2 MXUs of 128 x 128 with double-buffered weights (the TPU
//    loads the next weight tile while the current one streams);
//  - 128 lanes x 256-bit VLEN, 128 KiB scratchpad per lane (16 MiB);
//  - HBM2: 16 GiB per core; 16 channels x 32 B per cycle at 880 MHz = 450.6 GB/s
//    (the chip's public 900 GB/s over its two cores), 256 B channel
//    interleave with XOR hashing, 16 banks of 1 KiB rows, tRP = tRCD = 14
//    cycles (~16 ns), ~100 cycles access latency;
//  - DMA: 32 B requests, 16 per cycle (512 B/cycle, above the DRAM peak), and 2048
//    outstanding, enough for the peak over a ~120-cycle round trip
//    (Little's law: 16 * 120 = 1920);
//  - network: 10-cycle latency, two 512 B/cycle ports;
//  - the vector unit as 8 x 128 registers with 2 ALU, 1 extended (exp, rsqrt,
//    ...), 1 cross-lane, 1 load and 1 store slot per cycle; latencies and
//    intervals with their sources in the config's "source" strings.
// toy.json is a small machine for tests; tpuv4.json is TPU v4-like
// (2 cores at 1050 MHz, 4 MXUs each, HBM2e 32 channels at 1200 MHz).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spool::target {

// The vector unit's issue slots: each vector op class runs on one of them.
enum class VectorUnit : uint8_t { Alu, Eup, Xlu, Load, Store };
inline constexpr int kVectorUnits = 5;
inline constexpr const char* kVectorUnitNames[kVectorUnits] = {"alu", "eup", "xlu", "load", "store"};

struct VectorOpTiming {
  int64_t latency = 1;
  int64_t interval = 1;  // cycles one slot of its unit is busy per register
  VectorUnit unit = VectorUnit::Alu;
};

struct NpuConfig {
  std::string name;
  int cores = 1;
  double core_clock_mhz = 0;
  int64_t issue_queue_depth = 0;

  struct {
    int64_t fixed_cycles = 0;
    int64_t bytes_per_instruction = 0;
  } launch;
  struct {
    int arrays = 0;
    int64_t rows = 0;
    int64_t cols = 0;
    int weight_buffers = 0;
  } systolic;
  struct {
    int64_t lanes = 0;
    int64_t vlen_bits = 0;
    int64_t step_overhead_cycles = 0;
    int64_t slots[kVectorUnits] = {1, 1, 1, 1, 1};  // ops of each unit issued per cycle
    VectorOpTiming lane_reduce;                      // one register reduced across its lanes (on the xlu)
    std::map<std::string, VectorOpTiming> ops;       // by timing class
  } vector;
  struct {
    int64_t bytes_per_lane = 0;
    int64_t port_bytes_per_cycle = 0;
  } scratchpad;
  struct {
    int64_t request_bytes = 0;
    int64_t requests_per_cycle = 0;
    int64_t max_outstanding = 0;
    int64_t setup_cycles = 0;
  } dma;
  struct {
    double clock_mhz = 0;
    int channels = 0;
    int64_t bytes_per_cycle = 0;
    int64_t interleave_bytes = 0;
    int64_t latency_cycles = 0;
    int banks = 0;
    int64_t row_bytes = 0;
    int64_t capacity_bytes = 0;
    int64_t t_rp = 0;
    int64_t t_rcd = 0;
    // All-bank refresh: every t_refi DRAM cycles a channel refreshes for
    // t_rfc cycles and serves nothing (t_refi 0: no refresh).
    int64_t t_refi = 0;
    int64_t t_rfc = 0;
    bool xor_hash = false;
  } dram;
  struct {
    double clock_mhz = 0;
    int64_t latency_cycles = 0;
    int64_t ports_per_core = 0;
    int64_t port_bytes_per_cycle = 0;
  } noc;

  int64_t spad_bytes() const { return vector.lanes * scratchpad.bytes_per_lane; }
  // Peak DRAM bandwidth over all channels, in bytes per second.
  double dram_bytes_per_second() const { return dram.channels * dram.bytes_per_cycle * dram.clock_mhz * 1e6; }
  // The share of time a channel is not refreshing, and the bandwidth that
  // leaves: what a long stream can sustain (the analytic costs use it).
  double dram_available() const {
    return dram.t_refi > 0 ? static_cast<double>(dram.t_refi - dram.t_rfc) / static_cast<double>(dram.t_refi) : 1.0;
  }
  double dram_sustained_bytes_per_second() const { return dram_bytes_per_second() * dram_available(); }
};

// Parses a config from JSON text; `source` names it in error messages.
NpuConfig parse_config(std::string_view json_text, const std::string& source);

// The config as JSON that parse_config reads back to the same config
// (without the "source" notes): a canonical text of everything it sets.
std::string to_json(const NpuConfig& config);

// The timing classes every config's vector.ops must price: one per class of
// npu/vector_ops.def, and "store", sorted.
const std::vector<std::string>& vector_timing_classes();

// Loads a config from a file path, or by name ("tpuv3") from the configs/
// directory of the source tree.
NpuConfig load_config(const std::string& name_or_path);

}  // namespace spool::target
