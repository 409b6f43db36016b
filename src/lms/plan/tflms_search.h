// The TFLMS auto-tuning search (shared/TFLMS.md "Auto-tuning"): finds swapout_threshold T, sync_mode,
// swapin_ahead A and swapin_groupby G for a training graph and a memory budget by simulating each candidate
// with the memory simulator (sim/memory_sim), never building a rewritten graph. Order, as the original:
//   1. no swapping fits: "LMS not needed", stop;
//   2. T: the largest T in [1, n] that fits (n = number of levels), trying sync_mode 0, 1, 2, 3 in turn
//      (A = 1 and G = 0 meanwhile) until one has a T that fits; none: a result that does not fit, with the
//      numbers;
//   3. sync_mode 2 or 3: stop (A and G are unused);
//   4. A: the largest A in [1, n] that fits;
//   5. G: n if it fits, else the largest G in [0, n] that fits.
// Note [TFLMS search monotonicity]: every binary search assumes, as the original does, that fitting is
// monotone in the parameter (a larger T swaps fewer tensors, so it needs more memory; a larger A prefetches
// earlier; a larger G keeps fused swap-ins alive longer). None of this is guaranteed: a larger A can push the
// trigger window below the source so a swap-in falls back to synchronous and *saves* memory, and grouping can
// go either way. Where it fails, the search still returns a setting that fits (every accepted value was
// simulated and fit), only perhaps not the largest one. It optimizes feasibility, not step time.
// Levels and reachability are computed once per search; each trial costs one decide_tflms_swaps and one
// O(nodes + edges) simulation. Deterministic: same graph and options, same trials, same answer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "lms/analysis/levels.h"
#include "lms/analysis/reachability.h"
#include "lms/analysis/tflms_swaps.h"
#include "lms/ir/graph.h"
#include "lms/sim/memory_sim.h"
#include "lms/support/error.h"

namespace lms {

// Which step of the search a trial belongs to.
enum class TflmsStage : uint8_t { no_swap, threshold, ahead, groupby };
std::string_view tflms_stage_name(TflmsStage s);  // "no-swap", "T", "A", "G"

// One simulated parameter set.
struct TflmsTrial {
  TflmsStage stage = TflmsStage::no_swap;
  TflmsParams params;              // the no-swap trial carries the base parameters with T = n (nothing far)
  bool fits = false;
  int64_t peak_device_bytes = 0;   // simulated peak, parameters and state included
  int64_t peak_host_bytes = 0;
  bool host_exceeded = false;      // the host budget failed (the device one may have held)
  int64_t swapped_tensors = 0;     // SwapDecisions::swaps.size()
  int64_t swap_ins = 0;            // swap-in groups over all swapped tensors
  int64_t swap_out_bytes = 0;      // SwapDecisions::swap_out_bytes
};

struct TflmsSearchOptions {
  MemorySimOptions sim;                             // device and host budgets, ratio, workspaces
  TflmsParams base;                                 // carried into every trial: trigger_window, min_bytes and
                                                    // the include/exclude lists; its T, A, G and sync_mode
                                                    // are what the search sets (ignored here)
  std::function<void(const TflmsTrial&)> on_trial;  // called after every trial, in order (e.g. --verbose);
                                                    // may be empty; the trials are also in the result
};

struct TflmsSearchResult {
  bool fits = true;                 // false: no setting fits; `why` says so with the numbers
  std::optional<Error> why;         // set when !fits: the budget, the smallest simulated peak, the hard minimum
  bool lms_needed = false;          // false: the graph fits without swapping (decisions then swap nothing)
  TflmsParams params;               // the chosen parameters (the base ones when LMS is not needed)
  SwapDecisions decisions;          // what those parameters swap
  MemorySimResult sim;              // their simulation (fits)
  std::vector<TflmsTrial> trials;   // every parameter set simulated, in order
  int levels = 0;                   // n
};

// Searches with levels and reachability computed here. Errors: a cycle, decide_tflms_swaps or the simulator
// rejecting the input. No setting that fits is an answer, not an error: `fits` is false and `why` reads
// "TFLMS cannot fit ...: the smallest simulated peak was ... with T=1, sync_mode=...; the hard minimum is ...",
// naming the budget, the smallest peak and the hard minimum (persistent bytes plus the largest single-op
// working set); `trials` holds what was simulated.
Result<TflmsSearchResult> search_tflms(const Graph& g, const TflmsSearchOptions& opts);

// The same with levels and reachability the caller already has (computed on `g`).
Result<TflmsSearchResult> search_tflms(const Graph& g, const Levels& levels, const Reachability& reach,
                                       const TflmsSearchOptions& opts);

}  // namespace lms
