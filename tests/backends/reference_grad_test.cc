// The reference gradient kernels checked against central differences of the corresponding forward kernels in
// f64: for a random r, L(x) = sum(forward(x) * r) has dL/dy = r, so the gradient op fed dy = r must return
// dL/dx. This is independent of autodiff. Also hand-worked cases where a numeric check cannot reach (the
// first-maximum tie rule of max pooling, embedding's repeated ids).
#include <cmath>

#include "reference_test_util.h"

namespace lms {
namespace {
using namespace ref_test;

// Step and tolerance for smooth f64 functions of O(1) inputs: truncation ~h^2, rounding ~1e-16/h.
constexpr double kStep = 1e-5;
constexpr double kTol = 1e-7;

TEST(ReferenceGrad, Activations) {
  // Inputs kept away from relu's kink at 0 (|x| >= 0.1 > the step).
  HostTensor x = random(DType::f64, {3, 7}, 1, 0.1, 2);
  HostTensor sign = random(DType::f64, {3, 7}, 2);
  for (int64_t i = 0; i < x.type.num_elements(); ++i) x.set(i, sign.get(i) < 0 ? -x.get(i) : x.get(i));
  HostTensor r = random(DType::f64, {3, 7}, 3);
  HostTensor y = run1(Op::relu, {x});
  auto relu_loss = [&](const HostTensor& xp) { return dot(run1(Op::relu, {xp}), r); };
  EXPECT_TRUE(matches_numeric_gradient(relu_loss, x, run1(Op::relu_grad, {r, y}), kStep, kTol));
  auto gelu_loss = [&](const HostTensor& xp) { return dot(run1(Op::gelu, {xp}), r); };
  EXPECT_TRUE(matches_numeric_gradient(gelu_loss, x, run1(Op::gelu_grad, {r, x}), kStep, kTol));
  const Attributes tanh_form = A({{"approximate", S("tanh")}});
  auto gelu_tanh_loss = [&](const HostTensor& xp) { return dot(run1(Op::gelu, {xp}, tanh_form), r); };
  EXPECT_TRUE(matches_numeric_gradient(gelu_tanh_loss, x, run1(Op::gelu_grad, {r, x}, tanh_form), kStep, kTol));
  // clamp_grad reads x; x stays 0.1 away from the bounds (kinks).
  const Attributes bounds = A({{"min", F(-0.5)}, {"max", F(0.7)}});
  auto clamp_loss = [&](const HostTensor& xp) { return dot(run1(Op::clamp, {xp}, bounds), r); };
  HostTensor xc = x;
  for (int64_t i = 0; i < xc.type.num_elements(); ++i)
    if (std::abs(xc.get(i) + 0.5) < 0.1 || std::abs(xc.get(i) - 0.7) < 0.1) xc.set(i, 0.1);
  EXPECT_TRUE(matches_numeric_gradient(clamp_loss, xc, run1(Op::clamp_grad, {r, xc}, bounds), kStep, kTol));
  // sigmoid_grad and tanh_grad read the forward's output.
  for (Op op : {Op::sigmoid, Op::tanh}) {
    const Op grad = op == Op::sigmoid ? Op::sigmoid_grad : Op::tanh_grad;
    auto loss = [&](const HostTensor& xp) { return dot(run1(op, {xp}), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss, x, run1(grad, {r, run1(op, {x})}), kStep, kTol)) << op_def(op).name;
  }
  // Hand case: relu_grad passes dy where y > 0 only.
  EXPECT_TRUE(near(run1(Op::relu_grad, {f32({3}, {5, 6, 7}), f32({3}, {1, 0, -1})}), {5, 0, 0}, 0));
}

TEST(ReferenceGrad, BatchNorm) {
  for (Shape shape : {Shape{3, 2, 5}, Shape{4, 3}, Shape{2, 2, 3, 3}}) {
    SCOPED_TRACE(to_string(shape));
    const int64_t c = shape[1];
    HostTensor x = random(DType::f64, shape, 5, -2, 2), gamma = random(DType::f64, {c}, 6, 0.5, 1.5),
               beta = random(DType::f64, {c}, 7), r = random(DType::f64, shape, 8);
    Attributes eps = A({{"eps", F(1e-3)}});
    auto fwd = run(Op::batch_norm, {x, gamma, beta}, eps);
    ASSERT_TRUE(fwd) << fwd.error().str();
    auto grad = run(Op::batch_norm_grad, {r, x, gamma, (*fwd)[1], (*fwd)[2]});
    ASSERT_TRUE(grad) << grad.error().str();
    auto loss_x = [&](const HostTensor& p) { return dot(run1(Op::batch_norm, {p, gamma, beta}, eps), r); };
    auto loss_g = [&](const HostTensor& p) { return dot(run1(Op::batch_norm, {x, p, beta}, eps), r); };
    auto loss_b = [&](const HostTensor& p) { return dot(run1(Op::batch_norm, {x, gamma, p}, eps), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss_x, x, (*grad)[0], kStep, kTol));
    EXPECT_TRUE(matches_numeric_gradient(loss_g, gamma, (*grad)[1], kStep, kTol));
    EXPECT_TRUE(matches_numeric_gradient(loss_b, beta, (*grad)[2], kStep, kTol));
  }
}

TEST(ReferenceGrad, LayerNorm) {
  for (Shape shape : {Shape{5}, Shape{3, 7}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(to_string(shape));
    const int64_t c = shape.back();
    HostTensor x = random(DType::f64, shape, 9, -2, 2), gamma = random(DType::f64, {c}, 10, 0.5, 1.5),
               beta = random(DType::f64, {c}, 11), r = random(DType::f64, shape, 12);
    Attributes eps = A({{"eps", F(1e-3)}});
    auto fwd = run(Op::layer_norm, {x, gamma, beta}, eps);
    ASSERT_TRUE(fwd) << fwd.error().str();
    auto grad = run(Op::layer_norm_grad, {r, x, gamma, (*fwd)[1], (*fwd)[2]});
    ASSERT_TRUE(grad) << grad.error().str();
    auto loss_x = [&](const HostTensor& p) { return dot(run1(Op::layer_norm, {p, gamma, beta}, eps), r); };
    auto loss_g = [&](const HostTensor& p) { return dot(run1(Op::layer_norm, {x, p, beta}, eps), r); };
    auto loss_b = [&](const HostTensor& p) { return dot(run1(Op::layer_norm, {x, gamma, p}, eps), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss_x, x, (*grad)[0], kStep, kTol));
    EXPECT_TRUE(matches_numeric_gradient(loss_g, gamma, (*grad)[1], kStep, kTol));
    EXPECT_TRUE(matches_numeric_gradient(loss_b, beta, (*grad)[2], kStep, kTol));
  }
}

struct PoolCase {
  Op op;
  Shape x;
  IntList kernel, stride, pad;
};

const std::vector<PoolCase>& pool_cases(bool average) {
  static const std::vector<PoolCase> max_cases = {
      {Op::max_pool2d, {2, 3, 7, 6}, {3, 2}, {2, 2}, {1, 1}},
      {Op::max_pool2d, {1, 2, 5, 5}, {3, 3}, {1, 1}, {1, 0}},  // overlapping windows
      {Op::max_pool1d, {2, 2, 9}, {3}, {2}, {1}},
      {Op::max_pool3d, {1, 2, 4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {1, 1, 0}},
  };
  static const std::vector<PoolCase> avg_cases = {
      {Op::avg_pool2d, {2, 3, 7, 6}, {3, 2}, {2, 2}, {1, 1}},
      {Op::avg_pool2d, {1, 2, 5, 5}, {3, 3}, {1, 1}, {1, 0}},
      {Op::avg_pool1d, {2, 2, 9}, {3}, {2}, {1}},
      {Op::avg_pool3d, {1, 2, 4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {1, 1, 0}},
  };
  return average ? avg_cases : max_cases;
}

TEST(ReferenceGrad, MaxPool) {
  for (size_t i = 0; i < pool_cases(false).size(); ++i) {
    const PoolCase& c = pool_cases(false)[i];
    SCOPED_TRACE(fmt::format("case {}", i));
    Attributes a = A({{"kernel", L(c.kernel)}, {"stride", L(c.stride)}, {"pad", L(c.pad)}});
    // Random values have no ties, so the maximum is differentiable at x.
    HostTensor x = random(DType::f64, c.x, 20 + i);
    HostTensor y = run1(c.op, {x}, a);
    HostTensor r = random(DType::f64, y.type.shape, 30 + i);
    auto loss = [&](const HostTensor& p) { return dot(run1(c.op, {p}, a), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss, x, run1(Op::max_pool_grad, {r, x}, a), kStep, kTol));
  }
}

TEST(ReferenceGrad, MaxPoolTiesGoToTheFirstMaximum) {
  // All four elements of the single 2x2 window are equal: the first in row-major order, (0, 0), takes dy.
  HostTensor x = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Attributes a = A({{"kernel", L({2, 2})}, {"stride", L({2, 2})}, {"pad", L({0, 0})}});
  EXPECT_TRUE(near(run1(Op::max_pool_grad, {f32({1, 1, 1, 1}, {5}), x}, a), {5, 0, 0, 0}, 0));
  // x = [2, 7, 7, 1] with kernel 3, stride 1: overlapping windows [2, 7, 7] and [7, 7, 1]; both windows'
  // first maximum is position 1, so it collects 3 + 4 = 7.
  Attributes b = A({{"kernel", L({3})}, {"stride", L({1})}, {"pad", L({0})}});
  EXPECT_TRUE(near(run1(Op::max_pool_grad, {f32({1, 1, 2}, {3, 4}), f32({1, 1, 4}, {2, 7, 7, 1})}, b), {0, 7, 0, 0}, 0));
  // With padding: a window hanging over the edge never picks the padding, even on all-negative input.
  Attributes p = A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}});
  EXPECT_TRUE(near(run1(Op::max_pool_grad, {f32({1, 1, 2}, {1, 1}), f32({1, 1, 3}, {-3, -2, -1})}, p), {0, 1, 1}, 0));
}

TEST(ReferenceGrad, AvgPool) {
  for (bool include_pad : {true, false})
    for (size_t i = 0; i < pool_cases(true).size(); ++i) {
      const PoolCase& c = pool_cases(true)[i];
      SCOPED_TRACE(fmt::format("case {}, count_include_pad {}", i, include_pad));
      Attributes a = A({{"kernel", L(c.kernel)}, {"stride", L(c.stride)}, {"pad", L(c.pad)},
                        {"count_include_pad", B(include_pad)}});
      HostTensor x = random(DType::f64, c.x, 40 + i);
      HostTensor y = run1(c.op, {x}, a);
      HostTensor r = random(DType::f64, y.type.shape, 50 + i);
      Attributes g = a;
      g.set("x_shape", L(c.x));
      auto loss = [&](const HostTensor& p) { return dot(run1(c.op, {p}, a), r); };
      EXPECT_TRUE(matches_numeric_gradient(loss, x, run1(Op::avg_pool_grad, {r}, g), kStep, kTol));
    }
}

TEST(ReferenceGrad, Softmax) {
  struct Case {
    Shape shape;
    int64_t axis;
    bool causal;
  };
  for (const Case& c : {Case{{3, 5}, -1, false}, Case{{2, 4, 3}, 1, false}, Case{{2, 3, 4}, -1, true}}) {
    SCOPED_TRACE(fmt::format("{} axis {} causal {}", to_string(c.shape), c.axis, c.causal));
    Attributes a = A({{"axis", I(c.axis)}, {"causal", B(c.causal)}});
    HostTensor x = random(DType::f64, c.shape, 60, -3, 3), r = random(DType::f64, c.shape, 61);
    HostTensor y = run1(Op::softmax, {x}, a);
    auto loss = [&](const HostTensor& p) { return dot(run1(Op::softmax, {p}, a), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss, x, run1(Op::softmax_grad, {r, y}, A({{"axis", I(c.axis)}})), kStep, kTol));
  }
}

TEST(ReferenceGrad, Embedding) {
  // Hand case: ids [2, 0, 2] with dy rows [1, 2], [3, 4], [5, 6]: row 2 collects [1+5, 2+6], row 0 [3, 4].
  HostTensor dt = run1(Op::embedding_grad, {f32({3, 2}, {1, 2, 3, 4, 5, 6}), i64({3}, {2, 0, 2})},
                       A({{"vocab", I(4)}}));
  EXPECT_EQ(dt.type.shape, (Shape{4, 2}));
  EXPECT_TRUE(near(dt, {3, 4, 0, 0, 6, 8, 0, 0}, 0));
  // Numeric check with repeated ids in two dimensions.
  HostTensor table = random(DType::f64, {5, 3}, 70), ids = i32({2, 3}, {4, 1, 4, 0, 1, 1});
  HostTensor r = random(DType::f64, {2, 3, 3}, 71);
  auto loss = [&](const HostTensor& p) { return dot(run1(Op::embedding, {p, ids}), r); };
  EXPECT_TRUE(matches_numeric_gradient(loss, table, run1(Op::embedding_grad, {r, ids}, A({{"vocab", I(5)}})), kStep,
                                       kTol));
  auto bad = run(Op::embedding_grad, {f32({1, 2}), i64({1}, {9})}, A({{"vocab", I(4)}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("id 9"), std::string::npos) << error_of(bad);
}

TEST(ReferenceGrad, CrossEntropy) {
  // logits[N=2, C=4, S=3], labels[2, 3]; dloss scales the gradient. Checked against cross_entropy itself and,
  // independently of its loop, against -mean(log(softmax(logits, axis 1))[label]) built from the softmax kernel.
  HostTensor logits = random(DType::f64, {2, 4, 3}, 80, -2, 2), labels = i64({2, 3}, {0, 3, 1, 2, 2, 0});
  const double dloss = 2.5;
  HostTensor grad = run1(Op::cross_entropy_grad, {f64({}, {dloss}), logits, labels});
  auto loss = [&](const HostTensor& p) { return dloss * run1(Op::cross_entropy, {p, labels}).get(0); };
  EXPECT_TRUE(matches_numeric_gradient(loss, logits, grad, kStep, kTol));
  auto via_softmax = [&](const HostTensor& p) {
    HostTensor s = run1(Op::softmax, {p}, A({{"axis", I(1)}}));
    double total = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t sp = 0; sp < 3; ++sp)
        total -= std::log(s.get((n * 4 + static_cast<int64_t>(labels.get(n * 3 + sp))) * 3 + sp));
    return dloss * total / 6;
  };
  EXPECT_TRUE(matches_numeric_gradient(via_softmax, logits, grad, kStep, kTol));
  auto bad = run(Op::cross_entropy_grad, {f32({}, {1}), f32({1, 2}), i32({1}, {2})});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("label 2"), std::string::npos) << error_of(bad);
}

TEST(ReferenceGrad, BroadcastAndSumTo) {
  // sum_to is the gradient of broadcast_to, and broadcast_to the gradient of sum_to.
  struct Case {
    Shape small, big;
  };
  for (const Case& c : {Case{{3, 1}, {2, 3, 4}}, Case{{4}, {3, 4}}, Case{{}, {2, 2}}, Case{{2, 1, 3}, {2, 5, 3}}}) {
    SCOPED_TRACE(to_string(c.small) + " -> " + to_string(c.big));
    HostTensor x = random(DType::f64, c.small, 90), r = random(DType::f64, c.big, 91);
    Attributes to_big = A({{"shape", L(c.big)}}), to_small = A({{"shape", L(c.small)}});
    auto loss_b = [&](const HostTensor& p) { return dot(run1(Op::broadcast_to, {p}, to_big), r); };
    EXPECT_TRUE(matches_numeric_gradient(loss_b, x, run1(Op::sum_to, {r}, to_small), kStep, kTol));
    HostTensor big = random(DType::f64, c.big, 92), rs = random(DType::f64, c.small, 93);
    auto loss_s = [&](const HostTensor& p) { return dot(run1(Op::sum_to, {p}, to_small), rs); };
    EXPECT_TRUE(matches_numeric_gradient(loss_s, big, run1(Op::broadcast_to, {rs}, to_big), kStep, kTol));
  }
  // Hand case: [[1, 2, 3], [4, 5, 6]] summed to [1, 3] is [5, 7, 9]; to [2, 1] is [6, 15].
  HostTensor m = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(near(run1(Op::sum_to, {m}, A({{"shape", L({1, 3})}})), {5, 7, 9}, 0));
  EXPECT_TRUE(near(run1(Op::sum_to, {m}, A({{"shape", L({2, 1})}})), {6, 15}, 0));
  EXPECT_TRUE(near(run1(Op::broadcast_to, {f32({2, 1}, {1, 2})}, A({{"shape", L({2, 2})}})), {1, 1, 2, 2}, 0));
}

TEST(ReferenceGrad, SliceGrad) {
  HostTensor x = random(DType::f64, {3, 5, 2}, 100), r = random(DType::f64, {3, 2, 2}, 101);
  Attributes a = A({{"axis", I(1)}, {"start", I(2)}, {"end", I(4)}});
  auto loss = [&](const HostTensor& p) { return dot(run1(Op::slice, {p}, a), r); };
  Attributes g = a;
  g.set("dim", I(5));
  EXPECT_TRUE(matches_numeric_gradient(loss, x, run1(Op::slice_grad, {r}, g), kStep, kTol));
  // Hand case: [7, 8] placed at [1, 3) of 4 zeros.
  EXPECT_TRUE(near(run1(Op::slice_grad, {f32({2}, {7, 8})}, A({{"axis", I(0)}, {"start", I(1)}, {"end", I(3)}, {"dim", I(4)}})),
                   {0, 7, 8, 0}, 0));
}

TEST(ReferenceGrad, Errors) {
  auto bf = run(Op::relu_grad, {tensor(DType::bf16, {2}), tensor(DType::bf16, {2})});
  ASSERT_FALSE(bf);
  EXPECT_EQ(bf.error().str(), "reference backend: dtype bf16 is not supported for relu_grad");
  auto f16 = run(Op::conv_backward_filter, {tensor(DType::f16, {1, 1, 3, 3}), tensor(DType::f16, {1, 1, 2, 2})},
                 A({{"stride", L({1, 1})}, {"pad", L({0, 0})}, {"dilation", L({1, 1})}, {"groups", I(1)},
                    {"w_shape", L({1, 1, 2, 2})}}));
  ASSERT_FALSE(f16);
  EXPECT_EQ(f16.error().str(), "reference backend: dtype f16 is not supported for conv_backward_filter");
}

}  // namespace
}  // namespace lms
