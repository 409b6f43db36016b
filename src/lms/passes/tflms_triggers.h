// The `tflms-triggers` pass: gives every swap_in that has no control input yet a trigger, by the search of
// shared/TFLMS.md (analysis/tflms_swaps.h, find_swapin_trigger), adds the control edge trigger -> swap_in, and
// moves the swap_in in node order to right after its trigger (or after its swap_out, if that comes later).
// Levels and reachability for the search are those of the graph with the copies bypassed (each swap_in's
// readers read the original tensor again, the copies removed): the graph decide_tflms_swaps saw, so the
// triggers are exactly the ones it decides for the same params (tests/passes/tflms_triggers_test.cc checks
// this). A swap_in whose window holds no candidate keeps no control input: it stays synchronous (starts when
// its swap_out is done and runs before its first reader), the fallback of TFLMS.md. Swap-ins with control
// inputs (already triggered, or made synchronous by tflms-swap{sync_mode=2|3}) are left alone; note that a
// sync-in swap_in whose target has no other computed input has no control input either, so run this pass
// only after the asynchronous swap-in modes (0, 1). If moving the swap-ins leaves node order invalid (a
// trigger after another reader of the swap_in in node order), the graph is put into schedule order
// (plan/schedule.h: Kahn, smallest id first). Precondition: swap pairs as tflms-swap makes them. Undone by
// nothing.
#pragma once

#include <vector>

#include "lms/analysis/tflms_swaps.h"
#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Uses params.swapin_ahead, params.trigger_window, exclude_ops and exclude_names. Returns the number of
// swap-ins that got a trigger.
Result<int> add_tflms_triggers(Graph& g, const TflmsParams& params);

// The graph with every swap pair bypassed and removed; `old_of_new[i]` is the id in `g` of node i of the
// result. Error if a swap_in does not read a swap_out.
struct BypassedGraph {
  Graph graph;
  std::vector<NodeId> old_of_new;
};
Result<BypassedGraph> bypass_swaps(const Graph& g);

// Options: ahead, window, exclude_ops, exclude_names.
std::vector<AttrSpec> tflms_triggers_options();
Result<void> run_tflms_triggers_pass(Graph& g, const Attributes& options);

}  // namespace lms
