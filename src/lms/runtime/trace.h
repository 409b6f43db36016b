// A trace of training steps in the Chrome trace-event JSON format (what `lms train --trace FILE` writes; open it
// in ui.perfetto.dev or chrome://tracing, docs/trace.md). The executor reports, for each traced step, every
// node's start and end on its stream and the device and host bytes live after each allocation and free point;
// the TraceWriter keeps them in memory and writes them once at the end: one track (thread) per stream, named
// by "M" thread_name metadata, with one complete ("X") event per node run, and two counter ("C") tracks for
// device and host bytes in use. The output is deterministic given the events: keys in a fixed order,
// metadata first, then events in time order (ties keep the order they were reported in).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/runtime/backend.h"
#include "lms/support/error.h"

namespace lms {

// The names the counter tracks carry in the trace (their one series is "bytes").
inline constexpr const char* kTraceDeviceCounter = "device memory";
inline constexpr const char* kTraceHostCounter = "host memory";
// The trace's one process id (one process: this run); thread ids are the stream numbers.
inline constexpr int kTracePid = 1;

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;

  // Timestamps are microseconds since `origin` (the trace's zero); `process` names the trace's one process.
  explicit TraceWriter(Clock::time_point origin = Clock::now(), std::string process = "lms train")
      : origin_(origin), process_(std::move(process)) {}

  // The training step the following events belong to (0-based; written into every event's args).
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

  // One node run on `stream` from `start` to `end`: named `name` (its output values), with the op in args.
  void complete(std::string name, std::string op, uint32_t node, StreamId stream, Clock::time_point start,
                Clock::time_point end);
  // Device and host bytes in use from `at` on.
  void memory(Clock::time_point at, int64_t device_bytes, int64_t host_bytes);

  size_t num_events() const { return events_.size(); }
  // The whole trace as JSON text.
  std::string json() const;
  // Writes json() to `path`, replacing it.
  Result<void> write(const std::filesystem::path& path) const;

 private:
  struct Event {
    char phase = 'X';          // 'X' complete or 'C' counter
    std::string name;
    std::string op;            // X: the op
    uint32_t node = 0;         // X: the node id
    int tid = 0;               // X: the stream
    int64_t ts = 0, dur = 0;   // nanoseconds since the origin (written as microseconds)
    int64_t step = 0;
    int64_t bytes = 0;         // C: the counter's value
  };
  int64_t nanos(Clock::time_point t) const;

  Clock::time_point origin_;
  std::string process_;
  int64_t step_ = 0;
  std::vector<Event> events_;
};

// A node's name in a trace: its output values' names, comma-separated ("node #N" for a node without outputs).
std::string trace_node_name(const Graph& g, NodeId n);

// Checks that `path` can be written, before anything runs, by creating (or truncating) it: a run that trains
// for an hour must not fail at the end on a typo. Error names the path and the reason.
Result<void> check_trace_path(const std::filesystem::path& path);

}  // namespace lms
