// Strategies: from a training graph and a budget to a Plan, the one type everything downstream shares (DESIGN.md
// "Strategies"). A Plan is a scheduled graph (rewritten with swaps when the strategy swaps) and its exact memory
// plan, plus what the strategy decided and predicted, for reports.
//   - none: the graph as built, in schedule order (plan/schedule.h); fits or does not.
//   - auto: ours (plan/auto/auto_planner.h): per-tensor keep / swap / recompute for the predicted step time on
//     a device model. It also makes the tflms plan and takes it when that is predicted faster (or when its
//     own does not fit), so auto is never behind tflms by its own measure; `Plan::auto_source` says which.
//   - tflms: TFLMS exactly (shared/TFLMS.md): when the none plan does not fit, the auto-tuning search
//     (plan/tflms_search.h) picks T, A, G and the sync mode on the memory simulator; the tflms-swap and
//     tflms-triggers rewrites build those decisions; the result is scheduled in level order (the order the
//     simulator walks, Note [TFLMS schedule]) and planned exactly. The final check is the exact plan: when the
//     simulator said "fits" and the plan does not (its walk is an approximation of the schedule; ours), the
//     search runs again with the simulator's budget reduced by the excess, a few rounds at most.
// Workspaces: `StrategyOptions::workspace_bytes` (a backend's Backend::workspace_bytes, given as a function so
// plan/ need not know backends) sizes every node's scratch space in each graph planned, and the simulator's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "lms/analysis/tflms_swaps.h"
#include "lms/ir/graph.h"
#include "lms/plan/auto/auto_planner.h"
#include "lms/plan/memory_planner.h"
#include "lms/plan/tflms_search.h"
#include "lms/support/error.h"
#include "lms/support/size.h"

namespace lms {

enum class Strategy : uint8_t { none, tflms, automatic };
std::string_view strategy_name(Strategy s);  // "none", "tflms", "auto"
// Errors list the strategies.
Result<Strategy> parse_strategy(std::string_view name);

// Scratch bytes per node of a scheduled graph (empty vector: none).
using WorkspaceFn = std::function<Result<std::vector<int64_t>>(const Graph& scheduled)>;

struct StrategyOptions {
  Strategy strategy = Strategy::none;
  int64_t budget_bytes = kUnlimitedBytes;       // device bytes; the exact planned peak must not exceed it
  int64_t host_budget_bytes = kUnlimitedBytes;  // host bytes for swapped tensors; the host arena must fit
  Assignment assignment = kDefaultAssignment;   // offset assignment of the memory planner
  int packing_tries = 16;  // auto: perturbed orders tried when the fixed assignments miss the budget but the
                           // liveness bound fits it (Note [Perturbed orders] in plan/assignment.h)
  WorkspaceFn workspace_bytes = {};             // kernels' scratch space (empty: none)
  bool reuse_buffers = true;  // outputs written over a dying input's buffer (Note [Buffer reuse]); false: never
  // tflms:
  TflmsParams tflms = {};                       // base parameters: trigger window, size floor, include/exclude
  std::optional<TflmsParams> tflms_fixed = {};  // use exactly these (T, A, G, sync mode) instead of searching,
                                                // and swap what they say even when everything would fit
  double tflms_ratio = 1.0;                     // simulator budget fraction to start from (TFLMS.md: ours 1.0)
  std::function<void(const TflmsTrial&)> on_trial = {};  // every parameter set the search simulates (--verbose)
  // auto:
  std::optional<DeviceModel> device_model = {};  // the device auto plans for (required by auto)
  MeasuredTimes measured = {};                   // measured node times (lms profile) overriding the roofline
  bool fits_only = false;  // auto: whether it fits is all that is asked (capacity probes): the first plan that
                           // fits is returned, not the fastest (the same answer to "does it fit", far sooner)
  // auto: every greedy round's exact plan (--verbose), with the schedule it started from ("graph order" or
  // "level order"); empty: none
  std::function<void(std::string_view schedule, const AutoRound&)> on_auto_round = {};
  std::function<void()> on_auto_plan = {};  // auto: after each exact plan of its search, from whichever thread made
                                            // it (AutoOptions::on_plan: a live progress line); empty: none
  int threads = 0;  // auto: threads its search runs on (AutoOptions::threads; 0: one per hardware thread; one
                    // with workspace_bytes, whose backends are not made for queries from other threads)
};

struct Plan {
  Strategy strategy = Strategy::none;
  Graph graph;                     // scheduled: node-id order is the execution order
  MemoryPlan memory;               // exact; memory.device_arena_bytes is the planned peak
  bool fits = false;               // planned peak <= budget and host arena <= host budget
  int64_t budget_bytes = kUnlimitedBytes;
  int64_t host_budget_bytes = kUnlimitedBytes;
  int64_t peak_bytes_none = 0;     // the planned peak of strategy none (the same graph, nothing rewritten)
  bool lms_needed = false;         // the none plan does not fit (tflms then inserts swaps)
  std::optional<TflmsParams> tflms;  // tflms: the parameters used (when it rewrote the graph)
  int64_t sim_peak_bytes = -1;     // tflms: the simulator's peak for them (-1: not simulated)
  int tflms_rounds = 0;            // tflms: searches run (more than one when the exact plan disagreed)
  std::vector<TflmsTrial> trials;  // tflms: every parameter set simulated, over all rounds
  int levels = 0;                  // tflms: number of levels of the training graph
  int64_t swap_out_bytes = 0;      // bytes copied device -> host per step
  int64_t swap_in_bytes = 0;       // bytes copied host -> device per step
  int64_t swapped_tensors = 0;
  std::vector<AutoChoice> choices;  // auto: the values swapped and recomputed (empty when it took tflms's plan)
  int64_t recomputed_tensors = 0;  // values recomputed for their backward readers (auto)
  double recompute_flops = 0;      // FLOPs of the ops run again per step (auto)
  std::optional<double> predicted_step_seconds;  // auto: predicted on its device model (with its plan's waits)
  std::string auto_source;         // auto: "auto" (its own plan) or "tflms" (tflms's plan, predicted faster or
                                   // the only one that fits), with the two predictions
  int auto_rounds = 0;             // auto: exact plans its planner made
  std::optional<Error> why;        // when !fits: why not, with the numbers
};

// Plans `training` (acyclic; any node order). A plan that does not fit comes back with fits = false and
// `why` saying so: strategy none over the budget (the planner's does-not-fit error), tflms with no setting that
// fits (naming the minimum budget that could work), the host budget exceeded (naming the host bytes needed);
// its graph and memory are the last plan tried. Errors: bad options, and the analyses' and rewrites' own.
Result<Plan> try_plan(const Graph& training, const StrategyOptions& opts);

// try_plan, with a plan that does not fit returned as its `why` error.
Result<Plan> make_plan(const Graph& training, const StrategyOptions& opts);

// "%name, op" of the node of `g` whose working set sets m.min_budget_bytes (the hard minimum), "no op" when none.
std::string largest_op(const Graph& g, const MemoryPlan& m);

}  // namespace lms
