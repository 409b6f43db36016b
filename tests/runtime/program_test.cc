// Programs: streams by op (copies to the host on d2h, to the device on h2d), per-stream orders, and events
// from both rules: cross-stream dependencies, and reuse of a buffer's space whose previous occupant was last
// read on another stream. A one-stream program has no events. The reference backend runs a multi-stream
// program correctly (in order) and checks every wait names an event already recorded.
#include <gtest/gtest.h>

#include "lms/backends/reference/reference_backend.h"
#include "lms/ir/builder.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"

namespace lms {
namespace {

NodeId producer(const Graph& g, std::string_view name) { return g.value(*g.find_value(name)).producer; }

TEST(Program, OneStreamHasNoEvents) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {8}}, "x");
  ValueId y = b.op(Op::relu, {x}, {}, "y");
  ASSERT_TRUE(b.ok());
  g.set_outputs({y});
  auto p = compile(g);
  ASSERT_TRUE(p.has_value()) << p.error().str();
  EXPECT_EQ(p->num_events(), 0u);
  EXPECT_EQ(p->stream_order(StreamId::compute).size(), 2u);
  EXPECT_TRUE(p->stream_order(StreamId::d2h).empty());
  EXPECT_EQ(p->inputs(), std::vector<ValueId>{x});
}

// x -> a = concat(x, x) -> h = swap_out(a) on d2h; then c = concat(x, x) takes a's space (a is dead once
// swapped out), so c's producer must wait for the swap-out; a2 = swap_in(h) on h2d waits for it as a data
// dependency, and also for c, the last reader of x, whose space a2 takes; the final add on compute waits for
// the swap-in. Layout (largest first, then by first position): a and c at 0, a2 at 832, sum at 1664, x at 832.
TEST(Program, EventsForDependenciesAndReuseAcrossStreams) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {100}}, "x");
  ValueId a = b.op(Op::concat, {x, x}, attrs({{"axis", int64_t{0}}}), "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId c = b.op(Op::concat, {x, x}, attrs({{"axis", int64_t{0}}}), "c");
  ValueId a2 = b.op(Op::swap_in, {h}, {}, "a2");
  ValueId sum = b.op(Op::add, {a2, c}, {}, "sum");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({sum});
  auto p = compile(g);
  ASSERT_TRUE(p.has_value()) << p.error().str();
  const Graph& pg = p->graph();
  EXPECT_EQ(p->stream(producer(pg, "h")), StreamId::d2h);
  EXPECT_EQ(p->stream(producer(pg, "a2")), StreamId::h2d);
  EXPECT_EQ(p->memory().of(*pg.find_value("c")).offset, p->memory().of(*pg.find_value("a")).offset)
      << "c reuses a's space (the case the reuse rule is about)";

  auto rec = [&](std::string_view name) { return p->recorded(producer(pg, name)); };
  ASSERT_EQ(p->memory().of(*pg.find_value("a2")).offset, p->memory().of(*pg.find_value("x")).offset);
  ASSERT_TRUE(rec("a") && rec("h") && rec("c") && rec("a2"));
  EXPECT_FALSE(rec("sum").has_value());
  EXPECT_EQ(p->num_events(), 4u);
  EXPECT_EQ(rec("a")->v, 0u) << "events are numbered in node order";
  EXPECT_EQ(p->waits(producer(pg, "h")), std::vector<EventId>{*rec("a")});
  EXPECT_EQ(p->waits(producer(pg, "c")), std::vector<EventId>{*rec("h")}) << "reuse after the swap-out";
  EXPECT_EQ(p->waits(producer(pg, "a2")), (std::vector<EventId>{*rec("h"), *rec("c")}));
  EXPECT_EQ(p->waits(producer(pg, "sum")), std::vector<EventId>{*rec("a2")});
  EXPECT_GT(p->host_arena_bytes(), 0);

  ReferenceBackend backend;
  auto ex = Executor::create(*p, backend);
  ASSERT_TRUE(ex.has_value()) << ex.error().str();
  ASSERT_TRUE(ex->initialize(0).has_value());
  HostTensor xs(pg.value(*pg.find_value("x")).type);
  for (int i = 0; i < 100; ++i) xs.set(i, i - 50);
  Feed feed{*pg.find_value("x"), &xs};
  auto r = ex->step({&feed, 1});
  ASSERT_TRUE(r.has_value()) << r.error().str();
  const HostTensor& out = r->outputs.front();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(out.get(i), 2.0 * (i % 100 - 50)) << i;
}

TEST(Program, PlanMustMatchTheGraph) {
  Graph g;
  Builder b(g);
  b.input(TensorType{DType::f32, {8}}, "x");
  ASSERT_TRUE(b.ok());
  Graph other;
  auto plan = plan_memory(other);
  ASSERT_TRUE(plan.has_value());
  auto p = build_program(g, *plan);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().str().find("not made for this graph"), std::string::npos);
}

}  // namespace
}  // namespace lms
