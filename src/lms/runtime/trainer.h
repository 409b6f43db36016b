// Training end to end, as `lms train` runs it: forward graph -> training graph (autodiff + optimizer) ->
// Program under the device budget (an error before anything runs if it does not fit) -> Executor on a
// backend, fed by a data source for a number of steps or epochs -> the report the command prints (losses,
// measured and planned peaks, step times) and optionally the test accuracy and the trained values. The
// command line only parses options, draws progress and prints; everything it reports is computed here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lms/autodiff/optimizer.h"
#include "lms/data/data.h"
#include "lms/ir/graph.h"
#include "lms/runtime/backend.h"
#include "lms/runtime/lr_schedule.h"
#include "lms/runtime/tensor.h"
#include "lms/runtime/trace.h"
#include "lms/support/error.h"
#include "lms/plan/strategy.h"
#include "lms/support/size.h"

namespace lms {

// A checkpoint's record of the run that wrote it: non-negative i64 scalar members beside the values, which
// `lms train --save` writes and `--load` resumes after (docs/checkpoints.md "Resuming").
inline constexpr const char* kCheckpointStepsKey = "lms.steps";
inline constexpr const char* kCheckpointBatchKey = "lms.batch";
inline constexpr const char* kCheckpointSeedKey = "lms.seed";
struct CheckpointRecord {
  int64_t steps = 0;             // steps trained (0 when absent: a checkpoint made with NumPy)
  std::optional<int64_t> batch;  // samples per step, if recorded: the data order goes on only at the same batch
  std::optional<int64_t> seed;   // the seed of the data order (TrainOptions::seed, below 2^63), if recorded
};

// An accuracy on the test split, after `step` steps (from the first ever trained) ending epoch `epoch` (1-based; the
// epoch under way when a run ends within one).
struct Evaluation {
  int64_t epoch = 0;
  int64_t step = 0;
  double accuracy = 0;
};

struct TrainOptions {
  std::string device = "reference";          // backend name (runtime/backend_registry.h)
  bool allow_tf32 = false;                   // cuda: f32 convolutions and matmuls on TF32 tensor cores
  int64_t max_workspace_bytes = BackendOptions{}.max_workspace_bytes;  // cuda: the largest convolution workspace
  ConvGemm conv_gemm = ConvGemm::one_by_one;  // cuda: the convolutions on cuBLAS (BackendOptions)
  bool cpu_blocked_layouts = true;  // cpu: activations in oneDNN's blocked layouts (BackendOptions)
  int64_t budget_bytes = kUnlimitedBytes;    // device memory for the step; the plan must fit it
  int64_t host_budget_bytes = kUnlimitedBytes;  // host memory for swapped tensors
  Strategy strategy = Strategy::none;        // how the plan fits the budget (plan/strategy.h)
  std::optional<TflmsParams> tflms;          // tflms: use these parameters instead of searching
  std::function<void(const TflmsTrial&)> on_trial;  // tflms: every parameter set the search simulates
  std::optional<DeviceModel> device_model;   // auto: the device it plans for (required by auto); any strategy:
                                             // the device the report's predicted step time is for
  MeasuredTimes measured;                    // auto: measured node times overriding the roofline
  bool reuse_buffers = true;                 // outputs written over dying inputs' buffers (StrategyOptions)
  TrainingOptions training;                  // optimizer and batch-norm statistics
  LrSchedule lr_schedule;                    // the learning rate of each step (from training.optimizer's lr);
                                             // a schedule adds the training graph's %lr_scale input
  std::optional<int64_t> steps;              // run exactly this many steps, or
  std::optional<int64_t> epochs;             // this many passes over the train split (neither: one epoch)
  DataOptions data;                          // data kind and directory; its seed is replaced by `seed`
  uint64_t seed = 0;                         // initial values and the data (contents and order)
  const std::map<std::string, HostTensor>* initial_values = nullptr;  // start from these (a checkpoint)
  const std::map<std::string, HostTensor>* given_values = nullptr;  // else: these values where they name one (an
                                                                    // imported model's weights), init for the rest
  int64_t first_step = 0;                    // steps trained before (a resumed checkpoint's): the data order,
                                             // and the epoch count, go on from there
  const CheckpointRecord* resumed = nullptr;  // the record of the checkpoint in initial_values: a batch or seed
                                              // unlike this run's is told to on_warning (the order does not go on)
  std::function<void(const std::string&)> on_warning;  // one line, once the checkpoint has been checked
  std::function<void(const Evaluation&, int64_t samples)> on_evaluation;  // each evaluate_every evaluation
  bool keep_values = false;                  // return the trained parameters and state
  bool evaluate = false;                     // measure accuracy on the test split after training (if it has one)
  int64_t evaluate_every = 0;                // with evaluate: also after every this many epochs (0: at the end only);
                                             // the training arenas are released for it and remade
  bool validate = true;                      // poison and scan every step to measure the touched peak
  TraceWriter* trace = nullptr;              // record the traced steps (traced_step) into this
  // Called with one line before each start-up stage that can take a while at a large batch: once planned (what
  // the plan does), and before allocating the arenas (pinning a host arena of tens of GiB takes seconds) and
  // writing the initial values.
  std::function<void(const std::string&)> on_start_up;
  // Called after every `checkpoint_every` steps but the last (0: never) with the parameters and state and the
  // steps trained so far, `first_step` included; an error stops training and is returned.
  int64_t checkpoint_every = 0;
  std::function<Result<void>(std::map<std::string, HostTensor>, int64_t)> on_checkpoint;
};

// Removes the record's members from a loaded checkpoint and returns them. Errors, naming `where`: a member that
// is not a non-negative i64 scalar.
Result<CheckpointRecord> take_checkpoint_record(std::map<std::string, HostTensor>& values, const std::string& where);
// Adds (or replaces) the record's members (batch and seed where set).
void put_checkpoint_record(std::map<std::string, HostTensor>& values, const CheckpointRecord& record);

// A trace holds the first kTracedFirstSteps steps and the last one: enough to see warm-up and a steady step,
// and bounded, so a run of thousands of steps does not write gigabytes.
inline constexpr int64_t kTracedFirstSteps = 3;
// Whether 0-based step `step` of `total` is traced.
inline bool traced_step(int64_t step, int64_t total) { return step < kTracedFirstSteps || step == total - 1; }

// What the progress callback sees after each step.
struct StepProgress {
  int64_t step = 0;          // steps done (1-based count)
  int64_t total_steps = 0;
  int64_t epoch = 0;         // 0-based epoch of this step
  int64_t total_epochs = 0;  // epochs the run spans (the last may be partial)
  int64_t batch = 0;         // samples per step
  double loss = 0;
  double lr = 0;             // the learning rate the step trained with
  double elapsed_seconds = 0;  // wall time since the first step started (data loading included)
};

// Returning false stops training after the current step (the report says `interrupted`).
using ProgressCallback = std::function<bool(const StepProgress&)>;

struct TrainReport {
  std::vector<double> losses;              // one per step
  std::vector<double> learning_rates;      // the rate each step trained with: lr x the fed f32 lr_scale
  bool lr_scheduled = false;               // the rate changed over the steps (a schedule, lr_schedule.h)
  std::vector<double> grad_norms;          // with gradient clipping: the gradients' 2-norm of each step, before
                                           // clipping (TrainingOptions::clip_grad_norm)
  std::vector<double> step_seconds;        // executor step times (feeding to synchronize), one per step
  double feed_seconds_median = 0;          // of a step, the median time writing the batch into the arena
  bool batch_pinned = false;               // both batch buffers were page-locked (Backend::pin_host_memory)
  double plan_seconds = 0;                 // building the training graph and planning it
  double start_seconds = 0;                // allocating the arenas (the host one pinned) and the initial values
  int64_t steps = 0, planned_steps = 0;     // steps run, and steps asked for (more if interrupted)
  int64_t first_step = 0;                  // steps trained before this run (TrainOptions::first_step)
  int64_t batch = 0, steps_per_epoch = 0;
  int64_t planned_peak_bytes = 0;          // the device arena: the plan's peak
  int64_t budget_bytes = kUnlimitedBytes;
  int64_t lower_bound_bytes = 0;           // the plan's liveness lower bound
  int64_t min_budget_bytes = 0;            // parameters and state plus the largest op
  int64_t persistent_bytes = 0;            // parameters and state
  int64_t peak_device_bytes = -1;          // measured: highest arena byte written + 1, over all steps (validate)
  int64_t max_live_bytes = 0;              // most device bytes the executor saw live at once
  int64_t peak_bytes_none = 0;             // the planned peak without any strategy
  bool lms_needed = false;                 // the strategy rewrote the graph (swaps) to fit the budget
  std::optional<TflmsParams> tflms;        // tflms: the parameters used
  int64_t swap_out_bytes = 0;              // per step, device -> host
  int64_t swap_in_bytes = 0;               // per step, host -> device
  int64_t swapped_tensors = 0;
  int64_t recomputed_tensors = 0;   // auto: values recomputed for their backward readers
  double recompute_flops = 0;       // auto: FLOPs run again per step
  std::string auto_source;          // auto: which plan it took (strategy.h Plan::auto_source)
  std::optional<double> predicted_step_seconds;  // with a device model: the plan's step predicted on it before
                                                 // running (three-stream simulation, measured node times given)
  std::string device_model;                      // ... the device model's name
  double step_seconds_median = 0;
  double samples_per_second = 0;           // batch * steps / the sum of step times
  std::optional<double> test_accuracy;     // with `evaluate`
  std::vector<Evaluation> evaluations;     // with `evaluate`: every evaluation (evaluate_every), the last one the end's
  int64_t test_samples = 0;
  bool interrupted = false;
  std::map<std::string, HostTensor> values;  // with `keep_values`: trained parameters and state by name
};

Result<TrainReport> train(const Graph& forward, const TrainOptions& opts, const ProgressCallback& progress = {});

// The median of a non-empty list (the mean of the middle two for an even count); 0 for an empty one.
double median(std::vector<double> v);

}  // namespace lms
