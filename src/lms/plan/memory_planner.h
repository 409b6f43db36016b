// The memory planner: a static offset for every buffer of a scheduled graph, in one device arena and one host
// arena, so that the planned peak *is* the peak and no allocator runs during a step. Buffers are storage
// roots with liveness intervals (plan/liveness.h); two buffers may share addresses only if their intervals
// are disjoint. Persistent buffers (parameters and state, live for the whole program) go contiguously at the
// bottom of the device arena; the other buffers are placed above them by one of the assignment algorithms of
// plan/assignment.h (PlanOptions::assignment). The device arena's size is the planned peak; a budget below it
// is an error before anything runs, naming the peak, the budget and the op at the liveness peak. The plan
// also reports fragmentation: the planned peak against the liveness lower bound.
#pragma once

#include <cstdint>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/assignment.h"
#include "lms/plan/liveness.h"
#include "lms/support/error.h"
#include "lms/support/size.h"

namespace lms {

// The assignment algorithm plans use unless told otherwise: the one with the smaller arenas on our models'
// training graphs (bench/planner_bench.cc; the numbers are in docs/planner.md).
inline constexpr Assignment kDefaultAssignment = Assignment::greedy_by_size;

struct PlanOptions {
  int64_t budget_bytes = kUnlimitedBytes;      // device bytes available; a planned peak above it is an error
  Assignment assignment = kDefaultAssignment;  // how non-persistent buffers get their offsets
  uint32_t perturbation = 0;                   // perturbed_by_area: which order of the family
  std::vector<int64_t> workspace_bytes = {};   // scratch bytes each node's kernel needs, by NodeId of the
                                               // scheduled graph (Backend::workspace_bytes); empty: none
  bool reuse_buffers = true;                   // an op that may write over an input takes its buffer, and a
                                               // view shares it, where Notes [Buffer reuse], [Views] and
                                               // [Parts] (plan/liveness.h) allow
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;      // one per storage root, in root value-id order
  std::vector<int32_t> buffer_of_value;    // index into `buffers`, by ValueId
  std::vector<int64_t> offset_of_value;    // bytes from its buffer's offset, by ValueId (Note [Parts]; else 0)
  std::vector<int32_t> workspace_of_node;  // index into `buffers`, by NodeId; -1: no workspace
  int num_positions = 0;                   // schedule length

  int64_t device_arena_bytes = 0;          // the planned peak: the end of the highest device buffer
  int64_t host_arena_bytes = 0;            // the end of the highest host buffer
  int64_t persistent_bytes = 0;            // bytes of persistent device buffers (unpadded sum)
  int64_t persistent_end = 0;              // [0, persistent_end) holds them; transients lie above
  int64_t lower_bound_bytes = 0;           // liveness lower bound: most device bytes live at one position
  int64_t min_budget_bytes = 0;            // persistent bytes + the largest single-op working set (inputs,
                                           // outputs and workspace)
  int min_budget_position = -1;            // first position whose op has that largest working set
  int peak_position = -1;                  // first position where live device bytes reach the lower bound
  int64_t peak_transient_bytes = 0;        // non-persistent device bytes live there
  int reused_buffers = 0;                  // outputs written over the buffer of an input they read last, or
                                           // views sharing it, or parts in their whole's buffer (Notes [Buffer
                                           // reuse], [Views], [Parts], plan/liveness.h)
  int64_t budget_bytes = kUnlimitedBytes;  // the budget it was planned for
  Assignment assignment = kDefaultAssignment;  // the algorithm that placed it

  const PlannedBuffer& of(ValueId v) const { return buffers[buffer_of_value[v.v]]; }
  const PlannedBuffer* workspace(NodeId n) const {
    return workspace_of_node.empty() || workspace_of_node[n.v] < 0 ? nullptr : &buffers[workspace_of_node[n.v]];
  }
  // Fragmentation: the planned peak's excess over the liveness lower bound, as a fraction of the bound
  // (0 = no placement of this schedule could be smaller; 0 when the bound is 0).
  double fragmentation() const {
    return lower_bound_bytes > 0 ? static_cast<double>(device_arena_bytes - lower_bound_bytes) / lower_bound_bytes
                                 : 0.0;
  }
};

// Plans `scheduled` (node-id order is the execution order; checked). Errors: not in schedule order, or the
// planned peak above the budget ("does not fit: planned peak ... > budget ...; at the peak %x (op) runs ...").
Result<MemoryPlan> plan_memory(const Graph& scheduled, const PlanOptions& opts = {});

// The same placement without the budget check (for reports that show a plan that does not fit); the budget in
// `opts` is ignored.
Result<MemoryPlan> plan_memory_unchecked(const Graph& scheduled, const PlanOptions& opts = {});

// The error plan_memory returns when `plan` does not fit `budget_bytes` (exposed for reports and tests).
Error does_not_fit(const Graph& scheduled, const MemoryPlan& plan, int64_t budget_bytes);

}  // namespace lms
