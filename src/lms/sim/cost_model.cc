// The roofline cost model (sim/cost_model.h): one op_cost call per node.
#include "lms/sim/cost_model.h"

#include <algorithm>

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

}  // namespace

double op_seconds(const Graph& g, NodeId id, const DeviceModel& m) {
  const Node& n = g.node(id);
  const OpDef& def = op_def(n.op);
  if (def.traits.source) return 0;
  const Cost c = node_cost(g, n);
  if (def.traits.is_copy) {
    const double rate = def.output_placement == Placement::host ? m.d2h_bytes_per_s : m.h2d_bytes_per_s;
    return m.copy_latency_s + static_cast<double>(c.bytes_written) / rate;
  }
  const double compute_s = c.flops / m.peak_flops(compute_dtype(g, n));
  const double memory_s = static_cast<double>(c.bytes_read + c.bytes_written) / m.memory_bytes_per_s;
  return m.launch_overhead_s + std::max(compute_s, memory_s);
}

std::vector<double> op_times(const Graph& g, const DeviceModel& m, const MeasuredTimes* measured) {
  std::vector<double> times(g.num_nodes());
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    if (measured && !n.outputs.empty())
      if (auto it = measured->find(g.value(n.outputs.front()).name); it != measured->end()) {
        times[i] = it->second;
        continue;
      }
    times[i] = op_seconds(g, NodeId{i}, m);
  }
  return times;
}

}  // namespace lms
