// Compares the memory planner's assignment algorithms on our models' training graphs: for each model, each
// algorithm's planned device arena against the liveness lower bound of the same schedule (the most bytes live
// at one position, which no placement can beat), and the time planning took. Plain output, one row per
// (model, algorithm), deterministic apart from the time column. Run: build/bench/planner_bench. The numbers
// chose kDefaultAssignment (memory_planner.h) and are recorded in docs/planner.md and docs/results.md.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lms/autodiff/optimizer.h"
#include "lms/models/models.h"
#include "lms/plan/memory_planner.h"
#include "lms/plan/schedule.h"

namespace {

struct Config {
  std::string label;       // what the row says
  std::string model;       // the registry name
  lms::ModelOptions opts;  // the model's options
};

std::vector<Config> configs() {
  std::vector<Config> c;
  c.push_back({"mlp", "mlp", lms::ModelOptions{}});
  lms::ModelOptions r18;
  r18.batch = 32;
  r18.image = {32};
  r18.small_stem = true;
  c.push_back({"resnet18 32x32 small-stem b32", "resnet18", r18});
  lms::ModelOptions r50;
  r50.batch = 8;
  r50.image = {224};
  c.push_back({"resnet50 224 b8", "resnet50", r50});
  lms::ModelOptions unet;
  unet.batch = 1;
  unet.image = {64};
  c.push_back({"unet3d 64^3 b1", "unet3d", unet});
  lms::ModelOptions gpt;
  gpt.batch = 2;
  gpt.layers = 12;
  gpt.seq = 256;
  c.push_back({"gpt 12 layers seq256 b2", "gpt", gpt});
  return c;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

int main() {
  using namespace lms;
  fmt::print("{:<32} {:<22} {:>12} {:>12} {:>9} {:>9}\n", "model (training, momentum)", "assignment",
             "arena MiB", "bound MiB", "frag %", "plan ms");
  int status = 0;
  for (const Config& c : configs()) {
    auto forward = build_model(c.model, c.opts);
    if (!forward) {
      fmt::print(stderr, "{}: {}\n", c.label, forward.error().str());
      status = 1;
      continue;
    }
    auto training = build_training_graph(*forward, TrainingOptions{});
    if (!training) {
      fmt::print(stderr, "{}: {}\n", c.label, training.error().str());
      status = 1;
      continue;
    }
    auto scheduled = schedule(*training);
    if (!scheduled) {
      fmt::print(stderr, "{}: {}\n", c.label, scheduled.error().str());
      status = 1;
      continue;
    }
    for (Assignment a : kAllAssignments) {
      auto start = std::chrono::steady_clock::now();
      auto plan = plan_memory_unchecked(*scheduled, PlanOptions{.assignment = a});
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!plan) {
        fmt::print(stderr, "{}: {}\n", c.label, plan.error().str());
        status = 1;
        continue;
      }
      fmt::print("{:<32} {:<22} {:>12.2f} {:>12.2f} {:>9.2f} {:>9.1f}\n", c.label, assignment_name(a),
                 plan->device_arena_bytes / kMiB, plan->lower_bound_bytes / kMiB, 100.0 * plan->fragmentation(), ms);
    }
  }
  return status;
}
