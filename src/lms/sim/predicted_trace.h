// The predicted step as a trace (`lms plan --trace FILE`): the time simulation of a planned graph written in the
// Chrome trace-event format of `lms train --trace` (runtime/trace.h, docs/trace.md), so the prediction and a
// measured run open side by side in Perfetto. Every node that runs is one slice on its stream's track from its
// simulated start to its end; the counters are the plan's bytes live over time, as the executor counts them: a
// buffer joins at the simulated start of the node that first writes it and leaves at the end of the last node
// that uses it; parameters and state stay for the whole step, fed inputs are there from its start, graph outputs
// stay to its end. Because the simulation makes a node wait until the space it reuses is released, the device
// counter never exceeds the planned arena. Precondition: `sim` is simulate_time's result for `scheduled` with
// `plan`, the memory plan of `scheduled`.
#pragma once

#include <string>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"
#include "lms/runtime/trace.h"
#include "lms/sim/time_sim.h"
#include "lms/support/error.h"

namespace lms {

// The trace of one predicted step; `process` names its process (e.g. "lms plan: predicted on h200-pcie5").
// Errors: `sim` or `plan` not made for `scheduled` (their sizes differ from its node count).
Result<TraceWriter> predicted_trace(const Graph& scheduled, const MemoryPlan& plan, const TimeSimResult& sim,
                                    std::string process);

}  // namespace lms
