// The predicted step as a trace (see predicted_trace.h).
#include "lms/sim/predicted_trace.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <vector>

#include "lms/runtime/program.h"

namespace lms {

Result<TraceWriter> predicted_trace(const Graph& g, const MemoryPlan& plan, const TimeSimResult& sim,
                                    std::string process) {
  const size_t n = g.num_nodes();
  if (sim.start.size() != n || sim.end.size() != n || plan.num_positions != static_cast<int>(n))
    return fail("predicted trace: the simulation or the memory plan was not made for this graph ({} nodes; "
                "simulated {}, planned {})",
                n, sim.start.size(), plan.num_positions);
  using Clock = TraceWriter::Clock;
  const Clock::time_point origin{};
  auto at = [&](double seconds) {
    return origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  TraceWriter trace(origin, std::move(process));
  for (NodeId id : g.node_ids())
    if (!g.def(id).traits.source)  // inputs, parameters, constants: nothing runs (as in a measured trace)
      trace.complete(trace_node_name(g, id), std::string(op_name(g.node(id).op)), id.v, stream_for(g, id),
                     at(sim.start[id.v]), at(sim.end[id.v]));

  // Buffers join and leave: (time, +1 join / -1 leave, buffer); at one instant leaves come first (a node that
  // reuses space starts no earlier than the end of the one that released it). Parameters and state stay for the
  // whole step, fed inputs join at its start, graph outputs stay to its end.
  std::vector<bool> output(plan.buffers.size(), false);
  for (ValueId v : g.outputs()) output[static_cast<size_t>(plan.buffer_of_value[v.v])] = true;
  std::vector<std::tuple<double, int, size_t>> changes;
  int64_t bytes[2] = {0, 0};  // device, host, live from the start
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const BufferLife& life = plan.buffers[b].life;
    if (life.persistent || life.input) bytes[life.placement == Placement::device ? 0 : 1] += life.bytes;
    else changes.emplace_back(sim.start[static_cast<size_t>(life.first)], 1, b);
    if (!life.persistent && !output[b]) changes.emplace_back(sim.end[static_cast<size_t>(life.last)], -1, b);
  }
  std::sort(changes.begin(), changes.end());
  trace.memory(origin, bytes[0], bytes[1]);
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto [t, sign, b] = changes[i];
    const BufferLife& life = plan.buffers[b].life;
    bytes[life.placement == Placement::device ? 0 : 1] += sign * life.bytes;
    if (i + 1 == changes.size() || std::get<0>(changes[i + 1]) != t) trace.memory(at(t), bytes[0], bytes[1]);
  }
  return trace;
}

}  // namespace lms
