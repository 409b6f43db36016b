// Pipeline text: parsing, option validation against the registry, running with verification.
#include <gtest/gtest.h>

#include "lms/ir/builder.h"
#include "lms/passes/dce.h"
#include "lms/passes/pass.h"

namespace lms {
namespace {

TEST(Pipeline, ParsesNamesAndOptions) {
  auto p = parse_pipeline(" dce , verify ");
  ASSERT_TRUE(p.has_value()) << p.error().str();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].pass->name, "dce");
  EXPECT_EQ((*p)[1].pass->name, "verify");
  EXPECT_TRUE(parse_pipeline("dce{}").has_value());
}

TEST(Pipeline, Errors) {
  auto expect_error = [](std::string_view text, std::string_view needle) {
    auto p = parse_pipeline(text);
    ASSERT_FALSE(p.has_value()) << text;
    EXPECT_NE(p.error().str().find(needle), std::string::npos) << p.error().str();
  };
  expect_error("", "empty pipeline");
  expect_error("nosuch", "unknown pass 'nosuch' (passes: verify, dce");
  expect_error("dce{threshold=3}", "pass 'dce' has no option 'threshold'");
  expect_error("dce verify", "expected ',' between passes");
  expect_error("dce{", "expected an option name");
  expect_error("dce,", "expected a pass name");
}

TEST(Pipeline, DceRemovesUnneededNodes) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {3}};
  ValueId x = b.input(t, "x");
  b.op(Op::relu, {x}, {}, "dead");
  ValueId y = b.op(Op::relu, {x}, {}, "y");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(eliminate_dead_code(g).has_value());  // no return line: refuses rather than deleting everything
  g.set_outputs({y});
  auto p = parse_pipeline("dce,verify");
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(run_pipeline(g, *p, {.verify_each = true}).has_value());
  EXPECT_EQ(g.num_nodes(), 2u);
  EXPECT_FALSE(g.find_value("dead").has_value());
  auto again = eliminate_dead_code(g);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, 0);  // idempotent
}

}  // namespace
}  // namespace lms
