// The executor on the reference backend: runs are bit-identical for the same seed (and differ for another);
// parameters change in place; the measured peak (poison scan) stays within the planned peak and equals it
// where the top buffer is fully written; the executor's live-byte count equals the planner's lower bound; a
// budget below the planned peak fails before anything runs; bad feeds and unsafe reads are errors;
// checkpoints restore a run exactly.
#include <cmath>
#include <cstring>

#include "lms/ir/builder.h"
#include "runtime_test_util.h"

namespace lms {
namespace {

using runtime_test::TrainingRun;
using runtime_test::tiny_training_graph;

bool same_bytes(const std::map<std::string, HostTensor>& a, const std::map<std::string, HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.type != t.type || it->second.data != t.data) return false;
  }
  return true;
}

TEST(Executor, SameSeedGivesBitIdenticalLossesAndParameters) {
  auto program = compile(tiny_training_graph());
  ASSERT_TRUE(program.has_value()) << program.error().str();
  TrainingRun a(*program, 7), b(*program, 7), other(*program, 8);
  auto initial = a.executor->persistent_values();
  ASSERT_TRUE(initial.has_value());
  a.steps(0, 6);
  b.steps(0, 6);
  other.steps(0, 6);
  ASSERT_EQ(a.losses.size(), 6u);
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)), 0) << "step " << i;
    EXPECT_TRUE(std::isfinite(a.losses[i]));
  }
  EXPECT_NE(a.losses, other.losses) << "another seed gives other initial values, so other losses";
  auto pa = a.executor->persistent_values(), pb = b.executor->persistent_values();
  ASSERT_TRUE(pa.has_value() && pb.has_value());
  EXPECT_TRUE(same_bytes(*pa, *pb));
  EXPECT_FALSE(same_bytes(*pa, *initial)) << "the updates wrote the parameters in place";
  EXPECT_GT(pa->size(), 6u) << "parameters and their momentum state";
}

TEST(Executor, MeasuredPeakWithinPlannedPeakAndLiveBytesMatchLowerBound) {
  auto program = compile(tiny_training_graph(OptimizerKind::adam));
  ASSERT_TRUE(program.has_value()) << program.error().str();
  TrainingRun run(*program, 1, ExecutorOptions{.measure_touched = true});
  run.steps(0, 3);
  const MemoryPlan& plan = program->memory();
  for (const StepResult& r : run.results) {
    EXPECT_LE(r.touched_bytes, plan.device_arena_bytes);
    EXPECT_GT(r.touched_bytes, plan.persistent_end) << "the step wrote above the parameters";
    // The executor counts live bytes from first writes and completed last uses; the planner from intervals.
    EXPECT_EQ(r.max_live_bytes, plan.lower_bound_bytes);
  }
  TrainingRun unmeasured(*program, 1);
  unmeasured.steps(0, 1);
  EXPECT_EQ(unmeasured.results[0].touched_bytes, -1);
  EXPECT_EQ(unmeasured.losses[0], run.losses[0]) << "poisoning must not change results";
}

// x (256 f32 = 1024 bytes) -> a = relu(x) -> b = relu(a) -> s = mean(b). The planner puts x at 0, a at 1024
// (a overlaps x while computed), b back at 0 (x is dead by then) and s at 1024 (a is dead): the arena is
// 2048 bytes and its top buffer, a, is 1024 bytes (a multiple of the alignment, so no padding) written in
// full by relu(x). Feeding 1.0 makes every written f32 0x3f800000, no byte of which is the poison byte, so
// the poison scan must find exactly the planned peak. A chain whose top buffer were padded or only partly
// written would measure less than planned, which is the inequality the other test checks.
TEST(Executor, MeasuredPeakEqualsPlannedWhenTheTopBufferIsFullyWritten) {
  Graph g("chain");
  Builder b(g);
  TensorType t{DType::f32, {256}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId bb = b.op(Op::relu, {a}, {}, "b");
  ValueId s = b.op(Op::mean, {bb}, {}, "s");
  ASSERT_TRUE(b.ok());
  g.set_outputs({s});
  auto program = compile(g);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  const MemoryPlan& plan = program->memory();
  ASSERT_EQ(plan.device_arena_bytes, 2048);
  ASSERT_EQ(plan.of(a).offset, 1024);

  ReferenceBackend backend;
  auto ex = Executor::create(*program, backend, ExecutorOptions{.measure_touched = true});
  ASSERT_TRUE(ex.has_value()) << ex.error().str();
  ASSERT_TRUE(ex->initialize(0).has_value());  // no parameters: nothing to write
  HostTensor ones(t);
  for (float& v : ones.as<float>()) v = 1.0f;
  Feed feed{x, &ones};
  auto r = ex->step({&feed, 1});
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->touched_bytes, plan.device_arena_bytes);
  EXPECT_EQ(r->outputs.front().get(0), 1.0);
  EXPECT_EQ(r->max_live_bytes, plan.lower_bound_bytes);
  // Reading a value whose space is reused is refused; the output and the input's role are clear.
  EXPECT_FALSE(ex->read(a).has_value());
  EXPECT_TRUE(ex->read(s).has_value());
}

TEST(Executor, BudgetBelowPlannedPeakFailsBeforeAnythingRuns) {
  Graph training = tiny_training_graph();
  auto fits = compile(training);
  ASSERT_TRUE(fits.has_value());
  const int64_t peak = fits->device_arena_bytes();
  auto refused = compile(training, PlanOptions{.budget_bytes = peak - 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().str().find("does not fit"), std::string::npos) << refused.error().str();
  EXPECT_TRUE(compile(training, PlanOptions{.budget_bytes = peak}).has_value());

  // The backend enforces its budget too: a program bigger than it cannot even allocate its arena.
  ReferenceBackend small(BackendOptions{peak - 1});
  auto ex = Executor::create(*fits, small);
  ASSERT_FALSE(ex.has_value());
  EXPECT_NE(ex.error().str().find("exceeds the budget"), std::string::npos) << ex.error().str();
  EXPECT_EQ(small.device_arena_bytes(), -1) << "nothing was allocated";
}

TEST(Executor, BadFeedsAndStepsAreErrors) {
  auto program = compile(tiny_training_graph());
  ASSERT_TRUE(program.has_value());
  const Graph& g = program->graph();
  ValueId x = *g.find_value("x"), labels = *g.find_value("labels");
  ReferenceBackend backend;
  auto ex = Executor::create(*program, backend);
  ASSERT_TRUE(ex.has_value());
  HostTensor xs(g.value(x).type), ls(g.value(labels).type), wrong(TensorType{DType::f32, {2}});
  const Feed both[] = {{x, &xs}, {labels, &ls}};
  auto not_initialized = ex->step(both);
  ASSERT_FALSE(not_initialized.has_value());
  EXPECT_NE(not_initialized.error().str().find("initialize"), std::string::npos);
  ASSERT_TRUE(ex->initialize(0).has_value());

  const Feed missing[] = {{x, &xs}};
  auto r = ex->step(missing);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("input %labels"), std::string::npos) << r.error().str();
  const Feed mistyped[] = {{x, &wrong}, {labels, &ls}};
  r = ex->step(mistyped);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("%x"), std::string::npos) << r.error().str();
  const Feed twice[] = {{x, &xs}, {x, &xs}, {labels, &ls}};
  EXPECT_FALSE(ex->step(twice).has_value());
  const Feed not_input[] = {{g.outputs().front(), &xs}, {x, &xs}, {labels, &ls}};
  EXPECT_FALSE(ex->step(not_input).has_value());
  EXPECT_TRUE(ex->step(both).has_value());

  std::map<std::string, HostTensor> bad = {{"nope", xs}};
  auto load = ex->load(bad);
  ASSERT_FALSE(load.has_value());
  EXPECT_NE(load.error().str().find("checkpoint has no value for"), std::string::npos) << load.error().str();
}

TEST(Executor, CheckpointRestoresARunExactly) {
  auto program = compile(tiny_training_graph());
  ASSERT_TRUE(program.has_value());
  TrainingRun first(*program, 3);
  first.steps(0, 2);
  auto saved = first.executor->persistent_values();
  ASSERT_TRUE(saved.has_value());
  first.steps(2, 3);

  TrainingRun resumed(*program, /*seed=*/99);  // other initial values, overwritten by the checkpoint
  ASSERT_TRUE(resumed.executor->load(*saved).has_value());
  resumed.steps(2, 3);
  ASSERT_EQ(resumed.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed.losses[i], first.losses[2 + i]) << i;

  auto extra = *saved;
  extra.emplace("not_a_param", extra.begin()->second);
  auto strict = resumed.executor->load(extra);
  ASSERT_FALSE(strict.has_value());
  EXPECT_NE(strict.error().str().find("not_a_param"), std::string::npos);
  EXPECT_TRUE(resumed.executor->load(extra, /*allow_unused=*/true).has_value());
}

TEST(Executor, GivenValuesReplaceTheirInitializersOnly) {
  auto program = compile(tiny_training_graph());
  ASSERT_TRUE(program.has_value()) << program.error().str();
  ReferenceBackend backend;
  auto fresh = Executor::create(*program, backend);
  ASSERT_TRUE(fresh.has_value());
  ASSERT_TRUE(fresh->initialize(5).has_value());
  auto init = fresh->persistent_values();
  ASSERT_TRUE(init.has_value());
  ASSERT_GE(init->size(), 2u);
  // One value given (all elements 0.75), plus a name the program lacks (skipped, as an imported model's running
  // statistics are when the training graph keeps none).
  const auto& [name, t] = *init->begin();
  HostTensor given_t(t.type);
  for (int64_t i = 0; i < t.type.num_elements(); ++i) given_t.set(i, 0.75);
  std::map<std::string, HostTensor> given = {{name, given_t}, {"not_in_the_program", given_t}};
  ReferenceBackend backend2;
  auto ex = Executor::create(*program, backend2);
  ASSERT_TRUE(ex.has_value()) << ex.error().str();
  ASSERT_TRUE(ex->initialize(5, &given).has_value());
  auto values = ex->persistent_values();
  ASSERT_TRUE(values.has_value());
  for (const auto& [n, v] : *values)
    EXPECT_EQ(v.data, n == name ? given_t.data : init->at(n).data) << n;

  given[name] = HostTensor(TensorType{DType::f32, {1}});
  auto mistyped = ex->initialize(5, &given);
  ASSERT_FALSE(mistyped.has_value());
  EXPECT_NE(mistyped.error().str().find("initial value of %" + name), std::string::npos) << mistyped.error().str();
}

}  // namespace
}  // namespace lms
