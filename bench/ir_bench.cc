// IR speed on a large graph: building, printing, parsing and verifying resnet152 at batch 256 (the foundation
// issue's target: each well under 100 ms). Run: build/bin/ir_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstdio>

#include "lms/ir/parser.h"
#include "lms/ir/printer.h"
#include "lms/ir/verifier.h"
#include "lms/models/models.h"

namespace {

lms::ModelOptions big() {
  lms::ModelOptions o;
  o.batch = 256;
  return o;
}

const lms::Graph& resnet152() {
  static const lms::Graph g = [] {
    auto r = lms::build_model("resnet152", big());
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().str().c_str());
      std::abort();
    }
    return std::move(*r);
  }();
  return g;
}

void BM_BuildResnet152(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(lms::build_model("resnet152", big()));
  state.counters["nodes"] = static_cast<double>(resnet152().num_nodes());
}
BENCHMARK(BM_BuildResnet152)->Unit(benchmark::kMillisecond);

void BM_PrintResnet152(benchmark::State& state) {
  const lms::Graph& g = resnet152();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = lms::print_graph(g);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_PrintResnet152)->Unit(benchmark::kMillisecond);

void BM_ParseResnet152(benchmark::State& state) {
  std::string text = lms::print_graph(resnet152());
  for (auto _ : state) benchmark::DoNotOptimize(lms::parse_graph(text));
}
BENCHMARK(BM_ParseResnet152)->Unit(benchmark::kMillisecond);

void BM_VerifyResnet152(benchmark::State& state) {
  const lms::Graph& g = resnet152();
  for (auto _ : state) benchmark::DoNotOptimize(lms::verify_graph(g));
}
BENCHMARK(BM_VerifyResnet152)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
