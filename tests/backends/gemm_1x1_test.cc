// The cuda backend's 1x1 convolutions on cuBLAS (backends/cuda/conv_plan.h Gemm1x1Plan, conv_1x1_gemm.cc)
// checked without a GPU: each plan is executed by a plain column-major strided-batched gemm written here to
// cuBLAS's documented semantics (C = op(A) op(B), each matrix at its leading dimension, sample t's operands at
// t * stride, a stride of 0 sharing one matrix), one call per group of samples; backward-filter's partials are
// added into dw by SumPartials (kernel_fns.h, the GPU's element function). The results are compared with the
// reference's forward, backward-data and backward-filter for 1-, 2- and 3-D convolutions and a transposed one,
// with one sample per backward-filter group up to the whole batch; convolutions it does not cover get no plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backends/op_cases.h"
#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/kernel_fns.h"

namespace lms {
namespace {

using namespace op_cases;

// Runs the call's plan on the host as conv_1x1_gemm.cc runs it on the GPU, with `max_partials` partial
// elements; `group` receives the plan's samples per call.
Result<DirectCall> run_gemm_1x1(const OpCase& c, uint64_t seed, int64_t max_partials, int64_t& group) {
  return run_direct_call(
      c, seed, [](const KernelCall&) -> Result<int64_t> { return 0; },
      [&](const KernelCall& call) -> Result<void> {
        const cuda::ConvPlan plan = LMS_TRY(cuda::conv_plan(call));
        const std::optional<cuda::Gemm1x1Plan> p = cuda::gemm_1x1_plan(plan, max_partials);
        if (!p) return fail("no 1x1 gemm plan");
        group = p->group;
        const bool sums = plan.pass == cuda::ConvPass::backward_filter;
        const bool gathers = p->strided && !(plan.pass == cuda::ConvPass::backward_data);
        const bool scatters = p->strided && plan.pass == cuda::ConvPass::backward_data;
        const auto* A = static_cast<const float*>(call.inputs[0].data);
        const auto* B = static_cast<const float*>(call.inputs[1].data);
        auto* out = static_cast<float*>(call.outputs[0].data);
        std::vector<float> partials(sums ? static_cast<size_t>(p->group * p->stride_c) : 0);
        std::vector<float> compact(p->strided ? static_cast<size_t>(p->group * p->compact_sample) : 0);
        // the grid copy as conv_1x1_gemm.cc launches it: StridedCopy over the plan's grid (swapped onto the grid)
        auto grid_copy = [&](const float* from, float* to, int64_t samples, bool to_grid) {
          cuda::Strided g = p->grid;
          g.shape[0] = samples;
          if (to_grid) std::swap(g.a, g.b);
          const cuda::StridedCopy<uint32_t> copy{reinterpret_cast<const uint32_t*>(from),
                                                 reinterpret_cast<uint32_t*>(to), g};
          for (int64_t i = 0; i < samples * p->compact_sample; ++i) copy(i);
        };
        for (int64_t first = 0; first < p->batch; first += p->group) {
          const int64_t samples = std::min(p->group, p->batch - first);
          const float* A_first = A + first * p->stride_a;
          if (gathers) {
            grid_copy(A + first * p->grid_sample, compact.data(), samples, false);
            A_first = compact.data();
          }
          float* C = sums ? partials.data() : scatters ? compact.data() : out + first * p->stride_c;
          for (int64_t t = 0; t < samples; ++t) {
            const float* a = A_first + t * p->stride_a;
            const float* b = B + (first + t) * p->stride_b;
            float* cm = C + t * p->stride_c;
            for (int64_t i = 0; i < p->m; ++i)
              for (int64_t j = 0; j < p->n; ++j) {
                double sum = 0;
                for (int64_t l = 0; l < p->k; ++l) {
                  const double x = p->transpose_a ? a[l + i * p->lda] : a[i + l * p->lda];
                  const double y = p->transpose_b ? b[j + l * p->ldb] : b[l + j * p->ldb];
                  sum += x * y;
                }
                cm[i + j * p->ldc] = static_cast<float>(sum);
              }
          }
          if (sums) {
            const cuda::SumPartials<float> add{partials.data(), out, p->stride_c, samples, first > 0};
            for (int64_t e = 0; e < p->stride_c; ++e) add(e);
          } else if (scatters) {
            std::fill_n(out + first * p->grid_sample, samples * p->grid_sample, 0.0f);
            grid_copy(compact.data(), out + first * p->grid_sample, samples, true);
          }
        }
        return {};
      });
}

// Elements of one sample of a strided convolution's compact copy: the plain convolution's input channels times
// its output's spatial size.
int64_t compact_elements(const OpCase& c) {
  const Shape &first = c.inputs[0].shape, &second = c.inputs[1].shape, out = forward_types(c).front().shape;
  auto spatial = [](const Shape& s) { return reference::product(s, 2, s.size()); };
  if (c.op == Op::conv_backward_filter) return first[1] * spatial(second);               // (x, dy) -> dw
  if (c.op == Op::conv_backward_data || is_conv_transpose(c.op)) return out[1] * spatial(first);  // -> dx
  return first[1] * spatial(out);                                                         // (x, w) -> y
}

TEST(Gemm1x1, EveryPassComputesTheReference) {
  const std::vector<OpCase> forwards = {
      {"conv1d_1x1", Op::conv1d, {{3, 4, 9}, {6, 4, 1}}, {}},
      {"conv2d_1x1", Op::conv2d, {{5, 8, 5, 4}, {16, 8, 1, 1}}, {}},
      {"conv2d_1x1_dilated", Op::conv2d, {{2, 3, 6, 6}, {5, 3, 1, 1}}, A({{"dilation", L({2, 2})}})},
      {"conv3d_1x1", Op::conv3d, {{3, 2, 3, 4, 5}, {7, 2, 1, 1, 1}}, {}},
      // strided: the gemms on a compact copy of the grid positions; 7 = 2 * 3 + 1 leaves a last row and column
      // off the grid (zero in dx), and the strides differ per dimension
      {"conv2d_1x1_stride2", Op::conv2d, {{3, 4, 7, 6}, {8, 4, 1, 1}}, A({{"stride", L({2, 2})}})},
      {"conv2d_1x1_stride3x1", Op::conv2d, {{2, 3, 7, 5}, {4, 3, 1, 1}}, A({{"stride", L({3, 1})}})},
      {"conv1d_1x1_stride2", Op::conv1d, {{2, 3, 9}, {5, 3, 1}}, A({{"stride", L({2})}})},
      {"conv3d_1x1_stride2", Op::conv3d, {{2, 2, 3, 4, 5}, {3, 2, 1, 1, 1}}, A({{"stride", L({2, 2, 2})}})},
  };
  std::vector<OpCase> cases = {
      {"conv_transpose2d_1x1", Op::conv_transpose2d, {{3, 6, 4, 5}, {6, 5, 1, 1}}, {}},
      {"conv_transpose2d_1x1_stride2", Op::conv_transpose2d, {{3, 6, 4, 5}, {6, 5, 1, 1}},
       A({{"stride", L({2, 2})}, {"output_pad", L({1, 0})}})},
  };
  for (const OpCase& f : forwards) {
    cases.push_back(f);
    for (OpCase& g : gradient_cases(f)) cases.push_back(std::move(g));
  }
  ASSERT_EQ(cases.size(), 26u);
  for (const OpCase& c : cases) {
    const int64_t batch = c.inputs[0].shape[0];
    const Shape w = c.op == Op::conv_backward_filter ? forward_types(c).front().shape : c.inputs[1].shape;
    auto want = run_reference_call(c, 11);
    ASSERT_TRUE(want.has_value()) << c.name << ": " << want.error().str();
    // backward-filter's partials (and a strided convolution's compact copy) for one sample, two, the whole batch,
    // and a limit below one sample (1); the other passes of a stride-1 convolution take the whole batch in one
    // call whatever the limit
    const bool strided = c.attrs.has("stride") && c.attrs.get_ints("stride", {}) != IntList(w.size() - 2, 1);
    for (int64_t samples : {int64_t{1}, int64_t{2}, batch, int64_t{0}}) {
      int64_t group = 0;
      const int64_t per_sample = c.op == Op::conv_backward_filter ? w[0] * w[1] : 0;
      const int64_t compact = strided ? compact_elements(c) : 0;
      auto got = run_gemm_1x1(c, 11, samples * std::max(per_sample, compact), group);
      ASSERT_TRUE(got.has_value()) << c.name << ": " << got.error().str();
      EXPECT_EQ(group, per_sample > 0 || strided ? std::clamp<int64_t>(samples, 1, batch) : batch) << c.name;
      expect_match(c, "(1x1 gemms, " + std::to_string(group) + " samples per call)", got->outputs, want->outputs,
                   1e-5);
    }
  }
}

TEST(Gemm1x1, OnlyOneByOneUnpaddedUngroupedConvolutions) {
  const std::vector<OpCase> others = {
      {"padded", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, A({{"pad", L({1, 1})}})},
      {"3x3", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 3, 3}}, {}},
      {"grouped", Op::conv2d, {{2, 4, 6, 6}, {8, 2, 1, 1}}, A({{"groups", I(2)}})},
  };
  for (const OpCase& f : others) {
    std::vector<OpCase> passes = {f};
    for (OpCase& g : gradient_cases(f)) passes.push_back(std::move(g));
    for (const OpCase& c : passes) {
      int64_t group = 0;
      auto got = run_gemm_1x1(c, 1, 1 << 20, group);
      ASSERT_FALSE(got.has_value()) << c.name << ": planned";
      EXPECT_EQ(got.error().str(), "no 1x1 gemm plan") << c.name;
    }
  }
}

}  // namespace
}  // namespace lms
