// Learning-rate schedules: the rate of each step (warm-up, linear, cosine and step decay, the floor, a run that
// ends within its warm-up) and the checks of a schedule; and in training, on every backend of the build, that each
// step trains at its scheduled rate: a scheduled run ends with the losses and values, bit for bit, of a chain of
// one-step runs each given that step's rate as its constant learning rate. A scheduled run resumed from a
// checkpoint goes on along the same curve, and swapping under a budget does not change what it computes (nor what
// gradient clipping does).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "../backends/gpu_presence.h"
#include "lms/runtime/lr_schedule.h"
#include "lms/runtime/trainer.h"
#include "runtime_test_util.h"

namespace lms {
namespace {

using Values = std::map<std::string, HostTensor>;
using runtime_test::expect_same_values;

TEST(LrSchedule, WarmUpThenDecay) {
  LrSchedule s;
  s.warmup_steps = 4;
  EXPECT_TRUE(is_scheduled(s));
  EXPECT_FALSE(is_scheduled(LrSchedule{}));
  // Step s of the warm-up trains at lr * (s + 1) / 4; constant afterwards.
  EXPECT_EQ(lr_at(s, 0.4, 0, 100), 0.4 * 1 / 4);
  EXPECT_EQ(lr_at(s, 0.4, 2, 100), 0.4 * 3 / 4);
  EXPECT_EQ(lr_at(s, 0.4, 3, 100), 0.4);
  EXPECT_EQ(lr_at(s, 0.4, 99, 100), 0.4);

  s.decay = LrDecay::linear;
  s.min_lr = 0.1;
  // Decay over steps 4..14 (end 14): a tenth of the way down per step.
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 4, 14), 0.6);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 9, 14), 0.35);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 13, 14), 0.1 + 0.5 * 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 14, 14), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 50, 14), 0.1) << "past the decay: the floor";

  s.decay = LrDecay::cosine;
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 4, 14), 0.6);
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 9, 14), 0.35) << "halfway: halfway down";
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 6, 14), 0.1 + 0.5 * 0.5 * (1 + std::cos(std::numbers::pi * 0.2)));
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 14, 14), 0.1);
  s.decay_steps = 24;  // overrides the run's end
  EXPECT_DOUBLE_EQ(lr_at(s, 0.6, 14, 14), 0.35);

  // A run that ends within its warm-up never decays (and its rate never passes lr).
  LrSchedule short_run;
  short_run.decay = LrDecay::cosine;
  short_run.warmup_steps = 10;
  EXPECT_EQ(lr_at(short_run, 1.0, 4, 5), 0.5);

  LrSchedule step;
  step.decay = LrDecay::step;
  step.warmup_steps = 1;
  step.step_every = 3;
  step.gamma = 0.5;
  EXPECT_EQ(lr_at(step, 1.0, 0, 100), 1.0);
  EXPECT_EQ(lr_at(step, 1.0, 3, 100), 1.0);
  EXPECT_EQ(lr_at(step, 1.0, 4, 100), 0.5);
  EXPECT_EQ(lr_at(step, 1.0, 10, 100), 0.125);

  // Milestones: absolute steps, each multiplying by gamma from that step on (torch's MultiStepLR).
  step.step_every = 0;
  step.milestones = {3, 5};
  EXPECT_TRUE(check_lr_schedule(step, 1.0).has_value());
  EXPECT_EQ(lr_at(step, 1.0, 2, 100), 1.0);
  EXPECT_EQ(lr_at(step, 1.0, 3, 100), 0.5);
  EXPECT_EQ(lr_at(step, 1.0, 4, 100), 0.5);
  EXPECT_EQ(lr_at(step, 1.0, 5, 100), 0.25);
  EXPECT_EQ(lr_at(step, 1.0, 99, 100), 0.25);
}

TEST(LrSchedule, ChecksNameTheFlag) {
  auto error = [](const LrSchedule& s, double lr = 0.1) {
    auto r = check_lr_schedule(s, lr);
    return r ? std::string("ok") : r.error().str();
  };
  EXPECT_EQ(error(LrSchedule{}), "ok");
  LrSchedule s;
  s.warmup_steps = -1;
  EXPECT_NE(error(s).find("--warmup-steps must be >= 0"), std::string::npos) << error(s);
  s = {};
  s.decay = LrDecay::cosine;
  s.min_lr = 0.5;
  EXPECT_NE(error(s).find("--min-lr must be in [0, the learning rate 0.1]"), std::string::npos) << error(s);
  s.min_lr = 0;
  s.warmup_steps = 10;
  s.decay_steps = 10;
  EXPECT_NE(error(s).find("--decay-steps (10) must be greater than --warmup-steps (10)"), std::string::npos);
  s = {};
  s.decay_steps = 10;
  EXPECT_NE(error(s).find("--decay-steps applies to --lr-schedule linear or cosine"), std::string::npos);
  s = {};
  s.decay = LrDecay::step;
  EXPECT_NE(error(s).find("needs --lr-step-every"), std::string::npos) << error(s);
  s.step_every = 5;
  s.gamma = 0;
  EXPECT_NE(error(s).find("--lr-gamma must be in (0, 1]"), std::string::npos) << error(s);
  s = {};
  s.step_every = 5;
  EXPECT_NE(error(s).find("--lr-step-every and --lr-milestones apply to --lr-schedule step"), std::string::npos)
      << error(s);
  s.decay = LrDecay::step;
  s.milestones = {10, 20};
  EXPECT_NE(error(s).find("give --lr-step-every or --lr-milestones, not both"), std::string::npos) << error(s);
  s.step_every = 0;
  s.milestones = {10, 10};
  EXPECT_NE(error(s).find("--lr-milestones must increase, got 10 after 10"), std::string::npos) << error(s);
  s.milestones = {0};
  EXPECT_NE(error(s).find("--lr-milestones must be steps >= 1, got 0"), std::string::npos) << error(s);
}

// A GPT with dropout trained with Adam (so that the step count, the moments and the dropout key carry over),
// 8 synthetic samples: 2 steps an epoch.
TrainOptions options(const std::string& device, int64_t steps) {
  TrainOptions o;
  o.device = device;
  o.training.optimizer.kind = OptimizerKind::adam;
  o.training.optimizer.lr = 0.01;
  o.steps = steps;
  o.seed = 5;
  o.data.synthetic_train_samples = 8;
  o.keep_values = true;
  return o;
}

LrSchedule cosine_with_warmup() {
  LrSchedule s;
  s.decay = LrDecay::cosine;
  s.warmup_steps = 2;
  s.min_lr = 0.001;
  return s;
}

TEST(LrScheduleTraining, EachStepTrainsAtItsScheduledRate) {
  const Graph gpt = runtime_test::small_gpt(/*dropout=*/0.1);
  for (const std::string& device : training_devices()) {
    TrainOptions o = options(device, 5);
    o.lr_schedule = cosine_with_warmup();
    auto scheduled = train(gpt, o);
    ASSERT_TRUE(scheduled.has_value()) << device << ": " << scheduled.error().str();
    ASSERT_EQ(scheduled->learning_rates.size(), 5u);
    EXPECT_TRUE(scheduled->lr_scheduled);
    // The rates fed: half the rate, then the peak, then down towards the floor (rounded to the f32 lr_scale).
    EXPECT_NEAR(scheduled->learning_rates[0], 0.005, 1e-9);
    EXPECT_NEAR(scheduled->learning_rates[1], 0.01, 1e-9);
    EXPECT_NEAR(scheduled->learning_rates[4], 0.001 + 0.009 * 0.5 * (1 + std::cos(std::numbers::pi * 2 / 3)), 1e-9);

    // The same steps one at a time, each with its rate as the constant learning rate, from the last one's values.
    Values values;
    for (int64_t step = 0; step < 5; ++step) {
      TrainOptions one = options(device, 1);
      one.training.optimizer.lr = scheduled->learning_rates[step];
      one.first_step = step;
      if (step > 0) one.initial_values = &values;
      auto r = train(gpt, one);
      ASSERT_TRUE(r.has_value()) << device << ": " << r.error().str();
      EXPECT_FALSE(r->lr_scheduled);
      EXPECT_EQ(r->losses.front(), scheduled->losses[step]) << device << ": step " << step;
      values = std::move(r->values);
    }
    expect_same_values(scheduled->values, values, device + ": scheduled vs one step at a time");

    // Without the schedule the rate is lr from the first step: other losses.
    auto constant = train(gpt, options(device, 5));
    ASSERT_TRUE(constant.has_value()) << constant.error().str();
    EXPECT_EQ(constant->learning_rates, std::vector<double>(5, 0.01));
    EXPECT_NE(constant->losses[1], scheduled->losses[1]) << device;
  }
}

TEST(LrScheduleTraining, ResumingGoesOnAlongTheSameCurve) {
  const Graph gpt = runtime_test::small_gpt(/*dropout=*/0.1);
  LrSchedule s = cosine_with_warmup();
  s.decay_steps = 5;  // the whole run's end, given to both pieces
  TrainOptions whole = options("reference", 5);
  whole.lr_schedule = s;
  auto a = train(gpt, whole);
  ASSERT_TRUE(a.has_value()) << a.error().str();
  TrainOptions first = options("reference", 2);
  first.lr_schedule = s;
  auto b = train(gpt, first);
  ASSERT_TRUE(b.has_value()) << b.error().str();
  TrainOptions rest = options("reference", 3);
  rest.lr_schedule = s;
  rest.first_step = 2;
  rest.initial_values = &b->values;
  auto c = train(gpt, rest);
  ASSERT_TRUE(c.has_value()) << c.error().str();
  std::vector<double> rates = b->learning_rates, losses = b->losses;
  rates.insert(rates.end(), c->learning_rates.begin(), c->learning_rates.end());
  losses.insert(losses.end(), c->losses.begin(), c->losses.end());
  EXPECT_EQ(rates, a->learning_rates);
  EXPECT_EQ(losses, a->losses);
  expect_same_values(a->values, c->values, "2 + 3 resumed vs 5");
}

// With a schedule and gradient clipping (which keeps every gradient until the norm is known).
TEST(LrScheduleTraining, SwapsAndRecomputationAreBitIdentical) {
  const Graph gpt = runtime_test::small_gpt(/*dropout=*/0.1);
  for (const std::string& device : training_devices()) {
    TrainOptions o = options(device, 3);
    o.lr_schedule = cosine_with_warmup();
    o.training.clip_grad_norm = 0.5;
    auto base = train(gpt, o);
    ASSERT_TRUE(base.has_value()) << base.error().str();
    TrainOptions swapped = o;
    swapped.strategy = Strategy::tflms;
    TflmsParams p;  // T = 1, A = 1, no grouping: the most swaps
    p.min_bytes = 0;
    swapped.tflms = p;
    auto s = train(gpt, swapped);
    ASSERT_TRUE(s.has_value()) << s.error().str();
    EXPECT_GT(s->swapped_tensors, 0) << device;
    EXPECT_EQ(s->losses, base->losses) << device << " tflms";
    ASSERT_EQ(base->grad_norms.size(), 3u);
    EXPECT_EQ(s->grad_norms, base->grad_norms) << device << " tflms";
    expect_same_values(base->values, s->values, device + " tflms");
    TrainOptions automatic = o;
    automatic.strategy = Strategy::automatic;
    automatic.device_model = *device_model("v100-pcie3");
    automatic.budget_bytes = base->min_budget_bytes + (base->planned_peak_bytes - base->min_budget_bytes) / 3;
    auto r = train(gpt, automatic);
    ASSERT_TRUE(r.has_value()) << r.error().str();
    EXPECT_TRUE(r->lms_needed) << device;
    EXPECT_EQ(r->losses, base->losses) << device << " auto, took " << r->auto_source;
    EXPECT_EQ(r->grad_norms, base->grad_norms) << device << " auto";
    expect_same_values(base->values, r->values, device + " auto");
  }
}

}  // namespace
}  // namespace lms
