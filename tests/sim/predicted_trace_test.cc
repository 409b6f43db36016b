// The predicted step as a trace (sim/predicted_trace.h): one slice per node that runs, on its stream, at exactly
// its simulated times; the counters rise and fall with the plan's buffers over simulated time (the device one
// never above the planned arena, the host one reaching the swapped bytes, only the outputs left at the end); a
// simulation of another graph is an error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "lms/ir/parser.h"
#include "lms/plan/memory_planner.h"
#include "lms/runtime/program.h"
#include "lms/sim/predicted_trace.h"
#include "lms/sim/time_sim.h"

namespace lms {
namespace {

// %a (512 bytes) goes to the host after its producer and comes back after %c for its late reader %e.
constexpr const char* kSwapped = R"(graph g {
  %x = input() : f32[8,16]
  %a = relu(%x) : f32[8,16] #fwd
  %a.out = swap_out(%a) : f32[8,16] @host #swap
  %b = relu(%a) : f32[8,16] #fwd
  %c = relu(%b) : f32[8,16] #fwd
  %a.in = swap_in(%a.out) after(%c) : f32[8,16] #swap
  %d = relu(%c) : f32[8,16] #fwd
  %m = relu_grad(%d, %b) : f32[8,16] #bwd
  %e = add(%m, %a.in) : f32[8,16] #bwd
  return %e
})";

TEST(PredictedTrace, NodesAtTheirSimulatedTimesAndThePlansBytesOverTime) {
  auto g = parse_graph(kSwapped);
  ASSERT_TRUE(g.has_value()) << g.error().str();
  g->set_scheduled(true);
  auto plan = plan_memory(*g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  // x, a, a.out, b, c, a.in, d, m, e: the copies are long, so compute waits for %a.in.
  const std::vector<double> seconds = {0, 1e-3, 4e-3, 1e-3, 1e-3, 3e-3, 1e-3, 1e-3, 1e-3};
  auto sim = simulate_time(*g, seconds, &*plan);
  ASSERT_TRUE(sim.has_value()) << sim.error().str();
  auto trace = predicted_trace(*g, *plan, *sim, "lms plan: test");
  ASSERT_TRUE(trace.has_value()) << trace.error().str();
  const nlohmann::json j = nlohmann::json::parse(trace->json());

  std::map<std::string, nlohmann::json> slices;
  int64_t device_max = 0, host_max = 0, device_last = -1, host_last = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "lms plan: test");
    }
    if (e["ph"] == "X") slices[e["name"].get<std::string>()] = e;
    if (e["ph"] != "C") continue;
    const int64_t bytes = e["args"]["bytes"].get<int64_t>();
    if (e["name"] == "device memory") device_max = std::max(device_max, bytes), device_last = bytes;
    if (e["name"] == "host memory") host_max = std::max(host_max, bytes), host_last = bytes;
  }
  EXPECT_EQ(slices.size(), 8u) << "every node but the input";
  EXPECT_FALSE(slices.contains("x"));
  for (NodeId n : g->node_ids()) {
    const std::string name = g->value(g->first_output(n)).name;
    if (name == "x") continue;
    ASSERT_TRUE(slices.contains(name)) << name;
    const auto& e = slices[name];
    EXPECT_EQ(e["tid"].get<int>(), static_cast<int>(stream_for(*g, n))) << name;
    EXPECT_NEAR(e["ts"].get<double>(), sim->start[n.v] * 1e6, 1e-3) << name;
    EXPECT_NEAR(e["dur"].get<double>(), (sim->end[n.v] - sim->start[n.v]) * 1e6, 1e-3) << name;
  }
  EXPECT_EQ(slices["a.out"]["tid"], static_cast<int>(StreamId::d2h));
  EXPECT_EQ(slices["a.in"]["tid"], static_cast<int>(StreamId::h2d));
  EXPECT_GT(sim->stall_seconds[static_cast<int>(StreamId::compute)], 0) << "the case exercises a wait";
  EXPECT_LE(device_max, plan->device_arena_bytes);
  EXPECT_GE(device_max, 3 * 512) << "%x, %a.in and %m are live together at %e";
  EXPECT_EQ(host_max, 512) << "%a's copy on the host";
  EXPECT_EQ(host_last, 0);
  EXPECT_EQ(device_last, 512) << "only the output remains (the fed input leaves after its last reader)";
}

TEST(PredictedTrace, ASimulationOfAnotherGraphIsAnError) {
  auto g = parse_graph(kSwapped);
  ASSERT_TRUE(g.has_value());
  g->set_scheduled(true);
  auto plan = plan_memory(*g);
  ASSERT_TRUE(plan.has_value());
  TimeSimResult short_sim;
  short_sim.start.assign(3, 0.0);
  short_sim.end.assign(3, 0.0);
  auto trace = predicted_trace(*g, *plan, short_sim, "p");
  ASSERT_FALSE(trace.has_value());
  EXPECT_NE(trace.error().str().find("not made for this graph"), std::string::npos) << trace.error().str();
}

}  // namespace
}  // namespace lms
