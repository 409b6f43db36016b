// The time simulator (DESIGN.md "Simulators"): plays one training step of a scheduled graph on the three
// streams the runtime uses (compute, device-to-host, host-to-device), given how long each node takes, and
// says when every node starts and ends, how long the step takes, and how long each stream was busy and
// stalled. It follows the Program's rules exactly (runtime/program.h): a node runs on the stream
// `stream_for` gives it (swap-outs on d2h, swap-ins on h2d, everything else on compute); each stream runs its
// nodes in node-id order, one at a time; a node starts once its stream is free and every dependency (the
// producers of its data inputs and its control inputs, on any stream) has ended. Precondition: node-id order
// is a valid execution order (check_schedule_order; the `scheduled` flag itself is not required). It does
// not model: contention between the two copy directions or between copies and compute for a shared link or
// memory bandwidth (each stream runs at the speed its durations say), launch and event overheads beyond what
// the durations include, or memory at all (sim/memory_sim does bytes). Given the memory plan, it also plays the
// Program's buffer-reuse waits (a buffer's first writer waits for the readers, on other streams, of the earlier
// occupants of its space: runtime/program.h cross_stream_waits), so a swapped tensor's space is not reused
// before its copy to the host has ended; without one, dependencies alone are simulated. The rules and the stall definition are in
// Note [Time simulation]; docs/time_sim.md says the same for users. O(nodes + edges); nothing here changes
// the graph.
//
// Note [Time simulation]
// Walk the nodes in id order (every dependency has a smaller id, so it is already timed). For node n on
// stream s:
//   free(n)  = end of the previous node on s, or 0 for the first node of s     (n is next-in-line from here)
//   ready(n) = the latest end among n's dependencies, or 0 without any
//   start(n) = max(free(n), ready(n)),  end(n) = start(n) + seconds[n]
// A dependency on the same stream has ended by free(n) (it came earlier on that stream), so whenever
// start(n) > free(n) the delay is caused by a dependency on another stream: that delay, start(n) - free(n),
// is n's *stall*, and a stream's stall is the sum over its nodes. For the compute stream this is the time it
// had its next op issued but waited for a copy (or for a node on another stream that a copy depends on);
// for a copy stream it is the time its next copy waited for its source or trigger (including from the start
// of the step to its first copy). Gaps are either stall or nothing: after the last node of a stream, the
// stream is simply idle. The step time is the latest end of any node (0 for an empty graph).
#pragma once

#include <array>
#include <span>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"
#include "lms/runtime/backend.h"
#include "lms/sim/cost_model.h"
#include "lms/sim/device_model.h"
#include "lms/support/error.h"

namespace lms {

struct TimeSimResult {
  double step_seconds = 0;  // the step's length: the latest end of any node (0 for an empty graph)
  std::array<double, kNumStreams> busy_seconds{};   // by StreamId: sum of the durations of its nodes
  std::array<double, kNumStreams> stall_seconds{};  // by StreamId: sum over its nodes of start - free, the
                                                    // time from the node becoming next-in-line on its
                                                    // stream (its predecessor there ended; 0 for the first)
                                                    // to its start, which is always a wait on a dependency
                                                    // on another stream (Note [Time simulation])
  std::vector<double> start;  // by NodeId: when the node starts, in seconds from the step's start
  std::vector<double> end;    // by NodeId: start + its duration
};

// Simulates one step of `scheduled` with `seconds[n]` the duration of node n; with `plan` (the memory plan of
// `scheduled`) the buffer-reuse waits too. Errors: `seconds` not one entry per node, a negative, NaN or
// infinite duration (naming the node), a graph not in schedule order (check_schedule_order's error), a plan
// not made for this graph.
Result<TimeSimResult> simulate_time(const Graph& scheduled, std::span<const double> seconds,
                                    const MemoryPlan* plan = nullptr);

// The same with every node's duration from the cost model (sim/cost_model.h): measured where `measured` names
// the node, else the roofline of `model`. The step time a plan predicts on that device.
Result<TimeSimResult> simulate_time(const Graph& scheduled, const DeviceModel& model,
                                    const MeasuredTimes* measured = nullptr, const MemoryPlan* plan = nullptr);

}  // namespace lms
