// NPU configs: the shipped ones load; every kind of config error names the
// key path with an exact message.

#include <spool/target/npu.hpp>
#include <spool/support/error.hpp>

#include <spool/models/workloads.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace spool;
using nlohmann::json;

namespace {

json toy_json() {
  std::ifstream in(std::string(SPOOL_SOURCE_DIR) + "/configs/toy.json");
  REQUIRE(in);
  return json::parse(in);
}

std::string error_of(const json& j) {
  try {
    (void)target::parse_config(j.dump(), "toy.json");
  } catch (const spool::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("config: the shipped configs load with their documented parameters") {
  const target::NpuConfig v3 = target::load_config("tpuv3");
  CHECK(v3.name == "tpuv3");
  CHECK(v3.cores == 1);
  CHECK(v3.core_clock_mhz == 940);
  CHECK(v3.systolic.arrays == 2);
  CHECK(v3.systolic.rows == 128);
  CHECK(v3.vector.lanes == 128);
  CHECK(v3.vector.vlen_bits == 256);
  CHECK(v3.spad_bytes() == 128 * 128 * 1024);
  CHECK(v3.dram.channels == 16);
  CHECK(v3.dma.request_bytes == 32);
  CHECK(v3.noc.latency_cycles == 10);
  CHECK(v3.dram_bytes_per_second() == doctest::Approx(450.56e9));

  const target::NpuConfig toy = target::load_config("toy");
  CHECK(toy.cores == 1);
  CHECK(toy.systolic.arrays == 1);
  CHECK(toy.systolic.rows == 8);
  CHECK(toy.vector.lanes == 8);
  CHECK(toy.scratchpad.bytes_per_lane == 32 * 1024);
  CHECK(toy.dram.channels == 1);

  // The vector unit: 2-D registers, VLIW slots, units per op class.
  CHECK(v3.vector.lanes == 128);
  CHECK(v3.vector.vlen_bits == 8 * 32);
  CHECK(v3.vector.slots[static_cast<int>(target::VectorUnit::Alu)] == 2);
  CHECK(v3.vector.ops.at("exp").unit == target::VectorUnit::Eup);
  CHECK(v3.vector.ops.at("add").unit == target::VectorUnit::Alu);
  CHECK(v3.vector.ops.at("store").unit == target::VectorUnit::Store);
  CHECK(v3.vector.lane_reduce.latency > v3.vector.ops.at("add").latency);

  const target::NpuConfig v4 = target::load_config("tpuv4");
  CHECK(v4.systolic.arrays == 4);
  CHECK(v4.core_clock_mhz == 1050);
  CHECK(v4.dram.channels > v3.dram.channels);

  // By path as well as by name.
  CHECK(target::load_config(std::string(SPOOL_SOURCE_DIR) + "/configs/toy.json").name == "toy");
}

TEST_CASE("config: errors name the key path") {
  json j = toy_json();
  CHECK(error_of(j) == "no error");

  json unknown = j;
  unknown["systolic"]["size"] = 8;
  CHECK(error_of(unknown) == "toy.json: unknown key 'systolic.size'");

  json unknown_top = j;
  unknown_top["frequency"] = 1;
  CHECK(error_of(unknown_top) == "toy.json: unknown key 'frequency'");

  json unknown_op = j;
  unknown_op["vector"]["ops"]["tanh"] = {{"latency", 1}, {"interval", 1}};
  CHECK(error_of(unknown_op) == "toy.json: unknown key 'vector.ops.tanh'");

  json bad_unit = j;
  bad_unit["vector"]["ops"]["exp"]["unit"] = "fpu";
  CHECK(error_of(bad_unit) == "toy.json: 'vector.ops.exp.unit' must be one of alu, eup, xlu, load, store, got \"fpu\"");

  json no_slots = j;
  no_slots["vector"]["slots"].erase("xlu");
  CHECK(error_of(no_slots) == "toy.json: missing key 'vector.slots.xlu'");

  json zero_slots = j;
  zero_slots["vector"]["slots"]["alu"] = 0;
  CHECK(error_of(zero_slots) == "toy.json: 'vector.slots.alu' must be between 1 and 64, got 0");

  // Any object may say where its numbers come from, as a string.
  json sourced = j;
  sourced["source"] = "a paper, figure 3";
  sourced["dram"]["source"] = "a data sheet";
  CHECK(error_of(sourced) == "no error");
  json bad_source = j;
  bad_source["vector"]["source"] = 3;
  CHECK(error_of(bad_source) == "toy.json: 'vector.source' must be a string, got integer");

  json wrong_type = j;
  wrong_type["systolic"]["rows"] = "8";
  CHECK(error_of(wrong_type) == "toy.json: 'systolic.rows' must be an integer, got string");

  json fractional = j;
  fractional["dram"]["channels"] = 1.5;
  CHECK(error_of(fractional) == "toy.json: 'dram.channels' must be an integer, got number");

  json not_object = j;
  not_object["dma"] = 3;
  CHECK(error_of(not_object) == "toy.json: 'dma' must be an object, got integer");

  json impossible = j;
  impossible["systolic"]["arrays"] = 5;
  CHECK(error_of(impossible) == "toy.json: 'systolic.arrays' must be between 1 and 4, got 5");

  json zero_clock = j;
  zero_clock["core_clock_mhz"] = 0;
  CHECK(error_of(zero_clock) == "toy.json: 'core_clock_mhz' must be between 1 and 100000, got 0");

  json missing = j;
  missing["dram"].erase("channels");
  CHECK(error_of(missing) == "toy.json: missing key 'dram.channels'");

  // Refresh is optional, and needs both figures, t_rfc below t_refi.
  json refresh = j;
  refresh["dram"]["t_refi"] = 3900;
  refresh["dram"]["t_rfc"] = 350;
  CHECK(error_of(refresh) == "no error");
  json half_refresh = j;
  half_refresh["dram"]["t_rfc"] = 350;
  CHECK(error_of(half_refresh) == "toy.json: missing key 'dram.t_refi'");
  json only_refresh = refresh;
  only_refresh["dram"]["t_rfc"] = 3900;
  CHECK(error_of(only_refresh) ==
        "toy.json: 'dram.t_rfc' (3900) must be less than 'dram.t_refi' (3900): the channel would only refresh");

  json missing_op = j;
  missing_op["vector"]["ops"].erase("exp");
  CHECK(error_of(missing_op) == "toy.json: missing key 'vector.ops.exp'");

  json interleave = j;
  interleave["dram"]["interleave_bytes"] = 100;
  CHECK(error_of(interleave) == "toy.json: 'dram.interleave_bytes' (100) must be a multiple of 'dma.request_bytes' (32)");

  json hash = j;
  hash["dram"]["channels"] = 3;
  CHECK(error_of(hash) == "toy.json: 'dram.address_hash' \"xor\" needs a power-of-two 'dram.channels', got 3");

  json request = j;
  request["dma"]["request_bytes"] = 48;
  CHECK(error_of(request) == "toy.json: 'dma.request_bytes' must be a power of two, got 48");

  CHECK_THROWS_WITH_AS(target::parse_config("{\"name\": ", "cut.json"),
                       doctest::Contains("cut.json: invalid JSON: "), spool::Error);
  // A number too large for a double (found by fuzz_npu_config).
  CHECK_THROWS_WITH_AS(target::parse_config("{\"name\": 1e999}", "big.json"),
                       doctest::Contains("big.json: invalid JSON: "), spool::Error);
  CHECK_THROWS_WITH_AS(target::load_config("no_such_npu"), doctest::Contains("unknown NPU config 'no_such_npu'"),
                       spool::Error);
}

TEST_CASE("workload specs are checked") {
  const target::NpuConfig toy = target::load_config("toy");
  CHECK_THROWS_WITH_AS(models::compile_workload("gemm:2x3", toy), "workload 'gemm:2x3': expected 3 dimensions separated by 'x'",
                       spool::Error);
  CHECK_THROWS_WITH_AS(models::compile_workload("gemm:2x0x3", toy), "workload 'gemm:2x0x3': '0' is not a positive integer",
                       spool::Error);
  CHECK_THROWS_WITH_AS(models::compile_workload("bert:huge", toy), "workload 'bert:huge': bert size must be base, large or xlarge",
                       spool::Error);
  CHECK_THROWS_WITH_AS(models::compile_workload("conv:3x3", toy),
                       "unknown workload 'conv:3x3' (expected one of: gemm:MxKxN, layernorm:RxC, softmax:RxC, "
                       "attention:HxSxD, bert:base|large|xlarge, llama:LAYERS)",
                       spool::Error);
}
