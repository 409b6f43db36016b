// Checkpoints in training: the values handed out every N steps are exactly those a run of that many steps ends
// with, and a run resumed from them (the data order going on after the checkpoint's steps, across epochs) gives
// the uninterrupted run's losses and final values bit for bit; a failing checkpoint stops training with its
// error; the record of a checkpoint (trainer.h) round-trips and is checked; evaluating during training, which
// remakes the training arenas from the values, changes nothing. A GPT with dropout and Adam, so that the
// optimizer's moments, its step count and the dropout key all have to come back.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "../backends/gpu_presence.h"
#include "lms/runtime/trainer.h"
#include "runtime_test_util.h"

namespace lms {
namespace {

using Values = std::map<std::string, HostTensor>;
using runtime_test::expect_same_values;

Graph small_gpt() { return runtime_test::small_gpt(/*dropout=*/0.1); }

TrainOptions options(int64_t steps) {
  TrainOptions o;
  o.training.optimizer.kind = OptimizerKind::adam;
  o.steps = steps;
  o.seed = 3;
  o.data.synthetic_train_samples = 8;  // 2 steps an epoch: the runs below cross epochs
  o.keep_values = true;
  return o;
}

TEST(Resume, CheckpointsAreTheShorterRunsValuesAndResumingIsBitIdentical) {
  const Graph gpt = small_gpt();
  TrainOptions whole = options(5);
  std::map<int64_t, Values> checkpoints;
  whole.checkpoint_every = 2;
  whole.on_checkpoint = [&](Values v, int64_t steps) -> Result<void> {
    checkpoints.emplace(steps, std::move(v));
    return {};
  };
  auto a = train(gpt, whole);
  ASSERT_TRUE(a.has_value()) << a.error().str();
  ASSERT_EQ(a->losses.size(), 5u);
  std::vector<int64_t> at;
  for (const auto& [steps, v] : checkpoints) at.push_back(steps);
  EXPECT_EQ(at, (std::vector<int64_t>{2, 4})) << "every 2 steps, not after the last";

  auto two = train(gpt, options(2));
  ASSERT_TRUE(two.has_value()) << two.error().str();
  expect_same_values(checkpoints.at(2), two->values, "the checkpoint after 2 steps");
  EXPECT_EQ(two->losses, std::vector<double>(a->losses.begin(), a->losses.begin() + 2));

  // Resumed after 2 steps: 3 more steps end where the whole run did.
  TrainOptions rest = options(3);
  rest.initial_values = &two->values;
  rest.first_step = 2;
  auto c = train(gpt, rest);
  ASSERT_TRUE(c.has_value()) << c.error().str();
  EXPECT_EQ(c->first_step, 2);
  EXPECT_EQ(c->losses, std::vector<double>(a->losses.begin() + 2, a->losses.end()));
  expect_same_values(a->values, c->values, "resumed vs whole");

  // Without first_step the data start over: another batch, another loss.
  rest.first_step = 0;
  auto restarted = train(gpt, rest);
  ASSERT_TRUE(restarted.has_value()) << restarted.error().str();
  EXPECT_NE(restarted->losses.front(), a->losses[2]);
}

// Evaluating after each epoch releases the training arenas and remakes them from the values: the run goes on bit
// for bit, and each accuracy is the one a run of that many epochs ends with.
TEST(Resume, EvaluatingAfterEachEpochChangesNothing) {
  const Graph gpt = small_gpt();
  for (const std::string& device : training_devices()) {
    TrainOptions o = options(6);  // 3 epochs of 2 steps
    o.device = device;
    o.evaluate = true;
    auto plain = train(gpt, o);
    ASSERT_TRUE(plain.has_value()) << plain.error().str();
    ASSERT_EQ(plain->evaluations.size(), 1u) << "the end's";
    o.evaluate_every = 1;
    std::vector<Evaluation> seen;
    o.on_evaluation = [&](const Evaluation& e, int64_t samples) {
      seen.push_back(e);
      EXPECT_EQ(samples, 16);
    };
    auto every = train(gpt, o);
    ASSERT_TRUE(every.has_value()) << every.error().str();
    EXPECT_EQ(every->losses, plain->losses) << device;
    expect_same_values(plain->values, every->values, device + ": with evaluations vs without");
    ASSERT_EQ(every->evaluations.size(), 3u) << device;
    ASSERT_EQ(seen.size(), 2u) << "the end's is reported, not called back";
    for (int64_t epoch = 1; epoch <= 3; ++epoch) {
      const Evaluation& e = every->evaluations[epoch - 1];
      EXPECT_EQ(e.epoch, epoch);
      EXPECT_EQ(e.step, 2 * epoch);
      TrainOptions shorter = options(2 * epoch);
      shorter.device = device;
      shorter.evaluate = true;
      auto s = train(gpt, shorter);
      ASSERT_TRUE(s.has_value()) << s.error().str();
      EXPECT_EQ(e.accuracy, s->test_accuracy.value()) << device << " epoch " << epoch;
    }
    EXPECT_EQ(every->evaluations.back().accuracy, every->test_accuracy.value());
  }
}

TEST(Resume, AFailingCheckpointStopsTraining) {
  TrainOptions o = options(4);
  o.checkpoint_every = 1;
  o.on_checkpoint = [](Values, int64_t steps) -> Result<void> {
    if (steps == 2) return fail("disk full at step {}", steps);
    return {};
  };
  auto r = train(small_gpt(), o);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("disk full at step 2"), std::string::npos) << r.error().str();
  o.checkpoint_every = -1;
  auto negative = train(small_gpt(), o);
  ASSERT_FALSE(negative.has_value());
  EXPECT_NE(negative.error().str().find("--save-every must be >= 1"), std::string::npos);
}

TEST(Resume, TheCheckpointRecord) {
  Values v;
  v["w"] = HostTensor({DType::f32, {2}});
  auto none = take_checkpoint_record(v, "c.npz");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->steps, 0) << "a checkpoint made by hand starts at step 0";
  EXPECT_FALSE(none->batch || none->seed);
  put_checkpoint_record(v, {1234, 32, 7});
  for (const char* key : {kCheckpointStepsKey, kCheckpointBatchKey, kCheckpointSeedKey}) EXPECT_TRUE(v.contains(key));
  auto record = take_checkpoint_record(v, "c.npz");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->steps, 1234);
  EXPECT_EQ(record->batch, 32);
  EXPECT_EQ(record->seed, 7);
  EXPECT_EQ(v.size(), 1u) << "taken out, so that loading checks only the graph's values";
  put_checkpoint_record(v, {5, {}, {}});
  EXPECT_FALSE(v.contains(kCheckpointBatchKey)) << "only what is known";
  v[kCheckpointStepsKey] = HostTensor({DType::f32, {}});
  auto bad = take_checkpoint_record(v, "c.npz");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("c.npz: member 'lms.steps' must be a non-negative i64 scalar"), std::string::npos)
      << bad.error().str();
  put_checkpoint_record(v, {-1, {}, {}});
  EXPECT_FALSE(take_checkpoint_record(v, "c.npz").has_value());
  put_checkpoint_record(v, {1, -3, {}});
  auto bad_batch = take_checkpoint_record(v, "c.npz");
  ASSERT_FALSE(bad_batch.has_value());
  EXPECT_NE(bad_batch.error().str().find("member 'lms.batch' must be a non-negative i64 scalar (the batch), got -3"),
            std::string::npos)
      << bad_batch.error().str();
}

}  // namespace
}  // namespace lms
