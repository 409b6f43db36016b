// tflms-triggers: after tflms-swap, the triggers it adds are exactly the ones decide_tflms_swaps decides for
// the same params (on small real training graphs and random DAGs), and the rewritten graph verifies in a
// valid schedule order.
#include <gtest/gtest.h>

#include "analysis/random_dag.h"
#include "lms/autodiff/optimizer.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/models/models.h"
#include "lms/passes/tflms_swap.h"
#include "lms/passes/tflms_triggers.h"
#include "lms/plan/schedule.h"

namespace lms {
namespace {

// How a node is named across rewrites: its first output's name.
std::string name_of(const Graph& g, NodeId n) { return g.value(g.first_output(n)).name; }

// (tensor, consumers of the group, trigger or "") for every swap-in, as names, sorted.
using GroupKey = std::tuple<std::string, std::vector<std::string>, std::string>;

std::vector<GroupKey> from_decisions(const Graph& g, const SwapDecisions& d) {
  std::vector<GroupKey> out;
  for (const TensorSwap& s : d.swaps)
    for (const SwapInGroup& grp : s.groups) {
      std::vector<std::string> cs;
      for (NodeId c : grp.consumers) cs.push_back(name_of(g, c));
      std::sort(cs.begin(), cs.end());
      out.emplace_back(g.value(s.value).name, cs, grp.trigger ? name_of(g, *grp.trigger) : "");
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<GroupKey> from_rewritten(const Graph& g) {
  std::vector<GroupKey> out;
  for (NodeId in : g.node_ids()) {
    if (g.node(in).op != Op::swap_in) continue;
    NodeId swap_out = g.value(g.node(in).inputs.front()).producer;
    std::vector<std::string> cs;
    for (NodeId c : g.value(g.first_output(in)).consumers) cs.push_back(name_of(g, c));
    std::sort(cs.begin(), cs.end());
    const auto& ctl = g.node(in).control_inputs;
    EXPECT_LE(ctl.size(), 1u);
    out.emplace_back(g.value(g.node(swap_out).inputs.front()).name, cs, ctl.empty() ? "" : name_of(g, ctl.front()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Returns the number of swap-ins that got a trigger (so callers can check the comparison was not vacuous).
int expect_same_decisions(const Graph& original, const TflmsParams& p) {
  auto lv = compute_levels(original);
  if (!lv) return ADD_FAILURE() << lv.error().str(), 0;
  auto reach = compute_reachability(original, *lv);
  if (!reach) return ADD_FAILURE() << reach.error().str(), 0;
  auto d = decide_tflms_swaps(original, *lv, *reach, p);
  if (!d) return ADD_FAILURE() << d.error().str(), 0;
  Graph g = original;
  auto ins = insert_tflms_swaps(g, p);
  if (!ins) return ADD_FAILURE() << ins.error().str(), 0;
  auto added = add_tflms_triggers(g, p);
  if (!added) return ADD_FAILURE() << added.error().str(), 0;
  auto ok = verify(g);
  if (!ok) return ADD_FAILURE() << ok.error().str(), 0;
  EXPECT_TRUE(check_schedule_order(g).has_value());
  std::vector<GroupKey> want = from_decisions(original, *d);
  EXPECT_EQ(from_rewritten(g), want);
  int triggered = 0;
  for (const auto& k : want) triggered += std::get<2>(k).empty() ? 0 : 1;
  EXPECT_EQ(*added, triggered);
  return triggered;
}

Graph training(std::string_view model, const ModelOptions& o) {
  auto fwd = build_model(model, o);
  EXPECT_TRUE(fwd.has_value()) << fwd.error().str();
  auto g = build_training_graph(*fwd, TrainingOptions{});
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return *g;
}

TflmsParams params(int t, int a, int grp, int window = 10) {
  TflmsParams p;
  p.swapout_threshold = t;
  p.swapin_ahead = a;
  p.swapin_groupby = grp;
  p.trigger_window = window;
  return p;
}

TEST(TflmsTriggersPass, SameAsDecisionsOnSmallModels) {
  ModelOptions resnet;
  resnet.batch = 2;
  resnet.image = {32};
  resnet.small_stem = true;
  ModelOptions gpt;
  gpt.batch = 2;
  gpt.layers = 2;
  gpt.hidden_size = 32;
  gpt.heads = 2;
  gpt.seq = 8;
  gpt.vocab = 50;
  for (auto [name, opts] : {std::pair{"resnet18", resnet}, std::pair{"gpt", gpt}}) {
    Graph g = training(name, opts);
    int triggered = 0;
    for (TflmsParams p : {params(2, 1, 0), params(5, 2, 3), params(10, 4, 100, 3), params(1, 30, 2)}) {
      SCOPED_TRACE(::testing::Message() << name << " T " << p.swapout_threshold << " A " << p.swapin_ahead);
      triggered += expect_same_decisions(g, p);
    }
    EXPECT_GT(triggered, 5) << name;
  }
}

TEST(TflmsTriggersPass, SameAsDecisionsOnRandomDags) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    testing::RandomDagOptions o;
    o.nodes = 90;
    Graph g = testing::random_dag(seed, o);
    for (TflmsParams p : {params(1, 1, 0), params(3, 0, 2, 2), params(2, 3, 5, 1)}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " T " << p.swapout_threshold);
      expect_same_decisions(g, p);
    }
  }
}

TEST(TflmsTriggersPass, BypassRestoresTheOriginalGraph) {
  testing::RandomDagOptions o;
  o.nodes = 50;
  Graph g = testing::random_dag(3, o);
  Graph rewritten = g;
  ASSERT_TRUE(insert_tflms_swaps(rewritten, params(1, 1, 2)).has_value());
  auto b = bypass_swaps(rewritten);
  ASSERT_TRUE(b.has_value()) << b.error().str();
  EXPECT_EQ(print_graph(b->graph), print_graph(g));
}

}  // namespace
}  // namespace lms
