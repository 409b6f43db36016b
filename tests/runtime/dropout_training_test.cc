// Dropout in training: the training graph advances the dropout key once per step after every reader of it;
// each step draws new masks (the key moves by one per step and the losses differ from those without dropout);
// recomputing a dropout output for the backward pass gives bit-identical losses and parameters; and swapping
// (tflms) and auto's plans under a budget train exactly as the unconstrained run, on every backend of this
// build. The mask itself is tested in tests/ops/dropout_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/gpu_presence.h"
#include "lms/autodiff/optimizer.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/passes/recompute.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/init.h"
#include "lms/runtime/trainer.h"
#include "lms/sim/device_model.h"
#include "runtime_test_util.h"

namespace lms {
namespace {

Graph gpt(double dropout) { return runtime_test::small_gpt(dropout); }

int count(const Graph& g, Op op) {
  return static_cast<int>(std::ranges::count_if(g.node_ids(), [&](NodeId n) { return g.node(n).op == op; }));
}

TEST(DropoutTraining, TheKeyAdvancesAfterEveryReader) {
  const Graph forward = gpt(0.1);
  EXPECT_EQ(count(forward, Op::dropout), 1 + 2 * 3);
  EXPECT_EQ(count(gpt(0), Op::dropout), 0) << "p = 0 adds no ops";
  auto training = build_training_graph(forward, {});
  ASSERT_TRUE(training.has_value()) << training.error().str();
  const Graph& g = *training;
  EXPECT_EQ(count(g, Op::dropout), 2 * 7) << "each forward dropout has its backward twin";
  ASSERT_EQ(count(g, Op::rng_advance), 1) << "one key per graph";
  const ValueId key = *g.find_value("dropout.key");
  NodeId advance;
  for (NodeId n : g.node_ids())
    if (g.node(n).op == Op::rng_advance) advance = n;
  EXPECT_EQ(g.node(advance).category, Category::upd);
  EXPECT_EQ(g.node(advance).inputs, std::vector<ValueId>{key});
  const std::vector<NodeId>& waits = g.node(advance).control_inputs;
  for (NodeId reader : g.value(key).consumers) {
    if (reader == advance) continue;
    EXPECT_NE(std::ranges::find(waits, reader), waits.end())
        << "rng_advance must wait for %" << g.value(g.first_output(reader)).name;
  }
  // The key must be state: a dropout reading an input cannot be advanced.
  Graph bad("bad");
  Builder b(bad);
  ValueId x = b.param(TensorType{DType::f32, {4}}, "x", "ones");
  ValueId k = b.input(TensorType{DType::i64, {}}, "k");
  ValueId y = b.op(Op::dropout, {x, k}, attrs({{"p", 0.5}}), "y");
  bad.set_outputs({b.op(Op::reduce_sum, {y}, {}, "loss")});
  ASSERT_TRUE(b.ok());
  auto refused = build_training_graph(bad, {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().str().find("%k: a dropout key must be a state value"), std::string::npos)
      << refused.error().str();
}

TrainReport train_gpt(double dropout, const std::string& device, TrainOptions o, int steps = 3) {
  o.device = device;
  o.steps = steps;
  o.seed = 5;
  o.keep_values = true;
  auto r = train(gpt(dropout), o);
  EXPECT_TRUE(r.has_value()) << device << ": " << r.error().str();
  return r ? std::move(*r) : TrainReport{};
}

TEST(DropoutTraining, EachStepDrawsNewMasks) {
  const TrainReport with = train_gpt(0.2, "reference", {});
  const TrainReport without = train_gpt(0, "reference", {});
  ASSERT_EQ(with.losses.size(), 3u);
  for (size_t s = 0; s < 3; ++s) EXPECT_NE(with.losses[s], without.losses[s]) << "step " << s;
  const HostTensor initial = *initial_value(gpt(0.2), *gpt(0.2).find_value("dropout.key"), 5);
  const uint64_t start = static_cast<uint64_t>(initial.as<int64_t>()[0]);
  EXPECT_EQ(static_cast<uint64_t>(with.values.at("dropout.key").as<int64_t>()[0]), start + 3);
  // The same seed gives the same run; another seed other masks (and other initial weights).
  EXPECT_EQ(train_gpt(0.2, "reference", {}).losses, with.losses);
}

// Recomputing every forward dropout output for its backward readers (the clones regenerate the masks from the
// key before rng_advance moves it) gives the interpreter's exact losses and updated values.
TEST(DropoutTraining, RecomputedDropoutsAreBitIdentical) {
  auto training = build_training_graph(gpt(0.3), {});
  ASSERT_TRUE(training.has_value()) << training.error().str();
  Graph recomputed = *training;
  RecomputeOptions ro;
  for (NodeId n : training->node_ids()) {
    const Node& node = training->node(n);
    if (node.op != Op::dropout || node.category != Category::fwd) continue;
    const ValueId y = node.outputs[0];
    if (std::ranges::any_of(training->value(y).consumers,
                            [&](NodeId c) { return training->node(c).category == Category::bwd; }))
      ro.values.push_back(training->value(y).name);
  }
  // The embeddings' (read by ln_1's gradient) and each block's attention probabilities (read by the gradient
  // of probs @ v); the other dropouts feed residual adds, whose gradients read nothing.
  ASSERT_EQ(ro.values.size(), 3u) << "dropout outputs read by the backward pass";
  auto stats = insert_recompute(recomputed, ro);
  ASSERT_TRUE(stats.has_value()) << stats.error().str();
  EXPECT_EQ(stats->clones, static_cast<int>(ro.values.size()));
  auto feeds = initial_values(*training, 9);
  ASSERT_TRUE(feeds.has_value()) << feeds.error().str();
  for (const char* name : {"x", "labels"}) {
    HostTensor t(training->value(*training->find_value(name)).type);
    for (int64_t i = 0; i < t.type.num_elements(); ++i) t.set(i, static_cast<double>((i * 7 + 3) % 50));
    feeds->emplace(name, std::move(t));
  }
  auto want = interpret(*training, *feeds);
  auto got = interpret(recomputed, *feeds);
  ASSERT_TRUE(want.has_value()) << want.error().str();
  ASSERT_TRUE(got.has_value()) << got.error().str();
  for (NodeId n : training->node_ids()) {
    if (training->node(n).category != Category::upd) continue;
    for (ValueId v : training->node(n).outputs) {
      const std::string& name = training->value(v).name;
      EXPECT_EQ((*got)[recomputed.find_value(name)->v].data, (*want)[v.v].data) << name;
    }
  }
  EXPECT_EQ((*got)[recomputed.outputs()[0].v].data, (*want)[training->outputs()[0].v].data) << "the loss";
}

TEST(DropoutTraining, SwapsAndAutoPlansAreBitIdentical) {
  for (const std::string& device : training_devices()) {
    const TrainReport base = train_gpt(0.1, device, {});
    TrainOptions swapped;
    swapped.strategy = Strategy::tflms;
    TflmsParams p;  // T = 1, A = 1, no grouping: the most swaps
    p.min_bytes = 0;
    swapped.tflms = p;
    const TrainReport s = train_gpt(0.1, device, swapped);
    EXPECT_GT(s.swapped_tensors, 0) << device;
    EXPECT_EQ(s.losses, base.losses) << device << " tflms";
    EXPECT_EQ(s.values.at("dropout.key").data, base.values.at("dropout.key").data) << device;
    for (const char* model : {"v100-pcie3", "gh200-c2c"}) {
      TrainOptions o;
      o.strategy = Strategy::automatic;
      o.device_model = *device_model(model);
      o.budget_bytes = base.min_budget_bytes + (base.planned_peak_bytes - base.min_budget_bytes) / 3;
      const TrainReport r = train_gpt(0.1, device, o);
      const std::string what = device + " auto for " + model + "; took " + r.auto_source;
      EXPECT_TRUE(r.lms_needed) << what;
      EXPECT_LE(r.planned_peak_bytes, o.budget_bytes) << what;
      EXPECT_EQ(r.losses, base.losses) << what;
      for (const auto& [name, t] : base.values) EXPECT_EQ(r.values.at(name).data, t.data) << what << ": " << name;
    }
  }
}

}  // namespace
}  // namespace lms
