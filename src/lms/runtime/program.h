// A Program: everything about one training step decided ahead of time, immutable once built. It holds the
// scheduled graph (node-id order is the issue order), the memory plan (an arena offset for every buffer),
// the stream of every node, each stream's node order, and the events that order streams against each other:
// before a node runs, its stream waits on `waits(n)`; after it, `recorded(n)` (if any) is recorded on its
// stream. Events come from two rules: a node waits for each dependency (data or control) that runs on another
// stream, and a buffer's first writer waits for every reader of the previous occupant of its space on other
// streams (DESIGN.md "Memory planner"). With one stream, as today, there are no events.
// `build_program` is a plain function from (scheduled graph, memory plan); `compile` runs the whole chain
// schedule -> memory plan -> program for a training graph.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"
#include "lms/plan/strategy.h"
#include "lms/runtime/backend.h"
#include "lms/support/error.h"

namespace lms {

// Where a value's bytes are during a step.
struct Location {
  Placement placement = Placement::device;  // which arena
  int64_t offset = 0;                       // in that arena
  int64_t bytes = 0;                        // the value's tensor bytes
};

class Program {
 public:
  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory() const { return memory_; }
  int64_t device_arena_bytes() const { return memory_.device_arena_bytes; }
  int64_t host_arena_bytes() const { return memory_.host_arena_bytes; }

  StreamId stream(NodeId n) const { return stream_[n.v]; }
  const std::vector<NodeId>& stream_order(StreamId s) const { return stream_order_[static_cast<int>(s)]; }
  const std::vector<EventId>& waits(NodeId n) const { return waits_[n.v]; }
  std::optional<EventId> recorded(NodeId n) const { return recorded_[n.v]; }
  uint32_t num_events() const { return num_events_; }

  Location location(ValueId v) const;
  // The node's workspace in the device arena (planned scratch space for its kernel), if it has one.
  std::optional<Location> workspace(NodeId n) const;
  // Values of `input` nodes and of persistent sources (param, state), in id order.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& persistent_values() const { return persistent_; }

 private:
  friend Result<Program> build_program(Graph scheduled, MemoryPlan plan);
  friend struct ProgramTestAccess;  // tests break Programs on purpose (program_check_test.cc)
  Graph graph_;
  MemoryPlan memory_;
  std::vector<StreamId> stream_;
  std::array<std::vector<NodeId>, kNumStreams> stream_order_;
  std::vector<std::vector<EventId>> waits_;
  std::vector<std::optional<EventId>> recorded_;
  uint32_t num_events_ = 0;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> persistent_;
};

// The stream an op runs on: copies to the host on d2h, copies to the device on h2d, everything else compute.
StreamId stream_for(const Graph& g, NodeId n);

// For every node, the nodes on other streams it must wait for (sorted, unique): its dependencies (data and
// control), and for a buffer's first writer the last toucher, on each other stream, of every earlier occupant
// of its space in `plan` (made for `scheduled`). The Program's events are exactly these; the time simulator
// plays them too.
std::vector<std::vector<NodeId>> cross_stream_waits(const Graph& scheduled, const MemoryPlan& plan);

// Builds a program from a graph in schedule order and its memory plan (made from that same graph).
Result<Program> build_program(Graph scheduled, MemoryPlan plan);

// schedule -> plan_memory (with the budget check) -> build_program. Given a backend, every node's workspace
// (Backend::workspace_bytes) becomes a planned buffer, so the plan is exact for that backend; a program compiled
// without one gives nodes no workspace, and a backend that needs some refuses to prepare it.
Result<Program> compile(const Graph& graph, const PlanOptions& opts = {}, Backend* backend = nullptr);

// The backend's workspaces as a planning function (plan/strategy.h), for make_plan.
WorkspaceFn workspaces_of(Backend& backend);

}  // namespace lms
