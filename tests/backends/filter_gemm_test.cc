// The cuda backend's 1x1 backward-filter on cuBLAS (backends/cuda/conv_plan.h FilterGemmPlan, conv_1x1_gemm.cc)
// checked without a GPU: the plan is executed by a plain column-major strided-batched gemm written here to
// cuBLAS's documented semantics (C = op(A) op(B), each matrix at its leading dimension, batch t at t * stride),
// one call per group of samples into the partials, and SumPartials (kernel_fns.h, the GPU's element function)
// adds each group into dw; the result is compared with the reference's conv_backward_filter. 1-, 2- and 3-D
// convolutions, one sample per group up to the whole batch in one; convolutions it does not cover get no plan.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/op_cases.h"
#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/kernel_fns.h"

namespace lms {
namespace {

using namespace op_cases;

// The backward-filter of a forward convolution row (op_cases.h's gradient_cases).
OpCase filter_case(const OpCase& forward) {
  for (OpCase& g : gradient_cases(forward))
    if (g.op == Op::conv_backward_filter) return g;
  ADD_FAILURE() << forward.name << " has no backward-filter case";
  return forward;
}

// Runs the plan on the host as conv_1x1_gemm.cc runs it on the GPU, with `max_partials` partial elements.
Result<DirectCall> run_filter_gemm(const OpCase& c, uint64_t seed, int64_t max_partials, int64_t& group) {
  return run_direct_call(
      c, seed, [](const KernelCall&) -> Result<int64_t> { return 0; },
      [&](const KernelCall& call) -> Result<void> {
        const cuda::ConvPlan plan = LMS_TRY(cuda::conv_plan(call));
        const std::optional<cuda::FilterGemmPlan> p = cuda::filter_gemm_plan(plan, max_partials);
        if (!p) return fail("no filter gemm plan");
        group = p->group;
        const auto* x = static_cast<const float*>(call.inputs[0].data);
        const auto* dy = static_cast<const float*>(call.inputs[1].data);
        auto* dw = static_cast<float*>(call.outputs[0].data);
        std::vector<float> partials(static_cast<size_t>(p->group * p->stride_c));
        for (int64_t first = 0; first < p->batch; first += p->group) {
          const int64_t samples = std::min(p->group, p->batch - first);
          for (int64_t t = 0; t < samples; ++t) {  // gemm: op(A) = A^T (transa T), op(B) = B
            const float* a = x + (first + t) * p->stride_a;
            const float* b = dy + (first + t) * p->stride_b;
            float* out = partials.data() + t * p->stride_c;
            for (int64_t i = 0; i < p->m; ++i)
              for (int64_t j = 0; j < p->n; ++j) {
                double sum = 0;
                for (int64_t l = 0; l < p->k; ++l) sum += double{a[l + i * p->lda]} * double{b[l + j * p->ldb]};
                out[i + j * p->ldc] = static_cast<float>(sum);
              }
          }
          const cuda::SumPartials<float> add{partials.data(), dw, p->stride_c, samples, first > 0};
          for (int64_t e = 0; e < p->stride_c; ++e) add(e);
        }
        return {};
      });
}

TEST(FilterGemm, OneByOneBackwardFiltersComputeTheReference) {
  const std::vector<OpCase> forwards = {
      {"conv1d_1x1", Op::conv1d, {{3, 4, 9}, {6, 4, 1}}, {}},
      {"conv2d_1x1", Op::conv2d, {{5, 8, 5, 4}, {16, 8, 1, 1}}, {}},
      {"conv2d_1x1_dilated", Op::conv2d, {{2, 3, 6, 6}, {5, 3, 1, 1}}, A({{"dilation", L({2, 2})}})},
      {"conv3d_1x1", Op::conv3d, {{3, 2, 3, 4, 5}, {7, 2, 1, 1, 1}}, {}},
  };
  for (const OpCase& f : forwards) {
    const OpCase c = filter_case(f);
    const int64_t batch = c.inputs[0].shape[0], per_sample = c.inputs[1].shape[1] * c.inputs[0].shape[1];
    auto want = run_reference_call(c, 11);
    ASSERT_TRUE(want.has_value()) << c.name << ": " << want.error().str();
    // partials for one sample, two, and the whole batch (group 1, 2, batch), and a limit below one sample (1)
    for (int64_t samples : {int64_t{1}, int64_t{2}, batch, int64_t{0}}) {
      int64_t group = 0;
      auto got = run_filter_gemm(c, 11, samples * per_sample, group);
      ASSERT_TRUE(got.has_value()) << c.name << ": " << got.error().str();
      EXPECT_EQ(group, std::clamp<int64_t>(samples, 1, batch)) << c.name;
      expect_match(c, "(filter gemm, " + std::to_string(group) + " samples per call)", got->outputs, want->outputs,
                   1e-5);
    }
  }
}

TEST(FilterGemm, OnlyOneByOneStrideOneUnpaddedUngroupedConvolutions) {
  const std::vector<OpCase> others = {
      {"strided", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, A({{"stride", L({2, 2})}})},
      {"padded", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, A({{"pad", L({1, 1})}})},
      {"3x3", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 3, 3}}, {}},
      {"grouped", Op::conv2d, {{2, 4, 6, 6}, {8, 2, 1, 1}}, A({{"groups", I(2)}})},
  };
  for (const OpCase& f : others) {
    int64_t group = 0;
    auto got = run_filter_gemm(filter_case(f), 1, 1 << 20, group);
    ASSERT_FALSE(got.has_value()) << f.name << ": planned";
    EXPECT_EQ(got.error().str(), "no filter gemm plan") << f.name;
  }
  // the forward pass of a 1x1 convolution is not a backward-filter
  const OpCase forward{"forward", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, {}};
  int64_t group = 0;
  EXPECT_FALSE(run_filter_gemm(forward, 1, 1 << 20, group).has_value());
}

}  // namespace
}  // namespace lms
