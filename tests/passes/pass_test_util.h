// What the rewrite passes' tests share (recompute_test, swap_test): tiny training graphs of three models, the
// check that a rewritten graph trains exactly like the original on the reference backend, and graph parsing.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string_view>

#include "lms/autodiff/autodiff.h"
#include "lms/autodiff/optimizer.h"
#include "lms/ir/parser.h"
#include "lms/models/models.h"
#include "lms/runtime/program.h"
#include "runtime/runtime_test_util.h"

namespace lms::pass_test {

using runtime_test::TrainingRun;

// The training graph of `model` (momentum, lr 0.1).
inline Graph training_graph(std::string_view model, const ModelOptions& mo) {
  auto forward = build_model(model, mo);
  EXPECT_TRUE(forward.has_value()) << forward.error().str();
  TrainingOptions to;
  to.optimizer.kind = OptimizerKind::momentum;
  to.optimizer.lr = 0.1;
  auto training = build_training_graph(*forward, to);
  EXPECT_TRUE(training.has_value()) << training.error().str();
  return std::move(*training);
}

// A graph from text (a parse error fails the test).
inline Graph parse(std::string_view text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return std::move(*g);
}

// The gradient graph of `forward` with respect to every parameter (an error fails the test).
inline Graph gradients(const Graph& forward) {
  auto g = build_gradient_graph(forward, {});
  EXPECT_TRUE(g.has_value()) << g.error().str();
  return g ? std::move(*g) : Graph();
}

inline int count_op(const Graph& g, Op op) {
  int n = 0;
  for (NodeId id : g.node_ids()) n += g.node(id).op == op ? 1 : 0;
  return n;
}

inline ModelOptions mlp() {
  ModelOptions mo;
  mo.batch = 4;
  mo.image = {4};
  mo.hidden = {8, 8};
  mo.classes = 3;
  return mo;
}

inline ModelOptions resnet18() {
  ModelOptions mo;
  mo.batch = 2;
  mo.image = {8};
  mo.classes = 3;
  mo.small_stem = true;
  return mo;
}

inline ModelOptions gpt() {
  ModelOptions mo;
  mo.batch = 2;
  mo.layers = 2;
  mo.hidden_size = 16;
  mo.heads = 2;
  mo.seq = 8;
  mo.vocab = 11;
  return mo;
}

// Two training steps of a graph on the reference backend (seed 7). The program outlives the run, which
// refers to it.
struct TwoSteps {
  std::unique_ptr<Program> program;
  std::unique_ptr<TrainingRun> run;
};

// Null members (with a failure) if `g` does not compile.
inline TwoSteps two_steps(const Graph& g) {
  auto program = compile(g);
  EXPECT_TRUE(program.has_value()) << program.error().str();
  if (!program) return {};
  TwoSteps t{std::make_unique<Program>(std::move(*program)), nullptr};
  t.run = std::make_unique<TrainingRun>(*t.program, 7);
  t.run->steps(0, 2);
  return t;
}

// Expects two runs' losses and final parameters and state to be bit for bit equal.
inline void expect_same_training(TrainingRun& a, TrainingRun& b) {
  ASSERT_EQ(a.losses.size(), 2u);
  ASSERT_EQ(b.losses.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)), 0)
        << "step " << i << ": " << a.losses[i] << " vs " << b.losses[i];
  auto pa = a.executor->persistent_values(), pb = b.executor->persistent_values();
  ASSERT_TRUE(pa.has_value() && pb.has_value());
  ASSERT_EQ(pa->size(), pb->size());
  for (const auto& [name, t] : *pa) {
    auto it = pb->find(name);
    ASSERT_NE(it, pb->end()) << name;
    EXPECT_EQ(it->second.data, t.data) << name;
  }
}

}  // namespace lms::pass_test
