// TFLMS rewrites on random graphs, executed: for random graphs (tests/plan/random_graph.h) and random
// (T, A, G, sync mode), the graph rewritten with swaps and triggers, scheduled the TFLMS way and planned
// exactly, runs on the cpu backend (copies on their own stream threads; the reference backend in builds
// without oneDNN) for several steps and gives bit-identical outputs and updated parameters to the graph
// without swaps. The race check of every Program runs too (validation mode).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "lms/plan/strategy.h"
#include "lms/runtime/backend_registry.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"
#include "plan/random_graph.h"

namespace lms {
namespace {

#ifdef LMS_HAVE_CPU_BACKEND
constexpr const char* kDevice = "cpu";
#else
constexpr const char* kDevice = "reference";
#endif
constexpr int kSteps = 3;

struct Outcome {
  std::vector<std::vector<HostTensor>> outputs;  // by step
  std::map<std::string, HostTensor> params;      // persistent values after the last step, by name
  int64_t swaps = 0;
};

// Plans `g` with `opts` on a fresh backend, runs kSteps steps on inputs drawn from `seed`.
Outcome run_graph(const Graph& g, StrategyOptions opts, uint64_t seed) {
  Outcome out;
  auto backend = make_backend(kDevice, BackendOptions{});
  EXPECT_TRUE(backend.has_value()) << backend.error().str();
  if (!backend) return out;
  opts.workspace_bytes = workspaces_of(**backend);
  auto plan = make_plan(g, opts);
  EXPECT_TRUE(plan.has_value()) << plan.error().str();
  if (!plan) return out;
  out.swaps = plan->swapped_tensors;
  auto program = build_program(std::move(plan->graph), std::move(plan->memory));
  EXPECT_TRUE(program.has_value()) << program.error().str();
  if (!program) return out;
  auto ex = Executor::create(*program, **backend, ExecutorOptions{.measure_touched = true});
  EXPECT_TRUE(ex.has_value()) << ex.error().str();
  if (!ex) return out;
  EXPECT_TRUE(ex->initialize(seed).has_value());
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> value(0.5f, 1.0f);
  const Graph& pg = program->graph();
  for (int step = 0; step < kSteps; ++step) {
    std::vector<HostTensor> tensors;
    tensors.reserve(program->inputs().size());
    std::vector<Feed> feeds;
    // Inputs in name order, so both programs (whose value ids differ) get the same data.
    std::vector<ValueId> inputs = program->inputs();
    std::sort(inputs.begin(), inputs.end(), [&](ValueId a, ValueId b) { return pg.value(a).name < pg.value(b).name; });
    for (ValueId v : inputs) {
      tensors.emplace_back(pg.value(v).type);
      for (float& x : tensors.back().as<float>()) x = value(rng);
      feeds.push_back(Feed{v, &tensors.back()});
    }
    auto r = ex->step(feeds);
    EXPECT_TRUE(r.has_value()) << r.error().str();
    if (!r) return out;
    out.outputs.push_back(std::move(r->outputs));
  }
  for (uint32_t i = 0; i < pg.num_values(); ++i)
    if (ValueId v{i}; pg.is_persistent(v) && pg.storage_root(v) == v) {
      auto t = ex->read(v);
      EXPECT_TRUE(t.has_value()) << t.error().str();
      if (t) out.params.emplace(pg.value(v).name, std::move(*t));
    }
  return out;
}

TEST(TflmsRandom, SwappedGraphsComputeTheSameBits) {
  std::mt19937 rng(2026);
  int64_t total_swaps = 0;
  for (int trial = 0; trial < 24; ++trial) {
    Graph g = random_valid_graph(rng, 12 + trial * 2);
    TflmsParams p;
    p.swapout_threshold = std::uniform_int_distribution<int>(0, 3)(rng);
    p.swapin_ahead = std::uniform_int_distribution<int>(0, 4)(rng);
    p.swapin_groupby = std::uniform_int_distribution<int>(0, 3)(rng);
    p.sync_mode = static_cast<SyncMode>(std::uniform_int_distribution<int>(0, 3)(rng));
    const std::string what = fmt::format("trial {} (T={} A={} G={} sync_mode={})", trial, p.swapout_threshold,
                                         p.swapin_ahead, p.swapin_groupby, static_cast<int>(p.sync_mode));
    const Outcome base = run_graph(g, StrategyOptions{}, 100 + trial);
    const Outcome swapped = run_graph(g, StrategyOptions{.strategy = Strategy::tflms, .tflms_fixed = p}, 100 + trial);
    total_swaps += swapped.swaps;
    ASSERT_EQ(swapped.outputs.size(), base.outputs.size()) << what;
    for (size_t s = 0; s < base.outputs.size(); ++s) {
      ASSERT_EQ(swapped.outputs[s].size(), base.outputs[s].size()) << what;
      for (size_t o = 0; o < base.outputs[s].size(); ++o)
        EXPECT_EQ(swapped.outputs[s][o].data, base.outputs[s][o].data) << what << " step " << s << " output " << o;
    }
    ASSERT_EQ(swapped.params.size(), base.params.size()) << what;
    for (const auto& [name, t] : base.params) EXPECT_EQ(swapped.params.at(name).data, t.data) << what << " " << name;
  }
  EXPECT_GT(total_swaps, 24) << "the random settings should swap something in most graphs";
}

}  // namespace
}  // namespace lms
