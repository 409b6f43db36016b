// Levels: longest-path layering over data and control edges, as TFLMS.md defines it.
#include <gtest/gtest.h>

#include "lms/analysis/levels.h"
#include "lms/ir/builder.h"

namespace lms {
namespace {

TEST(Levels, LongestPathAndControlEdges) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {2}};
  ValueId x = b.input(t, "x");         // level 0
  ValueId a = b.op(Op::relu, {x}, {}, "a");  // 1
  ValueId c = b.op(Op::relu, {a}, {}, "c");  // 2
  ValueId d = b.op(Op::add, {c, x}, {}, "d");  // 3: longest path via c, not the short edge from x
  ValueId e = b.op(Op::relu, {x}, {}, "e");  // 1, then 4 once it runs after d
  ASSERT_TRUE(b.ok());
  auto lv = compute_levels(g);
  ASSERT_TRUE(lv.has_value());
  EXPECT_EQ(lv->count(), 4);
  EXPECT_EQ((*lv)[g.value(d).producer], 3);
  EXPECT_EQ((*lv)[g.value(e).producer], 1);
  EXPECT_EQ(lv->nodes[1], (std::vector<NodeId>{g.value(a).producer, g.value(e).producer}));
  EXPECT_EQ(lv->distance(g.value(x).producer, g.value(d).producer), 3);

  g.add_control_input(g.value(e).producer, g.value(d).producer);
  lv = compute_levels(g);
  ASSERT_TRUE(lv.has_value());
  EXPECT_EQ((*lv)[g.value(e).producer], 4);
  EXPECT_EQ(lv->count(), 5);
}

TEST(Levels, CycleIsAnError) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {2}}, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId c = b.op(Op::relu, {a}, {}, "c");
  g.add_control_input(g.value(a).producer, g.value(c).producer);
  auto lv = compute_levels(g);
  ASSERT_FALSE(lv.has_value());
  EXPECT_NE(lv.error().str().find("cycle"), std::string::npos);
}

TEST(Levels, EmptyGraph) {
  Graph g;
  auto lv = compute_levels(g);
  ASSERT_TRUE(lv.has_value());
  EXPECT_EQ(lv->count(), 0);
}

}  // namespace
}  // namespace lms
