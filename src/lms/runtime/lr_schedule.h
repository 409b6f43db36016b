// Learning-rate schedules: the learning rate of each training step as a plain function of the step, counted from
// the first step ever trained (so that a run resumed from a checkpoint goes on along the same curve). A linear
// warm-up from lr/N to lr over the first N steps, then constant, linear or cosine decay to a floor, or a step
// decay by a factor every K steps or at given steps (milestones). The trainer feeds lr_at(step) / lr as the
// training graph's f32[] input %lr_scale (autodiff/optimizer.h OptimizerOptions::lr_scale), so one Program serves
// every step. docs/cli.md "Learning-rate schedules" is the user's description.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lms/support/error.h"

namespace lms {

enum class LrDecay : uint8_t { constant, linear, cosine, step };
std::string_view lr_decay_name(LrDecay d);                    // "constant", "linear", "cosine", "step"
std::optional<LrDecay> parse_lr_decay(std::string_view name);  // inverse of lr_decay_name

struct LrSchedule {
  LrDecay decay = LrDecay::constant;  // after the warm-up: how the rate goes from lr towards min_lr
  int64_t warmup_steps = 0;           // steps 0..N-1 train at lr * (step + 1) / N, reaching lr at step N - 1
  std::optional<int64_t> decay_steps;  // linear, cosine: the step at which the rate reaches min_lr (and stays);
                                       // unset: the step the run ends at (TrainOptions' first_step + steps)
  double min_lr = 0;                  // linear, cosine: the final rate, in [0, lr]
  int64_t step_every = 0;             // step: the rate is multiplied by `gamma` every this many steps after
                                      // the warm-up (>= 1), or
  std::vector<int64_t> milestones;    // step: at each of these steps (increasing, counted from the first step
                                      // ever trained; torch's MultiStepLR)
  double gamma = 0.1;                 // step: the factor, in (0, 1]
};

// Whether the schedule changes the rate at all (a constant schedule without warm-up does not, and training then
// needs no %lr_scale input).
bool is_scheduled(const LrSchedule& s);

// Checks the schedule against the base rate `lr`; errors name the option as the command line spells it
// ("--warmup-steps").
Result<void> check_lr_schedule(const LrSchedule& s, double lr);

// The learning rate of 0-based step `step` (from the first step ever trained) for base rate `lr`; `end_step` is
// where linear and cosine decay end when `decay_steps` is unset. The schedule must have passed
// check_lr_schedule.
double lr_at(const LrSchedule& s, double lr, int64_t step, int64_t end_step);

}  // namespace lms
