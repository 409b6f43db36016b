// The event interface the simulators share (DESIGN.md "Simulators share one event interface"): a simulator
// walks a plan and tells a listener when an op starts and ends, when a buffer is allocated or freed, and when
// a copy between device and host starts and ends. The memory simulator (sim/memory_sim) only counts bytes; a
// time simulator will add timestamps to the same calls. `RecordingEvents` writes every event as one line of
// text, so tests can compare a simulated walk with a walk worked out by hand. Nothing here changes a graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lms/ir/graph.h"

namespace lms {

// What a simulated buffer holds.
enum class SimBufferKind : uint8_t {
  tensor,     // a value's own storage (a storage root of the graph)
  swap_in,    // the device copy one swap-in group brings back (value, group)
  host_copy,  // the host copy a swap-out makes (value)
  workspace,  // the scratch space of one node's kernel (node)
};

struct SimBuffer {
  SimBufferKind kind = SimBufferKind::tensor;
  ValueId value;  // the tensor it holds (invalid for a workspace)
  NodeId node;    // workspace: the node it belongs to; otherwise invalid
  int group = -1;  // swap_in: the group's index in TensorSwap::groups; otherwise -1
  Placement placement = Placement::device;
  int64_t bytes = 0;
};

// A listener; every method does nothing by default. `used` is the bytes in use on the buffer's placement
// after the event (transient bytes only: persistent parameters and state are outside the walk).
class SimEvents {
 public:
  virtual ~SimEvents() = default;
  virtual void op_start(NodeId /*node*/, int /*level*/) {}
  virtual void op_end(NodeId /*node*/, int /*level*/) {}
  virtual void allocate(const SimBuffer& /*b*/, int64_t /*used*/) {}
  virtual void free(const SimBuffer& /*b*/, int64_t /*used*/) {}
  // `dst` is the buffer being filled: a host copy (device to host) or a swap-in (host to device).
  virtual void copy_start(const SimBuffer& /*dst*/) {}
  virtual void copy_end(const SimBuffer& /*dst*/) {}
};

// Records events as text lines, one per event (op_end is not recorded: the next line shows it):
//   "L2 %c"                 op %c starts at level 2
//   "+dev %a 64 = 192"      allocate 64 device bytes for %a; 192 transient device bytes in use after
//   "-dev %a 64 = 128"      free them
//   "+host %a@host 64 = 64" a swap-out's host copy ("-host" frees it)
//   "+dev %a@in0 64 = ..."  the device copy swap-in group 0 of %a brings back
//   "+dev ws(%c) 16 = ..."  the workspace of node %c
//   "copy %a@host" / "done %a@host"   a copy into that buffer starts / ends
class RecordingEvents : public SimEvents {
 public:
  explicit RecordingEvents(const Graph& g) : g_(g) {}
  void op_start(NodeId node, int level) override;
  void allocate(const SimBuffer& b, int64_t used) override;
  void free(const SimBuffer& b, int64_t used) override;
  void copy_start(const SimBuffer& dst) override;
  void copy_end(const SimBuffer& dst) override;

  const std::vector<std::string>& lines() const { return lines_; }
  // The lines joined with '\n' (for readable test failures).
  std::string text() const;

 private:
  std::string label(const SimBuffer& b) const;
  const Graph& g_;
  std::vector<std::string> lines_;
};

}  // namespace lms
