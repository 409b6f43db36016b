// The time simulator (sim/time_sim.h): tiny scheduled graphs whose three-stream timelines are worked out by
// hand below (Note [Time simulation] gives the rules), and its errors. Durations are sums of powers of two, so
// every time is exact in binary and compared with ==.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lms/ir/builder.h"
#include "lms/plan/memory_planner.h"
#include "lms/runtime/program.h"
#include "lms/sim/time_sim.h"

namespace lms {
namespace {

const TensorType kT{DType::f32, {2, 2}};
constexpr int kCompute = static_cast<int>(StreamId::compute);
constexpr int kD2h = static_cast<int>(StreamId::d2h);
constexpr int kH2d = static_cast<int>(StreamId::h2d);

NodeId node_of(const Graph& g, ValueId v) { return g.value(v).producer; }

// Expects node `v`'s producer to run over [start, end].
void expect_span(const TimeSimResult& r, const Graph& g, ValueId v, double start, double end) {
  const NodeId n = node_of(g, v);
  EXPECT_EQ(r.start[n.v], start) << g.value(v).name;
  EXPECT_EQ(r.end[n.v], end) << g.value(v).name;
}

TEST(TimeSim, ChainOnComputeIsTheSum) {
  //   %x = input        0     [0, 0]
  //   %a = relu(%x)     0.5   [0, 0.5]
  //   %b = relu(%a)     0.25  [0.5, 0.75]
  //   %c = relu(%b)     2     [0.75, 2.75]
  //   %d = relu(%c)     1     [2.75, 3.75]   step = 0.5 + 0.25 + 2 + 1 = 3.75, no stall
  Graph g;
  Builder b(g);
  ValueId x = b.input(kT, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId bb = b.op(Op::relu, {a}, {}, "b");
  ValueId c = b.op(Op::relu, {bb}, {}, "c");
  ValueId d = b.op(Op::relu, {c}, {}, "d");
  ASSERT_TRUE(b.ok());
  g.set_outputs({d});
  const std::vector<double> secs = {0, 0.5, 0.25, 2.0, 1.0};
  auto r = simulate_time(g, secs);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->step_seconds, 3.75);
  EXPECT_EQ(r->busy_seconds, (std::array<double, 3>{3.75, 0, 0}));
  EXPECT_EQ(r->stall_seconds, (std::array<double, 3>{0, 0, 0}));
  expect_span(*r, g, x, 0, 0);
  expect_span(*r, g, a, 0, 0.5);
  expect_span(*r, g, bb, 0.5, 0.75);
  expect_span(*r, g, c, 0.75, 2.75);
  expect_span(*r, g, d, 2.75, 3.75);
}

TEST(TimeSim, SwapOutOverlapsLaterCompute) {
  //   %x = input            compute 0     [0, 0]
  //   %a = relu(%x)         compute 1     [0, 1]
  //   %h = swap_out(%a)     d2h     2     [1, 3]     d2h free at 0, waits for %a: d2h stall 1
  //   %b = relu(%a)         compute 0.5   [1, 1.5]   does not wait for the swap-out
  //   %c = relu(%b)         compute 2     [1.5, 3.5]
  // Compute never waits (stall 0); the step is compute's 3.5, the copy hidden under it.
  Graph g;
  Builder b(g);
  ValueId x = b.input(kT, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId bb = b.op(Op::relu, {a}, {}, "b");
  ValueId c = b.op(Op::relu, {bb}, {}, "c");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({c, h});
  const std::vector<double> secs = {0, 1.0, 2.0, 0.5, 2.0};
  auto r = simulate_time(g, secs);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  expect_span(*r, g, a, 0, 1);
  expect_span(*r, g, h, 1, 3);
  expect_span(*r, g, bb, 1, 1.5);
  expect_span(*r, g, c, 1.5, 3.5);
  EXPECT_EQ(r->step_seconds, 3.5);
  EXPECT_EQ(r->busy_seconds[kCompute], 3.5);
  EXPECT_EQ(r->busy_seconds[kD2h], 2.0);
  EXPECT_EQ(r->busy_seconds[kH2d], 0.0);
  EXPECT_EQ(r->stall_seconds[kCompute], 0.0);
  EXPECT_EQ(r->stall_seconds[kD2h], 1.0);
  EXPECT_EQ(r->stall_seconds[kH2d], 0.0);
}

// x -> a -> swap_out -> swap_in -> e = add(b, d), with b = relu(a) the only compute in between.
struct RoundTrip {
  Graph g;
  ValueId x, a, h, b, d, e;
  RoundTrip() {
    Builder bld(g);
    x = bld.input(kT, "x");
    a = bld.op(Op::relu, {x}, {}, "a");
    h = bld.op(Op::swap_out, {a}, {}, "h");
    b = bld.op(Op::relu, {a}, {}, "b");
    d = bld.op(Op::swap_in, {h}, {}, "d");
    e = bld.op(Op::add, {b, d}, {}, "e");
    EXPECT_TRUE(bld.ok());
    g.set_outputs({e});
  }
};

TEST(TimeSim, LongSwapInStallsCompute) {
  //   %x = input            compute 0     [0, 0]
  //   %a = relu(%x)         compute 0.5   [0, 0.5]
  //   %h = swap_out(%a)     d2h     1     [0.5, 1.5]   d2h stall 0.5 (waits for %a)
  //   %b = relu(%a)         compute 0.25  [0.5, 0.75]
  //   %d = swap_in(%h)      h2d     2     [1.5, 3.5]   h2d stall 1.5 (waits for %h)
  //   %e = add(%b, %d)      compute 0.5   [3.5, 4]     next-in-line at 0.75, starts at 3.5
  // The copies take 3.5 - 0.5 = 3 s after %a while compute has only 0.25 s of work before %e: compute stalls
  // 3.5 - 0.75 = 2.75 s. Step 4.
  RoundTrip t;
  const std::vector<double> secs = {0, 0.5, 1.0, 0.25, 2.0, 0.5};
  auto r = simulate_time(t.g, secs);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  expect_span(*r, t.g, t.a, 0, 0.5);
  expect_span(*r, t.g, t.h, 0.5, 1.5);
  expect_span(*r, t.g, t.b, 0.5, 0.75);
  expect_span(*r, t.g, t.d, 1.5, 3.5);
  expect_span(*r, t.g, t.e, 3.5, 4.0);
  EXPECT_EQ(r->step_seconds, 4.0);
  EXPECT_EQ(r->busy_seconds, (std::array<double, 3>{1.25, 1.0, 2.0}));
  EXPECT_EQ(r->stall_seconds, (std::array<double, 3>{2.75, 0.5, 1.5}));
}

TEST(TimeSim, StreamsAreTheProgramsStreams) {
  // The simulator assigns streams with the runtime's own rule, and each stream's nodes start in the
  // Program's per-stream order, each after the previous one ended.
  RoundTrip t;
  const std::vector<double> secs = {0, 0.5, 1.0, 0.25, 2.0, 0.5};
  auto r = simulate_time(t.g, secs);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  auto p = compile(t.g);
  ASSERT_TRUE(p.has_value()) << p.error().str();
  ASSERT_EQ(p->graph().num_nodes(), t.g.num_nodes());  // already in schedule order: same numbering
  EXPECT_EQ(p->stream_order(StreamId::d2h), std::vector<NodeId>{node_of(t.g, t.h)});
  EXPECT_EQ(p->stream_order(StreamId::h2d), std::vector<NodeId>{node_of(t.g, t.d)});
  for (int s = 0; s < kNumStreams; ++s) {
    const std::vector<NodeId>& order = p->stream_order(static_cast<StreamId>(s));
    for (size_t i = 1; i < order.size(); ++i) EXPECT_GE(r->start[order[i].v], r->end[order[i - 1].v]);
  }
}

// x -> a, a swapped out; compute b, c; d = swap_in(h) after(trigger); e = add(c, d).
struct Triggered {
  Graph g;
  ValueId x, a, h, b, c, d, e;
  explicit Triggered(bool trigger_is_c) {
    Builder bld(g);
    x = bld.input(kT, "x");
    a = bld.op(Op::relu, {x}, {}, "a");
    h = bld.op(Op::swap_out, {a}, {}, "h");
    b = bld.op(Op::relu, {a}, {}, "b");
    c = bld.op(Op::relu, {b}, {}, "c");
    d = bld.op(Op::swap_in, {h}, {}, "d");
    e = bld.op(Op::add, {c, d}, {}, "e");
    EXPECT_TRUE(bld.ok());
    g.add_control_input(node_of(g, d), node_of(g, trigger_is_c ? c : b));
    g.set_outputs({e});
  }
};

TEST(TimeSim, ControlEdgeDelaysSwapIn) {
  //   %x = input                      compute 0     [0, 0]
  //   %a = relu(%x)                   compute 0.5   [0, 0.5]
  //   %h = swap_out(%a)               d2h     0.5   [0.5, 1]
  //   %b = relu(%a)                   compute 1     [0.5, 1.5]
  //   %c = relu(%b)                   compute 1     [1.5, 2.5]
  //   %d = swap_in(%h) after(%b)      h2d     0.5   %h ends at 1, but the trigger %b at 1.5: [1.5, 2]
  //   %e = add(%c, %d)                compute 0.25  [2.5, 2.75]   %d is ready before %c ends: no stall
  const std::vector<double> secs = {0, 0.5, 0.5, 1.0, 1.0, 0.5, 0.25};
  {
    Triggered t(false);
    auto r = simulate_time(t.g, secs);
    ASSERT_TRUE(r.has_value()) << r.error().str();
    expect_span(*r, t.g, t.h, 0.5, 1.0);
    expect_span(*r, t.g, t.d, 1.5, 2.0);
    expect_span(*r, t.g, t.e, 2.5, 2.75);
    EXPECT_EQ(r->step_seconds, 2.75);
    EXPECT_EQ(r->stall_seconds[kCompute], 0.0);
    EXPECT_EQ(r->stall_seconds[kH2d], 1.5);
  }
  // With the trigger %c instead, %d starts when %c ends: [2.5, 3]; %e is next-in-line at 2.5 and starts at
  // 3, a compute stall of 0.5. Step 3.25.
  {
    Triggered t(true);
    auto r = simulate_time(t.g, secs);
    ASSERT_TRUE(r.has_value()) << r.error().str();
    expect_span(*r, t.g, t.d, 2.5, 3.0);
    expect_span(*r, t.g, t.e, 3.0, 3.25);
    EXPECT_EQ(r->step_seconds, 3.25);
    EXPECT_EQ(r->stall_seconds[kCompute], 0.5);
    EXPECT_EQ(r->stall_seconds[kH2d], 2.5);
  }
}

TEST(TimeSim, CopiesOnOneStreamSerialize) {
  //   %x  = input               compute 0     [0, 0]
  //   %a  = relu(%x)            compute 0.5   [0, 0.5]
  //   %b  = relu(%x)            compute 0.5   [0.5, 1]
  //   %ha = swap_out(%a)        d2h     0.25  [0.5, 0.75]   d2h stall 0.5
  //   %hb = swap_out(%b)        d2h     0.25  [1, 1.25]     next-in-line at 0.75, %b ends at 1: stall 0.25
  //   %da = swap_in(%ha)        h2d     2     [0.75, 2.75]  h2d stall 0.75
  //   %db = swap_in(%hb)        h2d     2     [2.75, 4.75]  independent of %da and ready at 1.25, but the h2d
  //                                                         stream is busy with %da until 2.75: no stall
  //   %s  = add(%da, %db)       compute 0.5   [4.75, 5.25]  next-in-line at 1: compute stall 3.75
  Graph g;
  Builder bld(g);
  ValueId x = bld.input(kT, "x");
  ValueId a = bld.op(Op::relu, {x}, {}, "a");
  ValueId b = bld.op(Op::relu, {x}, {}, "b");
  ValueId ha = bld.op(Op::swap_out, {a}, {}, "ha");
  ValueId hb = bld.op(Op::swap_out, {b}, {}, "hb");
  ValueId da = bld.op(Op::swap_in, {ha}, {}, "da");
  ValueId db = bld.op(Op::swap_in, {hb}, {}, "db");
  ValueId s = bld.op(Op::add, {da, db}, {}, "s");
  ASSERT_TRUE(bld.ok()) << bld.error()->str();
  g.set_outputs({s});
  const std::vector<double> secs = {0, 0.5, 0.5, 0.25, 0.25, 2.0, 2.0, 0.5};
  auto r = simulate_time(g, secs);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  expect_span(*r, g, ha, 0.5, 0.75);
  expect_span(*r, g, hb, 1.0, 1.25);
  expect_span(*r, g, da, 0.75, 2.75);
  expect_span(*r, g, db, 2.75, 4.75);
  expect_span(*r, g, s, 4.75, 5.25);
  EXPECT_EQ(r->step_seconds, 5.25);
  EXPECT_EQ(r->busy_seconds, (std::array<double, 3>{1.5, 0.5, 4.0}));
  EXPECT_EQ(r->stall_seconds, (std::array<double, 3>{3.75, 0.75, 0.75}));
}

TEST(TimeSim, BufferReuseWaitsForTheCopyOut) {
  //   %x  = input               compute 0   [0, 0]
  //   %a  = relu(%x)            compute 1   [0, 1]
  //   %ha = swap_out(%a)        d2h     3   [1, 4]   %a's last reader
  //   %b  = relu(%x)            compute 1   [1, 2] without the plan; with it [4, 5]: %b takes %a's space, so
  //                                                  it waits for %ha, the last reader of %a on the d2h stream
  //   %da = swap_in(%ha)        h2d     1   [4, 5] without the plan; with it [5, 6]: %da takes %x's space
  //                                                  (%x's last reader is %b), so it waits for %b
  //   %s  = add(%b, %da)        compute 1   [5, 6] without; [6, 7] with (next-in-line at 5: stall 1)
  Graph g;
  Builder bld(g);
  ValueId x = bld.input(kT, "x");
  ValueId a = bld.op(Op::relu, {x}, {}, "a");
  ValueId ha = bld.op(Op::swap_out, {a}, {}, "ha");
  ValueId b = bld.op(Op::relu, {x}, {}, "b");
  ValueId da = bld.op(Op::swap_in, {ha}, {}, "da");
  ValueId s = bld.op(Op::add, {b, da}, {}, "s");
  ASSERT_TRUE(bld.ok()) << bld.error()->str();
  g.set_outputs({s});
  auto plan = plan_memory(g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  ASSERT_EQ(plan->of(a).offset, plan->of(b).offset) << "the test needs %b in %a's space";
  ASSERT_EQ(plan->of(x).offset, plan->of(da).offset) << "the test needs %da in %x's space";
  const std::vector<double> secs = {0, 1, 3, 1, 1, 1};
  auto free_run = simulate_time(g, secs);
  ASSERT_TRUE(free_run.has_value()) << free_run.error().str();
  expect_span(*free_run, g, b, 1, 2);
  expect_span(*free_run, g, s, 5, 6);
  auto planned = simulate_time(g, secs, &*plan);
  ASSERT_TRUE(planned.has_value()) << planned.error().str();
  expect_span(*planned, g, b, 4, 5);
  expect_span(*planned, g, da, 5, 6);
  expect_span(*planned, g, s, 6, 7);
  EXPECT_EQ(planned->stall_seconds[kCompute], 4.0);  // %b 3 (next-in-line at 1, started at 4), %s 1
}

// A reshape written over its input's buffer (Note [Buffer reuse]) copies nothing: with the plan, the device model's
// time for it is 0; with every value in a buffer of its own, the roofline's copy.
TEST(TimeSim, AReshapeOverItsInputTakesNoTime) {
  Graph g;
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {1024, 1024}}, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId r = b.op(Op::reshape, {a}, attrs({{"shape", IntList{1024 * 1024}}}), "r");
  ValueId s = b.op(Op::mean, {r}, {}, "s");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({s});
  const DeviceModel m = *device_model("h100-pcie5");
  auto reused = plan_memory(g);
  auto own = plan_memory(g, PlanOptions{.reuse_buffers = false});
  ASSERT_TRUE(reused.has_value() && own.has_value());
  ASSERT_EQ(reused->buffer_of_value[r.v], reused->buffer_of_value[a.v]);
  auto with_reuse = simulate_time(g, m, nullptr, &*reused);
  auto without = simulate_time(g, m, nullptr, &*own);
  ASSERT_TRUE(with_reuse.has_value() && without.has_value());
  const NodeId n = node_of(g, r);
  EXPECT_EQ(with_reuse->end[n.v] - with_reuse->start[n.v], 0);
  EXPECT_EQ(without->end[n.v] - without->start[n.v], op_seconds(g, n, m));
  EXPECT_GT(op_seconds(g, n, m), 0);
  EXPECT_NEAR(with_reuse->step_seconds, without->step_seconds - op_seconds(g, n, m), 1e-12);
}

// Note [Parts]: a concat whose second input is written in its place copies only the first (half the roofline's
// time), and a slice viewing its range copies nothing; with buffers of their own, the roofline's copies.
TEST(TimeSim, PartsInPlaceTakeNoCopyTime) {
  Graph g;
  Builder b(g);
  const TensorType t{DType::f32, {1, 512, 1024}};
  ValueId x = b.input(t, "x");
  ValueId sk = b.op(Op::relu, {x}, {}, "s");
  ValueId u = b.op(Op::relu, {sk}, {}, "u");
  ValueId c = b.op(Op::concat, {sk, u}, attrs({{"axis", int64_t{1}}}), "c");
  ValueId h = b.op(Op::slice, {c}, attrs({{"axis", int64_t{1}}, {"start", int64_t{512}}, {"end", int64_t{1024}}}),
                   "h");
  ValueId m = b.op(Op::mean, {h}, {}, "m");
  ValueId late = b.op(Op::add, {sk, sk}, {}, "late");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({m, late});
  const DeviceModel model = *device_model("h100-pcie5");
  auto parts = plan_memory(g);
  auto own = plan_memory(g, PlanOptions{.reuse_buffers = false});
  ASSERT_TRUE(parts.has_value() && own.has_value());
  ASSERT_EQ(parts->buffer_of_value[u.v], parts->buffer_of_value[c.v]);
  ASSERT_EQ(parts->buffer_of_value[h.v], parts->buffer_of_value[c.v]);
  auto with_parts = simulate_time(g, model, nullptr, &*parts);
  auto without = simulate_time(g, model, nullptr, &*own);
  ASSERT_TRUE(with_parts.has_value() && without.has_value());
  const NodeId cn = node_of(g, c), hn = node_of(g, h);
  EXPECT_GT(op_seconds(g, cn, model), 0);
  EXPECT_NEAR(with_parts->end[cn.v] - with_parts->start[cn.v], op_seconds(g, cn, model) / 2, 1e-12);
  EXPECT_NEAR(without->end[cn.v] - without->start[cn.v], op_seconds(g, cn, model), 1e-12);
  EXPECT_EQ(with_parts->end[hn.v] - with_parts->start[hn.v], 0);
  EXPECT_NEAR(without->end[hn.v] - without->start[hn.v], op_seconds(g, hn, model), 1e-12);
}

TEST(TimeSim, EmptyGraph) {
  Graph g;
  auto r = simulate_time(g, std::span<const double>{});
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->step_seconds, 0.0);
  EXPECT_TRUE(r->start.empty());
}

TEST(TimeSim, Errors) {
  RoundTrip t;
  {
    const std::vector<double> secs = {0, 0.5};
    auto r = simulate_time(t.g, secs);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().str().find("2 durations for a graph of 6 nodes"), std::string::npos) << r.error().str();
  }
  for (double bad : {-0.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    std::vector<double> secs = {0, 0.5, 1.0, 0.25, 2.0, 0.5};
    secs[3] = bad;
    auto r = simulate_time(t.g, secs);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.error().str().find("%b"), std::string::npos) << r.error().str();
  }
  {
    // %a (node 1) made to wait for %e (node 5): node-id order is no longer an execution order.
    Graph g = t.g;
    g.add_control_input(node_of(g, t.a), node_of(g, t.e));
    const std::vector<double> secs = {0, 0.5, 1.0, 0.25, 2.0, 0.5};
    auto r = simulate_time(g, secs);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().str().find("not in schedule order"), std::string::npos) << r.error().str();
  }
}

}  // namespace
}  // namespace lms
