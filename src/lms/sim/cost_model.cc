// The roofline cost model (sim/cost_model.h): one op_cost call per node; measured times, scaled to the node's size.
#include "lms/sim/cost_model.h"

#include <algorithm>
#include <string>

#include "lms/analysis/stats.h"

namespace lms {

namespace {

// The dtype the op computes in: its first floating-point input (labels and indices are integers), else its
// first output, else f32.
DType compute_dtype(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (is_float(g.value(v).type.dtype)) return g.value(v).type.dtype;
  return n.outputs.empty() ? DType::f32 : g.value(n.outputs.front()).type.dtype;
}

// The roofline's seconds for node n doing the work `c`.
double roofline_seconds(const Graph& g, const Node& n, const Cost& c, const DeviceModel& m) {
  const OpDef& def = op_def(n.op);
  if (def.traits.source) return 0;
  if (def.traits.is_copy) {
    const double rate = def.output_placement == Placement::host ? m.d2h_bytes_per_s : m.h2d_bytes_per_s;
    return m.copy_latency_s + static_cast<double>(c.bytes_written) / rate;
  }
  const double compute_s = c.flops / m.peak_flops(compute_dtype(g, n));
  const double memory_s = static_cast<double>(c.bytes_read + c.bytes_written) / m.memory_bytes_per_s;
  return m.launch_overhead_s + std::max(compute_s, memory_s);
}

// A measured time for node n: as measured when its work then is unknown or the same as now, else the part
// above the launch overhead scaled by the roofline's ratio of now to then.
double scaled(const Graph& g, const Node& n, const MeasuredNode& measured, const DeviceModel& m) {
  if (!measured.cost) return measured.seconds;
  const Cost now = node_cost(g, n), &then = *measured.cost;
  if (now.flops == then.flops && now.bytes_read == then.bytes_read && now.bytes_written == then.bytes_written)
    return measured.seconds;
  const double launch = op_def(n.op).traits.is_copy ? m.copy_latency_s : m.launch_overhead_s;
  const double work_now = roofline_seconds(g, n, now, m) - launch;
  const double work_then = roofline_seconds(g, n, then, m) - launch;
  if (work_then <= 0) return measured.seconds;
  return launch + std::max(0.0, measured.seconds - launch) * (work_now / work_then);
}

}  // namespace

double op_seconds(const Graph& g, NodeId id, const DeviceModel& m) {
  const Node& n = g.node(id);
  return roofline_seconds(g, n, node_cost(g, n), m);
}

const MeasuredNode* measured_entry(const Graph& g, const Node& n, const MeasuredTimes& measured) {
  std::string name = g.value(n.outputs.front()).name;
  while (true) {
    if (auto it = measured.find(name); it != measured.end()) return &it->second;
    if (n.category != Category::recompute) return nullptr;
    size_t end = name.size();
    while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
    if (end < 3 || name.compare(end - 3, 3, ".re") != 0) return nullptr;
    name.resize(end - 3);
  }
}

std::vector<double> op_times(const Graph& g, const DeviceModel& m, const MeasuredTimes* measured) {
  std::vector<double> times(g.num_nodes());
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const MeasuredNode* entry = measured && !n.outputs.empty() ? measured_entry(g, n, *measured) : nullptr;
    times[i] = entry ? scaled(g, n, *entry, m) : op_seconds(g, NodeId{i}, m);
  }
  return times;
}

}  // namespace lms
