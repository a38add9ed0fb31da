// Simulated cycles of a program: whole, or summed over kernels simulated
// alone with a memo keyed by each kernel's one-node program text.

#include <spool/search/fitness.hpp>

#include <spool/ir/text.hpp>
#include <spool/search/space.hpp>
#include <spool/sim/sim.hpp>

#include <map>

namespace spool::search {
namespace {

// Nodes that are buffers, not kernels.
bool is_buffer(Op op) { return op == Op::Input || op == Op::Weight; }

// The search simulates candidates on every thread at once, so no simulation
// takes a second thread for its DRAM rows; the programs come from
// lower::to_npu, which verified them.
sim::Options serial_sim() {
  sim::Options o;
  o.walk_ahead = false;
  o.threads = 1;
  o.verified = true;
  return o;
}

}  // namespace

SimulatedCycles::SimulatedCycles(target::NpuConfig config, lower::LowerOptions options)
    : config_(std::move(config)), options_(std::move(options)) {
  if (!options_.tile_cycles) options_.tile_cycles = sim::tile_timer(config_);
}

Graph SimulatedCycles::kernel_alone(const Graph& program, NodeId id) {
  const Node& node = program.node(id);
  Graph g("kernel");
  std::vector<Edge> inputs;
  std::map<uint32_t, NodeId> source_of;  // a producer read twice stays one buffer
  for (const Edge& e : node.inputs) {
    auto it = source_of.find(e.src.value);
    if (it == source_of.end()) {
      const Node& p = program.node(e.src);
      const NodeId s = g.add_source(Op::Input, NameAttr{"in" + std::to_string(source_of.size())}, p.dtype, p.shape);
      it = source_of.emplace(e.src.value, s).first;
    }
    inputs.push_back(Edge{it->second, e.view});
  }
  const NodeId k = op_info(node.op).cls == OpClass::Source ? g.add_source(node.op, node.attr, node.dtype, node.shape)
                                                            : g.add(node.op, std::move(inputs), node.attr);
  g.add_output("out", Edge{k, View{}});
  return g;
}

int64_t SimulatedCycles::kernels(const Graph& program,
                                 const std::map<std::string, lower::KernelChoice, std::less<>>& choices) const {
  int64_t total = 0;
  for (NodeId id : program.topo_order()) {
    if (is_buffer(program.node(id).op)) continue;
    const Graph alone = kernel_alone(program, id);
    std::string key = print_graph(alone);
    lower::LowerOptions options = options_;
    if (const auto it = choices.find(key); it != choices.end() && !it->second.is_default()) {
      const lower::KernelChoice choice = it->second;
      options.choice = [choice](const Graph&, NodeId) { return choice; };
      key += "#" + choice.to_string();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (const auto it = memo_.find(key); it != memo_.end()) {
        ++hits_;
        total += it->second;
        continue;
      }
    }
    // Simulated outside the lock; a kernel two threads meet at once is
    // simulated twice, to the same number.
    const lower::Lowered lowered = lower::to_npu(alone, config_, options);
    const int64_t cycles = sim::run(lowered.program, config_, serial_sim()).cycles;
    ++simulations_;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      memo_.emplace(key, cycles);
    }
    total += cycles;
  }
  return total;
}

int64_t SimulatedCycles::whole(const Graph& program,
                               const std::map<std::string, lower::KernelChoice, std::less<>>& choices) const {
  const lower::Lowered lowered = lower::to_npu(program, config_, with_choices(options_, choices));
  return sim::run(lowered.program, config_, serial_sim()).cycles;
}

size_t SimulatedCycles::memo_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memo_.size();
}

}  // namespace spool::search
