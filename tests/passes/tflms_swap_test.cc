// tflms-swap and tflms-serialize on random DAGs: the rewrite verifies, keeps node order a valid schedule,
// inserts exactly the decided copies and rewires exactly the far consumers; the option reader names options.
#include <gtest/gtest.h>

#include "analysis/random_dag.h"
#include "lms/analysis/levels.h"
#include "lms/ir/verifier.h"
#include "lms/passes/tflms_serialize.h"
#include "lms/passes/tflms_swap.h"
#include "lms/plan/schedule.h"
#include "passes/pass_test_util.h"

namespace lms {
namespace {

using pass_test::count_op;

TflmsParams params(int t, int grp, SyncMode m) {
  TflmsParams p;
  p.swapout_threshold = t;
  p.swapin_groupby = grp;
  p.sync_mode = m;
  return p;
}

TEST(TflmsSwapPass, RandomDagsVerifyAndMatchDecisions) {
  int total_swaps = 0;
  for (uint64_t seed = 1; seed <= 15; ++seed)
    for (int t : {1, 4})
      for (int grp : {0, 3})
        for (SyncMode m : {SyncMode::async, SyncMode::sync_out, SyncMode::sync_in, SyncMode::sync_both}) {
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " T " << t << " G " << grp << " mode "
                                            << static_cast<int>(m));
          testing::RandomDagOptions o;
          o.nodes = 70;
          Graph g = testing::random_dag(seed, o);
          Graph before = g;
          auto d = insert_tflms_swaps(g, params(t, grp, m));
          ASSERT_TRUE(d.has_value()) << d.error().str();
          auto ok = verify(g);
          ASSERT_TRUE(ok.has_value()) << ok.error().str();
          ASSERT_TRUE(check_schedule_order(g).has_value());
          size_t groups = 0;
          for (const TensorSwap& s : d->swaps) groups += s.groups.size();
          EXPECT_EQ(count_op(g, Op::swap_out), static_cast<int>(d->swaps.size()));
          EXPECT_EQ(count_op(g, Op::swap_in), static_cast<int>(groups));
          EXPECT_EQ(g.num_nodes(), before.num_nodes() + d->swaps.size() + groups);
          // Every far consumer now reads the swap-in of its group instead of the tensor; near ones do not.
          for (const TensorSwap& s : d->swaps) {
            const std::string& name = before.value(s.value).name;
            for (size_t k = 0; k < s.groups.size(); ++k) {
              ValueId in = *g.find_value(name + ".in" + std::to_string(k));
              for (NodeId c : s.groups[k].consumers) {
                NodeId now = g.value(*g.find_value(before.value(before.first_output(c)).name)).producer;
                auto& ins = g.node(now).inputs;
                EXPECT_NE(std::find(ins.begin(), ins.end(), in), ins.end());
                EXPECT_EQ(std::find(ins.begin(), ins.end(), *g.find_value(name)), ins.end());
              }
            }
          }
          total_swaps += static_cast<int>(d->swaps.size());
        }
  EXPECT_GT(total_swaps, 100);
}

TEST(TflmsSwapPass, OptionsNameTheirErrors) {
  auto expect_error = [](Attributes a, std::string_view needle) {
    auto p = tflms_params_from(a);
    ASSERT_FALSE(p.has_value());
    EXPECT_NE(p.error().str().find(needle), std::string::npos) << p.error().str();
  };
  expect_error(attrs({{"threshold", int64_t{-1}}}), "option 'threshold'");
  expect_error(attrs({{"sync_mode", int64_t{7}}}), "option 'sync_mode'");
  expect_error(attrs({{"threshold", int64_t{1} << 40}}), "option 'threshold'");
  expect_error(attrs({{"include_ops", std::string("relu,,add")}}), "option 'include_ops'");
  expect_error(attrs({{"exclude_ops", std::string("nosuchop")}}), "option 'exclude_ops'");
  auto p = tflms_params_from(attrs({{"exclude_names", std::string("%a,b")}, {"groupby", int64_t{2}}}));
  ASSERT_TRUE(p.has_value()) << p.error().str();
  EXPECT_EQ(p->exclude_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p->swapin_groupby, 2);
}

TEST(TflmsSerializePass, ChainsEachChosenLevel) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomDagOptions o;
    o.inputs = 4;
    o.nodes = 60;
    o.percent_far = 60;
    Graph g = testing::random_dag(seed, o);
    auto lv = compute_levels(g);
    ASSERT_TRUE(lv.has_value());
    SerializeOptions s;
    int expected = 0;
    for (int l = 1; l < lv->count(); l += 2) {
      s.levels.push_back(l);
      expected += static_cast<int>(lv->nodes[static_cast<size_t>(l)].size()) - 1;
    }
    auto added = serialize_levels(g, s);
    ASSERT_TRUE(added.has_value()) << added.error().str();
    EXPECT_EQ(*added, expected);
    ASSERT_TRUE(verify(g).has_value());
    ASSERT_TRUE(check_schedule_order(g).has_value());
    // A chained level's ops now lie on one path: each gets its own level.
    auto after = compute_levels(g);
    ASSERT_TRUE(after.has_value());
    EXPECT_GE(after->count(), lv->count());
  }
}

}  // namespace
}  // namespace lms
