// Op costs checked against hand computation: FLOPs (2 per multiply-add) of convolutions, transposed
// convolutions, matmul, normalization, pooling, losses and updates, and bytes read and written (all inputs and
// all outputs, except the gathers slice and embedding, which read only what they copy out).
#include "shape_test_util.h"

namespace lms {
namespace {
using namespace op_test;

// Infers the outputs, then asks the op's cost for them.
Cost cost_of(Op op, const Types& in, Attributes a = {}) {
  auto n = normalize_attrs(op_def(op), std::move(a));
  if (!n) {
    ADD_FAILURE() << n.error().str();
    return {};
  }
  auto outs = infer_types(op, in, *n);
  if (!outs) {
    ADD_FAILURE() << outs.error().str();
    return {};
  }
  return op_cost(op, in, *n, *outs);
}

constexpr int64_t kF32 = 4;  // bytes per f32 element
constexpr int64_t kI64 = 8;  // bytes per i64 element

TEST(CostConv, Conv2dHandComputed) {
  // ResNet stem: x[8,3,224,224] * w[64,3,7,7], stride 2, pad 3 -> [8,64,112,112].
  Cost c = cost_of(Op::conv2d, {f32({8, 3, 224, 224}), f32({64, 3, 7, 7})},
                   A({{"stride", L({2, 2})}, {"pad", L({3, 3})}}));
  // 2 * N*Cout*OH*OW * Cin*KH*KW = 2 * 8*64*112*112 * 3*7*7 = 2 * 6,422,528 * 147.
  EXPECT_DOUBLE_EQ(c.flops, 1888223232.0);
  EXPECT_EQ(c.bytes_read, (8 * 3 * 224 * 224 + 64 * 3 * 7 * 7) * kF32);  // 4,816,896 + 37,632
  EXPECT_EQ(c.bytes_written, 8 * 64 * 112 * 112 * kF32);                 // 25,690,112
}

TEST(CostConv, GroupsDivideTheWork) {
  // x[2,8,10,10] * w[16,4,3,3], groups 2 -> [2,16,8,8]: each output sees Cin/groups = 4 channels.
  Cost c = cost_of(Op::conv2d, {f32({2, 8, 10, 10}), f32({16, 4, 3, 3})}, A({{"groups", I(2)}}));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 16 * 8 * 8 * 4 * 3 * 3);  // 73,728
  // conv1d and conv3d share the formula.
  Cost c1 = cost_of(Op::conv1d, {f32({4, 2, 100}), f32({6, 2, 5})}, A({{"stride", L({3})}}));
  EXPECT_DOUBLE_EQ(c1.flops, 2.0 * 4 * 6 * 32 * 2 * 5);
  Cost c3 = cost_of(Op::conv3d, {f32({1, 1, 8, 9, 10}), f32({2, 1, 3, 3, 3})});
  EXPECT_DOUBLE_EQ(c3.flops, 2.0 * 1 * 2 * (6 * 7 * 8) * 1 * 27);
}

TEST(CostConv, TransposedCountsInputPoints) {
  // x[2,16,8,8] * w[16,8,4,4], stride 2, pad 1 -> [2,8,16,16]: 2 * N*Cin*IH*IW * (Cout/g)*KH*KW.
  Cost c = cost_of(Op::conv_transpose2d, {f32({2, 16, 8, 8}), f32({16, 8, 4, 4})},
                   A({{"stride", L({2, 2})}, {"pad", L({1, 1})}}));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 16 * 64 * 8 * 16);  // 524,288
  EXPECT_EQ(c.bytes_read, (2 * 16 * 8 * 8 + 16 * 8 * 4 * 4) * kF32);
  EXPECT_EQ(c.bytes_written, 2 * 8 * 16 * 16 * kF32);
}

TEST(CostMatmul, FlopsAndBytes) {
  // [2,3,4,8] @ [8,5]: batch 6, M 4, N 5, K 8.
  Cost c = cost_of(Op::matmul, {f32({2, 3, 4, 8}), f32({8, 5})});
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 6 * 4 * 5 * 8);  // 1,920
  EXPECT_EQ(c.bytes_read, (2 * 3 * 4 * 8 + 8 * 5) * kF32);
  EXPECT_EQ(c.bytes_written, 2 * 3 * 4 * 5 * kF32);
  // With a transposed, K is a's second-to-last dimension.
  Cost t = cost_of(Op::matmul, {f32({8, 4}), f32({8, 16})}, A({{"transpose_a", true}}));
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 4 * 16 * 8);
}

TEST(CostNorm, CountsEveryOutput) {
  // 8 flops per element (see norm.cc); bytes include gamma, beta, mean and invstd.
  Cost c = cost_of(Op::batch_norm, {f32({8, 16, 4, 4}), f32({16}), f32({16})});
  EXPECT_DOUBLE_EQ(c.flops, 8.0 * 2048);
  EXPECT_EQ(c.bytes_read, (2048 + 16 + 16) * kF32);
  EXPECT_EQ(c.bytes_written, (2048 + 16 + 16) * kF32);
  Cost l = cost_of(Op::layer_norm, {f32({2, 5, 64}), f32({64}), f32({64})});
  EXPECT_EQ(l.bytes_written, (640 + 10 + 10) * kF32);
}

TEST(CostPool, OneOpPerWindowElement) {
  // 56*56 outputs per channel, 3x3 windows.
  Cost c = cost_of(Op::max_pool2d, {f32({1, 64, 112, 112})},
                   A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}}));
  EXPECT_DOUBLE_EQ(c.flops, 64.0 * 56 * 56 * 9);
  EXPECT_EQ(c.bytes_read, 64 * 112 * 112 * kF32);
  EXPECT_EQ(c.bytes_written, 64 * 56 * 56 * kF32);
  Cost g = cost_of(Op::global_avg_pool, {f32({2, 512, 7, 7})});
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 512 * 49);
  EXPECT_EQ(g.bytes_written, 2 * 512 * kF32);
}

TEST(CostDataMovement, BytesOnly) {
  Cost r = cost_of(Op::reshape, {f32({2, 3, 4})}, A({{"shape", L({6, 4})}}));
  EXPECT_EQ(r.flops, 0);
  EXPECT_EQ(r.bytes_read, 24 * kF32);
  EXPECT_EQ(r.bytes_written, 24 * kF32);
  Cost cat = cost_of(Op::concat, {f32({2, 3}), f32({2, 5})}, A({{"axis", I(1)}}));
  EXPECT_EQ(cat.bytes_read, 16 * kF32);
  EXPECT_EQ(cat.bytes_written, 16 * kF32);
  // Gathers read only what they copy out: 4x5 of the 4x10 input; 28 rows of a 50000-row table plus the ids.
  Cost s = cost_of(Op::slice, {f32({4, 10})}, A({{"axis", I(1)}, {"start", I(2)}, {"end", I(7)}}));
  EXPECT_EQ(s.bytes_read, 20 * kF32);
  EXPECT_EQ(s.bytes_written, 20 * kF32);
  Cost e = cost_of(Op::embedding, {f32({50000, 16}), i64({4, 7})});
  EXPECT_EQ(e.bytes_read, 28 * kI64 + 28 * 16 * kF32);
  EXPECT_EQ(e.bytes_written, 28 * 16 * kF32);
}

TEST(CostLoss, ReductionsAndCrossEntropy) {
  Cost m = cost_of(Op::mean, {f32({2, 3, 4})}, A({{"axes", L({1})}}));
  EXPECT_DOUBLE_EQ(m.flops, 24.0);
  EXPECT_EQ(m.bytes_written, 8 * kF32);
  // 4 flops per logit (see loss.cc); the loss is one f32.
  Cost ce = cost_of(Op::cross_entropy, {f32({32, 10}), i64({32})});
  EXPECT_DOUBLE_EQ(ce.flops, 4.0 * 320);
  EXPECT_EQ(ce.bytes_read, 320 * kF32 + 32 * kI64);
  EXPECT_EQ(ce.bytes_written, kF32);
  Cost sm = cost_of(Op::softmax, {f32({2, 10})});
  EXPECT_DOUBLE_EQ(sm.flops, 5.0 * 20);  // see linalg.cc
}

TEST(CostUpdate, ReadsAllStateWritesAliases) {
  Cost a = cost_of(Op::adam_update, {f32({10}), f32({10}), f32({10}), f32({}), f32({10})}, A({{"lr", 1e-3}}));
  EXPECT_DOUBLE_EQ(a.flops, 16.0 * 10);  // see update.cc
  EXPECT_EQ(a.bytes_read, (4 * 10 + 1) * kF32);
  EXPECT_EQ(a.bytes_written, (3 * 10 + 1) * kF32);
  Cost s = cost_of(Op::sgd_update, {f32({10}), f32({10})}, A({{"lr", 0.1}}));
  EXPECT_DOUBLE_EQ(s.flops, 4.0 * 10);
  EXPECT_EQ(s.bytes_read, 20 * kF32);
  EXPECT_EQ(s.bytes_written, 10 * kF32);
}

}  // namespace
}  // namespace lms
