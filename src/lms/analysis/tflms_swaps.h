// TFLMS's swap decisions as data (shared/TFLMS.md): which tensors are swapped, how each one's far consumers are
// grouped into swap-ins, and which op triggers each swap-in. `decide_tflms_swaps` is the one place these rules
// live: the rewrite passes (passes/tflms_swap, passes/tflms_triggers) build exactly these decisions into the
// graph, and the memory simulator (sim/memory_sim) plays them without building anything, so the two can never
// disagree. Precondition: an acyclic graph without swap ops (a training graph); levels and reachability computed
// on that same graph. Nothing here changes the graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lms/analysis/levels.h"
#include "lms/analysis/reachability.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Sync modes (TFLMS.md "Synchronization modes").
enum class SyncMode : int {
  async = 0,         // swap-outs run free; swap-ins start at their trigger
  sync_out = 1,      // the ops that follow a swapped tensor's source wait for its device-to-host copy
  sync_in = 2,       // a swap-in starts when its target's other inputs are ready; A and G are ignored
  sync_both = 3,     // 1 and 2
};

// The knobs of one TFLMS rewrite. Defaults are the original's where it had one.
struct TflmsParams {
  int swapout_threshold = 1;  // T: a consumer is far when level(consumer) - level(source) > T (strict)
  int swapin_ahead = 1;       // A: the trigger search starts at level(target) - A - 1
  int swapin_groupby = 0;     // G: far consumers within G levels of the group's last share a swap-in; <= 0: none
  SyncMode sync_mode = SyncMode::async;
  int trigger_window = 10;    // levels searched below the upper bound before falling back to synchronous (ours)
  int64_t min_bytes = 0;      // tensors smaller than this are never swapped (ours; 0 = no floor)
  // Users' include/exclude lists (TFLMS.md "Which tensors are swapped", rule 3): op kinds (e.g. "conv2d") and
  // value names (without '%'). An excluded op is never a source, a far consumer or a trigger; when an include
  // list is non-empty only ops on it may be sources.
  std::vector<std::string> include_ops, exclude_ops, include_names, exclude_names;
};

// One swap-in: the far consumers it feeds, the earliest of them (its target), and the op whose completion
// starts the host-to-device copy (none: synchronous, the copy starts when the target's other inputs are ready;
// that is sync modes 2 and 3, and the fallback when the window holds no candidate).
struct SwapInGroup {
  std::vector<NodeId> consumers;  // sorted by (level, id)
  NodeId target;                  // consumers.front()
  std::optional<NodeId> trigger;
};

// One swapped tensor: the output of `source`, copied to the host once and brought back per group.
struct TensorSwap {
  ValueId value;
  NodeId source;
  std::vector<NodeId> near_consumers;  // keep reading the device tensor (distance <= T), sorted by id
  std::vector<SwapInGroup> groups;     // sorted by target level, then id
  int64_t bytes = 0;                   // the tensor's bytes
};

struct SwapDecisions {
  TflmsParams params;
  std::vector<TensorSwap> swaps;  // sorted by value id
  int64_t swap_out_bytes = 0;     // sum of swapped tensors' bytes (each copied out once)
  int64_t swap_in_bytes = 0;      // sum over groups of the tensor's bytes
};

// Checks every field's range (T >= 0, A >= 0, window >= 0, min_bytes >= 0, sync mode 0..3); errors name the
// field by its pass-option spelling (threshold, ahead, window, min_bytes, sync_mode).
Result<void> check_tflms_params(const TflmsParams& params);

// True when `n` may never be a swap source, a far consumer or a trigger: sources (inputs, parameters, state,
// constants), persistent or random ops, side-effecting or in-place ops (optimizer updates, running-statistics
// updates), copies, and the user's exclude_ops / exclude_names (a node is named by its first output).
bool tflms_node_excluded(const Graph& g, NodeId n, const TflmsParams& params);

// The trigger search of TFLMS.md for a swap-in of `source`'s tensor whose target is `target` (async modes):
// the smallest-id eligible ancestor of `target` at the highest level in the window, or nullopt (fall back to
// synchronous). Levels and reachability of the graph without swap ops.
std::optional<NodeId> find_swapin_trigger(const Graph& g, const Levels& levels, const Reachability& reach,
                                          NodeId source, NodeId target, const TflmsParams& params);

// Applies TFLMS's rules to every output of every op. Errors: params out of range (named), levels/reachability
// not computed for `g`.
Result<SwapDecisions> decide_tflms_swaps(const Graph& g, const Levels& levels, const Reachability& reach,
                                         const TflmsParams& params);

}  // namespace lms
