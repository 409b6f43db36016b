// Shape rules of the tensor ops: linear algebra and data movement (matmul, reshape, transpose, concat, slice,
// softmax, embedding), reductions and losses, and optimizer updates. For each op a normal case and every
// error its rule can give, checked for the key facts in the message (the spatial ops are in
// shape_rules_test.cc).
#include "shape_test_util.h"

namespace lms {
namespace {
using namespace op_test;

TEST(ShapeMatmul, Normal) {
  EXPECT_TRUE(gives(infer(Op::matmul, {f32({4, 8}), f32({8, 16})}), {f32({4, 16})}));
  EXPECT_TRUE(gives(infer(Op::matmul, {f32({2, 3, 4, 8}), f32({2, 3, 8, 5})}), {f32({2, 3, 4, 5})}));
  // A rank-2 b is shared by every batch of a.
  EXPECT_TRUE(gives(infer(Op::matmul, {f32({2, 3, 4, 8}), f32({8, 5})}), {f32({2, 3, 4, 5})}));
  EXPECT_TRUE(gives(infer(Op::matmul, {f32({8, 4}), f32({8, 16})}, A({{"transpose_a", true}})), {f32({4, 16})}));
  EXPECT_TRUE(gives(infer(Op::matmul, {f32({4, 8}), f32({16, 8})}, A({{"transpose_b", true}})), {f32({4, 16})}));
  EXPECT_TRUE(gives(infer(Op::matmul, {f16({3, 8, 4}), f16({3, 16, 8})},
                          A({{"transpose_a", true}, {"transpose_b", true}})),
                    {f16({3, 4, 16})}));
}

TEST(ShapeMatmul, Errors) {
  expect_errors({
      {Op::matmul, {f32({8}), f32({8, 2})}, {}, {"matmul", "rank >= 2", "f32[8]"}},
      {Op::matmul, {f32({4, 8}), f16({8, 2})}, {}, {"one dtype", "f16[8,2]"}},
      {Op::matmul, {i32({4, 8}), i32({8, 2})}, {}, {"floating-point", "i32[4,8]"}},
      {Op::matmul, {f32({4, 8}), f32({7, 2})}, {}, {"inner dimensions", "K=8", "K=7"}},
      {Op::matmul, {f32({4, 8}), f32({8, 2})}, A({{"transpose_a", true}}), {"K=4", "K=8", "transpose_a=true"}},
      {Op::matmul, {f32({2, 4, 8}), f32({3, 8, 5})}, {}, {"f32[3,8,5]", "batch dimensions [2]"}},
      {Op::matmul, {f32({4, 8}), f32({1, 8, 5})}, {}, {"rank 2 or have a's batch dimensions []"}},
  });
}

TEST(ShapeDataMovement, Reshape) {
  EXPECT_TRUE(gives(infer(Op::reshape, {f32({2, 3, 4})}, A({{"shape", L({6, 4})}})), {f32({6, 4})}));
  EXPECT_TRUE(gives(infer(Op::reshape, {i64({2, 3, 4})}, A({{"shape", L({-1, 4, 1})}})), {i64({6, 4, 1})}));
  EXPECT_TRUE(gives(infer(Op::reshape, {f32({1})}, A({{"shape", L({})}})), {f32({})}));
  expect_errors({
      {Op::reshape, {f32({6})}, {}, {"reshape", "needs attribute 'shape'"}},
      {Op::reshape, {f32({6})}, A({{"shape", L({-1, -1})}}), {"more than one -1"}},
      {Op::reshape, {f32({6})}, A({{"shape", L({-2, 3})}}), {"negative size -2"}},
      {Op::reshape, {f32({2, 3, 4})}, A({{"shape", L({5, 5})}}), {"needs 25 elements", "f32[2,3,4] has 24"}},
      {Op::reshape, {f32({2, 3, 4})}, A({{"shape", L({-1, 5})}}), {"cannot infer", "24 elements", "multiple of 5"}},
      {Op::reshape, {f32({2, 3})}, A({{"shape", L({0, -1})}}), {"cannot infer", "multiple of 0"}},
  });
}

TEST(ShapeDataMovement, Transpose) {
  EXPECT_TRUE(gives(infer(Op::transpose, {f32({2, 3, 4})}, A({{"perm", L({2, 0, 1})}})), {f32({4, 2, 3})}));
  expect_errors({
      {Op::transpose, {f32({2, 3, 4})}, A({{"perm", L({1, 0})}}), {"transpose", "2 entries", "rank 3"}},
      {Op::transpose, {f32({2, 3, 4})}, A({{"perm", L({0, 0, 1})}}), {"not a permutation of 0..2", "entry 0"}},
      {Op::transpose, {f32({2, 3})}, A({{"perm", L({0, 2})}}), {"not a permutation", "entry 2"}},
  });
}

TEST(ShapeDataMovement, Concat) {
  EXPECT_TRUE(gives(infer(Op::concat, {f32({2, 3, 4}), f32({2, 5, 4}), f32({2, 1, 4})}, A({{"axis", I(1)}})),
                    {f32({2, 9, 4})}));
  EXPECT_TRUE(gives(infer(Op::concat, {f32({2, 3}), f32({2, 4})}, A({{"axis", I(-1)}})), {f32({2, 7})}));
  EXPECT_TRUE(gives(infer(Op::concat, {f32({2, 3})}, A({{"axis", I(0)}})), {f32({2, 3})}));
  expect_errors({
      {Op::concat, {f32({2, 3}), f32({2, 3})}, {}, {"concat", "needs attribute 'axis'"}},
      {Op::concat, {f32({2, 3}), f32({2, 3})}, A({{"axis", I(2)}}), {"'axis' = 2", "out of range", "rank 2"}},
      {Op::concat, {f32({2, 3}), f32({2, 3})}, A({{"axis", I(-3)}}), {"'axis' = -3"}},
      {Op::concat, {f32({2, 3}), f16({2, 3})}, A({{"axis", I(0)}}), {"input 1 is f16[2,3]", "input 0 is f32[2,3]"}},
      {Op::concat, {f32({2, 3}), f32({2, 3}), f32({3, 3})}, A({{"axis", I(1)}}), {"input 2 is f32[3,3]", "axis 1"}},
      {Op::concat, {f32({2, 3}), f32({2, 3, 1})}, A({{"axis", I(0)}}), {"input 1 is f32[2,3,1]"}},
  });
}

TEST(ShapeDataMovement, Slice) {
  EXPECT_TRUE(gives(infer(Op::slice, {f32({4, 10})}, A({{"axis", I(1)}, {"start", I(2)}, {"end", I(7)}})),
                    {f32({4, 5})}));
  EXPECT_TRUE(gives(infer(Op::slice, {f32({4, 10})}, A({{"axis", I(-2)}, {"start", I(0)}, {"end", I(4)}})),
                    {f32({4, 10})}));
  expect_errors({
      {Op::slice, {f32({4, 10})}, A({{"axis", I(1)}, {"start", I(2)}}), {"needs attribute 'end'"}},
      {Op::slice, {f32({4, 10})}, A({{"axis", I(2)}, {"start", I(0)}, {"end", I(1)}}), {"'axis' = 2"}},
      {Op::slice, {f32({4, 10})}, A({{"axis", I(1)}, {"start", I(5)}, {"end", I(5)}}),
       {"slice [5, 5)", "axis 1", "f32[4,10]", "<= 10"}},
      {Op::slice, {f32({4, 10})}, A({{"axis", I(1)}, {"start", I(3)}, {"end", I(11)}}), {"[3, 11)"}},
      {Op::slice, {f32({4, 10})}, A({{"axis", I(0)}, {"start", I(-1)}, {"end", I(2)}}), {"[-1, 2)", "<= 4"}},
  });
}

TEST(ShapeDataMovement, Softmax) {
  EXPECT_TRUE(gives(infer(Op::softmax, {f32({2, 10})}), {f32({2, 10})}));
  EXPECT_TRUE(gives(infer(Op::softmax, {f32({2, 10, 3})}, A({{"axis", I(1)}})), {f32({2, 10, 3})}));
  EXPECT_TRUE(gives(infer(Op::softmax, {f32({2, 4, 8, 8})}, A({{"causal", true}})), {f32({2, 4, 8, 8})}));
  EXPECT_TRUE(gives(infer(Op::softmax, {f32({1, 3, 5})}, A({{"causal", true}, {"axis", I(2)}})), {f32({1, 3, 5})}));
  EXPECT_TRUE(gives(infer(Op::softmax, {f32({1, 3, 5})}, A({{"causal", true}, {"causal_offset", I(2)}})),
                    {f32({1, 3, 5})}));
  expect_errors({
      {Op::softmax, {i32({2, 3})}, {}, {"softmax", "floating-point"}},
      {Op::softmax, {f32({2, 3})}, A({{"axis", I(2)}}), {"'axis' = 2", "f32[2,3]"}},
      {Op::softmax, {f32({})}, {}, {"'axis' = -1", "rank 0"}},
      {Op::softmax, {f32({4, 4})}, A({{"causal", true}, {"axis", I(0)}}), {"causal", "axis 0", "last"}},
      {Op::softmax, {f32({4})}, A({{"causal", true}}), {"causal", "rank >= 2"}},
      {Op::softmax, {f32({2, 6, 5})}, A({{"causal", true}}), {"6 rows > 5 columns"}},
      {Op::softmax, {f32({2, 3, 5})}, A({{"causal", true}, {"causal_offset", I(3)}}), {"3 rows from row 3 > 5"}},
      {Op::softmax, {f32({2, 3, 5})}, A({{"causal", true}, {"causal_offset", I(-1)}}), {"causal_offset", ">= 0"}},
      {Op::softmax, {f32({2, 3, 5})}, A({{"causal_offset", I(1)}}), {"causal_offset 1 needs causal"}},
  });
}

TEST(ShapeDataMovement, Embedding) {
  EXPECT_TRUE(gives(infer(Op::embedding, {f32({100, 16}), i64({4, 7})}), {f32({4, 7, 16})}));
  EXPECT_TRUE(gives(infer(Op::embedding, {f16({100, 16}), i32({})}), {f16({16})}));
  expect_errors({
      {Op::embedding, {f32({100}), i64({4})}, {}, {"embedding table", "[V, C]", "f32[100]"}},
      {Op::embedding, {i32({100, 4}), i64({4})}, {}, {"floating-point", "i32[100,4]"}},
      {Op::embedding, {f32({100, 4}), f32({4})}, {}, {"ids must be i32 or i64", "f32[4]"}},
  });
}

TEST(ShapeReduce, MeanAndSum) {
  EXPECT_TRUE(gives(infer(Op::mean, {f32({2, 3, 4})}), {f32({})}));
  EXPECT_TRUE(gives(infer(Op::mean, {f32({2, 3, 4})}, A({{"keepdims", true}})), {f32({1, 1, 1})}));
  EXPECT_TRUE(gives(infer(Op::mean, {f32({2, 3, 4})}, A({{"axes", L({-1, 0})}})), {f32({3})}));
  EXPECT_TRUE(gives(infer(Op::reduce_sum, {i64({2, 3, 4})}, A({{"axes", L({1})}, {"keepdims", true}})),
                    {i64({2, 1, 4})}));
  EXPECT_TRUE(gives(infer(Op::reduce_sum, {f32({})}), {f32({})}));
  expect_errors({
      {Op::mean, {i32({2, 3})}, {}, {"mean", "floating-point", "i32[2,3]"}},
      {Op::reduce_sum, {f32({2, 3})}, A({{"axes", L({2})}}), {"reduce_sum", "axis 2", "out of range"}},
      {Op::mean, {f32({2, 3})}, A({{"axes", L({-3})}}), {"axis -3", "rank 2"}},
      {Op::mean, {f32({2, 3, 4})}, A({{"axes", L({1, -2})}}), {"names axis 1 twice"}},
  });
}

TEST(ShapeLoss, CrossEntropy) {
  EXPECT_TRUE(gives(infer(Op::cross_entropy, {f32({32, 10}), i64({32})}), {f32({})}));
  EXPECT_TRUE(gives(infer(Op::cross_entropy, {f16({2, 5, 4, 3}), i32({2, 4, 3})}), {f32({})}));
  EXPECT_EQ(op_def(Op::cross_entropy).outputs, (std::vector<std::string_view>{"loss"}));
  expect_errors({
      {Op::cross_entropy, {f32({10}), i64({10})}, {}, {"cross_entropy logits", "f32[10]"}},
      {Op::cross_entropy, {i32({4, 10}), i64({4})}, {}, {"floating-point", "i32[4,10]"}},
      {Op::cross_entropy, {f32({4, 0}), i64({4})}, {}, {"no classes"}},
      {Op::cross_entropy, {f32({4, 10}), f32({4})}, {}, {"labels must be i32 or i64", "f32[4]"}},
      {Op::cross_entropy, {f32({4, 10, 3}), i64({4, 10})}, {}, {"i64[4,10]", "shape [4,3]"}},
  });
}

TEST(ShapeUpdate, Sgd) {
  EXPECT_TRUE(gives(infer(Op::sgd_update, {f32({10, 5}), f32({10, 5})}, A({{"lr", 0.1}})), {f32({10, 5})}));
  expect_errors({
      {Op::sgd_update, {f32({10, 5}), f32({10, 5})}, {}, {"sgd_update", "'lr'"}},
      {Op::sgd_update, {f32({10, 5}), f32({5, 10})}, A({{"lr", 0.1}}), {"g is f32[5,10]", "w is f32[10,5]"}},
      {Op::sgd_update, {f32({10}), f16({10})}, A({{"lr", 0.1}}), {"g is f16[10]"}},
      {Op::sgd_update, {i32({10}), i32({10})}, A({{"lr", 0.1}}), {"floating-point", "i32[10]"}},
      {Op::sgd_update, {f32({10}), f32({10})}, A({{"lr", -0.1}}), {"'lr' = -0.1", ">= 0"}},
      {Op::sgd_update, {f32({10}), f32({10})}, A({{"lr", 0.1}, {"weight_decay", -1.0}}), {"'weight_decay' = -1"}},
  });
}

TEST(ShapeUpdate, Momentum) {
  EXPECT_TRUE(gives(infer(Op::momentum_update, {f32({3, 3}), f32({3, 3}), f32({3, 3})},
                          A({{"lr", 0.1}, {"nesterov", true}})),
                    {f32({3, 3}), f32({3, 3})}));
  Types in{f32({3}), f32({3}), f32({3})};
  expect_errors({
      {Op::momentum_update, {f32({3}), f32({4}), f32({3})}, A({{"lr", 0.1}}), {"momentum_update", "v is f32[4]"}},
      {Op::momentum_update, in, A({{"lr", 0.1}, {"momentum", -0.5}}), {"'momentum' = -0.5"}},
      {Op::momentum_update, in, A({{"lr", 0.1}, {"momentum", 0.0}, {"nesterov", true}}), {"nesterov", "momentum > 0"}},
  });
}

TEST(ShapeUpdate, Adam) {
  Types ok{f32({4, 4}), f32({4, 4}), f32({4, 4}), f32({}), f32({4, 4})};
  EXPECT_TRUE(gives(infer(Op::adam_update, ok, A({{"lr", 1e-3}})), {f32({4, 4}), f32({4, 4}), f32({4, 4}), f32({})}));
  Types v1{f32({4}), f32({4}), f32({4}), f32({}), f32({4})};
  expect_errors({
      {Op::adam_update, {f32({4}), f32({4}), f32({4}), f32({1}), f32({4})}, A({{"lr", 0.1}}),
       {"adam_update", "step counter t must be f32[]", "f32[1]"}},
      {Op::adam_update, {f32({4}), f32({4}), f32({4}), i64({}), f32({4})}, A({{"lr", 0.1}}), {"got i64[]"}},
      {Op::adam_update, {f32({4}), f16({4}), f32({4}), f32({}), f32({4})}, A({{"lr", 0.1}}), {"m is f16[4]"}},
      {Op::adam_update, {f32({4}), f32({4}), f32({4}), f32({}), f32({5})}, A({{"lr", 0.1}}), {"g is f32[5]"}},
      {Op::adam_update, v1, A({{"lr", 0.1}, {"beta1", 1.0}}), {"'beta1' = 1", "[0, 1)"}},
      {Op::adam_update, v1, A({{"lr", 0.1}, {"beta2", -0.1}}), {"'beta2' = -0.1"}},
      {Op::adam_update, v1, A({{"lr", 0.1}, {"eps", -1e-8}}), {"'eps'"}},
  });
}

}  // namespace
}  // namespace lms
