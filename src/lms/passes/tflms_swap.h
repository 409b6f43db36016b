// The `tflms-swap` pass: builds TFLMS's swap decisions (analysis/tflms_swaps.h, shared/TFLMS.md) into the graph.
// One swap_out per swapped tensor, placed in node order right after its source; one swap_in per group of far
// consumers, placed right before the first of them in node order; the far consumers read the swap-in. Sync mode
// 1/3: every op reading an output of the source, except this tensor's far consumers, waits for the swap_out
// (control edge). Sync mode 2/3: each swap_in waits (control edges) for the producers of its target's other
// inputs (ours: inputs made by sources, which are ready from the start, and by other copies are skipped; two
// copies feeding one target waiting on each other would be a cycle). Triggers are a separate pass
// (tflms-triggers). Precondition: acyclic, no swap ops yet; a graph whose node order is not a valid schedule
// is first put into schedule order (plan/schedule.h). Postcondition: node order is a valid schedule and the
// graph verifies. Undone by nothing; bypassing the copies (tflms_triggers.cc) recovers the decision graph.
#pragma once

#include <vector>

#include "lms/analysis/tflms_swaps.h"
#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Inserts the swaps `decide_tflms_swaps(g, ..., params)` decides (triggers are ignored). Returns the decisions
// it built, in the ids of the graph as it was before the rewrite (after the schedule-order fix-up, if any).
Result<SwapDecisions> insert_tflms_swaps(Graph& g, const TflmsParams& params);

// The pass options: threshold, groupby, sync_mode, min_bytes, include_ops, exclude_ops, include_names,
// exclude_names (lists are comma-separated strings), and reading them into TflmsParams (errors name the
// option). Options absent from `options` keep TflmsParams' defaults.
std::vector<AttrSpec> tflms_swap_options();
Result<TflmsParams> tflms_params_from(const Attributes& options);

// Splits a comma-separated list option into names (a leading '%' is dropped); op names are checked against
// the op registry when `ops` is set. Errors name `option`.
Result<std::vector<std::string>> parse_name_list(const Attributes& options, std::string_view option, bool ops);

Result<void> run_tflms_swap_pass(Graph& g, const Attributes& options);

}  // namespace lms
