// Reachability against a search oracle on random DAGs, plus the rules the trigger search relies on (data
// edges only; a node reaches itself).
#include <gtest/gtest.h>

#include "analysis/random_dag.h"
#include "lms/analysis/reachability.h"

namespace lms {
namespace {

// Every node reachable from `a` through data edges (the oracle: an explicit search).
std::vector<bool> descendants(const Graph& g, NodeId a) {
  std::vector<bool> seen(g.num_nodes(), false);
  std::vector<NodeId> stack{a};
  seen[a.v] = true;
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.node(n).outputs)
      for (NodeId c : g.value(v).consumers)
        if (!seen[c.v]) {
          seen[c.v] = true;
          stack.push_back(c);
        }
  }
  return seen;
}

void expect_matches_oracle(const Graph& g) {
  auto lv = compute_levels(g);
  ASSERT_TRUE(lv.has_value()) << lv.error().str();
  auto r = compute_reachability(g, *lv);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  ASSERT_EQ(r->num_nodes(), g.num_nodes());
  int positives = 0;
  for (NodeId a : g.node_ids()) {
    std::vector<bool> desc = descendants(g, a);
    for (NodeId b : g.node_ids()) {
      ASSERT_EQ(r->reaches(a, b), desc[b.v]) << "a=" << a.v << " b=" << b.v;
      positives += desc[b.v] ? 1 : 0;
    }
  }
  // Guards against a vacuous pass: the random graphs are deep, so most pairs along the chain are connected.
  EXPECT_GT(positives, static_cast<int>(g.num_nodes()));
}

TEST(Reachability, MatchesSearchOnRandomDags) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomDagOptions o;
    o.inputs = 1 + static_cast<int>(seed % 4);
    o.nodes = 40 + static_cast<int>(seed * 7 % 80);
    expect_matches_oracle(testing::random_dag(seed, o));
  }
}

TEST(Reachability, MatchesSearchOnWideAndUniformDags) {
  // percent_far = 100: operands drawn uniformly, so ancestor sets have little interval structure.
  for (uint64_t seed = 100; seed < 110; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomDagOptions o;
    o.inputs = 8;
    o.nodes = 150;
    o.recent = 3;
    o.percent_far = 100;
    expect_matches_oracle(testing::random_dag(seed, o));
  }
}

TEST(Reachability, ControlEdgesDoNotCount) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {2, 2}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId c = b.op(Op::relu, {x}, {}, "c");
  ASSERT_TRUE(b.ok());
  NodeId na = g.value(a).producer, nc = g.value(c).producer;
  g.add_control_input(nc, na);  // a runs before c, but c does not read a
  auto lv = compute_levels(g);
  ASSERT_TRUE(lv.has_value());
  auto r = compute_reachability(g, *lv);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->reaches(na, nc));
  EXPECT_TRUE(r->reaches(g.value(x).producer, nc));
  EXPECT_TRUE(r->reaches(na, na));
  EXPECT_FALSE(r->reaches(nc, g.value(x).producer));
}

TEST(Reachability, LevelsOfAnotherGraphAreAnError) {
  Graph g = testing::random_dag(7);
  Levels empty;
  auto r = compute_reachability(g, empty);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().what.find("levels"), std::string::npos) << r.error().str();
}

}  // namespace
}  // namespace lms
