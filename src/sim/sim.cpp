// Simulator entry point, functional memory, trace output and the report.

#include <spool/sim/sim.hpp>

#include <spool/npu/verify.hpp>
#include <spool/support/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace spool::sim {

using namespace spool::npu;

// ---- Memory -----------------------------------------------------------------

Memory::Memory(const Program& program) : program_(&program), roots_(program.buffers.size()) {
  for (size_t i = 0; i < program.buffers.size(); ++i)
    if (program.buffers[i].alias_of < 0) roots_[i].assign(program.buffer_elements(static_cast<int>(i)), 0.0);
}

int Memory::index(std::string_view buffer) const {
  const int i = program_->find_buffer(buffer);
  if (i < 0) fail("program '{}' has no buffer '@{}'", program_->name, buffer);
  return i;
}

double* Memory::data(int buffer) {
  const DramBuffer& b = program_->buffers[buffer];
  return b.alias_of < 0 ? roots_[buffer].data() : roots_[b.alias_of].data() + b.alias_offset;
}
const double* Memory::data(int buffer) const { return const_cast<Memory*>(this)->data(buffer); }

void Memory::write(std::string_view buffer, std::span<const double> values) {
  const int i = index(buffer);
  const int64_t n = program_->buffer_elements(i);
  if (static_cast<int64_t>(values.size()) != n)
    fail("buffer '@{}' holds {} elements, got {} values", buffer, n, values.size());
  const DType dtype = program_->buffers[i].dtype;
  double* out = data(i);
  for (int64_t j = 0; j < n; ++j) {
    const double v = values[j];
    out[j] = is_float(dtype)         ? round_to_float(dtype, v)
             : dtype == DType::Bool ? (v != 0.0 ? 1.0 : 0.0)
                                    : static_cast<double>(wrap_to_int(dtype, static_cast<int64_t>(v)));
  }
}

std::vector<double> Memory::read(std::string_view buffer) const {
  const int i = index(buffer);
  const double* p = data(i);
  return std::vector<double>(p, p + program_->buffer_elements(i));
}

// ---- Trace --------------------------------------------------------------------

int Trace::track(const std::string& name) {
  for (size_t i = 0; i < tracks.size(); ++i)
    if (tracks[i] == name) return static_cast<int>(i);
  tracks.push_back(name);
  return static_cast<int>(tracks.size()) - 1;
}

namespace {
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

void Trace::write_json(std::ostream& out) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out << R"({"ph":"M","pid":0,"tid":0,"name":"process_name","args":{"name":"npu"}})";
  for (size_t i = 0; i < tracks.size(); ++i) {
    out << fmt::format(",\n{{\"ph\":\"M\",\"pid\":0,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":\"{}\"}}}}",
                       i, escape(tracks[i]));
    out << fmt::format(",\n{{\"ph\":\"M\",\"pid\":0,\"tid\":{},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}}}",
                       i, i);
  }
  for (const Event& e : events)
    out << fmt::format(",\n{{\"ph\":\"X\",\"pid\":0,\"tid\":{},\"name\":\"{}\",\"ts\":{:.6f},\"dur\":{:.6f}}}", e.track,
                       escape(e.name), e.start_us, e.duration_us);
  out << "\n]}\n";
}

// ---- Report ---------------------------------------------------------------------

nlohmann::json Report::to_json() const {
  nlohmann::json j;
  j["program"] = program;
  j["config"] = config;
  j["mode"] = mode == Mode::Functional ? "functional" : "timing";
  j["cycles"] = cycles;
  j["time_ms"] = time_ms;
  j["dram_bytes"] = dram_read_bytes + dram_write_bytes;
  j["dram_read_bytes"] = dram_read_bytes;
  j["dram_write_bytes"] = dram_write_bytes;
  j["dram_useful_bytes"] = dram_useful_bytes;
  j["dram_row_hits"] = dram_row_hits;
  j["dram_row_misses"] = dram_row_misses;
  j["flops"] = flops;
  j["matmul_flops"] = matmul_flops;
  j["vector_flops"] = vector_flops;
  j["vector_element_ops"] = vector_element_ops;
  j["spad_peak_bytes"] = spad_peak_bytes;
  j["roofline_cycles"] = roofline_cycles;
  j["kernels"] = kernels;
  nlohmann::json units_json = nlohmann::json::array();
  for (const UnitStats& u : units)
    units_json.push_back({{"name", u.name}, {"busy_cycles", u.busy_cycles}, {"utilisation", u.utilisation}});
  j["units"] = units_json;
  nlohmann::json kernels_json = nlohmann::json::array();
  for (const KernelStats& k : kernel_stats)
    kernels_json.push_back({{"name", k.name},
                            {"core", k.core},
                            {"launch_cycle", k.launch_cycle},
                            {"start_cycle", k.start_cycle},
                            {"end_cycle", k.end_cycle}});
  j["kernel_stats"] = kernels_json;
  return j;
}

std::string Report::to_text() const {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  std::string out;
  out += fmt::format("program          {}\n", program);
  out += fmt::format("config           {}\n", config);
  out += fmt::format("mode             {}\n", mode == Mode::Functional ? "functional" : "timing");
  out += fmt::format("kernels          {}\n", kernels);
  out += fmt::format("cycles           {}\n", cycles);
  out += fmt::format("time             {:.6f} ms\n", time_ms);
  out += fmt::format("roofline cycles  {} (the run reaches {:.1f}% of the roofline)\n", roofline_cycles,
                     cycles > 0 ? 100.0 * static_cast<double>(roofline_cycles) / static_cast<double>(cycles) : 0.0);
  out += fmt::format("flops            {} (matmul {}, vector {})\n", flops, matmul_flops, vector_flops);
  out += fmt::format("dram read        {} B ({:.2f} MiB)\n", dram_read_bytes, mib(dram_read_bytes));
  out += fmt::format("dram written     {} B ({:.2f} MiB)\n", dram_write_bytes, mib(dram_write_bytes));
  out += fmt::format("dram rows        {} hits, {} misses\n", dram_row_hits, dram_row_misses);
  out += fmt::format("scratchpad peak  {} B ({:.2f} MiB)\n", spad_peak_bytes, mib(spad_peak_bytes));
  out += "unit                  busy cycles   utilisation\n";
  for (const UnitStats& u : units)
    out += fmt::format("  {:<18} {:>13} {:>12.1f}%\n", u.name, u.busy_cycles, 100.0 * u.utilisation);
  out += "kernel              core   launch cycle      end cycle         cycles\n";
  for (const KernelStats& k : kernel_stats)
    out += fmt::format("  {:<18} {:>4} {:>14} {:>14} {:>14}\n", k.name, k.core, k.launch_cycle, k.end_cycle,
                       k.end_cycle - k.launch_cycle);
  return out;
}

// ---- run -------------------------------------------------------------------------

Report run(const Program& program, const target::NpuConfig& config, const Options& options) {
  const auto start = std::chrono::steady_clock::now();
  if (!options.verified) verify_or_throw(program);
  const double verify_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Report report = simulate_timing(program, config, options.trace, options.replay, options.progress, options.walk_ahead,
                                  options.threads);
  report.profile.verify_ms = verify_ms;
  report.profile.total_ms += verify_ms;
  report.mode = options.mode;
  if (options.mode == Mode::Functional) {
    if (!options.memory) fail("functional simulation of '{}' needs a memory image", program.name);
    execute_functional(program, *options.memory);
  }
  return report;
}

}  // namespace spool::sim
