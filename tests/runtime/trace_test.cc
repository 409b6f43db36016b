// The Chrome trace of training steps: the JSON parses; every stream has a named track; each traced step has one
// complete event per executed node, named by the node's values, with its op and stream, and non-negative
// times; the memory counters rise and fall with the executor's own live-byte count (the step's maximum is the
// executor's max_live_bytes, and at the end only parameters, state and outputs are left); the writer's output
// is deterministic and in time order; the trainer traces only the first steps and the last; and `lms train
// --trace` with a path it cannot write fails with one line before training.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"
#include "lms/runtime/trace.h"
#include "lms/runtime/trainer.h"
#include "runtime_test_util.h"
#include "tools/cli_util.h"

namespace lms {
namespace {

using json = nlohmann::json;
using runtime_test::TrainingRun;
using runtime_test::tiny_training_graph;

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not valid JSON:\n" << text.substr(0, 2000);
  return j;
}

// A node's expected event name: its output values' names.
std::string node_name(const Graph& g, NodeId n) {
  std::string name;
  for (ValueId v : g.node(n).outputs) name += (name.empty() ? "" : ", ") + g.value(v).name;
  return name;
}

// Device bytes of the buffers that stay live through a whole step: parameters, state and graph outputs.
int64_t pinned_device_bytes(const Program& p) {
  const MemoryPlan& plan = p.memory();
  std::set<int32_t> pinned;
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].life.persistent) pinned.insert(static_cast<int32_t>(b));
  for (ValueId v : p.graph().outputs()) pinned.insert(plan.buffer_of_value[v.v]);
  int64_t bytes = 0;
  for (int32_t b : pinned)
    if (plan.buffers[b].life.placement == Placement::device) bytes += plan.buffers[b].life.bytes;
  return bytes;
}

TEST(Trace, EveryNodeOfEveryStepOnItsStreamAndCountersMatchTheExecutor) {
  auto program = compile(tiny_training_graph());
  ASSERT_TRUE(program.has_value()) << program.error().str();
  const Graph& g = program->graph();
  TrainingRun run(*program, 3);
  TraceWriter trace;
  constexpr int kSteps = 2;
  std::vector<StepResult> results;
  HostTensor x, labels;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(run.data->train_batch(0, step, x, labels).has_value());
    const Feed feeds[] = {{*g.find_value("x"), &x}, {*g.find_value("labels"), &labels}};
    trace.set_step(step);
    auto r = run.executor->step(feeds, &trace);
    ASSERT_TRUE(r.has_value()) << r.error().str();
    results.push_back(std::move(*r));
  }

  json j = parse(trace.json());
  ASSERT_TRUE(j.contains("traceEvents"));
  const json& events = j["traceEvents"];
  std::map<int, std::string> tracks;
  std::vector<std::vector<const json*>> nodes(kSteps);
  std::vector<const json*> device_counters, host_counters;
  double last_ts = -1;
  for (const json& e : events) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (e.at("name") == "thread_name") tracks[e.at("tid").get<int>()] = e.at("args").at("name");
      continue;
    }
    const double ts = e.at("ts");
    EXPECT_GE(ts, last_ts) << "events out of time order: " << e.dump();
    last_ts = ts;
    if (ph == "X") {
      EXPECT_GE(e.at("dur").get<double>(), 0.0) << e.dump();
      const int step = e.at("args").at("step");
      ASSERT_TRUE(step >= 0 && step < kSteps) << e.dump();
      nodes[step].push_back(&e);
    } else {
      ASSERT_EQ(ph, "C") << e.dump();
      (e.at("name") == kTraceDeviceCounter ? device_counters : host_counters).push_back(&e);
    }
  }
  EXPECT_EQ(tracks, (std::map<int, std::string>{{0, "compute"}, {1, "d2h copy"}, {2, "h2d copy"}}));

  for (int step = 0; step < kSteps; ++step) {
    // The reference backend runs nodes in program order, so time order is node order.
    ASSERT_EQ(nodes[step].size(), g.num_nodes()) << "step " << step;
    for (NodeId n : g.node_ids()) {
      const json& e = *nodes[step][n.v];
      EXPECT_EQ(e.at("args").at("node").get<uint32_t>(), n.v);
      EXPECT_EQ(e.at("name").get<std::string>(), node_name(g, n));
      EXPECT_EQ(e.at("args").at("op").get<std::string>(), op_name(g.node(n).op));
      EXPECT_EQ(e.at("tid").get<int>(), static_cast<int>(program->stream(n)));
    }
  }

  // A counter belongs to the step whose last node ends at or after it (the step's first counter comes before
  // its first node; its last, the frees after its last node, at that node's end). The writer prints exact
  // nanoseconds, but ts + dur is a sum of parsed decimals: allow a fraction of a nanosecond.
  constexpr double kSumSlackMicros = 1e-4;
  ASSERT_FALSE(device_counters.empty());
  ASSERT_EQ(host_counters.size(), device_counters.size()) << "device and host counters are reported together";
  const int64_t pinned = pinned_device_bytes(*program);
  size_t c = 0;
  for (int step = 0; step < kSteps; ++step) {
    const json& last_node = *nodes[step].back();
    const double step_end = last_node.at("ts").get<double>() + last_node.at("dur").get<double>() + kSumSlackMicros;
    int64_t max_bytes = -1, last_bytes = -1;
    int count = 0;
    for (; c < device_counters.size() && device_counters[c]->at("ts").get<double>() <= step_end; ++c, ++count) {
      last_bytes = device_counters[c]->at("args").at("bytes");
      max_bytes = std::max(max_bytes, last_bytes);
      EXPECT_EQ(host_counters[c]->at("args").at("bytes").get<int64_t>(), 0) << "no host buffers in this plan";
    }
    EXPECT_GT(count, 2) << "step " << step << ": the live bytes should change as buffers come and go";
    EXPECT_EQ(max_bytes, results[step].max_live_bytes) << "step " << step;
    EXPECT_EQ(last_bytes, pinned) << "step " << step << ": only parameters, state and outputs are left";
  }
  EXPECT_EQ(c, device_counters.size()) << "counters after the last step's last node";
}

#ifdef LMS_HAVE_CPU_BACKEND
// On the cpu backend nodes run after `run` returns, on stream threads: the slices must be the nodes' real
// execution (Backend::node_times), not the moment they were enqueued. A relu over 64 MiB takes milliseconds;
// enqueueing it takes microseconds.
TEST(Trace, CpuSlicesAreRealExecutionTimes) {
  Graph g("big_relu");
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {4096, 4096}}, "x");
  ValueId y = b.op(Op::relu, {x}, {}, "y");
  ValueId m = b.op(Op::mean, {y}, {}, "m");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({m});
  auto backend = make_backend("cpu", BackendOptions{});
  ASSERT_TRUE(backend.has_value()) << backend.error().str();
  auto program = compile(g, {}, backend->get());
  ASSERT_TRUE(program.has_value()) << program.error().str();
  auto ex = Executor::create(*program, **backend);
  ASSERT_TRUE(ex.has_value()) << ex.error().str();
  ASSERT_TRUE(ex->initialize(0).has_value());
  HostTensor input(TensorType{DType::f32, {4096, 4096}});
  Feed feed{program->inputs().front(), &input};
  TraceWriter trace;
  ASSERT_TRUE(ex->step({&feed, 1}, &trace).has_value());
  json j = parse(trace.json());
  double relu_us = -1;
  for (const json& e : j["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "y") relu_us = e["dur"].get<double>();
  EXPECT_GT(relu_us, 1000.0) << "the relu's slice lasted " << relu_us << " us: an enqueue time, not its run";
}
#endif

TEST(Trace, WriterIsDeterministicInTimeOrderAndEscapesNames) {
  const TraceWriter::Clock::time_point t0{};
  auto at = [&](int us) { return t0 + std::chrono::microseconds(us); };
  auto build = [&] {
    TraceWriter w(t0);
    w.set_step(4);
    w.complete("late", "add", 2, StreamId::compute, at(30), at(35));
    w.complete("a \"quoted\"\\name\n", "swap_out", 1, StreamId::d2h, at(10), at(20));
    w.memory(at(10), 100, 7);
    w.complete("backwards", "swap_in", 3, StreamId::h2d, at(40), at(39));
    return w.json();
  };
  const std::string text = build();
  EXPECT_EQ(text, build());
  json j = parse(text);
  std::vector<std::string> order;
  for (const json& e : j["traceEvents"])
    if (e["ph"] != "M") order.push_back(e["name"]);
  // Same instant: kept in the order reported (the swap_out before the counters).
  EXPECT_EQ(order, (std::vector<std::string>{"a \"quoted\"\\name\n", kTraceDeviceCounter, kTraceHostCounter, "late",
                                             "backwards"}));
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      EXPECT_EQ(e["args"]["step"], 4);
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (e["name"] == "a \"quoted\"\\name\n") {
      EXPECT_EQ(e["ts"].get<double>(), 10.0);
      EXPECT_EQ(e["dur"].get<double>(), 10.0);
      EXPECT_EQ(e["tid"], 1);
      EXPECT_EQ(e["args"]["op"], "swap_out");
    }
    if (e["name"] == kTraceHostCounter) {
      EXPECT_EQ(e["args"]["bytes"], 7);
    }
  }
}

TEST(Trace, TrainerTracesTheFirstStepsAndTheLast) {
  ModelOptions mo;
  mo.batch = 4;
  mo.image = {4};
  mo.hidden = {8};
  auto forward = build_model("mlp", mo);
  ASSERT_TRUE(forward.has_value()) << forward.error().str();
  TraceWriter trace;
  TrainOptions opts;
  constexpr int64_t kSteps = kTracedFirstSteps + 3;
  opts.steps = kSteps;
  opts.trace = &trace;
  auto report = train(*forward, opts);
  ASSERT_TRUE(report.has_value()) << report.error().str();
  json j = parse(trace.json());
  std::set<int64_t> steps;
  for (const json& e : j["traceEvents"])
    if (e["ph"] == "X") steps.insert(e["args"]["step"].get<int64_t>());
  std::set<int64_t> expected;
  for (int64_t s = 0; s < kSteps; ++s)
    if (traced_step(s, kSteps)) expected.insert(s);
  EXPECT_EQ(steps, expected);
  EXPECT_EQ(expected, (std::set<int64_t>{0, 1, 2, kSteps - 1}));
}

TEST(Trace, CliWritesTheTraceAndRefusesAnUnwritablePathBeforeTraining) {
  const std::string model = "--model mlp --hidden 8 --image 4 --batch 4 --steps 2 --data synthetic";
  const std::filesystem::path file = lms::testing::temp_dir() / "trace.json";
  auto ok = lms::testing::run_lms("train " + model + " --json --trace " + file.string());
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(parse(ok.out)["steps"], 2);
  json j = parse(lms::testing::slurp(file));
  std::map<int64_t, int> nodes_per_step;
  for (const json& e : j["traceEvents"])
    if (e["ph"] == "X") nodes_per_step[e["args"]["step"].get<int64_t>()]++;
  ASSERT_EQ(nodes_per_step.size(), 2u) << "both steps traced";
  EXPECT_GT(nodes_per_step[0], 0);
  EXPECT_EQ(nodes_per_step[0], nodes_per_step[1]) << "two steps of the same program";

  const std::string missing = "/nonexistent-lms-dir/trace.json";
  auto bad = lms::testing::run_lms("train " + model + " --trace " + missing);
  // One error line and no progress on stdout: it failed before the first step.
  lms::testing::expect_one_error_line(bad, missing, "--trace into a missing directory");
  auto dir = lms::testing::run_lms("train " + model + " --trace " + lms::testing::temp_dir().string());
  lms::testing::expect_one_error_line(dir, "is a directory", "--trace naming a directory");
}

}  // namespace
}  // namespace lms
