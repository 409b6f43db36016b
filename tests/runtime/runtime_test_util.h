// Shared fixtures of the runtime tests: a tiny MLP training program and its synthetic data, a small GPT, a check
// that two sets of trained values are the same bytes, and a runner that executes steps on the reference backend
// and collects losses.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lms/autodiff/optimizer.h"
#include "lms/backends/reference/reference_backend.h"
#include "lms/data/data.h"
#include "lms/models/models.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"

namespace lms::runtime_test {

// A two-layer GPT (hidden 32, 4 heads, sequence 16, vocabulary 50, batch 4) with dropout `p` in all of nanoGPT's
// places (5 per block, 1 on the embeddings); p = 0 adds none.
inline Graph small_gpt(double dropout) {
  ModelOptions o;
  o.batch = 4;
  o.layers = 2;
  o.hidden_size = 32;
  o.heads = 4;
  o.seq = 16;
  o.vocab = 50;
  o.dropout = dropout;
  auto g = build_model("gpt", o);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? std::move(*g) : Graph("none");
}

// Two sets of trained values are the same names, types and bytes.
inline void expect_same_values(const std::map<std::string, HostTensor>& a, const std::map<std::string, HostTensor>& b,
                               const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << what << ": " << name;
    EXPECT_EQ(t.type, b.at(name).type) << what << ": " << name;
    EXPECT_TRUE(t.data == b.at(name).data) << what << ": " << name << " differs";
  }
}

// mlp on 1x4x4 images, one hidden layer of 8, 3 classes, batch 4, trained with momentum SGD.
inline Graph tiny_training_graph(OptimizerKind kind = OptimizerKind::momentum) {
  ModelOptions mo;
  mo.batch = 4;
  mo.image = {4};
  mo.hidden = {8};
  mo.classes = 3;
  auto forward = build_model("mlp", mo);
  EXPECT_TRUE(forward.has_value()) << forward.error().str();
  TrainingOptions to;
  to.optimizer.kind = kind;
  to.optimizer.lr = 0.1;
  auto training = build_training_graph(*forward, to);
  EXPECT_TRUE(training.has_value()) << training.error().str();
  return std::move(*training);
}

// Runs steps of `program` on a fresh reference backend, feeding synthetic batches, and keeps what tests look at.
struct TrainingRun {
  std::unique_ptr<ReferenceBackend> backend = std::make_unique<ReferenceBackend>();
  std::unique_ptr<Executor> executor;
  std::unique_ptr<DataSource> data;
  std::vector<double> losses;
  std::vector<StepResult> results;

  TrainingRun(const Program& program, uint64_t seed, ExecutorOptions opts = {}, uint64_t data_seed = 1) {
    auto ex = Executor::create(program, *backend, opts);
    EXPECT_TRUE(ex.has_value()) << ex.error().str();
    executor = std::make_unique<Executor>(std::move(*ex));
    auto init = executor->initialize(seed);
    EXPECT_TRUE(init.has_value()) << init.error().str();
    const Graph& g = program.graph();
    DataOptions d;
    d.seed = data_seed;
    d.classes = 3;
    auto src = open_data(d, g.value(*g.find_value("x")).type, g.value(*g.find_value("labels")).type);
    EXPECT_TRUE(src.has_value()) << src.error().str();
    data = std::move(*src);
  }

  // Runs training batches [first, first + count) of epoch 0.
  void steps(int64_t first, int64_t count) {
    const Graph& g = executor->program().graph();
    HostTensor x, labels;
    for (int64_t i = first; i < first + count; ++i) {
      ASSERT_TRUE(data->train_batch(0, i, x, labels).has_value());
      const Feed feeds[] = {{*g.find_value("x"), &x}, {*g.find_value("labels"), &labels}};
      auto r = executor->step(feeds);
      ASSERT_TRUE(r.has_value()) << r.error().str();
      losses.push_back(r->outputs.front().get(0));
      results.push_back(std::move(*r));
    }
  }
};

}  // namespace lms::runtime_test
