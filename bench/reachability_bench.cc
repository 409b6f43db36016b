// Reachability and TFLMS decisions at scale: building the ancestor interval labels (analysis/reachability.h)
// and answering queries on training graphs (resnet152, a deep gpt) and on a synthetic 100k-node graph shaped
// like one (a forward chain with residual skips, mirrored by a backward chain that reads every forward
// activation). Counters report the labels' memory (the cost stated in reachability.cc), so a change in the
// representation shows up here. Run: build/bin/reachability_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "lms/analysis/reachability.h"
#include "lms/analysis/tflms_swaps.h"
#include "lms/autodiff/optimizer.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/support/random.h"

namespace {

template <class T>
T must(lms::Result<T> r) {
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().str().c_str());
    std::abort();
  }
  return std::move(*r);
}

lms::Graph training(std::string_view name, const lms::ModelOptions& o) {
  return must(lms::build_training_graph(must(lms::build_model(name, o)), lms::TrainingOptions{}));
}

// Forward h_i = relu(h_{i-1}) with an add of h_{i-3} every third step (residual skips); backward
// g_i = add(g_{i+1}, h_i). About 2 * steps nodes.
lms::Graph synthetic(int steps) {
  lms::Graph g("synthetic");
  lms::Builder b(g);
  lms::TensorType t{lms::DType::f32, {8, 8}};
  std::vector<lms::ValueId> h{b.input(t, "x")};
  constexpr int kSkip = 3;
  for (int i = 1; i < steps; ++i) {
    lms::ValueId prev = h.back();
    h.push_back(i % kSkip == 0 ? b.op(lms::Op::add, {prev, h[static_cast<size_t>(i - kSkip)]})
                               : b.op(lms::Op::relu, {prev}));
  }
  b.set_category(lms::Category::bwd);
  lms::ValueId grad = h.back();
  for (int i = steps - 2; i >= 0; --i) grad = b.op(lms::Op::add, {grad, h[static_cast<size_t>(i)]});
  g.set_outputs({grad});
  if (!b.ok()) std::abort();
  return g;
}

const lms::Graph& graph(int which) {
  static const lms::Graph resnet = [] {
    lms::ModelOptions o;
    o.batch = 32;
    return training("resnet152", o);
  }();
  static const lms::Graph gpt = [] {
    lms::ModelOptions o;
    o.layers = 96;
    o.hidden_size = 64;
    o.heads = 2;
    o.seq = 16;
    o.vocab = 100;
    return training("gpt", o);
  }();
  constexpr int kSyntheticSteps = 50000;  // 100k nodes
  static const lms::Graph syn = synthetic(kSyntheticSteps);
  return which == 0 ? resnet : which == 1 ? gpt : syn;
}

void BM_BuildReachability(benchmark::State& state) {
  const lms::Graph& g = graph(static_cast<int>(state.range(0)));
  lms::Levels lv = must(lms::compute_levels(g));
  size_t bytes = 0;
  for (auto _ : state) {
    lms::Reachability r = must(lms::compute_reachability(g, lv));
    bytes = r.memory_bytes();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["nodes"] = static_cast<double>(g.num_nodes());
  state.counters["label_bytes"] = static_cast<double>(bytes);
  state.counters["bytes_per_node"] = static_cast<double>(bytes) / static_cast<double>(g.num_nodes());
}
BENCHMARK(BM_BuildReachability)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

void BM_Query(benchmark::State& state) {
  const lms::Graph& g = graph(static_cast<int>(state.range(0)));
  lms::Levels lv = must(lms::compute_levels(g));
  lms::Reachability r = must(lms::compute_reachability(g, lv));
  constexpr uint64_t kSeed = 42;
  uint64_t i = 0, hits = 0;
  const uint64_t n = g.num_nodes();
  for (auto _ : state) {
    lms::NodeId a{static_cast<uint32_t>(lms::mix64(kSeed + 2 * i) % n)};
    lms::NodeId b{static_cast<uint32_t>(lms::mix64(kSeed + 2 * i + 1) % n)};
    hits += r.reaches(a, b) ? 1 : 0;
    ++i;
  }
  state.counters["hit_fraction"] = static_cast<double>(hits) / static_cast<double>(i == 0 ? 1 : i);
}
BENCHMARK(BM_Query)->Arg(0)->Arg(1)->Arg(2);

void BM_DecideTflmsSwaps(benchmark::State& state) {
  const lms::Graph& g = graph(static_cast<int>(state.range(0)));
  lms::Levels lv = must(lms::compute_levels(g));
  lms::Reachability r = must(lms::compute_reachability(g, lv));
  lms::TflmsParams p;
  p.swapout_threshold = 3;
  p.swapin_groupby = 2;
  size_t swaps = 0;
  for (auto _ : state) {
    lms::SwapDecisions d = must(lms::decide_tflms_swaps(g, lv, r, p));
    swaps = d.swaps.size();
    benchmark::DoNotOptimize(swaps);
  }
  state.counters["swaps"] = static_cast<double>(swaps);
}
BENCHMARK(BM_DecideTflmsSwaps)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
