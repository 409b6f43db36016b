// What `lms plan`, `lms maxbatch` and `lms maxres` share: the training graph to plan (from FILE as given, or from
// --model with --train, momentum by default), the backend whose kernel workspaces the plan includes (--device;
// none by default), one planning call, and the search for the largest model size that fits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.h"
#include "lms/plan/strategy.h"
#include "lms/sim/cost_model.h"
#include "lms/runtime/backend.h"
#include "strategy_args.h"
#include "train_args.h"

namespace lms::cli {

struct PlanArgs {
  std::string file;
  ModelArgs model;
  TrainArgs train;
  StrategyArgs strategy;
  std::string device;  // --device: include this backend's kernel workspaces (empty: none)
  std::string plot;          // --plot FILE.svg: device memory over the step, this plan and strategy none's
  std::string trace;         // --trace FILE: the predicted step as a Chrome trace (needs a device model)
  bool json = false;
};

// Adds FILE, the model options, --train, the strategy options (--budget required), --device and --json.
void add_plan_options(CLI::App* app, PlanArgs& args, bool with_file);
// Adds --plot and --trace (lms plan).
void add_picture_options(CLI::App* app, PlanArgs& args);

// The graph to plan: FILE as given (a training graph, or a forward graph with --train), or --model's forward
// graph made a training graph with --train (default momentum). `onnx`: an ONNX FILE already read (load_graph).
Result<Graph> training_graph(const PlanArgs& args, const ModelArgs& model, const OnnxModel* onnx = nullptr);

// Planning options with the workspaces of --device (the backend is kept in `backend`, which must outlive them).
Result<StrategyOptions> planning_options(const PlanArgs& args, std::unique_ptr<Backend>& backend);

// The largest value of one model size that fits: `apply(model, k)` sets the k-th size on a copy of the model
// options and returns that size (k itself for the batch; a side for maxres); each probe plans the training
// graph (one stderr line per probe with --verbose). `what` names the size in messages. A size the model
// builder, the planner or the backend refuses outright (a tensor past 2^48 elements, a convolution past cuDNN's
// 32-bit indexing) counts as not fitting: the search goes on below it, and when the answer is bounded by such a
// refusal rather than by memory, `limited_by` says so. Errors: the refusal of k = 1, and not fitting even at
// k = 1 (with the reason).
struct Capacity {
  int64_t size = 0;        // the largest size that fits: apply(model, k) at the largest k
  Plan plan;               // the plan at that size (with --verbose, its search was printed)
  int probes = 0;          // plans made by the search
  std::string limited_by;  // "SIZE: error" when the next size up was refused, not out of memory; else empty
  std::string next_fails;  // "SIZE: why" when the next size up was planned and does not fit (the reason memory
                           // bounds the answer); else empty
};
Result<Capacity> largest_model(const PlanArgs& args, int64_t limit, const std::string& what,
                               const std::function<int64_t(ModelArgs&, int64_t)>& apply);

// A capacity search's answer: `key` (e.g. "max_batch") = c.size first, then the plan's strategy, budget, peaks,
// hard minimum, swap bytes, tflms parameters, the number of probes, `limited_by` (null when memory is the limit)
// and `next_does_not_fit` (why the next size does not fit; null when it was refused or not probed), as `lms
// maxbatch/maxres --json` print.
nlohmann::ordered_json capacity_json(const std::string& key, const Capacity& c);
// The text form: "<head> for 'MODEL' with strategy S under BUDGET<note>: planned peak P (without LMS Q)", the
// tflms parameters when there are any, and what refused the next size when that, not memory, is the limit.
void print_capacity(const std::string& head, const std::string& model, const std::string& note, const Capacity& c);

// The largest k in [1, limit] with fits(k), assuming fitting is monotone (fits(k) implies fits(j) for j < k):
// doubling from 1, then bisection. 0 when fits(1) is false. Errors from `fits` other than "does not fit" stop
// the search; `fits` returns false for a plan that does not fit.
Result<int64_t> largest_fitting(int64_t limit, const std::function<Result<bool>(int64_t)>& fits);

}  // namespace lms::cli
