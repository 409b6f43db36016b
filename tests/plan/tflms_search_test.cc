// The TFLMS auto-tuning search (plan/tflms_search.h): "LMS not needed", a search whose every trial is worked
// out by hand on a tiny graph, the error when nothing fits, the trial callback, and on a real training graph
// the binary searches' answers (each chosen value is the largest tried that fits) and determinism.
#include <gtest/gtest.h>

#include "lms/autodiff/optimizer.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/plan/tflms_search.h"

namespace lms {
namespace {

const TensorType kT{DType::f32, {2, 2}};  // 16 bytes

// The skip graph of tests/sim/memory_sim_test.cc: levels x0 a1 b2 c3 e4 f5 h6 (n = 7); long edges a -> h
// (distance 5) and b -> f (distance 3); every other edge has distance 1. No-swap peak 64 bytes at e.
Graph skip_graph() {
  Graph g("skip");
  Builder bld(g);
  ValueId x = bld.input(kT, "x");
  ValueId a = bld.op(Op::relu, {x}, {}, "a");
  ValueId b = bld.op(Op::relu, {a}, {}, "b");
  ValueId c = bld.op(Op::relu, {b}, {}, "c");
  ValueId e = bld.op(Op::relu, {c}, {}, "e");
  ValueId f = bld.op(Op::add, {e, b}, {}, "f");
  ValueId h = bld.op(Op::add, {f, a}, {}, "h");
  EXPECT_TRUE(bld.ok());
  g.set_outputs({h});
  return g;
}

TEST(TflmsSearch, LmsNotNeededWhenItFits) {
  Graph g = skip_graph();
  TflmsSearchOptions o;
  o.sim.device_bytes = 64;  // exactly the no-swap peak
  auto r = search_tflms(g, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_FALSE(r->lms_needed);
  EXPECT_TRUE(r->decisions.swaps.empty());
  EXPECT_TRUE(r->sim.fits);
  EXPECT_EQ(r->sim.peak_device_bytes, 64);
  ASSERT_EQ(r->trials.size(), 1u);
  EXPECT_EQ(r->trials[0].stage, TflmsStage::no_swap);
  EXPECT_EQ(r->trials[0].params.swapout_threshold, 7);  // T = n: nothing is far
  EXPECT_EQ(r->levels, 7);
}

TEST(TflmsSearch, HandDerivedSearchOnTheSkipGraph) {
  // Budget 48 bytes, no parameters. Trials, in order:
  //  1. no swap: peak 64 (a, b, c, e live at e's step)                                     no
  //  2. T=1 sync 0: a (far h) and b (far f) swapped; triggers e (for h: from level 6-1-1=4) and c (for f:
  //     level 3). b@in0 is allocated after c and a@in0 after e, so f's step holds e, f, a@in0, b@in0: 64   no
  //  3. T=1 sync 1: the swap-outs finish a level earlier but the prefetches are the same: 64              no
  //  4. T=1 sync 2: just-in-time swap-ins; a freed after level 2, b after level 3; the largest step is
  //     f's (e, b@in0, f) or h's (f, a@in0, h): 48                                             yes
  //  then the largest T in [1, 7] for sync 2, by binary search:
  //  5. T=4: only a (distance 5) is far: e's step holds b, c, e = 48                           yes
  //  6. T=6: nothing is far: 64                                                                no
  //  7. T=5: nothing is far (5 is not > 5): 64                                                 no
  // Sync 2 ignores A and G, so the search stops at T=4, sync_mode 2.
  Graph g = skip_graph();
  TflmsSearchOptions o;
  o.sim.device_bytes = 48;
  std::vector<TflmsTrial> seen;
  o.on_trial = [&](const TflmsTrial& t) { seen.push_back(t); };
  auto r = search_tflms(g, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_TRUE(r->lms_needed);
  EXPECT_EQ(r->params.swapout_threshold, 4);
  EXPECT_EQ(r->params.sync_mode, SyncMode::sync_in);
  ASSERT_EQ(r->decisions.swaps.size(), 1u);
  EXPECT_EQ(g.value(r->decisions.swaps[0].value).name, "a");
  EXPECT_TRUE(r->sim.fits);
  EXPECT_EQ(r->sim.peak_device_bytes, 48);
  struct Expected {
    TflmsStage stage;
    int t;
    int sync;
    bool fits;
    int64_t peak;
  };
  const std::vector<Expected> expected = {
      {TflmsStage::no_swap, 7, 0, false, 64},   {TflmsStage::threshold, 1, 0, false, 64},
      {TflmsStage::threshold, 1, 1, false, 64}, {TflmsStage::threshold, 1, 2, true, 48},
      {TflmsStage::threshold, 4, 2, true, 48},  {TflmsStage::threshold, 6, 2, false, 64},
      {TflmsStage::threshold, 5, 2, false, 64}};
  ASSERT_EQ(r->trials.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TflmsTrial& t = r->trials[i];
    EXPECT_EQ(t.stage, expected[i].stage) << i;
    EXPECT_EQ(t.params.swapout_threshold, expected[i].t) << i;
    EXPECT_EQ(static_cast<int>(t.params.sync_mode), expected[i].sync) << i;
    EXPECT_EQ(t.fits, expected[i].fits) << i;
    EXPECT_EQ(t.peak_device_bytes, expected[i].peak) << i;
  }
  EXPECT_EQ(r->trials[1].swapped_tensors, 2);
  EXPECT_EQ(r->trials[4].swapped_tensors, 1);
  // The callback saw the same trials in the same order.
  ASSERT_EQ(seen.size(), r->trials.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].params.swapout_threshold, r->trials[i].params.swapout_threshold);
    EXPECT_EQ(seen[i].peak_device_bytes, r->trials[i].peak_device_bytes);
  }
}

TEST(TflmsSearch, NothingFitsNamesTheNumbers) {
  // 40 bytes: every sync mode fails at T=1; the best any trial reached is 48 (T=1, sync 2), which is also
  // the hard minimum (f's working set e, b, f).
  Graph g = skip_graph();
  TflmsSearchOptions o;
  o.sim.device_bytes = 40;
  auto r = search_tflms(g, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  ASSERT_FALSE(r->fits);
  ASSERT_TRUE(r->why.has_value());
  EXPECT_EQ(r->trials.size(), 5u);  // no swap, then T=1 in each sync mode
  const std::string msg = r->why->str();
  EXPECT_NE(msg.find("TFLMS cannot fit 40 B of device memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the smallest simulated peak was 48 B (T=1, sync_mode=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its simulation's hard minimum is 48 B"), std::string::npos) << msg;
  EXPECT_NE(msg.find("%f"), std::string::npos) << msg;
}

TEST(TflmsSearch, HostBudgetTooSmall) {
  // Every swap needs a 16-byte host copy; with no host memory no setting that swaps can fit. The smallest
  // device peak is still T=1, sync 2's 48 bytes (a and b swapped: 32 host bytes).
  Graph g = skip_graph();
  TflmsSearchOptions o;
  o.sim.device_bytes = 48;
  o.sim.host_bytes = 0;
  std::vector<TflmsTrial> seen;
  o.on_trial = [&](const TflmsTrial& t) { seen.push_back(t); };
  auto r = search_tflms(g, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  ASSERT_FALSE(r->fits);
  EXPECT_NE(r->why->str().find("and 0 B of host memory (that trial's host peak 32 B, too much)"), std::string::npos)
      << r->why->str();
  ASSERT_EQ(seen.size(), 5u);  // no swap, then T=1 in each sync mode
  for (const TflmsTrial& t : seen) EXPECT_EQ(t.host_exceeded, t.swapped_tensors > 0);
}

// A real training graph: resnet18 (small stem, 32x32, batch 64, momentum), 128 levels; its no-swap peak is
// about 387 MiB. At 300 MB the search goes through every stage (sync 0 fits).
Graph resnet18_training() {
  ModelOptions mo;
  mo.batch = 64;
  mo.image = {32};
  mo.small_stem = true;
  auto fwd = build_model("resnet18", mo);
  EXPECT_TRUE(fwd.has_value());
  auto tr = build_training_graph(*fwd, TrainingOptions{});
  EXPECT_TRUE(tr.has_value());
  return std::move(*tr);
}

TEST(TflmsSearch, EachChosenValueIsTheLargestTriedThatFits) {
  Graph g = resnet18_training();
  TflmsSearchOptions o;
  o.sim.device_bytes = 300'000'000;
  auto r = search_tflms(g, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  ASSERT_TRUE(r->lms_needed);
  ASSERT_TRUE(r->sim.fits);
  EXPECT_LE(r->sim.peak_device_bytes, o.sim.device_bytes);
  ASSERT_EQ(r->params.sync_mode, SyncMode::async) << "the budget was chosen so that the A and G stages run";
  const int n = r->levels;
  auto stage_trials = [&](TflmsStage s) {
    std::vector<TflmsTrial> out;
    for (const TflmsTrial& t : r->trials)
      if (t.stage == s) out.push_back(t);
    return out;
  };
  // Stages appear in order: no-swap, T, A, G.
  for (size_t i = 1; i < r->trials.size(); ++i) EXPECT_LE(r->trials[i - 1].stage, r->trials[i].stage) << i;
  // For each searched knob: the chosen value was tried and fit, and value + 1 was tried and did not (or the
  // chosen value is the range's top), with the knobs chosen before it fixed.
  auto check = [&](TflmsStage s, auto knob, int chosen) {
    bool chosen_fit = false, next_failed = false;
    for (const TflmsTrial& t : stage_trials(s)) {
      if (knob(t.params) == chosen && t.fits) chosen_fit = true;
      if (knob(t.params) == chosen + 1 && !t.fits) next_failed = true;
    }
    EXPECT_TRUE(chosen_fit) << tflms_stage_name(s);
    EXPECT_TRUE(next_failed || chosen == n) << tflms_stage_name(s);
  };
  check(TflmsStage::threshold, [](const TflmsParams& p) { return p.swapout_threshold; }, r->params.swapout_threshold);
  check(TflmsStage::ahead, [](const TflmsParams& p) { return p.swapin_ahead; }, r->params.swapin_ahead);
  if (r->params.swapin_groupby != n)
    check(TflmsStage::groupby, [](const TflmsParams& p) { return p.swapin_groupby; }, r->params.swapin_groupby);
  for (const TflmsTrial& t : stage_trials(TflmsStage::ahead))
    EXPECT_EQ(t.params.swapout_threshold, r->params.swapout_threshold);
  // The result's decisions are those of its parameters.
  auto levels = compute_levels(g);
  ASSERT_TRUE(levels.has_value());
  auto reach = compute_reachability(g, *levels);
  ASSERT_TRUE(reach.has_value());
  auto again = decide_tflms_swaps(g, *levels, *reach, r->params);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->swaps.size(), r->decisions.swaps.size());
  EXPECT_EQ(again->swap_in_bytes, r->decisions.swap_in_bytes);
}

TEST(TflmsSearch, Deterministic) {
  Graph g = resnet18_training();
  TflmsSearchOptions o;
  o.sim.device_bytes = 300'000'000;
  auto r1 = search_tflms(g, o);
  auto r2 = search_tflms(g, o);
  ASSERT_TRUE(r1.has_value() && r2.has_value());
  ASSERT_EQ(r1->trials.size(), r2->trials.size());
  for (size_t i = 0; i < r1->trials.size(); ++i) {
    const TflmsTrial &a = r1->trials[i], &b = r2->trials[i];
    EXPECT_EQ(a.params.swapout_threshold, b.params.swapout_threshold);
    EXPECT_EQ(a.params.swapin_ahead, b.params.swapin_ahead);
    EXPECT_EQ(a.params.swapin_groupby, b.params.swapin_groupby);
    EXPECT_EQ(a.params.sync_mode, b.params.sync_mode);
    EXPECT_EQ(a.peak_device_bytes, b.peak_device_bytes);
    EXPECT_EQ(a.peak_host_bytes, b.peak_host_bytes);
  }
  EXPECT_EQ(r1->sim.level_bytes, r2->sim.level_bytes);
}

}  // namespace
}  // namespace lms
