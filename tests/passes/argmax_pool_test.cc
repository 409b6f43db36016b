// The argmax-pool pass: it rewrites exactly the relu-then-max-pool gradient, leaves the relu's output with no
// backward reader, and changes no bit of the gradients or of training (reference and cpu backends).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "backends/reference_test_util.h"
#include "lms/autodiff/optimizer.h"
#include "lms/backends/reference/interpreter.h"
#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/models/models.h"
#include "lms/passes/argmax_pool.h"
#include "lms/runtime/trainer.h"

namespace lms {
namespace {

Graph parse(std::string_view text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? std::move(*g) : Graph();
}

// A 3-D stem (relu, overlapping padded windows) with its hand-written gradient.
constexpr std::string_view kStem = R"(
graph stem {
  %x = input() : f32[2,3,5,6,7]
  %dp = input() : f32[2,3,3,3,4]
  %y = relu(%x) : f32[2,3,5,6,7] #fwd
  %p = max_pool3d(%y) {kernel = [3, 2, 3], stride = [2, 2, 2], pad = [1, 0, 1]} : f32[2,3,3,3,4] #fwd
  %dy = max_pool_grad(%dp, %y) {kernel = [3, 2, 3], stride = [2, 2, 2], pad = [1, 0, 1]} : f32[2,3,5,6,7] #bwd
  %dx = relu_grad(%dy, %y) : f32[2,3,5,6,7] #bwd
  return %p, %dx
}
)";

TEST(ArgmaxPool, GradientsAreBitIdenticalWithTiesAndNaNs) {
  Graph before = parse(kStem);
  Graph after = before;
  ASSERT_EQ(use_pool_argmax(after).value_or(-1), 1);
  // x on a coarse grid: half the relu outputs are 0 and windows tie; a few NaNs; dp with both signs and zeros.
  HostTensor x = ref_test::random(DType::f32, {2, 3, 5, 6, 7}, 11, -1, 1);
  for (int64_t i = 0; i < x.type.num_elements(); ++i) x.set(i, std::round(x.get(i) * 4) / 4);
  for (int64_t i : {5, 77, 300}) x.set(i, std::numeric_limits<double>::quiet_NaN());
  HostTensor dp = ref_test::random(DType::f32, {2, 3, 3, 3, 4}, 12, -1, 1);
  dp.set(0, 0.0);
  dp.set(1, -0.0);
  const std::map<std::string, HostTensor> feeds = {{"x", x}, {"dp", dp}};
  auto want = interpret(before, feeds), got = interpret(after, feeds);  // every value, by ValueId
  ASSERT_TRUE(want.has_value()) << want.error().str();
  ASSERT_TRUE(got.has_value()) << got.error().str();
  const HostTensor& dx = (*got)[after.find_value("dx")->v];
  EXPECT_EQ(dx.data, (*want)[before.find_value("dx")->v].data) << "dx differs";
  // And the gradient is not trivially zero.
  int nonzero = 0;
  for (int64_t i = 0; i < dx.type.num_elements(); ++i) nonzero += dx.get(i) != 0;
  EXPECT_GT(nonzero, 20);
}

ModelOptions resnet_options() {
  ModelOptions o;
  o.batch = 2;
  o.image = {32};
  o.classes = 10;
  return o;  // the standard stem: conv 7x7/2, relu, max pool 3x3/2
}

TEST(ArgmaxPool, RewritesTheResnetStemOnce) {
  auto forward = build_model("resnet18", resnet_options());
  ASSERT_TRUE(forward.has_value()) << forward.error().str();
  TrainingOptions t;
  t.argmax_pool = false;
  Graph g = build_training_graph(*forward, t).value();
  ASSERT_EQ(use_pool_argmax(g).value_or(-1), 1);
  EXPECT_EQ(use_pool_argmax(g).value_or(-1), 0) << "a second run finds nothing";
  const ValueId relu = *g.find_value("relu");
  for (NodeId c : g.value(relu).consumers) EXPECT_EQ(g.node(c).category, Category::fwd) << g.def(c).name;
  for (NodeId n : g.node_ids()) EXPECT_NE(g.node(n).op, Op::max_pool_grad);
  // build_training_graph runs it by default.
  Graph by_default = build_training_graph(*forward, TrainingOptions{}).value();
  EXPECT_EQ(by_default.num_nodes(), g.num_nodes());
  ASSERT_EQ(by_default.outputs().size(), 1u);
  EXPECT_EQ(by_default.value(by_default.outputs()[0]).name, "loss") << "the output survives the renumbering";
}

TEST(ArgmaxPool, KeepPoolInputUndoesTheRewrite) {
  auto forward = build_model("resnet18", resnet_options());
  ASSERT_TRUE(forward.has_value()) << forward.error().str();
  TrainingOptions t;
  t.argmax_pool = false;
  const Graph without = build_training_graph(*forward, t).value();
  Graph g = build_training_graph(*forward, TrainingOptions{}).value();
  ASSERT_NE(print_graph(g), print_graph(without));
  ASSERT_EQ(keep_pool_input(g).value_or(-1), 1);
  EXPECT_EQ(print_graph(g), print_graph(without)) << "the same text, names and node order included";
  EXPECT_EQ(keep_pool_input(g).value_or(-1), 0);
}

TEST(ArgmaxPool, ModelsWithoutTheStemAreUnchanged) {
  ModelOptions o = resnet_options();
  o.small_stem = true;  // no max pooling
  auto forward = build_model("resnet18", o);
  ASSERT_TRUE(forward.has_value());
  Graph g = build_training_graph(*forward, TrainingOptions{}).value();
  EXPECT_EQ(use_pool_argmax(g).value_or(-1), 0);
}

TrainReport train_resnet(const std::string& device, bool argmax_pool) {
  auto forward = build_model("resnet18", resnet_options());
  EXPECT_TRUE(forward.has_value());
  TrainOptions opts;
  opts.device = device;
  opts.steps = 2;
  opts.seed = 7;
  opts.keep_values = true;
  opts.training.argmax_pool = argmax_pool;
  auto r = train(*forward, opts);
  EXPECT_TRUE(r.has_value()) << device << ": " << r.error().str();
  return r ? std::move(*r) : TrainReport{};
}

void expect_same_training(const std::string& device) {
  TrainReport off = train_resnet(device, false), on = train_resnet(device, true);
  ASSERT_EQ(off.losses.size(), 2u);
  EXPECT_EQ(on.losses, off.losses);
  ASSERT_FALSE(off.values.empty());
  for (const auto& [name, t] : off.values) {
    auto it = on.values.find(name);
    ASSERT_NE(it, on.values.end()) << name;
    EXPECT_EQ(it->second.data, t.data) << device << " " << name;
  }
  EXPECT_LT(on.planned_peak_bytes, off.planned_peak_bytes) << "the relu output no longer lives to the backward pass";
}

TEST(ArgmaxPool, TrainingIsBitIdenticalOnTheReferenceBackend) { expect_same_training("reference"); }

TEST(ArgmaxPool, TrainingIsBitIdenticalOnTheCpuBackend) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  expect_same_training("cpu");
#endif
}

}  // namespace
}  // namespace lms
