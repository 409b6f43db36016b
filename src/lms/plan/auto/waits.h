// Which swap of a plan the compute stream waits for longest, by the plan's time simulation: what the auto planner's
// refinement tries as a recomputation instead (Note [Auto refinement] in plan/auto/auto_planner.h). Internal to the
// auto planner.
#pragma once

#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/auto/auto_planner.h"
#include "lms/plan/auto/candidates.h"

namespace lms::autoplan {

// The swapped candidate whose prefetches the compute stream waits for longest in `r`'s simulation (each wait of a
// compute node charged to the swap-in among its dependencies that ended last; with `copies_out`, to the swap-out
// too when the last to end is the copy out of an earlier occupant of the node's space), among those not yet tried
// that can be recomputed without cloning a producer that another recomputation clones; -1: none waits.
int most_waited_for_swap(const Graph& scheduled, const std::vector<Candidate>& cands, const AutoResult& r,
                         const std::vector<bool>& tried, bool copies_out);

}  // namespace lms::autoplan
