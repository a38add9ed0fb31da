// Step 4 of auto_roll (see auto_roll.cpp): a checked candidate rolled into
// a loop, either in the searched graph itself or, for the first roll, in
// the copy build_survivors made of it (first_roll.cpp).

#include "roller.hpp"

#include <spool/support/error.hpp>

#include <map>

namespace spool::roll::detail {
namespace {

// The markers of one loop, added to `g` for the candidate `found` of the
// searched graph.
class LoopBuilder {
 public:
  LoopBuilder(Graph& g, const Found& found, int64_t loop_id, const std::vector<NodeId>* id_in_g)
      : g_(g),
        order_(found.order),
        c_(found.candidate),
        loop_id_(loop_id),
        trips_(static_cast<int64_t>(found.candidate.count)),
        id_in_g_(id_in_g) {}

  // Entry markers, one per slot and per distinct outside input, with
  // occurrence 0's inputs rewired to them; returns the loop_start of each
  // slot position.
  std::map<size_t, NodeId> add_entries() {
    std::map<size_t, NodeId> start_of;  // slot position -> loop_start
    std::map<std::vector<uint32_t>, NodeId> entry_of;
    int64_t slot_index = 0;
    for (size_t j = 0; j < c_.period; ++j) {
      for (size_t i = 0; i < c_.plans[j].size(); ++i) {
        const InputPlan& plan = c_.plans[j][i];
        NodeId marker;
        switch (plan.kind) {
          case InputPlan::Internal:
            continue;
          case InputPlan::Carried: {
            auto it = start_of.find(plan.position);
            if (it == start_of.end())
              it = start_of
                       .emplace(plan.position, add_marker(Op::LoopStart, {Edge{in_g(plan.sources.front()), {}}},
                                                          LoopAttr{loop_id_, trips_, slot_index++}))
                       .first;
            marker = it->second;
            break;
          }
          case InputPlan::Static:
          case InputPlan::PerIteration: {
            std::vector<uint32_t> key{static_cast<uint32_t>(plan.kind)};
            for (const NodeId s : plan.sources) key.push_back(s.value);
            auto it = entry_of.find(key);
            if (it == entry_of.end()) {
              EdgeList sources;
              sources.reserve(plan.sources.size());
              for (const NodeId s : plan.sources) sources.push_back(Edge{in_g(s), {}});
              const Op op = plan.kind == InputPlan::Static ? Op::LoopInputStatic : Op::LoopInput;
              it = entry_of.emplace(key, add_marker(op, std::move(sources), LoopAttr{loop_id_, trips_, 0})).first;
            }
            marker = it->second;
            break;
          }
        }
        g_.set_input(in_g(at(0, j)), i, Edge{marker, g_.node(in_g(at(0, j))).inputs[i].view});
      }
    }
    return start_of;
  }

  // Exit markers, and outside readers rewired to them. The outside uses and
  // `is_output` describe the graph from before the rewrite, `before`: an
  // output is rewired only while its own node is.
  void add_exits(const std::map<size_t, NodeId>& start_of, const Graph& before, const std::vector<bool>& is_output) {
    std::map<size_t, NodeId> end_of;
    for (const auto& [position, start] : start_of)
      end_of[position] = add_marker(Op::LoopEnd, {Edge{in_g(at(0, position)), {}}, Edge{start, {}}},
                                    LoopAttr{loop_id_, trips_, std::get<LoopAttr>(g_.node(start).attr).index});
    auto use = c_.outside_uses.begin();
    for (size_t k = 0; k < c_.count; ++k) {
      for (size_t j = 0; j < c_.period; ++j) {
        if (!c_.read_outside[k * c_.period + j]) continue;
        const NodeId node = at(k, j);
        NodeId exit;
        if (k + 1 == c_.count && end_of.count(j))
          exit = end_of.at(j);
        else
          exit = add_marker(Op::LoopOutput, {Edge{in_g(at(0, j)), {}}},
                            LoopAttr{loop_id_, trips_, static_cast<int64_t>(k)});
        // Rewire outside readers only (not the occurrences, not the markers).
        const uint32_t position = static_cast<uint32_t>(k * c_.period + j);
        while (use != c_.outside_uses.end() && use->position < position) ++use;
        for (; use != c_.outside_uses.end() && use->position == position; ++use)
          g_.set_input(in_g(use->user), use->input, Edge{exit, g_.node(in_g(use->user)).inputs[use->input].view});
        if (is_output[node.value])
          for (size_t o = 0; o < g_.outputs().size(); ++o)
            if (before.outputs()[o].edge.src == node) g_.set_output(o, Edge{exit, g_.outputs()[o].edge.view});
      }
    }
  }

  // The other occurrences go, readers before producers, and with them the
  // constants and iotas only they read (occurrence 0's copies serve all).
  // Only in place: g is then the searched graph, its ids, no canonical
  // renaming.
  void remove_other_occurrences() {
    std::vector<uint8_t> is_read(g_.id_bound(), 0);
    std::vector<NodeId> read_sources;
    for (size_t k = 1; k < c_.count; ++k)
      for (size_t j = 0; j < c_.period; ++j)
        for (const Edge& e : g_.node(at(k, j)).inputs)
          if (is_value_source(g_.node(e.src)) && !is_read[e.src.value]) {
            read_sources.push_back(e.src);
            is_read[e.src.value] = 1;
          }
    for (size_t k = c_.count; k-- > 1;)
      for (size_t j = c_.period; j-- > 0;) g_.remove(at(k, j));
    for (const NodeId id : read_sources)
      if (g_.use_count(id) == 0) g_.remove(id);
  }

 private:
  // Ids of the searched graph (the candidate's, the search's) as ids of g.
  NodeId in_g(NodeId id) const { return id_in_g_ ? (*id_in_g_)[id.value] : id; }
  NodeId at(size_t k, size_t j) const { return order_[c_.start + k * c_.period + j]; }

  // A marker has the type of its first input, read whole. check() made sure
  // a slot's init has its state's type, and the sources of one loop_input
  // are read at one position of every occurrence; should they differ in
  // type all the same, add() reports it.
  NodeId add_marker(Op op, EdgeList inputs, LoopAttr attr) {
    const Node& first = g_.node(inputs.front().src);
    bool same = true;
    for (const Edge& e : inputs) same &= g_.node(e.src).dtype == first.dtype && g_.node(e.src).shape == first.shape;
    if (!same) return g_.add(op, std::vector<Edge>(inputs.begin(), inputs.end()), attr);
    TensorType type{first.dtype, first.shape};
    return g_.add_known(op, std::move(inputs), attr, std::move(type));
  }

  Graph& g_;
  const std::vector<NodeId>& order_;
  const Candidate& c_;
  const int64_t loop_id_;
  const int64_t trips_;
  const std::vector<NodeId>* id_in_g_;  // null: g is the searched graph
};

}  // namespace

void Roller::rewrite(Graph& g, const Graph& before, const Found& found, int64_t loop_id,
                     const std::vector<NodeId>* id_in_g) {
  const bool in_place = &g == &before;
  SPOOL_ASSERT(in_place == !id_in_g, "rewrite: a copy needs its id map, the graph itself none");
  LoopBuilder loop(g, found, loop_id, id_in_g);
  g.reserve(g.id_bound() + found.candidate.markers);
  const std::map<size_t, NodeId> start_of = loop.add_entries();
  loop.add_exits(start_of, before, is_output_);
  // A copy (the first roll) holds no occurrence but the first, nor a
  // source only the others read: it reads every constant and iota through
  // its canonical node, and each source an occurrence k >= 1 reads is read
  // after the rewrite by occurrence 0 (a static input: the same canonical
  // node) or by the loop_input of its position.
  if (in_place) loop.remove_other_occurrences();
}

}  // namespace spool::roll::detail
