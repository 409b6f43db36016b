// The verifier: each check fires on a graph built to break it, and a valid graph passes.
#include <gtest/gtest.h>

#include "lms/ir/builder.h"
#include "lms/ir/verifier.h"

namespace lms {
namespace {

TensorType f32(Shape s) { return TensorType{DType::f32, std::move(s)}; }

// x -> relu -> add(relu, x)
struct Small {
  Graph g;
  ValueId x, r, y;
  Small() {
    Builder b(g);
    x = b.input(f32({4, 8}), "x");
    r = b.op(Op::relu, {x}, {}, "r");
    y = b.op(Op::add, {r, x}, {}, "y");
    g.set_outputs({y});
    EXPECT_TRUE(b.ok()) << b.error()->str();
  }
};

bool any_error_contains(const std::vector<Error>& errs, std::string_view text) {
  for (const Error& e : errs)
    if (e.str().find(text) != std::string::npos) return true;
  return false;
}

TEST(Verifier, AcceptsValidGraph) {
  Small s;
  EXPECT_TRUE(verify_graph(s.g).empty());
  EXPECT_TRUE(verify(s.g).has_value());
}

TEST(Verifier, WrongAnnotatedShape) {
  Small s;
  Graph& g = s.g;
  // Re-create %y with a wrong type: the shape rule disagrees.
  NodeId bad = g.add_node(Op::relu, {}, std::vector<TensorType>{f32({4, 9})}, std::vector<std::string>{"bad"});
  g.set_inputs(bad, {s.r});
  auto errs = verify_graph(g);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].where, "%bad");
  EXPECT_NE(errs[0].what.find("gives f32[4,8], the node says f32[4,9]"), std::string::npos) << errs[0].what;
}

TEST(Verifier, Arity) {
  Small s;
  NodeId bad = s.g.add_node(Op::add, {}, std::vector<TensorType>{f32({4, 8})}, std::vector<std::string>{"bad"});
  s.g.set_inputs(bad, {s.r});
  EXPECT_TRUE(any_error_contains(verify_graph(s.g), "%bad: op 'add' takes 2 inputs (a, b), got 1"));
}

TEST(Verifier, UnknownAttribute) {
  Small s;
  NodeId bad = s.g.add_node(Op::relu, attrs({{"alpha", 1.0}}), std::vector<TensorType>{f32({4, 8})},
                            std::vector<std::string>{"bad"});
  s.g.set_inputs(bad, {s.r});
  EXPECT_TRUE(any_error_contains(verify_graph(s.g), "op 'relu' has no attribute 'alpha'"));
}

TEST(Verifier, ControlCycle) {
  Small s;
  // %r runs after %y, but %y reads %r.
  s.g.add_control_input(s.g.value(s.r).producer, s.g.value(s.y).producer);
  auto errs = verify_graph(s.g);
  EXPECT_TRUE(any_error_contains(errs, "cycle: %r -> %y -> %r")) << (errs.empty() ? "" : errs[0].str());
}

TEST(Verifier, SelfControlInput) {
  Small s;
  NodeId y = s.g.value(s.y).producer;
  s.g.add_control_input(y, y);
  EXPECT_TRUE(any_error_contains(verify_graph(s.g), "%y: node is its own control input"));
}

TEST(Verifier, PlacementOnlyCopiesCross) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(f32({4}), "x");
  ValueId h = b.op(Op::swap_out, {x}, {}, "h");
  ValueId back = b.op(Op::swap_in, {h}, {}, "back");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(g.value(h).placement, Placement::host);
  EXPECT_TRUE(verify_graph(g).empty());
  NodeId bad = g.add_node(Op::relu, {}, std::vector<TensorType>{f32({4})}, std::vector<std::string>{"bad"});
  g.set_inputs(bad, {h});
  EXPECT_TRUE(any_error_contains(verify_graph(g), "input %h is on the host"));
  g.set_placement(back, Placement::host);
  EXPECT_TRUE(any_error_contains(verify_graph(g), "output %back is placed on the host"));
}

TEST(Verifier, ScheduledOrder) {
  Small s;
  s.g.set_scheduled(true);
  EXPECT_TRUE(verify_graph(s.g).empty());
  // Move %y first: it now reads %r before %r is defined.
  std::vector<NodeId> order = {NodeId{2}, NodeId{0}, NodeId{1}};
  s.g.reorder(order);
  EXPECT_TRUE(any_error_contains(verify_graph(s.g), "%y: reads %r before it is defined"));
  s.g.set_scheduled(false);
  EXPECT_TRUE(verify_graph(s.g).empty());  // unscheduled graphs may be in any order
}

TEST(Verifier, ReportsAllProblemsAndSummarizes) {
  Small s;
  for (int i = 0; i < 3; ++i) {
    NodeId bad = s.g.add_node(Op::relu, {}, std::vector<TensorType>{f32({1})}, std::vector<std::string>{"bad"});
    s.g.set_inputs(bad, {s.r});
  }
  EXPECT_EQ(verify_graph(s.g).size(), 3u);
  auto r = verify(s.g);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().what.find("(and 2 more problems)"), std::string::npos);
}

TEST(Graph, NamesAreUniqueAndEraseRenumbers) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(f32({2}), "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId a2 = b.op(Op::relu, {a}, {}, "a");
  ValueId a3 = b.op(Op::relu, {a2}, {}, "a");
  EXPECT_EQ(g.value(a2).name, "a.1");
  EXPECT_EQ(g.value(a3).name, "a.2");
  EXPECT_EQ(g.value(a).consumers, std::vector<NodeId>{g.value(a2).producer});
  g.set_outputs({a});
  std::vector<bool> dead = {false, false, true, true};
  g.erase_nodes(dead);
  EXPECT_EQ(g.num_nodes(), 2u);
  EXPECT_TRUE(g.value(*g.find_value("a")).consumers.empty());
  EXPECT_FALSE(g.find_value("a.1").has_value());
  EXPECT_TRUE(verify_graph(g).empty());
}

}  // namespace
}  // namespace lms
