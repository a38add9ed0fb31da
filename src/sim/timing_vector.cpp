// The timing model's vector unit (the model: timing.cpp).

#include "timing.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace spool::sim::detail {
namespace {

int64_t ceil_log2(int64_t v) {
  int64_t stages = 0;
  while ((int64_t{1} << stages) < v) ++stages;
  return stages;
}

}  // namespace

using namespace spool::npu;

const VecStatic& TimingSim::vec_static(const VectorOp& v) {
  auto it = vec_cache_.find(&v);
  if (it != vec_cache_.end()) return it->second;
  VecStatic s;
  s.shapes.reserve(v.body.size());
  for (size_t i = 0; i < v.body.size(); ++i) {
    const VecInstr& in = v.body[i];
    const target::VectorOpTiming& t = c_.vector.ops.at(std::string(vec_op_timing_class(in.op)));
    VecInstrTiming vt;
    vt.interval = t.interval;
    vt.latency = t.latency;
    vt.unit = static_cast<int>(t.unit);
    vt.bits = scalar_bits(in.type);
    const VecOpKind kind = vec_op_kind(in.op);
    vt.reduce = kind == VecOpKind::Reduce;
    vt.col_load = kind == VecOpKind::Load && in.broadcast == LoadBroadcast::Col;
    vt.counts = kind != VecOpKind::Load && kind != VecOpKind::Const && kind != VecOpKind::Iota;
    vt.flop = vt.counts && is_float(in.type) &&
              (kind == VecOpKind::Arith || kind == VecOpKind::FloatUnary || kind == VecOpKind::Reduce);
    vt.reduce_rows = vec_op_reduces_rows(in.op);
    s.shapes.push_back(value_shape(in, v.body, s.shapes));
    s.instrs.push_back(vt);
  }
  s.store = c_.vector.ops.at("store");
  return vec_cache_.emplace(&v, std::move(s)).first->second;
}

void TimingSim::vector(Core& core, const VectorOp& v) {
  const int64_t* vars = core.vars.data();
  const int64_t rows = v.rows.eval(vars), cols = v.cols.eval(vars);
  const VecStatic& vs = vec_static(v);
  const int64_t lanes = c_.vector.lanes, vlen = c_.vector.vlen_bits;

  // Operand readiness.
  Time ready = 0;
  auto ref_range = [&](const SpadRef& r, ValueShape shape, LoadBroadcast bc) {
    const int64_t lo = r.offset.eval(vars);
    if (bc == LoadBroadcast::Col) return make_interval(lo, lo + cols);
    if (shape == ValueShape::Row) return make_interval(lo, lo + rows);
    if (shape == ValueShape::Col) return make_interval(lo, lo + cols);
    return make_box(lo, rows, cols, r.ld);
  };
  // A gather may read any column of its rows: the whole [rows x ld] tile.
  auto read_range = [&](const VecInstr& in, size_t i) {
    return in.op == VecOp::Gather ? make_box(in.ref.offset.eval(vars), rows, in.ref.ld, in.ref.ld)
                                  : ref_range(in.ref, vs.shapes[i], in.broadcast);
  };
  for (size_t i = 0; i < v.body.size(); ++i) {
    const VecInstr& in = v.body[i];
    if (in.op != VecOp::Load && in.op != VecOp::Gather) continue;
    ready = std::max(ready, read_ready(slot_of(core, in.ref), read_range(in, i)));
  }
  for (const VecStore& st : v.stores) {
    ready = std::max(ready,
                     write_ready(slot_of(core, st.ref), ref_range(st.ref, vs.shapes[st.value], LoadBroadcast::Full)));
  }

  // Issue cycles and critical path. A tile's columns lie across the lanes
  // of a register, its rows across the register's sublanes (VLEN / bits
  // rows: narrower types pack more); a per-row value takes one register per
  // group of rows, a per-column value (load.col) one per group of lanes.
  int64_t unit_busy[target::kVectorUnits] = {};
  std::vector<int64_t>& lat = latency_scratch_;
  lat.assign(v.body.size(), 0);
  int64_t critical = 0;
  const int64_t col_regs = ceil_div(cols, lanes);
  auto row_groups = [&](int64_t bits) { return ceil_div(rows, std::max<int64_t>(1, vlen / bits)); };
  auto registers = [&](int64_t bits, ValueShape shape) {
    return shape == ValueShape::Full ? row_groups(bits) * col_regs
           : shape == ValueShape::Row ? row_groups(bits)
                                      : col_regs;
  };
  for (size_t i = 0; i < v.body.size(); ++i) {
    const VecInstrTiming& t = vs.instrs[i];
    const int64_t elems = t.col_load || vs.shapes[i] == ValueShape::Col ? (t.reduce ? rows * cols : cols)
                          : vs.shapes[i] == ValueShape::Full || t.reduce ? rows * cols
                                                                          : rows;
    int64_t l = t.latency;
    if (t.reduce_rows) {
      // Down the rows: the row groups' registers of each column block are
      // combined on the ALUs, then the sublanes of the one left in a
      // ceil(log2 sublanes)-step tree of shifts and combines; no
      // cross-lane unit.
      const int64_t groups = row_groups(t.bits);
      const int64_t sublane_steps = ceil_log2(std::min(rows, std::max<int64_t>(1, vlen / t.bits)));
      unit_busy[t.unit] += ((groups - 1) + sublane_steps) * col_regs * t.interval;
      l = (ceil_log2(groups) + sublane_steps) * t.latency;
    } else if (t.reduce) {
      // The registers of a row group are combined on the unit of the reduce
      // class (a tree of depth ceil(log2 col_regs)), then the one left is
      // reduced across its lanes by the cross-lane unit.
      const int64_t groups = row_groups(t.bits);
      unit_busy[t.unit] += groups * (col_regs - 1) * t.interval;
      unit_busy[static_cast<int>(target::VectorUnit::Xlu)] += groups * c_.vector.lane_reduce.interval;
      l = ceil_log2(col_regs) * t.latency + c_.vector.lane_reduce.latency;
    } else if (t.col_load) {
      unit_busy[t.unit] += col_regs * t.interval;
    } else {
      unit_busy[t.unit] += registers(t.bits, vs.shapes[i]) * t.interval;
    }
    int64_t before = 0;
    for (int o : v.body[i].operands) before = std::max(before, lat[o]);
    lat[i] = before + l;
    critical = std::max(critical, lat[i]);
    if (t.counts) report_.vector_element_ops += elems;
    if (t.flop) report_.vector_flops += elems;
  }
  for (const VecStore& st : v.stores) {
    const int64_t bits = scalar_bits(v.body[st.value].type);
    unit_busy[static_cast<int>(vs.store.unit)] += registers(bits, vs.shapes[st.value]) * vs.store.interval;
    critical = std::max(critical, lat[st.value] + vs.store.latency);
  }
  // The units issue side by side (VLIW slots): the step takes as long as
  // its busiest unit.
  int64_t issue = 0;
  for (int u = 0; u < target::kVectorUnits; ++u) issue = std::max(issue, ceil_div(unit_busy[u], c_.vector.slots[u]));
  issue += c_.vector.step_overhead_cycles;

  core.issue = std::max(core.issue, core.vector_queue.slot_free());
  const Time start = std::max({core.issue, core.vector_free, ready});
  const Time busy_end = start + issue * core_period_;
  const Time done = busy_end + critical * core_period_;
  core.vector_queue.push(start);
  core.vector_free = busy_end;
  core.vector_busy += issue * core_period_;
  core.issue += core_period_;
  core.end = std::max(core.end, done);
  for (size_t i = 0; i < v.body.size(); ++i) {
    const VecInstr& in = v.body[i];
    if (in.op != VecOp::Load && in.op != VecOp::Gather) continue;
    record_read(slot_of(core, in.ref), read_range(in, i), done);
  }
  for (const VecStore& st : v.stores) {
    record_write(slot_of(core, st.ref), ref_range(st.ref, vs.shapes[st.value], LoadBroadcast::Full), done, -1);
  }
  if (trace_) record(core.vector_track, v.label, start, done - start);
}

}  // namespace spool::sim::detail
