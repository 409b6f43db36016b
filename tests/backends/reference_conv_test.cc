// The reference convolutions: hand-worked forward cases (values derived in the comments), the transposed
// convolution checked as the adjoint of the convolution, and both convolution gradients checked against
// central differences of the forward kernel in f64, over odd sizes, strides, padding, dilation and groups.
#include "reference_test_util.h"

namespace lms {
namespace {
using namespace ref_test;

// x = 1..9 as a 3x3 image: [[1,2,3],[4,5,6],[7,8,9]].
HostTensor image3x3(DType t = DType::f32) { return tensor(t, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}); }

TEST(ReferenceConv, Conv2dValid) {
  // w = [[1,2],[3,4]]: out[i][j] = x[i][j] + 2x[i][j+1] + 3x[i+1][j] + 4x[i+1][j+1]
  // out[0][0] = 1 + 4 + 12 + 20 = 37; out[0][1] = 2 + 6 + 15 + 24 = 47
  // out[1][0] = 4 + 10 + 21 + 32 = 67; out[1][1] = 5 + 12 + 24 + 36 = 77
  for (DType t : {DType::f32, DType::f64}) {
    HostTensor y = run1(Op::conv2d, {image3x3(t), tensor(t, {1, 1, 2, 2}, {1, 2, 3, 4})});
    EXPECT_EQ(y.type, (TensorType{t, {1, 1, 2, 2}}));
    EXPECT_TRUE(near(y, {37, 47, 67, 77}, 0));
  }
}

TEST(ReferenceConv, Conv2dStridePad) {
  // A 3x3 kernel of ones, pad 1, stride 2: outputs centred on (0,0), (0,2), (2,0), (2,2), each the sum of the
  // in-image part of the 3x3 neighbourhood: 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24, 5+6+8+9 = 28.
  HostTensor w = f32({1, 1, 3, 3}, std::vector<double>(9, 1.0));
  HostTensor y = run1(Op::conv2d, {image3x3(), w}, A({{"stride", L({2, 2})}, {"pad", L({1, 1})}}));
  EXPECT_EQ(y.type.shape, (Shape{1, 1, 2, 2}));
  EXPECT_TRUE(near(y, {12, 16, 24, 28}, 0));
}

TEST(ReferenceConv, Conv2dDilation) {
  // A 2x2 kernel of ones with dilation 2 touches the four corners: 1 + 3 + 7 + 9 = 20.
  HostTensor y = run1(Op::conv2d, {image3x3(), f32({1, 1, 2, 2}, {1, 1, 1, 1})}, A({{"dilation", L({2, 2})}}));
  EXPECT_TRUE(near(y, {20}, 0));
  // Dilation along one dimension only, with pad 1 along the other: kernel [1,1] along W dilated by 2 reads
  // columns j-1 and j+1 (pad 1): row 0 -> [0+2, 1+3, 2+0] = [2, 4, 2].
  HostTensor y2 = run1(Op::conv2d, {image3x3(), f32({1, 1, 1, 2}, {1, 1})},
                       A({{"dilation", L({1, 2})}, {"pad", L({0, 1})}}));
  EXPECT_EQ(y2.type.shape, (Shape{1, 1, 3, 3}));
  EXPECT_TRUE(near(y2, {2, 4, 2, 5, 10, 5, 8, 16, 8}, 0));
}

TEST(ReferenceConv, Conv2dGroups) {
  // Two channels [2] and [3]; groups 2 keeps them apart: weights 10 and 100 give [20, 300].
  HostTensor x = f32({1, 2, 1, 1}, {2, 3});
  EXPECT_TRUE(near(run1(Op::conv2d, {x, f32({2, 1, 1, 1}, {10, 100})}, A({{"groups", I(2)}})), {20, 300}, 0));
  // groups 1 mixes them: w = [[1,1],[1,-1]] gives [2+3, 2-3] = [5, -1].
  EXPECT_TRUE(near(run1(Op::conv2d, {x, f32({2, 2, 1, 1}, {1, 1, 1, -1})}), {5, -1}, 0));
}

TEST(ReferenceConv, Conv1dAndConv3d) {
  // conv1d of 1..5 with [1, 0, -1], pad 1: out[i] = x[i-1] - x[i+1] (zeros outside): [-2, -2, -2, -2, 4].
  HostTensor y = run1(Op::conv1d, {f32({1, 1, 5}, {1, 2, 3, 4, 5}), f32({1, 1, 3}, {1, 0, -1})}, A({{"pad", L({1})}}));
  EXPECT_TRUE(near(y, {-2, -2, -2, -2, 4}, 0));
  // conv3d of 1..8 in a 2x2x2 cube with a 2x2x2 kernel of ones: 1+...+8 = 36.
  HostTensor y3 = run1(Op::conv3d, {f32({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), f32({1, 1, 2, 2, 2}, std::vector<double>(8, 1))});
  EXPECT_TRUE(near(y3, {36}, 0));
}

TEST(ReferenceConv, ConvTranspose2d) {
  HostTensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  HostTensor ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  // Stride 2 with a 2x2 kernel of ones: each input becomes a 2x2 block of a 4x4 output.
  HostTensor y = run1(Op::conv_transpose2d, {x, ones}, A({{"stride", L({2, 2})}}));
  EXPECT_EQ(y.type.shape, (Shape{1, 1, 4, 4}));
  EXPECT_TRUE(near(y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0));
  // Stride 1: overlapping 2x2 blocks add up: [[1, 1+2, 2], [1+3, 1+2+3+4, 2+4], [3, 3+4, 4]].
  EXPECT_TRUE(near(run1(Op::conv_transpose2d, {x, ones}), {1, 3, 2, 4, 10, 6, 3, 7, 4}, 0));
  // Stride 2, pad 1 crops one row and column from each side of the 4x4: its centre [[1, 2], [3, 4]].
  EXPECT_TRUE(near(run1(Op::conv_transpose2d, {x, ones}, A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})),
                   {1, 2, 3, 4}, 0));
  // output_pad 1 extends the end: a 5x5 output whose last row and column receive nothing.
  HostTensor padded = run1(Op::conv_transpose2d, {x, ones}, A({{"stride", L({2, 2})}, {"output_pad", L({1, 1})}}));
  EXPECT_EQ(padded.type.shape, (Shape{1, 1, 5, 5}));
  EXPECT_TRUE(near(padded, {1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0}, 0));
}

TEST(ReferenceConv, ConvTranspose1dGroups) {
  // Two groups of one channel: x0 = [1, 2] with w0 = [1, 10] gives [1, 10 + 2, 20] = [1, 12, 20];
  // x1 = [3, 4] with w1 = [2, 20] gives [6, 60 + 8, 80] = [6, 68, 80].
  HostTensor y = run1(Op::conv_transpose1d, {f32({1, 2, 2}, {1, 2, 3, 4}), f32({2, 1, 2}, {1, 10, 2, 20})},
                      A({{"groups", I(2)}}));
  EXPECT_EQ(y.type.shape, (Shape{1, 2, 3}));
  EXPECT_TRUE(near(y, {1, 12, 20, 6, 68, 80}, 0));
}

// One convolution configuration for the property checks below.
struct ConvCase {
  Op op;
  Shape x, w;
  IntList stride, pad, dilation;
  int64_t groups;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {Op::conv2d, {2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},  // odd sizes, groups, mixed stride
      {Op::conv2d, {1, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {Op::conv2d, {1, 2, 6, 7}, {2, 1, 2, 3}, {3, 2}, {1, 1}, {2, 1}, 2},  // stride 3 skips inputs
      {Op::conv1d, {2, 3, 9}, {4, 3, 3}, {2}, {2}, {3}, 1},
      {Op::conv3d, {1, 2, 4, 3, 5}, {2, 1, 2, 2, 3}, {1, 2, 2}, {1, 0, 1}, {1, 1, 1}, 2},
  };
  return cases;
}

Attributes conv_attrs(const ConvCase& c) {
  return A({{"stride", L(c.stride)}, {"pad", L(c.pad)}, {"dilation", L(c.dilation)}, {"groups", I(c.groups)}});
}

TEST(ReferenceConv, BackwardDataMatchesFiniteDifferences) {
  for (size_t i = 0; i < conv_cases().size(); ++i) {
    const ConvCase& c = conv_cases()[i];
    SCOPED_TRACE(fmt::format("case {}", i));
    HostTensor x = random(DType::f64, c.x, 11 + i), w = random(DType::f64, c.w, 23 + i);
    HostTensor y = run1(c.op, {x, w}, conv_attrs(c));
    HostTensor r = random(DType::f64, y.type.shape, 37 + i);  // L = sum(conv(x, w) * r), so dL/dy = r
    Attributes a = conv_attrs(c);
    a.set("x_shape", L(c.x));
    HostTensor dx = run1(Op::conv_backward_data, {r, w}, a);
    auto loss = [&](const HostTensor& xp) { return dot(run1(c.op, {xp, w}, conv_attrs(c)), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss, x, dx, 1e-5, 1e-7));
  }
}

TEST(ReferenceConv, BackwardFilterMatchesFiniteDifferences) {
  for (size_t i = 0; i < conv_cases().size(); ++i) {
    const ConvCase& c = conv_cases()[i];
    SCOPED_TRACE(fmt::format("case {}", i));
    HostTensor x = random(DType::f64, c.x, 41 + i), w = random(DType::f64, c.w, 53 + i);
    HostTensor y = run1(c.op, {x, w}, conv_attrs(c));
    HostTensor r = random(DType::f64, y.type.shape, 67 + i);
    Attributes a = conv_attrs(c);
    a.set("w_shape", L(c.w));
    HostTensor dw = run1(Op::conv_backward_filter, {x, r}, a);
    auto loss = [&](const HostTensor& wp) { return dot(run1(c.op, {x, wp}, conv_attrs(c)), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss, w, dw, 1e-5, 1e-7));
  }
}

// A transposed convolution is the adjoint of the convolution with the same weight and geometry:
// <conv(a, w), b> = <a, conv_transpose(b, w)> for all a, b. conv's w[Co, Ci/g, k] is conv_transpose's
// w[Cin_t = Co, Cout_t/g = Ci/g, k], so the very same tensor serves both.
TEST(ReferenceConv, TransposeIsTheAdjointOfConv) {
  struct Case {
    Op conv, transpose;
    Shape a, w;
    IntList stride, pad, dilation, output_pad;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {Op::conv2d, Op::conv_transpose2d, {2, 4, 7, 8}, {6, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 2},
      {Op::conv1d, Op::conv_transpose1d, {1, 2, 10}, {3, 2, 3}, {3}, {0}, {2}, {2}, 1},
      {Op::conv3d, Op::conv_transpose3d, {1, 2, 5, 4, 6}, {2, 2, 2, 1, 3}, {2, 1, 2}, {1, 0, 1}, {1, 1, 1},
       {1, 0, 1}, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(fmt::format("case {}", i));
    Attributes fwd = A({{"stride", L(c.stride)}, {"pad", L(c.pad)}, {"dilation", L(c.dilation)}, {"groups", I(c.groups)}});
    Attributes tr = fwd;
    tr.set("output_pad", L(c.output_pad));
    HostTensor a = random(DType::f64, c.a, 101 + i), w = random(DType::f64, c.w, 103 + i);
    HostTensor y = run1(c.conv, {a, w}, fwd);
    HostTensor b = random(DType::f64, y.type.shape, 107 + i);
    HostTensor t = run1(c.transpose, {b, w}, tr);
    // The transposed output must have a's shape (output_pad chooses among the sizes stride makes ambiguous).
    ASSERT_EQ(t.type.shape, c.a);
    EXPECT_NEAR(dot(y, b), dot(a, t), 1e-10 * std::max(1.0, std::abs(dot(y, b))));
  }
}

TEST(ReferenceConv, F32AccumulatesInDouble) {
  // 1 + 1e-8 * 4096 summed in float one term at a time would lose every 1e-8 (below half an ulp of 1);
  // a double accumulator keeps them: 1 + 4.096e-5, then rounded once to float.
  const int64_t n = 4096;
  std::vector<double> xs(n + 1, 1e-8);
  xs[0] = 1;
  HostTensor y = run1(Op::conv1d, {f32({1, 1, n + 1}, xs), f32({1, 1, n + 1}, std::vector<double>(n + 1, 1.0))});
  EXPECT_EQ(y.as<float>()[0], static_cast<float>(1 + 4096 * static_cast<double>(1e-8f)));
  EXPECT_NE(y.as<float>()[0], 1.0f);
}

TEST(ReferenceConv, Errors) {
  // f16 and bf16 are refused with a clear error, not computed.
  HostTensor xb = tensor(DType::bf16, {1, 1, 3, 3}), wb = tensor(DType::bf16, {1, 1, 2, 2});
  auto r = run(Op::conv2d, {xb, wb});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "reference backend: dtype bf16 is not supported for conv2d");
  auto h = run(Op::conv_transpose2d, {tensor(DType::f16, {1, 1, 3, 3}), tensor(DType::f16, {1, 1, 2, 2})});
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().str(), "reference backend: dtype f16 is not supported for conv_transpose2d");
  // Output buffers typed differently from what the shape rule gives are refused before any memory is touched.
  HostTensor x = image3x3(), w = f32({1, 1, 2, 2}), y = f32({1, 1, 3, 3});
  std::vector<TensorRef> ins = {{&x.type, x.data.data()}, {&w.type, w.data.data()}};
  std::vector<TensorRef> outs = {{&y.type, y.data.data()}};
  Attributes none;
  auto bad = run_reference_kernel(KernelCall{Op::conv2d, &none, ins, outs, nullptr, 0});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("f32[1,1,2,2]"), std::string::npos) << bad.error().what;
  EXPECT_NE(bad.error().what.find("f32[1,1,3,3]"), std::string::npos) << bad.error().what;
  // A missing buffer and a wrong input count.
  outs[0].data = nullptr;
  auto no_buffer = run_reference_kernel(KernelCall{Op::conv2d, &none, ins, outs, nullptr, 0});
  ASSERT_FALSE(no_buffer);
  EXPECT_NE(no_buffer.error().what.find("no buffer"), std::string::npos) << no_buffer.error().what;
  outs[0].data = y.data.data();
  auto arity = run_reference_kernel(KernelCall{Op::conv2d, &none, std::span(ins).first(1), outs, nullptr, 0});
  ASSERT_FALSE(arity);
  EXPECT_NE(arity.error().what.find("takes 2 inputs"), std::string::npos) << arity.error().what;
}

}  // namespace
}  // namespace lms
