// The TFLMS memory simulator (shared/TFLMS.md "The simulator"): a reference-counting walk over the levels of a
// training graph that plays the rewrite a set of SwapDecisions *would* produce, without building it, and says
// whether it fits a device budget (and a host budget) and how many bytes it needs. The auto-tuning search
// (plan/tflms_search) calls it once per parameter set it tries, so the walk is O(nodes + edges + swaps) and
// everything that depends only on the graph is prepared once by `MemorySimulator`. The rules are in
// Note [TFLMS memory walk] below. Precondition: the graph the decisions were made for, without swap ops, and
// its levels. Nothing here changes the graph.
//
// Note [TFLMS memory walk]
// Persistent values (parameters and optimizer state, Graph::is_persistent) are outside the walk: they live for
// the whole step, so they are counted once, up front. Every other buffer is a storage root (an in-place
// output shares its input's buffer). The walk visits levels in order and the nodes of a level by id; one node
// is one *step*:
//   1. buffers the node needs that are not yet resident are allocated: the device copy of a synchronous
//      swap-in group whose target is this node (its host-to-device copy runs now, blocking);
//   2. the node's fresh outputs (and its workspace, if the options give one) are allocated; the bytes in use
//      now are the step's working set, compared against the budget and recorded in the curve;
//   3. the node releases what it read: one hold per distinct buffer, then its workspace; a buffer nobody
//      holds any more is freed (an output nobody reads is freed here too); graph outputs are never freed;
//   4. if the node is the source of swapped tensors, their host copies are allocated (the swap-out starts);
//   5. if the node is the trigger of swap-in groups, their device copies are allocated (the prefetch starts).
// A buffer's holds are the distinct nodes reading it, except that a swapped tensor's far consumers hold their
// group's swap-in copy instead; the swap-out holds the device tensor until its copy is done: to the end of
// level(source) + 1 in async swap-out modes (0, 2), to the start of level(source) + 1 when the ops after the
// source wait for the copy (sync modes 1, 3). A swap-in copy is held by its group's consumers. A host copy
// lives from its swap-out to the start of its last group's target (that copy is then complete).
// Out of memory is the first allocation after which the bytes in use exceed the budget; the walk goes on to
// the end so that the peak is always the full walk's peak (the search reports the smallest peak it saw).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lms/analysis/levels.h"
#include "lms/analysis/tflms_swaps.h"
#include "lms/ir/graph.h"
#include "lms/sim/sim_events.h"
#include "lms/support/error.h"
#include "lms/support/size.h"

namespace lms {

struct MemorySimOptions {
  int64_t device_bytes = kUnlimitedBytes;  // device memory (the budget before the ratio)
  int64_t host_bytes = kUnlimitedBytes;    // host memory for swap-out copies; exceeding it is out of memory
  double ratio = 1.0;                      // fraction of the device memory the walk may use; TFLMS used 0.9
                                           // for workspaces and fragmentation it did not model; our planner is
                                           // exact, so 1.0 (TFLMS.md, ours); in (0, 1]
  bool subtract_persistent = true;         // true (TFLMS): budget = ratio x (device - persistent bytes), for the
                                           // transient bytes alone; false: budget = ratio x device, for
                                           // persistent and transient bytes together
  std::vector<int64_t> workspace_bytes = {};  // scratch bytes each node's kernel needs while it runs, by
                                              // NodeId (Backend::workspace_bytes); empty: none
};

// The first allocation that did not fit.
struct SimOutOfMemory {
  Placement placement = Placement::device;  // which budget it exceeded
  SimBufferKind kind = SimBufferKind::tensor;  // what was being allocated
  int level = 0;
  NodeId node;          // the node whose step made the allocation
  ValueId value;        // the tensor allocated (invalid for a workspace)
  int64_t bytes = 0;    // bytes asked for
  int64_t free = 0;     // bytes left under the budget before the allocation (0 when already over)
};

struct MemorySimResult {
  bool fits = false;                      // no allocation exceeded the device or the host budget
  int64_t budget_bytes = 0;               // the device budget as the options define it (see subtract_persistent)
  int64_t transient_budget_bytes = 0;     // the part of it left for non-persistent buffers (may be negative)
  int64_t host_budget_bytes = 0;          // the host budget
  int64_t persistent_bytes = 0;           // parameters and state on the device
  int64_t peak_transient_bytes = 0;       // most non-persistent device bytes in use at once
  int64_t peak_device_bytes = 0;          // peak_transient_bytes + persistent_bytes
  int peak_level = -1;                    // first level where the transient peak is reached
  NodeId peak_node;                       // the node whose step reached it
  int64_t peak_host_bytes = 0;            // most host bytes in use at once (swap-out copies)
  std::vector<int64_t> level_bytes;       // most transient device bytes in use during each level
  std::optional<SimOutOfMemory> oom;      // the first allocation that did not fit; set iff !fits
  int64_t min_device_bytes = 0;           // hard minimum: persistent bytes + the largest single-step working
                                          // set (inputs, outputs, workspace), which no swapping reduces
  NodeId min_node;                        // the node with that working set
};

// Everything the walk needs that depends only on the graph, computed once (O(nodes + edges)). It keeps
// pointers to the graph and the levels: both must outlive it and stay unchanged.
class MemorySimulator {
 public:
  // Errors: levels not computed for `g` (size mismatch), workspace_bytes of the wrong size.
  static Result<MemorySimulator> create(const Graph& g, const Levels& levels,
                                        std::span<const int64_t> workspace_bytes = {});

  // Plays `decisions` under `opts` (opts.workspace_bytes is ignored: it was given to create). Errors name the
  // decision that does not belong to this graph: a value or node out of range, a source that does not produce
  // the value, a consumer that does not read it, a trigger not strictly between the source's and the
  // target's levels, an in-place (aliasing) value swapped; and options out of range.
  Result<MemorySimResult> run(const SwapDecisions& decisions, const MemorySimOptions& opts,
                              SimEvents* events = nullptr) const;

  int64_t persistent_bytes() const { return persistent_bytes_; }

 private:
  const Graph* g_ = nullptr;
  const Levels* levels_ = nullptr;
  std::vector<uint32_t> root_;           // storage root of each value
  std::vector<int32_t> base_holds_;      // by root value: distinct reading nodes (+1 for graph outputs)
  std::vector<uint8_t> walked_;          // by value: 1 if a non-persistent root (a buffer of the walk)
  std::vector<uint32_t> reads_begin_;    // CSR by node: distinct walked roots the node reads
  std::vector<uint32_t> reads_;
  std::vector<uint32_t> fresh_begin_;    // CSR by node: walked roots the node produces
  std::vector<uint32_t> fresh_;
  std::vector<int64_t> workspace_;       // by node; empty: none
  std::vector<NodeId> order_;            // the walk: levels in order, nodes of a level by id
  std::vector<uint32_t> pos_;            // by node: its index in order_
  int64_t persistent_bytes_ = 0;
  int64_t min_working_set_ = 0;
  NodeId min_node_;
};

// One-shot form: prepares and runs (the search uses MemorySimulator to prepare once).
Result<MemorySimResult> simulate_tflms_memory(const Graph& g, const Levels& levels, const SwapDecisions& decisions,
                                              const MemorySimOptions& opts, SimEvents* events = nullptr);

// "out of device memory at %y (conv2d, level 7): allocating 1.5 GiB for %y with 512 MiB free of a 4 GiB
// budget (...)": the error for a result that does not fit (precondition: !r.fits).
Error sim_out_of_memory(const Graph& g, const MemorySimResult& r);

}  // namespace lms
