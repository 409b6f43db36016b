// Learning-rate schedules, AdamW and gradient clipping against PyTorch: an MLP trained ten steps by torch.optim (Adam,
// AdamW, momentum SGD, SGD) with torch.optim.lr_scheduler's LinearLR warm-up, CosineAnnealingLR, StepLR and LinearLR
// decay, MultiStepLR, and once with torch.nn.utils.clip_grad_norm_
// (tests/fixtures/make_schedule_fixture.py wrote torch_lr_schedule.npz; CI has no PyTorch and reads the committed
// file). LMS trains the same f64 model from the same parameters on the same batch with the matching
// --lr-schedule flags on the reference backend: every step's learning rate, every loss (and gradient norm) and
// the final parameters agree. The rates LMS trains with are lr x an f32 lr_scale (relative error <= 2^-24,
// lr_schedule.h), which bounds the agreement: 1e-7 relative for the rates, 1e-6 for losses and parameters after ten
// steps.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>

#include "lms/io/npz.h"
#include "lms/models/models.h"
#include "lms/runtime/trainer.h"

namespace lms {
namespace {

using Values = std::map<std::string, HostTensor>;

const std::string kFixture = std::string(LMS_SOURCE_DIR) + "/tests/fixtures/torch_lr_schedule.npz";
constexpr int64_t kSteps = 10;
const char* const kParams[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};

struct ScheduledRun {
  const char* name;
  OptimizerOptions optimizer;
  LrSchedule schedule;
  double clip_grad_norm = 0;
};

std::vector<ScheduledRun> runs() {
  ScheduledRun adam{"adam_cosine", {}, {}};
  adam.optimizer.kind = OptimizerKind::adam;
  adam.optimizer.lr = 0.05;
  adam.optimizer.weight_decay = 0.01;
  adam.schedule.decay = LrDecay::cosine;
  adam.schedule.warmup_steps = 3;
  adam.schedule.min_lr = 0.005;
  ScheduledRun adamw = adam;
  adamw.name = "adamw_cosine";
  adamw.optimizer.kind = OptimizerKind::adamw;
  adamw.optimizer.weight_decay = 0.1;
  ScheduledRun clipped = adamw;
  clipped.name = "adamw_clip";
  clipped.clip_grad_norm = 0.5;
  ScheduledRun momentum{"momentum_step", {}, {}};
  momentum.optimizer.kind = OptimizerKind::momentum;
  momentum.optimizer.lr = 0.1;
  momentum.optimizer.weight_decay = 0.001;
  momentum.schedule.decay = LrDecay::step;
  momentum.schedule.warmup_steps = 2;
  momentum.schedule.step_every = 3;
  momentum.schedule.gamma = 0.5;
  ScheduledRun milestones{"momentum_milestones", {}, {}};
  milestones.optimizer.kind = OptimizerKind::momentum;
  milestones.optimizer.lr = 0.1;
  milestones.schedule.decay = LrDecay::step;
  milestones.schedule.warmup_steps = 2;
  milestones.schedule.milestones = {4, 7};
  ScheduledRun sgd{"sgd_linear", {}, {}};
  sgd.optimizer.kind = OptimizerKind::sgd;
  sgd.optimizer.lr = 0.2;
  sgd.schedule.decay = LrDecay::linear;
  sgd.schedule.min_lr = 0.02;
  return {adam, adamw, clipped, momentum, milestones, sgd};
}

::testing::AssertionResult close(double got, double want, double rel, const std::string& what) {
  if (std::abs(got - want) <= rel * std::max(1.0, std::abs(want))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": got " << got << ", PyTorch " << want;
}

TEST(TorchScheduleFixture, SchedulesMatchPyTorchsSchedulers) {
  auto fixture = read_npz(kFixture);
  ASSERT_TRUE(fixture.has_value()) << fixture.error().str();
  const Values& f = *fixture;
  // The batch as an npz data file of exactly one batch: every step trains on it (in a shuffled row order, which
  // changes only the order of the mean's sum).
  const std::filesystem::path data =
      std::filesystem::temp_directory_path() / ("lms_schedule_" + std::to_string(getpid()) + ".npz");
  ASSERT_TRUE(write_npz(data.string(), {{"x_train", f.at("x")}, {"y_train", f.at("labels")}}).has_value());
  ModelOptions mo;
  mo.batch = 8;
  mo.image = {4};
  mo.channels = 1;
  mo.hidden = {16};
  mo.classes = 3;
  mo.dtype = DType::f64;
  auto forward = build_model("mlp", mo);
  ASSERT_TRUE(forward.has_value()) << forward.error().str();
  Values initial;
  for (const char* p : kParams) initial.emplace(p, f.at(p));

  for (const ScheduledRun& run : runs()) {
    TrainOptions o;
    o.training.optimizer = run.optimizer;
    o.lr_schedule = run.schedule;
    o.training.clip_grad_norm = run.clip_grad_norm;
    o.steps = kSteps;
    o.data.kind = "npz";
    o.data.file = data.string();
    o.given_values = &initial;  // the optimizer state starts at zero, as in torch.optim
    o.keep_values = true;
    auto r = train(*forward, o);
    ASSERT_TRUE(r.has_value()) << run.name << ": " << r.error().str();
    const HostTensor &lrs = f.at(std::string(run.name) + "/lrs"), &losses = f.at(std::string(run.name) + "/losses");
    ASSERT_EQ(r->losses.size(), static_cast<size_t>(kSteps));
    for (int64_t s = 0; s < kSteps; ++s) {
      const std::string at = std::string(run.name) + " step " + std::to_string(s);
      EXPECT_TRUE(close(r->learning_rates[s], lrs.get(s), 1e-7, at + " learning rate"));
      EXPECT_TRUE(close(r->losses[s], losses.get(s), 1e-6, at + " loss"));
      if (run.clip_grad_norm > 0) {
        const HostTensor& norms = f.at(std::string(run.name) + "/grad_norms");
        EXPECT_TRUE(close(r->grad_norms.at(s), norms.get(s), 1e-6, at + " gradient norm"));
      }
    }
    EXPECT_EQ(r->grad_norms.empty(), run.clip_grad_norm == 0) << run.name;
    for (const char* p : kParams) {
      const HostTensor& want = f.at(std::string(run.name) + "/" + p);
      const HostTensor& got = r->values.at(p);
      ASSERT_EQ(got.type, want.type) << run.name << " " << p;
      for (int64_t i = 0; i < want.type.num_elements(); ++i)
        EXPECT_TRUE(close(got.get(i), want.get(i), 1e-6, fmt::format("{} {}[{}]", run.name, p, i)));
    }
  }
  std::filesystem::remove(data);
}

}  // namespace
}  // namespace lms
