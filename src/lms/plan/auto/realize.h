// The auto planner's choices made real (plan/auto/auto_planner.h; docs/planner.md "The auto strategy", step 4):
// the recompute pass for the chosen recomputations, then the swap pass for the chosen swaps with the triggers and
// holds the greedy placed, the exact memory plan of the result and its time simulation. Shared by the greedy's
// rounds, the holds, the prefetch order and the prefetch advance in auto_planner.cc. Internal to the auto planner.
#pragma once

#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/auto/auto_planner.h"
#include "lms/plan/auto/candidates.h"
#include "lms/support/error.h"

namespace lms::autoplan {

// The rewrite of `cands`' choices on `scheduled`, its exact plan (`exact`, with its costly searches when `search`)
// and its time simulation on `o`'s device; `fits` when the plan fits `o`'s budgets. AutoResult::choices lists the
// values chosen, in position order (a swap the rewrite left no gap for is left out: the value stays).
Result<AutoResult> realize(const Graph& scheduled, const std::vector<Candidate>& cands, const ExactPlanner& exact,
                           const AutoOptions& o, bool search = true);

}  // namespace lms::autoplan
