// Speed of the TFLMS auto-tuning search (plan/tflms_search.h) on large training graphs: resnet152 at batch 256
// under a 16 GiB device (the target: tuning + rewrite + memory plan under 1 s; this measures the tuning
// part: levels, reachability and every simulated trial) and resnet50 at batch 256 under 16 GiB. Also times
// one memory simulation alone. Counters: nodes, levels, trials, and the chosen parameters.
// Run: build/bin/tflms_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lms/autodiff/optimizer.h"
#include "lms/models/models.h"
#include "lms/plan/tflms_search.h"

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kBudget = 16 * kGiB;  // a 16 GB-class GPU, as in the TFLMS paper

lms::Graph training(const std::string& model, int64_t batch) {
  lms::ModelOptions o;
  o.batch = batch;
  auto fwd = lms::build_model(model, o);
  if (!fwd) {
    std::fprintf(stderr, "%s\n", fwd.error().str().c_str());
    std::abort();
  }
  auto tr = lms::build_training_graph(*fwd, lms::TrainingOptions{});
  if (!tr) {
    std::fprintf(stderr, "%s\n", tr.error().str().c_str());
    std::abort();
  }
  return std::move(*tr);
}

const lms::Graph& resnet152() {
  static const lms::Graph g = training("resnet152", 256);
  return g;
}

const lms::Graph& resnet50() {
  static const lms::Graph g = training("resnet50", 256);
  return g;
}

void search(benchmark::State& state, const lms::Graph& g) {
  lms::TflmsSearchOptions opts;
  opts.sim.device_bytes = kBudget;
  lms::Result<lms::TflmsSearchResult> r;
  for (auto _ : state) {
    r = lms::search_tflms(g, opts);
    benchmark::DoNotOptimize(r);
  }
  if (!r || !r->fits) {
    state.SkipWithError((r ? r->why->str() : r.error().str()).c_str());
    return;
  }
  state.counters["nodes"] = static_cast<double>(g.num_nodes());
  state.counters["levels"] = r->levels;
  state.counters["trials"] = static_cast<double>(r->trials.size());
  state.counters["T"] = r->params.swapout_threshold;
  state.counters["A"] = r->params.swapin_ahead;
  state.counters["G"] = r->params.swapin_groupby;
  state.counters["sync"] = static_cast<double>(r->params.sync_mode);
  state.counters["peak_GiB"] = static_cast<double>(r->sim.peak_device_bytes) / static_cast<double>(kGiB);
}

void BM_TflmsSearchResnet152(benchmark::State& state) { search(state, resnet152()); }
BENCHMARK(BM_TflmsSearchResnet152)->Unit(benchmark::kMillisecond);

void BM_TflmsSearchResnet50(benchmark::State& state) { search(state, resnet50()); }
BENCHMARK(BM_TflmsSearchResnet50)->Unit(benchmark::kMillisecond);

// One trial's simulation (T = 1, async: the most swaps), graph index prepared outside the loop.
void BM_MemorySimResnet152(benchmark::State& state) {
  const lms::Graph& g = resnet152();
  auto levels = lms::compute_levels(g);
  auto reach = lms::compute_reachability(g, *levels);
  auto sim = lms::MemorySimulator::create(g, *levels);
  auto d = lms::decide_tflms_swaps(g, *levels, *reach, lms::TflmsParams{});
  if (!levels || !reach || !sim || !d) {
    state.SkipWithError("setup failed");
    return;
  }
  lms::MemorySimOptions opts;
  opts.device_bytes = kBudget;
  for (auto _ : state) benchmark::DoNotOptimize(sim->run(*d, opts));
  state.counters["swaps"] = static_cast<double>(d->swaps.size());
}
BENCHMARK(BM_MemorySimResnet152)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
