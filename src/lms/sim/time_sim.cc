// The time simulator: three streams, node-id order, dependencies across streams (Note [Time simulation] in
// time_sim.h).
#include "lms/sim/time_sim.h"

#include <algorithm>
#include <cmath>

#include "lms/analysis/stats.h"
#include "lms/ir/verifier.h"
#include "lms/plan/schedule.h"
#include "lms/runtime/program.h"
#include "lms/sim/cost_model.h"

namespace lms {

Result<TimeSimResult> simulate_time(const Graph& g, std::span<const double> seconds, const MemoryPlan* plan) {
  if (seconds.size() != g.num_nodes())
    return fail("simulate_time: {} durations for a graph of {} nodes", seconds.size(), g.num_nodes());
  for (NodeId n : g.node_ids())
    if (!std::isfinite(seconds[n.v]) || seconds[n.v] < 0)
      return fail_at(node_label(g, n), "simulate_time: duration {} s is not a finite non-negative number",
                     seconds[n.v]);
  LMS_TRY_VOID(check_schedule_order(g));
  std::vector<std::vector<NodeId>> waits;
  if (plan) {
    if (plan->buffer_of_value.size() != g.num_values() || plan->num_positions != static_cast<int>(g.num_nodes()))
      return fail("simulate_time: the memory plan ({} values, {} positions) was not made for this graph ({} values, "
                  "{} nodes)",
                  plan->buffer_of_value.size(), plan->num_positions, g.num_values(), g.num_nodes());
    waits = cross_stream_waits(g, *plan);
  }

  TimeSimResult r;
  r.start.resize(g.num_nodes());
  r.end.resize(g.num_nodes());
  std::array<double, kNumStreams> stream_free{};  // when each stream's last node so far ends
  for (NodeId n : g.node_ids()) {
    const int s = static_cast<int>(stream_for(g, n));  // the runtime's own rule
    const Node& node = g.node(n);
    double ready = 0;
    for (ValueId v : node.inputs) ready = std::max(ready, r.end[g.value(v).producer.v]);
    for (NodeId c : node.control_inputs) ready = std::max(ready, r.end[c.v]);
    if (plan)
      for (NodeId w : waits[n.v]) ready = std::max(ready, r.end[w.v]);
    const double start = std::max(stream_free[s], ready);
    r.stall_seconds[s] += start - stream_free[s];
    r.busy_seconds[s] += seconds[n.v];
    r.start[n.v] = start;
    r.end[n.v] = start + seconds[n.v];
    stream_free[s] = r.end[n.v];
    r.step_seconds = std::max(r.step_seconds, r.end[n.v]);
  }
  return r;
}

Result<TimeSimResult> simulate_time(const Graph& g, const DeviceModel& model, const MeasuredTimes* measured,
                                    const MemoryPlan* plan) {
  std::vector<double> seconds = op_times(g, model, measured);
  // A view given its input's buffer (a reshape, Note [Views]; a slice, Note [Parts]) takes no time on the
  // roofline: every backend skips a copy onto itself; a concat copies only the inputs not already in place. A
  // measured time is kept (it has the backend's per-node overhead).
  if (plan && plan->buffer_of_value.size() == g.num_values())
    for (NodeId n : g.node_ids()) {
      const Node& node = g.node(n);
      if (node.outputs.size() != 1 || (measured && measured_entry(g, node, *measured))) continue;
      const ValueId out = node.outputs[0];
      auto shared = [&](ValueId in) { return plan->buffer_of_value[in.v] == plan->buffer_of_value[out.v]; };
      auto offset = [&](ValueId v) { return plan->offset_of_value.empty() ? 0 : plan->offset_of_value[v.v]; };
      if (node.op == Op::concat) {  // an input in place: in the output's buffer where its part begins
        const int64_t total = g.value(out).type.bytes();
        int64_t copied = 0;
        for (size_t k = 0; k < node.inputs.size(); ++k) {
          const ValueId in = node.inputs[k];
          const bool in_place = shared(in) && offset(in) == offset(out) + part_offset(g, n, k);
          copied += in_place ? 0 : g.value(in).type.bytes();
        }
        if (total > 0) seconds[n.v] *= static_cast<double>(copied) / static_cast<double>(total);
        continue;
      }
      const int k = node.op == Op::slice ? 0 : g.def(n).view_input;
      if (k >= 0 && k < static_cast<int>(node.inputs.size()) && shared(node.inputs[static_cast<size_t>(k)]))
        seconds[n.v] = 0;
    }
  return simulate_time(g, seconds, plan);
}

}  // namespace lms
