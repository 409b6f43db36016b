// The roofline cost model (sim/cost_model.h): times worked out by hand on a tiny graph. On v100-pcie3
// (15.7 TFLOP/s f32, 900 GB/s, 12.5 GB/s link, 5 us launch, 10 us copy latency) a 1024^3 f32 matmul is
// compute bound and a relu over 1024x1024 f32 is memory bound.
#include <gtest/gtest.h>

#include "lms/analysis/stats.h"
#include "lms/ir/builder.h"
#include "lms/sim/cost_model.h"

namespace lms {
namespace {

constexpr double kN = 1024;
constexpr double kTensorBytes = kN * kN * 4;  // f32[1024,1024]: 4 MiB

struct Tiny {
  Graph g{"tiny"};
  ValueId x, w, c, y, r, out, in;
  Tiny() {
    Builder b(g);
    const TensorType t{DType::f32, {1024, 1024}};
    x = b.input(t, "x");
    w = b.param(t, "w");
    c = b.add(Op::constant, {}, {}, "c", {t}).front();
    y = b.op(Op::matmul, {x, w}, {}, "y");
    r = b.op(Op::relu, {y}, {}, "r");
    out = b.op(Op::swap_out, {r}, {}, "out");
    in = b.op(Op::swap_in, {out}, {}, "in");
    EXPECT_TRUE(b.ok()) << b.error()->str();
  }
  NodeId n(ValueId v) const { return g.value(v).producer; }
};

TEST(CostModel, MatmulIsComputeBound) {
  Tiny t;
  const DeviceModel m = *device_model("v100-pcie3");
  const double compute = 2 * kN * kN * kN / 15.7e12;  // 136.8 us
  const double memory = 3 * kTensorBytes / 900e9;     // 14.0 us: two inputs read, one output written
  ASSERT_GT(compute, memory);
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.y), m), 5e-6 + compute);
}

TEST(CostModel, ReluIsMemoryBound) {
  Tiny t;
  const DeviceModel m = *device_model("v100-pcie3");
  const double compute = kN * kN / 15.7e12;       // 0.07 us: one flop per element
  const double memory = 2 * kTensorBytes / 900e9;  // 9.3 us: read and write 4 MiB
  ASSERT_LT(compute, memory);
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.r), m), 5e-6 + memory);
}

TEST(CostModel, HalfPrecisionUsesTensorCorePeak) {
  Graph g;
  Builder b(g);
  const TensorType t{DType::bf16, {4096, 4096}};
  ValueId y = b.op(Op::matmul, {b.input(t, "a"), b.param(t, "b")}, {}, "y");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  const DeviceModel m = *device_model("h100-pcie5");
  // 2 * 4096^3 = 137.4 GFLOP at 989 TFLOP/s = 139 us; 3 x 32 MiB at 3.35 TB/s = 30 us.
  EXPECT_DOUBLE_EQ(op_seconds(g, g.value(y).producer, m), 5e-6 + 2.0 * 4096 * 4096 * 4096 / 989e12);
}

TEST(CostModel, CopiesUseTheLinkOfTheirDirection) {
  Tiny t;
  DeviceModel m = *device_model("v100-pcie3");
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.out), m), 10e-6 + kTensorBytes / 12.5e9);  // 345.5 us
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.in), m), 10e-6 + kTensorBytes / 12.5e9);
  m.d2h_bytes_per_s = 1e9;
  m.h2d_bytes_per_s = 2e9;
  m.copy_latency_s = 1e-3;
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.out), m), 1e-3 + kTensorBytes / 1e9);
  EXPECT_DOUBLE_EQ(op_seconds(t.g, t.n(t.in), m), 1e-3 + kTensorBytes / 2e9);
}

TEST(CostModel, SourcesTakeNoTime) {
  Tiny t;
  const DeviceModel m = *device_model("gh200-c2c");
  EXPECT_EQ(op_seconds(t.g, t.n(t.x), m), 0);
  EXPECT_EQ(op_seconds(t.g, t.n(t.w), m), 0);
  EXPECT_EQ(op_seconds(t.g, t.n(t.c), m), 0);
}

TEST(CostModel, OpTimesCoversEveryNode) {
  Tiny t;
  const DeviceModel m = *device_model("a100-pcie4");
  const std::vector<double> times = op_times(t.g, m);
  ASSERT_EQ(times.size(), t.g.num_nodes());
  for (uint32_t i = 0; i < t.g.num_nodes(); ++i) EXPECT_EQ(times[i], op_seconds(t.g, NodeId{i}, m)) << i;
}

// A measured time without recorded work is used as is; with it, at the size it was measured it is used as is,
// and at twice the rows the part above the launch overhead doubles (the matmul is compute bound and the relu
// memory bound at both sizes, so the roofline doubles for both).
TEST(CostModel, MeasuredTimesScaleWithTheWorkOfTheNode) {
  auto graph = [](int64_t rows) {
    Graph g{"rows"};
    Builder b(g);
    const ValueId x = b.input(TensorType{DType::f32, {rows, 1024}}, "x");
    const ValueId w = b.param(TensorType{DType::f32, {1024, 1024}}, "w");
    b.op(Op::relu, {b.op(Op::matmul, {x, w}, {}, "y")}, {}, "r");
    EXPECT_TRUE(b.ok()) << b.error()->str();
    return g;
  };
  const Graph small = graph(1024), large = graph(2048);
  const DeviceModel m = *device_model("v100-pcie3");
  const NodeId y = small.value(*small.find_value("y")).producer, r = small.value(*small.find_value("r")).producer;
  MeasuredTimes unsized{{"y", {1e-3, std::nullopt}}, {"r", {2e-4, std::nullopt}}};
  MeasuredTimes sized{{"y", {1e-3, node_cost(small, small.node(y))}}, {"r", {2e-4, node_cost(small, small.node(r))}}};
  for (const Graph* g : {&small, &large}) {
    const std::vector<double> t = op_times(*g, m, &unsized);
    EXPECT_EQ(t[y.v], 1e-3);
    EXPECT_EQ(t[r.v], 2e-4);
  }
  const std::vector<double> same = op_times(small, m, &sized), twice = op_times(large, m, &sized);
  EXPECT_EQ(same[y.v], 1e-3);
  EXPECT_EQ(same[r.v], 2e-4);
  EXPECT_NEAR(twice[y.v], m.launch_overhead_s + 2 * (1e-3 - m.launch_overhead_s), 1e-15);
  EXPECT_NEAR(twice[r.v], m.launch_overhead_s + 2 * (2e-4 - m.launch_overhead_s), 1e-15);
}

// A recompute clone (named `<original>.re`, `.re<k>`, a clone of a clone `.re.re`) takes its original's measured
// time; other nodes whose names merely look like clones' do not.
TEST(CostModel, RecomputeClonesTakeTheirOriginalsMeasuredTime) {
  Graph g{"clones"};
  Builder b(g);
  const TensorType t{DType::f32, {1024, 1024}};
  const ValueId x = b.input(t, "x");
  const ValueId r = b.op(Op::relu, {x}, {}, "r");
  const ValueId looks = b.op(Op::relu, {r}, {}, "r.re");  // an ordinary node
  ASSERT_TRUE(b.ok()) << b.error()->str();
  std::vector<NodeId> clones;
  for (const char* name : {"r.re2", "r.re.re", "q.re"}) {
    const std::vector<TensorType> types{t};
    const std::vector<std::string> names{name};
    const NodeId c = g.add_node(Op::relu, {}, types, names, Category::recompute);
    g.set_inputs(c, {x});
    clones.push_back(c);
  }
  const DeviceModel m = *device_model("v100-pcie3");
  const MeasuredTimes measured{{"r", {3e-3, std::nullopt}}};
  const std::vector<double> times = op_times(g, m, &measured);
  EXPECT_EQ(times[g.value(r).producer.v], 3e-3);
  EXPECT_EQ(times[g.value(looks).producer.v], op_seconds(g, g.value(looks).producer, m));
  EXPECT_EQ(times[clones[0].v], 3e-3);
  EXPECT_EQ(times[clones[1].v], 3e-3);
  EXPECT_EQ(times[clones[2].v], op_seconds(g, clones[2], m));  // no measured original
}

}  // namespace
}  // namespace lms
