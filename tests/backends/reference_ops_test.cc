// The reference forward kernels other than convolution, on small hand-worked cases (the expected numbers are
// derived in the comments): normalization, elementwise ops with broadcasting, pooling (padding, ties),
// matmul with transposes and batching, data movement, softmax (plain and causal), embedding, reductions,
// cross-entropy, optimizer updates (also run in place), bn_running_update, constants and copies; plus errors.
#include <cmath>
#include <numbers>

#include "reference_test_util.h"

namespace lms {
namespace {
using namespace ref_test;

TEST(ReferenceOps, BatchNorm) {
  // x[2, 2, 2]: channel 0 holds 1, 3 (n = 0) and 5, 7 (n = 1); channel 1 holds 2 everywhere.
  // Channel 0: mean 4, biased variance (9 + 1 + 1 + 9)/4 = 5; eps 4 gives invstd 1/3, and with gamma 3 and
  // beta 1 out = 3*(x - 4)/3 + 1 = x - 3: [-2, 0, 2, 4]. Channel 1: mean 2, variance 0, invstd 1/sqrt(4) = 1/2,
  // out = beta = -1.
  HostTensor x = f64({2, 2, 2}, {1, 3, 2, 2, 5, 7, 2, 2});
  auto r = run(Op::batch_norm, {x, f64({2}, {3, 5}), f64({2}, {1, -1})}, A({{"eps", F(4)}}));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_TRUE(near((*r)[0], {-2, 0, -1, -1, 2, 4, -1, -1}, 1e-12));
  EXPECT_TRUE(near((*r)[1], {4, 2}, 1e-12));
  EXPECT_TRUE(near((*r)[2], {1.0 / 3, 0.5}, 1e-12));
}

TEST(ReferenceOps, LayerNorm) {
  // Rows [1, 3, 5, 7] (mean 4, variance 5) and [2, 2, 2, 2] (mean 2, variance 0); eps 4: invstd 1/3 and 1/2.
  // Row 0: xhat = [-1, -1/3, 1/3, 1]; gamma [3, 6, 3, 6], beta [1, 0, 0, 0]: [-2, -2, 1, 6]. Row 1: beta.
  auto r = run(Op::layer_norm, {f32({2, 4}, {1, 3, 5, 7, 2, 2, 2, 2}), f32({4}, {3, 6, 3, 6}), f32({4}, {1, 0, 0, 0})},
               A({{"eps", F(4)}}));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_TRUE(near((*r)[0], {-2, -2, 1, 6, 1, 0, 0, 0}, 1e-6));
  EXPECT_TRUE(near((*r)[1], {4, 2}, 0));
  EXPECT_TRUE(near((*r)[2], {1.0 / 3, 0.5}, 1e-7));
}

TEST(ReferenceOps, Activations) {
  EXPECT_TRUE(near(run1(Op::relu, {f32({4}, {-1, 0, 2.5, -0.0})}), {0, 0, 2.5, 0}, 0));
  HostTensor nan = f32({1});
  nan.as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(run1(Op::relu, {nan}).get(0)));  // NaN propagates, as in PyTorch
  // gelu(x) = x * Phi(x): Phi(0) = 1/2 so gelu(0) = 0; Phi(1) = 0.8413447460685429 (the normal table);
  // gelu(-1) = -Phi(-1) = -(1 - 0.8413447460685429).
  EXPECT_TRUE(near(run1(Op::gelu, {f64({3}, {0, 1, -1})}), {0, 0.8413447460685429, -0.1586552539314571}, 1e-15));
  EXPECT_TRUE(near(run1(Op::scale, {f32({2}, {1.5, -2})}, A({{"factor", F(-2)}})), {-3, 4}, 0));
  // sigmoid(0) = 1/2, sigmoid(ln 3) = 1/(1 + 1/3) = 3/4, sigmoid(-ln 3) = 1/4; tanh(ln 2) = (2 - 1/2)/(2 + 1/2).
  EXPECT_TRUE(near(run1(Op::sigmoid, {f64({3}, {0, std::log(3.0), -std::log(3.0)})}), {0.5, 0.75, 0.25}, 1e-15));
  EXPECT_TRUE(near(run1(Op::tanh, {f64({3}, {0, std::log(2.0), -std::log(2.0)})}), {0, 0.6, -0.6}, 1e-15));
  // clamp: both bounds, one bound, NaN kept; clamp_grad passes dy strictly inside the bounds only.
  const Attributes relu6 = A({{"min", F(0)}, {"max", F(6)}});
  EXPECT_TRUE(near(run1(Op::clamp, {f32({4}, {-1, 3, 6.5, 6})}, relu6), {0, 3, 6, 6}, 0));
  EXPECT_TRUE(near(run1(Op::clamp, {f32({3}, {-1, 3, 7})}, A({{"max", F(2)}})), {-1, 2, 2}, 0));
  EXPECT_TRUE(std::isnan(run1(Op::clamp, {nan}, relu6).get(0)));
  EXPECT_TRUE(near(run1(Op::clamp_grad, {f32({5}, {1, 2, 3, 4, 5}), f32({5}, {-1, 0, 3, 6, 7})}, relu6),
                   {0, 0, 3, 0, 0}, 0));
  // sqrt and reciprocal, and their gradients from the output: dy/(2y) and -dy*y^2.
  EXPECT_TRUE(near(run1(Op::sqrt, {f32({3}, {4, 0.25, 0})}), {2, 0.5, 0}, 0));
  EXPECT_TRUE(std::isnan(run1(Op::sqrt, {f32({1}, {-1})}).get(0)));
  EXPECT_TRUE(near(run1(Op::reciprocal, {f32({3}, {4, -0.5, 1})}), {0.25, -2, 1}, 0));
  EXPECT_TRUE(near(run1(Op::sqrt_grad, {f32({2}, {1, 3}), f32({2}, {2, 0.5})}), {0.25, 3}, 0));
  EXPECT_TRUE(near(run1(Op::reciprocal_grad, {f32({2}, {1, 3}), f32({2}, {2, 0.5})}), {-4, -0.75}, 0));
  // exp and log, and log's gradient from its input: dy/x.
  EXPECT_TRUE(near(run1(Op::exp, {f32({3}, {0, 1, -1})}), {1, 2.7182817f, 0.36787945f}, 0));
  EXPECT_TRUE(near(run1(Op::log, {f32({3}, {1, 2.7182817f, 0.25})}), {0, 1, -1.3862944f}, 1e-7));
  EXPECT_TRUE(std::isnan(run1(Op::log, {f32({1}, {-1})}).get(0)));
  EXPECT_TRUE(std::isinf(run1(Op::log, {f32({1}, {0})}).get(0)));
  EXPECT_TRUE(near(run1(Op::log_grad, {f32({2}, {1, 3}), f32({2}, {2, 0.5})}), {0.5, 6}, 0));
  // softplus: log(1 + e^x), exactly x above PyTorch's threshold of 20; its gradient dy * sigmoid(x), dy above 20.
  EXPECT_TRUE(near(run1(Op::softplus, {f32({4}, {0, -30, 21, 100})}), {0.6931472f, 9.3576230e-14f, 21, 100}, 1e-7));
  EXPECT_TRUE(near(run1(Op::softplus_grad, {f32({3}, {2, 2, 2}), f32({3}, {0, 19, 21})}),
                   {1, 2 / (1 + std::exp(-19.0)), 2}, 1e-7));
  // Saturation: no overflow to NaN at large |x|.
  EXPECT_TRUE(near(run1(Op::sigmoid, {f32({2}, {-1000, 1000})}), {0, 1}, 0));
  // The tanh gelu against PyTorch 1.13's F.gelu(x, approximate='tanh') in double, at 0, 1, -1 and 3.
  EXPECT_TRUE(near(run1(Op::gelu, {f64({4}, {0, 1, -1, 3})}, A({{"approximate", S("tanh")}})),
                   {0, 0.8411919906082768, -0.15880800939172324, 2.996362607918227}, 1e-15));
  // silu and its gradient against PyTorch 1.13's F.silu in double at 0, 1 and -1: x / (1 + e^-x), and
  // s (1 + x (1 - s)).
  EXPECT_TRUE(near(run1(Op::silu, {f64({3}, {0, 1, -1})}), {0, 0.7310585786300049, -0.2689414213699951}, 1e-15));
  EXPECT_TRUE(near(run1(Op::silu_grad, {f64({3}, {1, 1, 1}), f64({3}, {0, 1, -1})}),
                   {0.5, 0.9276705118714869, 0.07232948812851325}, 1e-15));
  // hardswish x (x + 3) / 6 between -3 and 3, and PyTorch's one-sided gradients there: x / 3 + 1/2 on [-3, 3]
  // (-1/2 at -3, 3/2 at 3), 0 below, 1 above (F.hardswish's backward in 1.13).
  const HostTensor hs_x = f32({7}, {-4, -3, -1.5, 0, 1.5, 3, 4});
  EXPECT_TRUE(near(run1(Op::hardswish, {hs_x}), {0, 0, -0.375, 0, 1.125, 3, 4}, 0));
  EXPECT_TRUE(near(run1(Op::hardswish_grad, {f32({7}, {1, 1, 1, 1, 1, 1, 1}), hs_x}), {0, -0.5, 0, 0.5, 1, 1.5, 1}, 0));
  EXPECT_TRUE(std::isnan(run1(Op::hardswish, {nan}).get(0)));
}

TEST(ReferenceOps, BroadcastingAddMul) {
  // a[2, 1] = [1, 2] against b[3] = [10, 20, 30]: out[i][j] = a[i] + b[j].
  HostTensor s = run1(Op::add, {f32({2, 1}, {1, 2}), f32({3}, {10, 20, 30})});
  EXPECT_EQ(s.type.shape, (Shape{2, 3}));
  EXPECT_TRUE(near(s, {11, 21, 31, 12, 22, 32}, 0));
  // A scalar times [2, 2]; and [2, 1, 2] times [3, 1]: out[i][j][k] = a[i][0][k] * b[j][0].
  EXPECT_TRUE(near(run1(Op::mul, {f32({}, {3}), f32({2, 2}, {1, 2, 3, 4})}), {3, 6, 9, 12}, 0));
  HostTensor m = run1(Op::mul, {f64({2, 1, 2}, {1, 2, 3, 4}), f64({3, 1}, {1, 10, 100})});
  EXPECT_EQ(m.type.shape, (Shape{2, 3, 2}));
  EXPECT_TRUE(near(m, {1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400}, 0));
  // Same shapes: plain elementwise.
  EXPECT_TRUE(near(run1(Op::add, {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})}), {5, 7, 9}, 0));
}

TEST(ReferenceOps, BiasAdd) {
  // x[1, 2, 2] + bias [10, 20] along axis 1 (channels): [[1+10, 2+10], [3+20, 4+20]].
  HostTensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(near(run1(Op::bias_add, {x, f32({2}, {10, 20})}), {11, 12, 23, 24}, 0));
  // Along the last axis (-1): columns get 10 and 20.
  EXPECT_TRUE(near(run1(Op::bias_add, {x, f32({2}, {10, 20})}, A({{"axis", I(-1)}})), {11, 22, 13, 24}, 0));
}

TEST(ReferenceOps, MaxPool) {
  HostTensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  // 2x2 windows, stride 1: the bottom-right element of each window is its max: [[5, 6], [8, 9]].
  EXPECT_TRUE(near(run1(Op::max_pool2d, {x}, A({{"kernel", L({2, 2})}, {"stride", L({1, 1})}})), {5, 6, 8, 9}, 0));
  // Stride defaults to the kernel: one 2x2 window at (0, 0): 5.
  EXPECT_TRUE(near(run1(Op::max_pool2d, {x}, A({{"kernel", L({2, 2})}})), {5}, 0));
  // Padding counts as -inf, not 0: on all-negative input, 3x3 windows with pad 1 and stride 2 start at rows and
  // columns -1 and 1, so their in-image parts are the four 2x2 corners: max(-1, -2, -4, -5) = -1, then
  // max(-2, -3, -5, -6) = -2, max(-4, -5, -7, -8) = -4 and max(-5, -6, -8, -9) = -5.
  HostTensor neg = f32({1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9});
  EXPECT_TRUE(near(run1(Op::max_pool2d, {neg}, A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})),
                   {-1, -2, -4, -5}, 0));
  // 1-D and 3-D: [3, 1, 4, 1, 5] with kernel 2 -> [3, 4]; a 2x2x2 cube -> its max.
  EXPECT_TRUE(near(run1(Op::max_pool1d, {f32({1, 1, 5}, {3, 1, 4, 1, 5})}, A({{"kernel", L({2})}})), {3, 4}, 0));
  EXPECT_TRUE(near(run1(Op::max_pool3d, {f32({1, 1, 2, 2, 2}, {1, 8, 3, 4, 5, 6, 7, 2})}, A({{"kernel", L({2, 2, 2})}})),
                   {8}, 0));
}

TEST(ReferenceOps, AvgPool) {
  HostTensor x = f64({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Attributes a = A({{"kernel", L({3, 3})}, {"stride", L({1, 1})}, {"pad", L({1, 1})}});
  // Corner (0, 0): in-image elements 1 + 2 + 4 + 5 = 12. count_include_pad divides by 9, else by 4.
  // Edge (0, 1): 1+2+3+4+5+6 = 21 over 9 or 6. Centre: 45 / 9 = 5 either way.
  HostTensor with = run1(Op::avg_pool2d, {x}, a);
  EXPECT_TRUE(near(with, {12 / 9., 21 / 9., 16 / 9., 27 / 9., 5, 33 / 9., 24 / 9., 39 / 9., 28 / 9.}, 1e-15));
  a.set("count_include_pad", false);
  HostTensor without = run1(Op::avg_pool2d, {x}, a);
  EXPECT_TRUE(near(without, {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, 1e-15));
  // 1-D: [1, 2, 3, 4] with kernel 2 -> [1.5, 3.5]. global_avg_pool: the mean of each plane.
  EXPECT_TRUE(near(run1(Op::avg_pool1d, {f32({1, 1, 4}, {1, 2, 3, 4})}, A({{"kernel", L({2})}})), {1.5, 3.5}, 0));
  EXPECT_TRUE(near(run1(Op::global_avg_pool, {f32({1, 2, 2, 1}, {1, 2, 3, 5})}), {1.5, 4}, 0));
}

TEST(ReferenceOps, Matmul) {
  // [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[7+18+33, 8+20+36], [28+45+66, 32+50+72]] = [[58,64],[139,154]].
  HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  EXPECT_TRUE(near(run1(Op::matmul, {a, b}), {58, 64, 139, 154}, 0));
  // The same product from stored transposes: a^T is [3, 2], b^T is [2, 3].
  HostTensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  EXPECT_TRUE(near(run1(Op::matmul, {at, bt}, A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})),
                   {58, 64, 139, 154}, 0));
  // Batched a[2, 1, 2] with a shared b[2, 2] = [[1, 2], [3, 4]]: [1, 0] -> [1, 2]; [0, 1] -> [3, 4].
  HostTensor shared = run1(Op::matmul, {f32({2, 1, 2}, {1, 0, 0, 1}), f32({2, 2}, {1, 2, 3, 4})});
  EXPECT_EQ(shared.type.shape, (Shape{2, 1, 2}));
  EXPECT_TRUE(near(shared, {1, 2, 3, 4}, 0));
  // Batched b: batch 0 uses [[1, 2], [3, 4]], batch 1 uses [[5, 6], [7, 8]]; rows [1, 1] sum the rows.
  HostTensor batched = run1(Op::matmul, {f32({2, 1, 2}, {1, 1, 1, 1}), f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})});
  EXPECT_TRUE(near(batched, {4, 6, 12, 14}, 0));
}

TEST(ReferenceOps, MatmulTransposedLayoutsAreBitIdentical) {
  // Both loop nests sum over k in ascending order in double, so a product computed from a stored transpose is
  // bit-identical to the plain one.
  HostTensor a = random(DType::f32, {5, 33}, 1), b = random(DType::f32, {33, 7}, 2);
  HostTensor bt = run1(Op::transpose, {b}, A({{"perm", L({1, 0})}}));
  HostTensor plain = run1(Op::matmul, {a, b});
  HostTensor trans = run1(Op::matmul, {a, bt}, A({{"transpose_b", B(true)}}));
  EXPECT_EQ(plain.data, trans.data);
}

TEST(ReferenceOps, DataMovement) {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor r = run1(Op::reshape, {x}, A({{"shape", L({3, -1})}}));
  EXPECT_EQ(r.type.shape, (Shape{3, 2}));
  EXPECT_TRUE(near(r, {1, 2, 3, 4, 5, 6}, 0));
  EXPECT_TRUE(near(run1(Op::transpose, {x}, A({{"perm", L({1, 0})}})), {1, 4, 2, 5, 3, 6}, 0));
  // perm [2, 0, 1] of x[1, 2, 3] (x[0][i][j] = 3i + j + 1): out[j][0][i] = x[0][i][j] -> out[3, 1, 2].
  HostTensor t3 = run1(Op::transpose, {f32({1, 2, 3}, {1, 2, 3, 4, 5, 6})}, A({{"perm", L({2, 0, 1})}}));
  EXPECT_EQ(t3.type.shape, (Shape{3, 1, 2}));
  EXPECT_TRUE(near(t3, {1, 4, 2, 5, 3, 6}, 0));
  // concat along axis 1: rows [1,2,3] + [7] and [4,5,6] + [8].
  EXPECT_TRUE(near(run1(Op::concat, {x, f32({2, 1}, {7, 8})}, A({{"axis", I(1)}})), {1, 2, 3, 7, 4, 5, 6, 8}, 0));
  EXPECT_TRUE(near(run1(Op::concat, {x, x}, A({{"axis", I(0)}})), {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 0));
  // slice [1, 3) along the last axis: [[2, 3], [5, 6]].
  EXPECT_TRUE(near(run1(Op::slice, {x}, A({{"axis", I(-1)}, {"start", I(1)}, {"end", I(3)}})), {2, 3, 5, 6}, 0));
  // Movement works for every dtype, bf16 included (it only moves bytes).
  HostTensor h = tensor(DType::bf16, {2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(near(run1(Op::transpose, {h}, A({{"perm", L({1, 0})}})), {1, 3, 2, 4}, 0));
}

TEST(ReferenceOps, Softmax) {
  // softmax([0, ln 3]) = [1, 3] / 4.
  EXPECT_TRUE(near(run1(Op::softmax, {f64({2}, {0, std::log(3.0)})}), {0.25, 0.75}, 1e-15));
  // Along axis 0 of [[0, 0], [ln 3, 0]]: column 0 is [1/4, 3/4], column 1 is [1/2, 1/2].
  EXPECT_TRUE(near(run1(Op::softmax, {f64({2, 2}, {0, 0, std::log(3.0), 0})}, A({{"axis", I(0)}})),
                   {0.25, 0.5, 0.75, 0.5}, 1e-15));
  // Causal over zeros[2, 3]: row 0 keeps column 0 only -> [1, 0, 0]; row 1 keeps columns 0..1 -> [1/2, 1/2, 0].
  // A huge masked value must not leak into the row (masked means -inf, whatever x holds).
  HostTensor causal = run1(Op::softmax, {f32({1, 2, 3}, {0, 100, 100, 0, 0, 100})}, A({{"causal", B(true)}}));
  EXPECT_TRUE(near(causal, {1, 0, 0, 0.5, 0.5, 0}, 0));
  // The same two rows as rows 1 and 2 of a causal matrix (causal_offset 1): they keep 2 and 3 columns.
  HostTensor offset = run1(Op::softmax, {f32({1, 2, 3}, {0, 0, 100, 0, 0, 0})},
                           A({{"causal", B(true)}, {"causal_offset", I(1)}}));
  EXPECT_TRUE(near(offset, {0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-7));
}

TEST(ReferenceOps, Embedding) {
  HostTensor table = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  EXPECT_TRUE(near(run1(Op::embedding, {table, i64({3}, {2, 0, 2})}), {20, 21, 0, 1, 20, 21}, 0));
  EXPECT_TRUE(near(run1(Op::embedding, {table, i32({1, 2}, {1, 1})}), {10, 11, 10, 11}, 0));
  auto bad = run(Op::embedding, {table, i64({2, 2}, {0, 1, 3, 0})});
  ASSERT_FALSE(bad);
  for (std::string_view f : {"id 3", "[1,0]", "[0, 3)"}) EXPECT_NE(bad.error().what.find(f), std::string::npos) << error_of(bad);
}

TEST(ReferenceOps, Reductions) {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(near(run1(Op::reduce_sum, {x}), {21}, 0));
  EXPECT_TRUE(near(run1(Op::reduce_sum, {x}, A({{"axes", L({0})}})), {5, 7, 9}, 0));
  HostTensor kept = run1(Op::reduce_sum, {x}, A({{"axes", L({1})}, {"keepdims", B(true)}}));
  EXPECT_EQ(kept.type.shape, (Shape{2, 1}));
  EXPECT_TRUE(near(kept, {6, 15}, 0));
  EXPECT_TRUE(near(run1(Op::mean, {x}, A({{"axes", L({-1})}})), {2, 5}, 0));
  EXPECT_TRUE(near(run1(Op::mean, {x}), {3.5}, 0));
  // Integers sum exactly, beyond f32's 24-bit mantissa: 2^24 + 1.
  EXPECT_TRUE(near(run1(Op::reduce_sum, {i64({2}, {16777216, 1})}), {16777217}, 0));
  EXPECT_TRUE(near(run1(Op::reduce_sum, {i32({2, 2}, {1, 2, 3, 4})}, A({{"axes", L({0})}})), {4, 6}, 0));
}

TEST(ReferenceOps, CrossEntropy) {
  // Row 0: logits [0, 0], label 0: logsumexp = ln 2, loss ln 2. Row 1: [0, ln 3], label 1:
  // logsumexp = ln(1 + 3) = ln 4, loss ln 4 - ln 3. Mean: (ln 2 + ln 4 - ln 3)/2 = ln(8/3)/2.
  HostTensor loss = run1(Op::cross_entropy, {f64({2, 2}, {0, 0, 0, std::log(3.0)}), i64({2}, {0, 1})});
  EXPECT_EQ(loss.type, (TensorType{DType::f64, {}}));  // f64 logits give an f64 loss (gradient checks)
  EXPECT_TRUE(near(loss, {std::log(8.0 / 3) / 2}, 1e-15));
  // With a spatial axis: logits[1, 2, 2] (classes on axis 1), position 0 has logits [0, 0] and label 1 (ln 2),
  // position 1 has logits [ln 3, 0] and label 0 (ln 4 - ln 3): the same mean.
  HostTensor spatial = run1(Op::cross_entropy, {f32({1, 2, 2}, {0, std::log(3.0), 0, 0}), i32({1, 2}, {1, 0})});
  EXPECT_EQ(spatial.type, (TensorType{DType::f32, {}}));
  EXPECT_TRUE(near(spatial, {std::log(8.0 / 3) / 2}, 1e-7));
  // A label outside [0, C) names the label and its position.
  auto bad = run(Op::cross_entropy, {f32({2, 3, 2}), i64({2, 2}, {0, 1, 2, 7})});
  ASSERT_FALSE(bad);
  for (std::string_view f : {"label 7", "[1,1]", "[0, 3)"}) EXPECT_NE(bad.error().what.find(f), std::string::npos) << error_of(bad);
  auto negative = run(Op::cross_entropy, {f32({1, 3}), i64({1}, {-1})});
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().what.find("label -1"), std::string::npos) << error_of(negative);
}

TEST(ReferenceOps, OptimizerUpdates) {
  // sgd: d = 0.5 + 0.1*1 = 0.6; w = 1 - 0.1*0.6 = 0.94.
  EXPECT_TRUE(near(run1(Op::sgd_update, {f64({1}, {1}), f64({1}, {0.5})}, A({{"lr", F(0.1)}, {"weight_decay", F(0.1)}})),
                   {0.94}, 1e-15));
  // momentum: v = 0.9*0.2 + 0.5 = 0.68; w = 1 - 0.1*0.68 = 0.932. Nesterov: w = 1 - 0.1*(0.5 + 0.9*0.68) = 0.8888.
  auto m = run(Op::momentum_update, {f64({1}, {1}), f64({1}, {0.2}), f64({1}, {0.5})}, A({{"lr", F(0.1)}}));
  ASSERT_TRUE(m) << m.error().str();
  EXPECT_TRUE(near((*m)[0], {0.932}, 1e-15));
  EXPECT_TRUE(near((*m)[1], {0.68}, 1e-15));
  auto n = run(Op::momentum_update, {f64({1}, {1}), f64({1}, {0.2}), f64({1}, {0.5})},
               A({{"lr", F(0.1)}, {"nesterov", B(true)}}));
  ASSERT_TRUE(n) << n.error().str();
  EXPECT_TRUE(near((*n)[0], {0.8888}, 1e-15));
  // adam from zero state, g = 0.5: t = 1; m = 0.1*0.5 = 0.05; v = 0.001*0.25 = 0.00025; m_hat = 0.05/0.1 = 0.5;
  // v_hat = 0.00025/0.001 = 0.25; w = 1 - 0.1*0.5/(0.5 + 1e-8).
  auto ad = run(Op::adam_update, {f64({1}, {1}), f64({1}, {0}), f64({1}, {0}), f32({}, {0}), f64({1}, {0.5})},
                A({{"lr", F(0.1)}}));
  ASSERT_TRUE(ad) << ad.error().str();
  EXPECT_TRUE(near((*ad)[0], {1 - 0.05 / (0.5 + 1e-8)}, 1e-14));
  EXPECT_TRUE(near((*ad)[1], {0.05}, 1e-15));
  EXPECT_TRUE(near((*ad)[2], {0.00025}, 1e-15));
  EXPECT_TRUE(near((*ad)[3], {1}, 0));
  // AdamW (decoupled, wd 0.1): no decay in the gradient, so the same moments; w = 1*(1 - 0.1*0.1) - the same step.
  auto adw = run(Op::adam_update, {f64({1}, {1}), f64({1}, {0}), f64({1}, {0}), f32({}, {0}), f64({1}, {0.5})},
                 A({{"lr", F(0.1)}, {"weight_decay", F(0.1)}, {"decoupled_weight_decay", B(true)}}));
  ASSERT_TRUE(adw) << adw.error().str();
  EXPECT_TRUE(near((*adw)[0], {0.99 - 0.05 / (0.5 + 1e-8)}, 1e-14));
  EXPECT_TRUE(near((*adw)[1], {0.05}, 1e-15));
}

// With the optional lr_scale input, an update steps with lr x lr_scale: the same bits as lr = that product.
TEST(ReferenceOps, UpdatesWithALearningRateScale) {
  const double scale = 0.375;  // exact in f32
  auto w = [] { return f64({3}, {1, -2, 0.25}); };
  auto g = [] { return f64({3}, {0.5, 0.125, -3}); };
  struct Case {
    Op op;
    std::vector<HostTensor> state;
  };
  for (const Case& c : {Case{Op::sgd_update, {}}, Case{Op::momentum_update, {f64({3}, {0.2, 0, -1})}},
                        Case{Op::adam_update, {f64({3}, {0.1, 0, 0}), f64({3}, {0.5, 1, 2}), f32({}, {2})}}}) {
    std::vector<HostTensor> plain = {w()}, scaled = {w()};
    for (const HostTensor& t : c.state) {
      plain.push_back(t);
      scaled.push_back(t);
    }
    plain.push_back(g());
    scaled.push_back(g());
    scaled.push_back(f32({}, {scale}));
    auto expected = run(c.op, plain, A({{"lr", F(0.1 * scale)}, {"weight_decay", F(0.01)}}));
    auto got = run(c.op, scaled, A({{"lr", F(0.1)}, {"weight_decay", F(0.01)}}));
    ASSERT_TRUE(expected && got) << op_name(c.op) << ": " << (got ? expected.error().str() : got.error().str());
    ASSERT_EQ(got->size(), expected->size());
    for (size_t i = 0; i < got->size(); ++i)
      EXPECT_TRUE((*got)[i].data == (*expected)[i].data) << op_name(c.op) << " output " << i;
  }
  auto bad = run(Op::sgd_update, {w(), g(), f32({1}, {1})}, A({{"lr", F(0.1)}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("lr_scale must be f32[], got f32[1]"), std::string::npos) << error_of(bad);
}

// The KernelCall contract for in-place ops: the output pointer is the input pointer.
TEST(ReferenceOps, UpdatesRunInPlace) {
  HostTensor w = f32({2}, {1, 2}), v = f32({2}, {0, 0}), g = f32({2}, {1, -1});
  Attributes a = *normalize_attrs(op_def(Op::momentum_update), A({{"lr", F(0.5)}, {"momentum", F(0.5)}}));
  std::vector<TensorRef> ins = {{&w.type, w.data.data()}, {&v.type, v.data.data()}, {&g.type, g.data.data()}};
  std::vector<TensorRef> outs = {ins[0], ins[1]};
  for (int step = 0; step < 2; ++step) ASSERT_TRUE(run_reference_kernel(KernelCall{Op::momentum_update, &a, ins, outs, nullptr, 0}));
  // Step 1: v = g = [1, -1], w = [0.5, 2.5]. Step 2: v = 0.5*v + g = [1.5, -1.5], w = [-0.25, 3.25].
  EXPECT_TRUE(near(v, {1.5, -1.5}, 0));
  EXPECT_TRUE(near(w, {-0.25, 3.25}, 0));
}

TEST(ReferenceOps, BnRunningUpdate) {
  // invstd 0.5 means var + eps = 4, so var = 4 - 1e-5; count 4 makes the unbiased variance var * 4/3.
  // rm = 0.9*0 + 0.1*2 = 0.2; rv = 0.9*1 + 0.1*(4 - 1e-5)*4/3.
  auto r = run(Op::bn_running_update, {f64({1}, {0}), f64({1}, {1}), f64({1}, {2}), f64({1}, {0.5})},
               A({{"count", I(4)}}));
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_TRUE(near((*r)[0], {0.2}, 1e-15));
  EXPECT_TRUE(near((*r)[1], {0.9 + 0.1 * (4 - 1e-5) * 4 / 3}, 1e-15));
}

TEST(ReferenceOps, ConstantAndCopies) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    HostTensor out(TensorType{t, {3}});
    Attributes a = A({{"value", F(2.5)}});
    std::vector<TensorRef> outs = {{&out.type, out.data.data()}};
    ASSERT_TRUE(run_reference_kernel(KernelCall{Op::constant, &a, {}, outs, nullptr, 0}));
    double expect = is_float(t) ? 2.5 : 2;  // integers truncate
    EXPECT_TRUE(near(out, {expect, expect, expect}, 0));
  }
  HostTensor x = f32({2}, {1.5, -7});
  EXPECT_EQ(run1(Op::swap_out, {x}).data, x.data);
  EXPECT_EQ(run1(Op::swap_in, {x}).data, x.data);
}

TEST(ReferenceOps, Errors) {
  auto f16 = run(Op::relu, {tensor(DType::f16, {2})});
  ASSERT_FALSE(f16);
  EXPECT_EQ(f16.error().str(), "reference backend: dtype f16 is not supported for relu");
  auto bf = run(Op::matmul, {tensor(DType::bf16, {2, 2}), tensor(DType::bf16, {2, 2})});
  ASSERT_FALSE(bf);
  EXPECT_EQ(bf.error().str(), "reference backend: dtype bf16 is not supported for matmul");
  // Sources are fed by the runtime, not run.
  HostTensor out = f32({1});
  std::vector<TensorRef> outs = {{&out.type, out.data.data()}};
  auto src = run_reference_kernel(KernelCall{Op::param, nullptr, {}, outs, nullptr, 0});
  ASSERT_FALSE(src);
  EXPECT_NE(src.error().what.find("param is a source"), std::string::npos) << src.error().what;
}

}  // namespace
}  // namespace lms
