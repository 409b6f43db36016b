// decide_tflms_swaps: the rules of shared/TFLMS.md on hand-worked graphs (threshold strictness, grouping,
// trigger window, sync modes, exclusions) and invariants on random DAGs and small real training graphs.
#include <gtest/gtest.h>

#include "analysis/random_dag.h"
#include "lms/analysis/tflms_swaps.h"
#include "lms/autodiff/optimizer.h"
#include "lms/models/models.h"

namespace lms {
namespace {

struct Analyzed {
  Levels levels;
  Reachability reach;
};

Analyzed analyze(const Graph& g) {
  auto lv = compute_levels(g);
  EXPECT_TRUE(lv.has_value());
  auto r = compute_reachability(g, *lv);
  EXPECT_TRUE(r.has_value());
  return {*lv, *r};
}

SwapDecisions decide(const Graph& g, const TflmsParams& p) {
  Analyzed a = analyze(g);
  auto d = decide_tflms_swaps(g, a.levels, a.reach, p);
  EXPECT_TRUE(d.has_value()) << d.error().str();
  return d.value_or(SwapDecisions{});
}

TflmsParams params(int t, int a = 1, int grp = 0) {
  TflmsParams p;
  p.swapout_threshold = t;
  p.swapin_ahead = a;
  p.swapin_groupby = grp;
  return p;
}

NodeId node_of(const Graph& g, std::string_view name) { return g.value(*g.find_value(name)).producer; }

// The DESIGN.md example: x(0) -> a(1) -> b(2) -> c(3) -> d(4), and d also reads a (distance 3).
Graph chain() {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {8, 16}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId bb = b.op(Op::relu, {a}, {}, "b");
  ValueId c = b.op(Op::relu, {bb}, {}, "c");
  ValueId d = b.op(Op::add, {c, a}, {}, "d");
  EXPECT_TRUE(b.ok());
  g.set_outputs({d});
  return g;
}

TEST(TflmsSwaps, ThresholdIsStrict) {
  Graph g = chain();
  TflmsParams p;
  p.swapout_threshold = 3;  // distance(a, d) = 3, not > 3
  EXPECT_TRUE(decide(g, p).swaps.empty());
  p.swapout_threshold = 2;  // 3 > 2: a is swapped, d is its only far consumer
  SwapDecisions d = decide(g, p);
  ASSERT_EQ(d.swaps.size(), 1u);
  const TensorSwap& s = d.swaps[0];
  EXPECT_EQ(s.value, *g.find_value("a"));
  EXPECT_EQ(s.source, node_of(g, "a"));
  EXPECT_EQ(s.near_consumers, std::vector<NodeId>{node_of(g, "b")});
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].target, node_of(g, "d"));
  // A = 1: ub = 4 - 1 = 3, the search starts at level 2, where b is an ancestor of d.
  EXPECT_EQ(s.groups[0].trigger, node_of(g, "b"));
  EXPECT_EQ(d.swap_out_bytes, 8 * 16 * 4);
  EXPECT_EQ(d.swap_in_bytes, 8 * 16 * 4);
}

TEST(TflmsSwaps, WindowWithoutCandidateFallsBackToSynchronous) {
  Graph g = chain();
  TflmsParams p;
  p.swapout_threshold = 2;
  p.swapin_ahead = 2;  // ub = 2, lb = max(2 - 10, 1 + 1) = 2: the loop from ub - 1 = 1 down to 2 is empty
  SwapDecisions d = decide(g, p);
  ASSERT_EQ(d.swaps.size(), 1u);
  EXPECT_FALSE(d.swaps[0].groups[0].trigger.has_value());
}

TEST(TflmsSwaps, SyncInModesHaveNoTriggers) {
  Graph g = chain();
  for (SyncMode m : {SyncMode::sync_in, SyncMode::sync_both}) {
    TflmsParams p;
    p.swapout_threshold = 2;
    p.sync_mode = m;
    SwapDecisions d = decide(g, p);
    ASSERT_EQ(d.swaps.size(), 1u);
    EXPECT_FALSE(d.swaps[0].groups[0].trigger.has_value());
  }
}

TEST(TflmsSwaps, BadParamsNameTheOption) {
  Graph g = chain();
  Analyzed a = analyze(g);
  auto expect_error = [&](TflmsParams p, std::string_view option) {
    auto d = decide_tflms_swaps(g, a.levels, a.reach, p);
    ASSERT_FALSE(d.has_value());
    EXPECT_NE(d.error().str().find(option), std::string::npos) << d.error().str();
  };
  expect_error(params(-1), "'threshold'");
  expect_error(params(1, -2), "'ahead'");
  TflmsParams p = params(1);
  p.sync_mode = static_cast<SyncMode>(7);
  expect_error(p, "'sync_mode'");
  p = params(1);
  p.trigger_window = -1;
  expect_error(p, "'window'");
  p = params(1);
  p.min_bytes = -5;
  expect_error(p, "'min_bytes'");
}

// Invariants that hold for any graph and params: far consumers are beyond T and not excluded, near + far is
// exactly the consumer set, groups respect G, targets are group fronts, triggers lie in the window and reach
// their target.
void check_invariants(const Graph& g, const Analyzed& a, const SwapDecisions& d) {
  const TflmsParams& p = d.params;
  int64_t out_bytes = 0, in_bytes = 0;
  for (size_t i = 0; i < d.swaps.size(); ++i) {
    const TensorSwap& s = d.swaps[i];
    if (i > 0) {
      EXPECT_LT(d.swaps[i - 1].value, s.value);
    }
    const Value& v = g.value(s.value);
    EXPECT_EQ(v.producer, s.source);
    EXPECT_GE(v.type.rank(), 2);
    EXPECT_FALSE(tflms_node_excluded(g, s.source, p));
    std::vector<NodeId> all = s.near_consumers;
    int prev_level = -1;
    for (const SwapInGroup& grp : s.groups) {
      ASSERT_FALSE(grp.consumers.empty());
      EXPECT_EQ(grp.target, grp.consumers.front());
      EXPECT_GE(a.levels[grp.target], prev_level);
      for (size_t k = 0; k < grp.consumers.size(); ++k) {
        NodeId c = grp.consumers[k];
        EXPECT_GT(a.levels.distance(s.source, c), p.swapout_threshold);
        EXPECT_FALSE(tflms_node_excluded(g, c, p));
        if (k > 0) {
          EXPECT_LE(a.levels.distance(grp.consumers[k - 1], c), p.swapin_groupby);
          EXPECT_GT(p.swapin_groupby, 0);
        }
        all.push_back(c);
      }
      prev_level = a.levels[grp.consumers.back()];
      if (grp.trigger) {
        int ub = a.levels[grp.target] - p.swapin_ahead;
        EXPECT_LT(a.levels[*grp.trigger], ub);
        EXPECT_GE(a.levels[*grp.trigger], std::max(ub - p.trigger_window, a.levels[s.source] + 1));
        EXPECT_TRUE(a.reach.reaches(*grp.trigger, grp.target));
        EXPECT_FALSE(tflms_node_excluded(g, *grp.trigger, p));
      }
      in_bytes += s.bytes;
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, v.consumers);
    out_bytes += s.bytes;
  }
  EXPECT_EQ(d.swap_out_bytes, out_bytes);
  EXPECT_EQ(d.swap_in_bytes, in_bytes);
}

TEST(TflmsSwaps, InvariantsOnRandomDags) {
  int swapped = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    testing::RandomDagOptions o;
    o.nodes = 80;
    Graph g = testing::random_dag(seed, o);
    Analyzed a = analyze(g);
    for (int t : {1, 3, 6})
      for (int grp : {0, 2, 5}) {
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " T " << t << " G " << grp);
        auto d = decide_tflms_swaps(g, a.levels, a.reach, params(t, 1, grp));
        ASSERT_TRUE(d.has_value()) << d.error().str();
        check_invariants(g, a, *d);
        swapped += static_cast<int>(d->swaps.size());
      }
  }
  EXPECT_GT(swapped, 0);
}

TEST(TflmsSwaps, TrainingGraphNeverSwapsStateOrUpdates) {
  ModelOptions o;
  o.batch = 2;
  o.image = {32};
  o.small_stem = true;
  auto fwd = build_model("resnet18", o);
  ASSERT_TRUE(fwd.has_value()) << fwd.error().str();
  auto g = build_training_graph(*fwd, TrainingOptions{});
  ASSERT_TRUE(g.has_value()) << g.error().str();
  Analyzed a = analyze(*g);
  auto d = decide_tflms_swaps(*g, a.levels, a.reach, params(2, 1, 3));
  ASSERT_TRUE(d.has_value()) << d.error().str();
  // resnet18's forward activations are read again by the backward pass, far away.
  int fwd_sources = 0;
  for (const TensorSwap& s : d->swaps) {
    EXPECT_FALSE(g->is_persistent(s.value)) << g->value(s.value).name;
    EXPECT_NE(g->node(s.source).category, Category::upd) << g->value(s.value).name;
    for (const SwapInGroup& grp : s.groups) {
      for (NodeId c : grp.consumers) EXPECT_NE(g->node(c).category, Category::upd) << g->value(s.value).name;
    }
    fwd_sources += g->node(s.source).category == Category::fwd ? 1 : 0;
  }
  EXPECT_GT(fwd_sources, 10);
  check_invariants(*g, a, *d);
}

}  // namespace
}  // namespace lms
