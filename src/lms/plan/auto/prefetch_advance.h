// Prefetch advance, the auto planner's last step (docs/planner.md "The auto strategy", step 8): given a plan
// that fits, moves its prefetches' triggers earlier where the rewritten graph's exact liveness has room, so that
// the host-to-device queue meets its readers' deadlines. The greedy times each prefetch on the schedule before
// the rewrite and with its estimate of memory; the exact plan and the simulation of the rewritten graph often
// show room to start prefetches earlier while the link idles (Note [Prefetch advance] in the .cc).
// Precondition: `rewritten` is `scheduled` rewritten by the recompute and swap passes (each scheduled node keeps
// its first output's name), `memory` and `sim` its exact plan and its simulation. It only proposes triggers; the
// caller builds, plans and simulates them again and keeps them when they fit and are faster. Undone by keeping
// the old triggers. Its counterpart for a plan over its budget, the prefetch delay, moves triggers later where
// prefetched values wait unread at positions over the budget (Note [Prefetch delay]).
#pragma once

#include <cstdint>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"
#include "lms/sim/time_sim.h"

namespace lms {

// One swapped value's prefetch, in positions of the scheduled graph (before the rewrite).
struct PrefetchSlot {
  ValueId value;        // the swapped value, in the scheduled graph
  int64_t bytes = 0;    // its bytes
  int earliest = 0;     // the earliest position its trigger may take (its hold, else its last forward reader)
  int trigger = 0;      // its trigger's position; advance_prefetches lowers it
};

struct PrefetchAdvanceOptions {
  int64_t budget_bytes = 0;    // device bytes the plan must fit
  double margin = 0.1;         // a prefetch is timed to end this fraction of its copy time before its first reader
};

// Lowers the triggers of `slots` (see above); true when any moved. Prefetches whose swap_in `rewritten` lacks
// stay as they are.
bool advance_prefetches(const Graph& scheduled, const Graph& rewritten, const MemoryPlan& memory,
                        const TimeSimResult& sim, const PrefetchAdvanceOptions& opts,
                        std::vector<PrefetchSlot>& slots);

// Raises the triggers of `slots` where `memory`, a plan over its budget, has a prefetched value live before its
// first reader reads it at a position whose live bytes exceed the budget (less the plan's fragmentation): the
// least urgent first, each to follow the first scheduled node at or after that position (Note [Prefetch
// delay]); true when any moved. Prefetches whose swap_in `rewritten` lacks stay as they are.
bool delay_prefetches(const Graph& scheduled, const Graph& rewritten, const MemoryPlan& memory,
                      const PrefetchAdvanceOptions& opts, std::vector<PrefetchSlot>& slots);

}  // namespace lms
