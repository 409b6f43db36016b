// Evaluation: the logits graph drops the loss and the labels, and normalizes batch norm with its running
// statistics when asked (inference: a row's logits alone, checked against the formula); accuracy counts argmax
// hits (first on ties) over the real rows only; bad shapes are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "lms/backends/reference/interpreter.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/runtime/evaluate.h"

namespace lms {
namespace {

TEST(Evaluate, GraphOutputsTheLogits) {
  ModelOptions mo;
  mo.batch = 2;
  mo.image = {4};
  mo.hidden = {8};
  mo.classes = 3;
  auto forward = build_model("mlp", mo);
  ASSERT_TRUE(forward.has_value());
  auto eval = evaluation_graph(*forward);
  ASSERT_TRUE(eval.has_value()) << eval.error().str();
  ASSERT_EQ(eval->outputs().size(), 1u);
  EXPECT_EQ(eval->value(eval->outputs()[0]).type, (TensorType{DType::f32, {2, 3}}));
  EXPECT_FALSE(eval->find_value("labels").has_value());
  EXPECT_FALSE(eval->find_value("loss").has_value());

  Graph no_ce = *forward;
  no_ce.set_outputs({*forward->find_value("x")});
  auto bad = evaluation_graph(no_ce);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().str().find("cross_entropy"), std::string::npos) << bad.error().str();
}

// x[3,2,2,2] -> batch_norm -> global_avg_pool -> logits[3,2] -> cross_entropy.
Graph bn_classifier() {
  Graph g("bn");
  Builder b(g);
  ValueId x = b.input(TensorType{DType::f32, {3, 2, 2, 2}}, "x");
  ValueId labels = b.input(TensorType{DType::i64, {3}}, "labels");
  ValueId gamma = b.param(TensorType{DType::f32, {2}}, "gamma", "ones");
  ValueId beta = b.param(TensorType{DType::f32, {2}}, "beta", "zeros");
  ValueId y = b.add(Op::batch_norm, {x, gamma, beta}, attrs({{"eps", 1e-3}}), "bn").at(0);
  ValueId logits = b.op(Op::global_avg_pool, {y}, {}, "logits");
  g.set_outputs({b.op(Op::cross_entropy, {logits, labels}, {}, "loss")});
  EXPECT_TRUE(b.ok()) << (b.ok() ? "" : b.error()->str());
  return g;
}

// With running statistics, a batch norm computes gamma·(x − running_mean)/sqrt(running_var + eps) + beta for
// each row alone; with the batch's statistics, a row's output moves with the other rows.
TEST(Evaluate, BatchNormWithRunningStatisticsIsInference) {
  const Graph forward = bn_classifier();
  auto eval = evaluation_graph(forward, /*running_statistics=*/true);
  ASSERT_TRUE(eval.has_value()) << eval.error().str();
  EXPECT_FALSE(std::ranges::any_of(eval->node_ids(), [&](NodeId n) { return eval->node(n).op == Op::batch_norm; }));
  std::map<std::string, HostTensor> feeds;
  auto fill = [&](const std::string& name, TensorType t, auto f) {
    HostTensor h(std::move(t));
    for (int64_t i = 0; i < h.type.num_elements(); ++i) h.set(i, f(i));
    feeds[name] = std::move(h);
  };
  fill("x", {DType::f32, {3, 2, 2, 2}}, [](int64_t i) { return 0.25 * static_cast<double>(i % 7) - 0.5; });
  fill("gamma", {DType::f32, {2}}, [](int64_t c) { return c == 0 ? 1.5 : -0.75; });
  fill("beta", {DType::f32, {2}}, [](int64_t c) { return c == 0 ? 0.125 : 2.0; });
  fill("bn.running_mean", {DType::f32, {2}}, [](int64_t c) { return c == 0 ? 0.3 : -0.2; });
  fill("bn.running_var", {DType::f32, {2}}, [](int64_t c) { return c == 0 ? 0.5 : 2.5; });
  auto run = [&](const Graph& g, const std::map<std::string, HostTensor>& f) {
    auto all = interpret(g, f);
    EXPECT_TRUE(all.has_value()) << all.error().str();
    return all ? (*all)[g.outputs()[0].v] : HostTensor();
  };
  const HostTensor logits = run(*eval, feeds);
  ASSERT_EQ(logits.type, (TensorType{DType::f32, {3, 2}}));
  const double gamma[] = {1.5, -0.75}, beta[] = {0.125, 2.0}, mean[] = {0.3, -0.2}, var[] = {0.5, 2.5};
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t c = 0; c < 2; ++c) {
      double sum = 0;
      for (int64_t p = 0; p < 4; ++p) {
        const double xv = 0.25 * static_cast<double>(((n * 2 + c) * 4 + p) % 7) - 0.5;
        sum += gamma[c] * (xv - mean[c]) / std::sqrt(var[c] + 1e-3) + beta[c];
      }
      EXPECT_NEAR(logits.get(n * 2 + c), sum / 4, 1e-5) << n << " " << c;
    }
  // A row's logits do not depend on the other rows (here: rows 1 and 2 zeroed, as padding is).
  std::map<std::string, HostTensor> padded = feeds;
  for (int64_t i = 8; i < 24; ++i) padded["x"].set(i, 0);
  const HostTensor alone = run(*eval, padded);
  EXPECT_EQ(alone.get(0), logits.get(0));
  EXPECT_EQ(alone.get(1), logits.get(1));
  // With the batch's statistics they do.
  auto batch = evaluation_graph(forward);
  ASSERT_TRUE(batch.has_value());
  padded.erase("bn.running_mean");
  padded.erase("bn.running_var");
  std::map<std::string, HostTensor> unpadded = padded;
  unpadded["x"] = feeds["x"];
  EXPECT_NE(run(*batch, padded).get(0), run(*batch, unpadded).get(0));
}

TEST(Evaluate, CountsArgmaxHitsOverRealRows) {
  HostTensor logits(TensorType{DType::f32, {3, 3}});
  const float values[] = {0.1f, 0.9f, 0.0f,   // predicts 1
                          2.0f, 2.0f, 1.0f,   // tie: predicts 0
                          0.0f, 0.0f, 5.0f};  // predicts 2 (a padding row below)
  for (int i = 0; i < 9; ++i) logits.set(i, values[i]);
  HostTensor labels(TensorType{DType::i64, {3}});
  labels.set(0, 1);
  labels.set(1, 1);
  labels.set(2, 2);
  auto all = count_correct(logits, labels, 3);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, 2);
  EXPECT_EQ(*count_correct(logits, labels, 2), 1);
  EXPECT_FALSE(count_correct(logits, labels, 4).has_value());
  HostTensor wrong(TensorType{DType::i64, {2}});
  EXPECT_FALSE(count_correct(logits, wrong, 2).has_value());

  // A language model's logits [N*P, C] with labels [N, P]: here 2 samples of 2 positions (the 4th row added).
  HostTensor lm(TensorType{DType::f32, {4, 3}});
  for (int i = 0; i < 9; ++i) lm.set(i, values[i]);
  lm.set(10, 1.0f);  // row 3 predicts 1
  HostTensor tokens(TensorType{DType::i64, {2, 2}});
  for (int i = 0; i < 4; ++i) tokens.set(i, std::vector<int>{1, 1, 2, 0}[i]);
  EXPECT_EQ(*count_correct(lm, tokens, 2), 2);  // rows 0 and 2
  EXPECT_EQ(*count_correct(lm, tokens, 1), 1) << "sample 0: rows 0 and 1";
  EXPECT_FALSE(count_correct(lm, tokens, 3).has_value());
  HostTensor odd(TensorType{DType::i64, {2, 3}});
  auto mismatch = count_correct(lm, odd, 2);
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_NE(mismatch.error().str().find("or [4] positions"), std::string::npos) << mismatch.error().str();
}

}  // namespace
}  // namespace lms
