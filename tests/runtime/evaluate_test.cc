// Evaluation: the logits graph drops the loss and the labels; accuracy counts argmax hits (first on ties)
// over the real rows only; bad shapes are errors.
#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace lms
