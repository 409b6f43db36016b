// The schedule: node-id order when valid; otherwise Kahn's algorithm by smallest ready id, respecting control
// edges; a cycle is an error naming a node on it.
#include <gtest/gtest.h>

#include "lms/ir/builder.h"
#include "lms/plan/schedule.h"

namespace lms {
namespace {

TEST(Schedule, KeepsAValidOrder) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {4}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  b.op(Op::add, {a, x}, {}, "c");
  ASSERT_TRUE(b.ok());
  auto order = schedule_order(g);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(*order, g.node_ids());
  auto s = schedule(g);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->scheduled());
}

TEST(Schedule, ControlEdgesReorderBySmallestReadyId) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {4}};
  ValueId x = b.input(t, "x");           // node 0
  ValueId a = b.op(Op::relu, {x}, {}, "a");  // 1, must run after c
  ValueId c = b.op(Op::relu, {x}, {}, "c");  // 2
  ValueId d = b.op(Op::relu, {x}, {}, "d");  // 3
  ASSERT_TRUE(b.ok());
  g.add_control_input(g.value(a).producer, g.value(c).producer);
  g.set_outputs({a, d});
  auto order = schedule_order(g);
  ASSERT_TRUE(order.has_value()) << order.error().str();
  // Ready after x: c (2) and d (3); c first, which frees a (1), the smallest ready id next.
  EXPECT_EQ(*order, (std::vector<NodeId>{NodeId{0}, NodeId{2}, NodeId{1}, NodeId{3}}));
  auto s = schedule(g);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(check_schedule_order(*s).has_value());
  EXPECT_EQ(s->value(s->first_output(NodeId{1})).name, "c");
  ASSERT_EQ(s->outputs().size(), 2u);
  EXPECT_EQ(s->value(s->outputs()[0]).name, "a");
}

TEST(Schedule, CycleIsAnErrorNamingANodeOnIt) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {4}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId c = b.op(Op::relu, {a}, {}, "c");
  b.op(Op::relu, {c}, {}, "downstream");
  ASSERT_TRUE(b.ok());
  g.add_control_input(g.value(a).producer, g.value(c).producer);
  auto order = schedule_order(g);
  ASSERT_FALSE(order.has_value());
  const std::string msg = order.error().str();
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_TRUE(msg.rfind("%a:", 0) == 0 || msg.rfind("%c:", 0) == 0) << msg;
}

}  // namespace
}  // namespace lms
