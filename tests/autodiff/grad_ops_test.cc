// Shape rules, errors, traits and costs of the gradient ops (ops/grad.cc, ops/grad_tensor.cc): each gradient
// op gives its forward input's type back and refuses inconsistent operands with one message naming the op,
// the types and the numbers.
#include <gtest/gtest.h>

#include "../ops/shape_test_util.h"

namespace lms::op_test {
namespace {

TensorType f64(Shape s) { return {DType::f64, std::move(s)}; }

Attributes conv_attrs(IntList stride, IntList pad, IntList dilation, int64_t groups) {
  return A({{"stride", L(stride)}, {"pad", L(pad)}, {"dilation", L(dilation)}, {"groups", I(groups)}});
}

TEST(GradOps, ConvBackwardDataAndFilterGiveTheForwardShapes) {
  // conv2d of x[2,4,9,7] with w[6,2,3,3], stride 2, pad 1, dilation 1, groups 2 gives [2,6,5,4].
  Attributes a = conv_attrs({2, 2}, {1, 1}, {1, 1}, 2);
  a.set("x_shape", L({2, 4, 9, 7}));
  EXPECT_TRUE(gives(infer(Op::conv_backward_data, {f32({2, 6, 5, 4}), f32({6, 2, 3, 3})}, a), {f32({2, 4, 9, 7})}));
  Attributes f = conv_attrs({2, 2}, {1, 1}, {1, 1}, 2);
  f.set("w_shape", L({6, 2, 3, 3}));
  EXPECT_TRUE(gives(infer(Op::conv_backward_filter, {f32({2, 4, 9, 7}), f32({2, 6, 5, 4})}, f), {f32({6, 2, 3, 3})}));
  // 1-D and 3-D, dilation, f64.
  Attributes a1 = conv_attrs({1}, {0}, {2}, 1);
  a1.set("x_shape", L({1, 3, 10}));
  EXPECT_TRUE(gives(infer(Op::conv_backward_data, {f64({1, 5, 6}), f64({5, 3, 3})}, a1), {f64({1, 3, 10})}));
  Attributes f3 = conv_attrs({1, 2, 1}, {1, 0, 1}, {1, 1, 1}, 1);
  f3.set("w_shape", L({4, 2, 3, 2, 3}));
  EXPECT_TRUE(
      gives(infer(Op::conv_backward_filter, {f32({1, 2, 5, 6, 7}), f32({1, 4, 5, 3, 7})}, f3), {f32({4, 2, 3, 2, 3})}));
}

TEST(GradOps, NormAndPoolGradients) {
  EXPECT_TRUE(gives(infer(Op::batch_norm_grad, {f32({2, 3, 4}), f32({2, 3, 4}), f32({3}), f32({3}), f32({3})}),
                    {f32({2, 3, 4}), f32({3}), f32({3})}));
  EXPECT_TRUE(gives(infer(Op::layer_norm_grad, {f32({2, 5, 8}), f32({2, 5, 8}), f32({8}), f32({2, 5}), f32({2, 5})}),
                    {f32({2, 5, 8}), f32({8}), f32({8})}));
  Attributes p = A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}});
  EXPECT_TRUE(gives(infer(Op::max_pool_grad, {f32({2, 3, 4, 4}), f32({2, 3, 8, 7})}, p), {f32({2, 3, 8, 7})}));
  Attributes q = A({{"kernel", L({2})},
                    {"stride", L({2})},
                    {"pad", L({1})},
                    {"count_include_pad", Attribute{false}},
                    {"x_shape", L({1, 2, 5})}});
  EXPECT_TRUE(gives(infer(Op::avg_pool_grad, {f64({1, 2, 3})}, q), {f64({1, 2, 5})}));
}

TEST(GradOps, TensorGradients) {
  EXPECT_TRUE(gives(infer(Op::relu_grad, {f32({4, 5}), f32({4, 5})}), {f32({4, 5})}));
  EXPECT_TRUE(gives(infer(Op::gelu_grad, {f64({3}), f64({3})}), {f64({3})}));
  EXPECT_TRUE(gives(infer(Op::softmax_grad, {f32({2, 4, 4}), f32({2, 4, 4})}, A({{"axis", I(-1)}})), {f32({2, 4, 4})}));
  EXPECT_TRUE(gives(infer(Op::embedding_grad, {f32({2, 3, 8}), i64({2, 3})}, A({{"vocab", I(50)}})), {f32({50, 8})}));
  EXPECT_TRUE(gives(infer(Op::cross_entropy_grad, {f32({}), f32({4, 10}), i64({4})}), {f32({4, 10})}));
  EXPECT_TRUE(gives(infer(Op::cross_entropy_grad, {f64({}), f64({2, 3, 5}), i32({2, 5})}), {f64({2, 3, 5})}));
  // f16 logits have an f32 loss, so dloss is f32[].
  EXPECT_TRUE(gives(infer(Op::cross_entropy_grad, {f32({}), f16({4, 10}), i64({4})}), {f16({4, 10})}));
  EXPECT_TRUE(gives(infer(Op::broadcast_to, {f32({3, 1})}, A({{"shape", L({2, 3, 4})}})), {f32({2, 3, 4})}));
  EXPECT_TRUE(gives(infer(Op::broadcast_to, {f32({})}, A({{"shape", L({2, 3})}})), {f32({2, 3})}));
  EXPECT_TRUE(gives(infer(Op::sum_to, {f32({2, 3, 4})}, A({{"shape", L({3, 1})}})), {f32({3, 1})}));
  EXPECT_TRUE(gives(infer(Op::sum_to, {f32({2, 3})}, A({{"shape", L({})}})), {f32({})}));
  EXPECT_TRUE(gives(
      infer(Op::slice_grad, {f32({2, 3, 4})}, A({{"axis", I(-1)}, {"start", I(1)}, {"end", I(5)}, {"dim", I(9)}})),
      {f32({2, 3, 9})}));
  EXPECT_TRUE(gives(infer(Op::bn_running_update, {f32({8}), f32({8}), f32({8}), f32({8})}, A({{"count", I(32)}})),
                    {f32({8}), f32({8})}));
}

TEST(GradOps, Errors) {
  Attributes conv = conv_attrs({1, 1}, {0, 0}, {1, 1}, 1);
  Attributes data = conv;
  data.set("x_shape", L({2, 3, 8, 8}));
  Attributes data_1d_lists = conv_attrs({1}, {0}, {1}, 1);
  data_1d_lists.set("x_shape", L({2, 3, 8, 8}));
  Attributes filter = conv;
  filter.set("w_shape", L({4, 3, 3, 3}));
  Attributes pool = A({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"pad", L({0, 0})}});
  Attributes short_pool = A({{"kernel", L({2, 2})}, {"stride", L({})}, {"pad", L({0, 0})}});
  expect_errors({
      // dy must be the forward's output: 8-3+1 = 6, not 7.
      {Op::conv_backward_data,
       {f32({2, 4, 7, 7}), f32({4, 3, 3, 3})},
       data,
       {"conv_backward_data", "f32[2,4,6,6]", "f32[2,4,7,7]"}},
      {Op::conv_backward_data, {f32({2, 4, 6, 6}), f32({4, 3, 3, 3})}, data_1d_lists, {"stride", "needs 2 entries"}},
      {Op::conv_backward_data, {f32({2, 4, 6, 6}), f32({4, 3, 3, 3})}, conv, {"needs attribute 'x_shape'"}},
      {Op::conv_backward_data, {f32({2, 4, 6, 6}), f32({4, 3})}, data, {"rank 3 to 5"}},
      {Op::conv_backward_filter,
       {f32({2, 3, 8, 8}), f32({2, 4, 5, 6})},
       filter,
       {"conv_backward_filter", "f32[2,4,6,6]"}},
      {Op::conv_backward_filter, {f32({2, 2, 8, 8}), f32({2, 4, 6, 6})}, filter, {"input channels 2"}},
      {Op::conv_backward_filter, {i32({2, 3, 8, 8}), f32({2, 4, 6, 6})}, filter, {"floating-point"}},
      {Op::batch_norm_grad,
       {f32({2, 3, 4}), f32({2, 3, 5}), f32({3}), f32({3}), f32({3})},
       {},
       {"dy f32[2,3,4]", "x's type f32[2,3,5]"}},
      {Op::batch_norm_grad, {f32({2, 3}), f32({2, 3}), f32({3}), f32({2}), f32({3})}, {}, {"mean must be f32[3]"}},
      {Op::layer_norm_grad, {f32({2, 5}), f32({2, 5}), f32({4}), f32({2}), f32({2})}, {}, {"gamma must be f32[5]"}},
      {Op::max_pool_grad, {f32({2, 3, 4, 4}), f32({2, 3, 10, 10})}, pool, {"max_pool_grad", "f32[2,3,5,5]"}},
      {Op::max_pool_grad, {f32({2, 3, 4, 4}), f32({2, 3, 8, 8})}, short_pool, {"'stride'", "needs 2 entries"}},
      {Op::avg_pool_grad, {f32({2, 3, 4, 4})}, pool, {"needs attribute 'count_include_pad'"}},
      {Op::relu_grad, {f32({4}), f32({5})}, {}, {"relu_grad", "f32[4]", "f32[5]"}},
      {Op::gelu_grad, {i32({4}), i32({4})}, {}, {"floating-point"}},
      {Op::softmax_grad, {f32({4}), f32({4})}, A({{"axis", I(1)}}), {"'axis' = 1 is out of range"}},
      {Op::embedding_grad, {f32({2, 8}), i64({2, 3})}, A({{"vocab", I(5)}}), {"ids.shape + [C]"}},
      {Op::embedding_grad, {f32({2, 8}), f32({2})}, A({{"vocab", I(5)}}), {"ids must be i32 or i64"}},
      {Op::embedding_grad, {f32({2, 8}), i32({2})}, A({{"vocab", I(0)}}), {"'vocab' = 0"}},
      {Op::cross_entropy_grad, {f32({1}), f32({4, 10}), i64({4})}, {}, {"dloss must be", "f32[]", "f32[1]"}},
      {Op::cross_entropy_grad, {f64({}), f32({4, 10}), i64({4})}, {}, {"dloss must be", "f32[]"}},
      {Op::cross_entropy_grad, {f32({}), f32({4, 10}), i64({5})}, {}, {"labels"}},
      {Op::broadcast_to, {f32({3, 2})}, A({{"shape", L({3, 4})}}), {"cannot broadcast f32[3,2] to [3,4]"}},
      {Op::broadcast_to, {f32({3})}, A({{"shape", L({-1, 3})}}), {"negative size -1"}},
      {Op::sum_to, {f32({2, 3})}, A({{"shape", L({2})}}), {"sum_to target [2] does not broadcast"}},
      {Op::sum_to, {f32({3})}, A({{"shape", L({2, 3})}}), {"does not broadcast"}},
      {Op::slice_grad,
       {f32({2, 3})},
       A({{"axis", I(1)}, {"start", I(0)}, {"end", I(2)}, {"dim", I(4)}}),
       {"has 3 along axis 1", "has 2"}},
      {Op::slice_grad,
       {f32({2, 3})},
       A({{"axis", I(1)}, {"start", I(2)}, {"end", I(5)}, {"dim", I(4)}}),
       {"end <= dim = 4"}},
      {Op::bn_running_update, {f32({8}), f32({8}), f32({8}), f32({4})}, A({{"count", I(8)}}), {"invstd is f32[4]"}},
      {Op::bn_running_update,
       {f32({8}), f32({8}), f32({8}), f32({8})},
       A({{"count", I(1)}}),
       {"'count' = 1", "at least 2"}},
      {Op::bn_running_update,
       {f32({8}), f32({8}), f32({8}), f32({8})},
       A({{"count", I(4)}, {"momentum", Attribute{1.5}}}),
       {"'momentum' = 1.5"}},
      {Op::bn_running_update, {f32({8}), f32({8}), f32({8}), f32({8})}, {}, {"needs attribute 'count'"}},
  });
}

TEST(GradOps, TraitsAndCosts) {
  for (Op op : {Op::conv_backward_data, Op::conv_backward_filter, Op::relu_grad, Op::gelu_grad, Op::batch_norm_grad,
                Op::layer_norm_grad, Op::max_pool_grad, Op::avg_pool_grad, Op::softmax_grad, Op::embedding_grad,
                Op::cross_entropy_grad, Op::broadcast_to, Op::sum_to, Op::slice_grad}) {
    const OpDef& d = op_def(op);
    EXPECT_TRUE(d.traits.recomputable) << d.name;
    EXPECT_FALSE(d.traits.side_effecting || d.traits.in_place) << d.name;
    EXPECT_FALSE(d.doc.empty()) << d.name;
  }
  const OpDef& bn = op_def(Op::bn_running_update);
  EXPECT_TRUE(bn.traits.in_place && bn.traits.side_effecting && !bn.traits.recomputable);
  EXPECT_EQ(bn.aliases, (std::vector<int>{0, 1}));

  // The data and filter gradients do the forward's multiply-adds: 2 * n(dy) * (Cin/g) * prod(k).
  Attributes a = conv_attrs({1, 1}, {1, 1}, {1, 1}, 1);
  a.set("x_shape", L({2, 3, 8, 8}));
  Types dx = {f32({2, 3, 8, 8})};
  Cost c = op_cost(Op::conv_backward_data, Types{f32({2, 4, 8, 8}), f32({4, 3, 3, 3})},
                   *normalize_attrs(op_def(Op::conv_backward_data), a), dx);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3));
  EXPECT_EQ(c.bytes_read, (2 * 4 * 8 * 8 + 4 * 3 * 3 * 3) * 4);
  EXPECT_EQ(c.bytes_written, 2 * 3 * 8 * 8 * 4);
  Attributes f = conv_attrs({1, 1}, {1, 1}, {1, 1}, 1);
  f.set("w_shape", L({4, 3, 3, 3}));
  Types dw = {f32({4, 3, 3, 3})};
  Cost cf = op_cost(Op::conv_backward_filter, Types{f32({2, 3, 8, 8}), f32({2, 4, 8, 8})},
                    *normalize_attrs(op_def(Op::conv_backward_filter), f), dw);
  EXPECT_DOUBLE_EQ(cf.flops, c.flops);
  Types st = {f32({6})};
  EXPECT_DOUBLE_EQ(op_cost(Op::sum_to, Types{f32({5, 6})}, A({{"shape", L({6})}}), st).flops, 30);
  EXPECT_DOUBLE_EQ(op_cost(Op::broadcast_to, Types{f32({6})}, A({{"shape", L({5, 6})}}), Types{f32({5, 6})}).flops, 0);
}

}  // namespace
}  // namespace lms::op_test
