// The auto planner's choices made real (plan/auto/auto_planner.h; docs/planner.md "The auto strategy", step 4):
// the recompute pass for the chosen recomputations, then the swap pass for the chosen swaps with the triggers and
// holds the greedy placed, the exact memory plan of the result and its time simulation; and the same choices
// realized again with their prefetches retimed on an exact plan (plan/auto/prefetch_advance.h). Shared by the
// greedy's rounds, the holds, the prefetch order, delay and advance in auto_planner.cc. Internal to the auto
// planner.
#pragma once

#include <optional>
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

// The plan `r` of the greedy's choices `cands` with its prefetches started earlier where its exact plan has room
// (Note [Prefetch advance]), when that fits and is predicted faster (true; `r` and `cands` replaced); else false.
Result<bool> realize_advanced(const Graph& scheduled, std::vector<Candidate>& cands, AutoResult& r,
                              const ExactPlanner& exact, const AutoOptions& o);

// The plan `r` of the greedy's choices `cands`, over the budget, with the prefetches live unread where its exact
// plan is over the budget started later (Note [Prefetch delay]), up to AutoOptions::delay_rounds times while each
// lowers the planned peak: the last that did (with `cands` its choices), or nothing when none did.
Result<std::optional<AutoResult>> realize_delayed(const Graph& scheduled, std::vector<Candidate>& cands,
                                                  const AutoResult& r, const ExactPlanner& exact,
                                                  const AutoOptions& o);

}  // namespace lms::autoplan
