// The plan is exact: for every model family, one training step on each backend present writes exactly up to
// the planned peak (the executor's poison-and-scan measurement, runtime/executor.h), its Program passes the race
// check, and the executor never sees more bytes live than the plan allows. On the cpu backend the plan includes
// the oneDNN workspaces (Backend::workspace_bytes); a kernel writing outside its planned buffers would show as
// a measured peak above the plan, a plan with unused space as one below.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lms/models/models.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/trainer.h"

namespace lms {
namespace {

struct PeakCase {
  std::string name;
  std::string model;
  ModelOptions options;
};

// Small members of every model family, so that the reference backend runs them in seconds.
std::vector<PeakCase> cases() {
  std::vector<PeakCase> c;
  ModelOptions mlp;
  mlp.batch = 4;
  mlp.hidden = {32, 16};
  c.push_back({"mlp", "mlp", mlp});
  ModelOptions resnet;
  resnet.batch = 2;
  resnet.image = {16};
  resnet.classes = 10;
  resnet.small_stem = true;
  c.push_back({"resnet18", "resnet18", resnet});
  resnet.batch = 1;
  c.push_back({"resnet50", "resnet50", resnet});
  ModelOptions unet;
  unet.image = {8};
  unet.depth = 2;
  unet.base_filters = 4;
  c.push_back({"unet3d", "unet3d", unet});
  ModelOptions gpt;
  gpt.batch = 2;
  gpt.layers = 1;
  gpt.hidden_size = 32;
  gpt.heads = 2;
  gpt.seq = 16;
  gpt.vocab = 64;
  c.push_back({"gpt", "gpt", gpt});
  return c;
}

TEST(ExactPlan, MeasuredPeakEqualsPlannedPeakForEveryModelOnEveryBackend) {
  int runs = 0;
  for (const char* device : {"reference", "cpu"}) {
    if (!make_backend(device, {}).has_value()) continue;  // cpu: not in a build without oneDNN
    for (const PeakCase& c : cases()) {
      auto forward = build_model(c.model, c.options);
      ASSERT_TRUE(forward.has_value()) << c.name << ": " << forward.error().str();
      TrainOptions opts;
      opts.device = device;
      opts.steps = 1;
      opts.validate = true;
      auto r = train(*forward, opts);
      ASSERT_TRUE(r.has_value()) << device << " " << c.name << ": " << r.error().str();
      EXPECT_EQ(r->peak_device_bytes, r->planned_peak_bytes) << device << " " << c.name;
      EXPECT_LE(r->max_live_bytes, r->planned_peak_bytes) << device << " " << c.name;
      ++runs;
    }
  }
  EXPECT_GE(runs, static_cast<int>(cases().size())) << "at least the reference backend runs every case";
}

}  // namespace
}  // namespace lms
