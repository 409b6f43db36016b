// The Executor runs training steps of a Program on a Backend. It allocates the backend's arenas at exactly the
// planned sizes, writes parameters and state once (initial values, or a checkpoint), and for each step feeds
// the inputs, issues every node in program order with the waits and records the program lists, synchronizes,
// and fetches the graph outputs (the loss). It never decides where memory goes.
// It measures each step: wall time; the live device bytes it sees (buffers become live when first written and
// die when their last use completes: an observation independent of the planner's intervals); and, in the
// validation mode, the peak device bytes actually touched: the region above the parameters is poisoned with
// kPoisonByte before the step and scanned afterwards for the highest byte that changed (docs/runtime.md).
// Given a TraceWriter, a step also reports every node's start and end on its stream and the device and host
// bytes live after each allocation and free point (docs/trace.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "lms/runtime/backend.h"
#include "lms/runtime/program.h"
#include "lms/runtime/tensor.h"
#include "lms/runtime/trace.h"
#include "lms/support/error.h"

namespace lms {

// What validation writes over the non-persistent part of the device arena before a step. Not 0x00 (zeros are
// common results) and not a byte that makes common small floats.
inline constexpr std::byte kPoisonByte{0xA5};

struct ExecutorOptions {
  bool measure_touched = false;  // validation mode: check the Program for races (runtime/program_check.h) once,
                                 // and poison before each step and scan after (two passes over the arena a step)
  bool time_nodes = false;       // fill StepResult::node_seconds (`lms profile`)
};

// One input of a step: a value of an `input` node and the tensor to feed it.
struct Feed {
  ValueId value;
  const HostTensor* tensor = nullptr;
};

struct StepResult {
  std::vector<HostTensor> outputs;  // the graph outputs, in order
  double seconds = 0;               // from the first feed to the end of synchronize
  double feed_seconds = 0;          // of which writing the fed inputs (host to device copies of the batch)
  int64_t touched_bytes = -1;       // validation mode: highest device arena byte written + 1 (at least the
                                    // parameters' end); -1 otherwise
  int64_t max_live_bytes = 0;       // most device bytes the executor saw live at once
  std::vector<double> node_seconds;  // with ExecutorOptions::time_nodes: each node's run time, by NodeId (0 for
                                     // nodes that do not run: inputs, parameters, state)
};

// Whether `values` (a checkpoint, by value name) can be loaded into `program` (Executor::load): every
// persistent value present with its exact type and size; names the program lacks are an error unless
// `allow_unused`. Needs no backend, so a bad checkpoint is refused before any arena is allocated.
Result<void> check_checkpoint(const Program& program, const std::map<std::string, HostTensor>& values,
                              bool allow_unused = false);

class Executor {
 public:
  // Allocates the arenas (the backend refuses more than its budget) and prepares the backend. `program` and
  // `backend` must outlive the executor.
  static Result<Executor> create(const Program& program, Backend& backend, ExecutorOptions opts = {});

  const Program& program() const { return *program_; }

  // Writes every parameter and state value from its initializer (runtime/init.h) with this seed, or from `given`
  // where that names the value (an imported model's weights; the type must match exactly). Names in `given` that
  // the program lacks are skipped: running statistics, say, when the training graph keeps none.
  Result<void> initialize(uint64_t seed, const std::map<std::string, HostTensor>* given = nullptr);
  // Writes parameters and state by value name (a checkpoint), after check_checkpoint (`allow_unused`: evaluating
  // a forward graph with a training checkpoint that also holds optimizer state).
  Result<void> load(const std::map<std::string, HostTensor>& values, bool allow_unused = false);
  // Every parameter and state value by name (for checkpoints and tests).
  Result<std::map<std::string, HostTensor>> persistent_values() const;
  // A persistent value or a graph output (after a step); other values' space is reused within a step, so
  // reading them would be a silent wrong answer and is an error instead.
  Result<HostTensor> read(ValueId v) const;

  // Runs one step. Every program input must be fed exactly once with its exact type. With `trace`, the step's
  // node runs and live bytes are added to it.
  Result<StepResult> step(std::span<const Feed> feeds, TraceWriter* trace = nullptr);

 private:
  Executor(const Program& p, Backend& b, ExecutorOptions o) : program_(&p), backend_(&b), opts_(o) {}
  Result<void> write(ValueId v, const HostTensor& t);
  Result<void> feed(std::span<const Feed> feeds);
  Result<void> issue_all(int64_t& max_live, TraceWriter* trace);
  Backend::NodeTimes own_times_;  // node times taken around run() for backends that run nodes inside it

  const Program* program_;
  Backend* backend_;
  ExecutorOptions opts_;
  bool initialized_ = false;
  int64_t persistent_top_ = 0;           // end of the highest persistent device buffer
  std::vector<int> uses_;                // by buffer: nodes that read it or write it in place
  std::vector<bool> pinned_;             // by buffer: persistent or a graph output (never dies in a step)
};

}  // namespace lms
