// The cuda backend's convolutions on cuBLAS (backends/cuda/conv_plan.h GemmConvPlan, conv_gemm.cc) checked
// without a GPU: each plan is executed by a plain column-major strided-batched gemm written here to cuBLAS's
// documented semantics (C = op(A) op(B), each matrix at its leading dimension, sample t's operands at
// t * stride, a stride of 0 sharing one matrix), one call per group of samples, with the GPU's element functions
// (conv_gemm_fns.h) for the rest: Im2Col and Col2Im for strided convolutions' column matrices, SumPartials adding
// backward-filter's partials into dw. The results are compared with the reference's forward, backward-data and
// backward-filter for 1x1 convolutions (1-, 2-, 3-D, a transposed one) and strided ones (1x1 and larger
// kernels, padding, dilation, uneven strides, 1-, 2-, 3-D, transposed ones), with one sample per call up to the
// whole batch; convolutions it does not take get no plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backends/op_cases.h"
#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/conv_gemm_fns.h"

namespace lms {
namespace {

using namespace op_cases;

// Runs the call's plan on the host as conv_gemm.cc runs it on the GPU, with at most `max_elements` elements of
// partials and of column matrices; `group` receives the plan's samples per call.
Result<DirectCall> run_gemm_conv(const OpCase& c, uint64_t seed, int64_t max_elements, int64_t& group) {
  return run_direct_call(
      c, seed, [](const KernelCall&) -> Result<int64_t> { return 0; },
      [&](const KernelCall& call) -> Result<void> {
        const cuda::ConvPlan plan = LMS_TRY(cuda::conv_plan(call));
        const std::optional<cuda::GemmConvPlan> p = cuda::gemm_conv_plan(plan, max_elements, ConvGemm::strided);
        if (!p) return fail("no gemm plan");
        group = p->group;
        const bool sums = plan.pass == cuda::ConvPass::backward_filter;
        const bool gathers = p->columns && plan.pass != cuda::ConvPass::backward_data;
        const bool scatters = p->columns && plan.pass == cuda::ConvPass::backward_data;
        const auto* A = static_cast<const float*>(call.inputs[0].data);
        const auto* B = static_cast<const float*>(call.inputs[1].data);
        auto* out = static_cast<float*>(call.outputs[0].data);
        if (p->regroup) {  // as conv_gemm.cc's regrouped(): one gemm per call over the samples side by side
          std::vector<float> cols(static_cast<size_t>(p->group * p->cols_sample));
          std::vector<float> dys(static_cast<size_t>(p->group * p->dy_sample));
          for (int64_t first = 0; first < p->batch; first += p->group) {
            const int64_t samples = std::min(p->group, p->batch - first), k = samples * p->spatial;
            const cuda::Im2Col<float> xs{A + first * p->x_sample, cols.data(), p->windows, true, samples};
            const cuda::Im2Col<float> ds{B + first * p->dy_sample, dys.data(), p->dy_windows, true, samples};
            for (int64_t j = 0; j < samples * p->cols_sample; ++j) xs(j);
            for (int64_t j = 0; j < samples * p->dy_sample; ++j) ds(j);
            for (int64_t i = 0; i < p->m; ++i)  // C = op(A) B with op(A) = A^T, A [k, m] and B [k, n] at ld k
              for (int64_t j = 0; j < p->n; ++j) {
                double sum = 0;
                for (int64_t l = 0; l < k; ++l)
                  sum += static_cast<double>(cols[l + i * k]) * static_cast<double>(dys[l + j * k]);
                float& c = out[i + j * p->ldc];
                c = static_cast<float>(sum) + (first > 0 ? c : 0.0f);
              }
          }
          return {};
        }
        std::vector<float> partials(sums ? static_cast<size_t>(p->group * p->stride_c) : 0);
        std::vector<float> cols(p->columns ? static_cast<size_t>(p->group * p->cols_sample) : 0);
        for (int64_t first = 0; first < p->batch; first += p->group) {
          const int64_t samples = std::min(p->group, p->batch - first);
          const float* A_first = A + first * p->stride_a;
          if (gathers) {
            const cuda::Im2Col<float> im2col{A + first * p->x_sample, cols.data(), p->windows};
            for (int64_t j = 0; j < samples * p->cols_sample; ++j) im2col(j);
            A_first = cols.data();
          }
          float* C = sums ? partials.data() : scatters ? cols.data() : out + first * p->stride_c;
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
            const cuda::Col2Im<float> col2im{cols.data(), out + first * p->x_sample, p->windows};
            for (int64_t i = 0; i < samples * p->x_sample; ++i) col2im(i);
          }
        }
        return {};
      });
}

// Elements of one sample's column matrix: the plain convolution's input channels times its kernel's volume
// times its output's spatial size.
int64_t cols_elements(const OpCase& c) {
  const Shape &first = c.inputs[0].shape, &second = c.inputs[1].shape, out = forward_types(c).front().shape;
  auto spatial = [](const Shape& s) { return reference::product(s, 2, s.size()); };
  if (c.op == Op::conv_backward_filter) return out[1] * spatial(out) * spatial(second);  // (x, dy) -> dw
  const int64_t volume = spatial(second);                                                // w's kernel
  if (c.op == Op::conv_backward_data) return out[1] * volume * spatial(first);            // (dy, w) -> dx
  if (is_conv_transpose(c.op)) return second[1] * volume * spatial(first);                // (x, w) -> out
  return first[1] * volume * spatial(out);                                                // (x, w) -> y
}

// Elements of one sample of backward-filter's dy.
int64_t dy_elements(const OpCase& c) { return reference::product(c.inputs[1].shape, 1, c.inputs[1].shape.size()); }

// Whether backward-filter regroups: one sample's partial (dw's size) larger than its columns and dy together.
bool regroups(const OpCase& c) {
  const Shape dw = forward_types(c).front().shape;
  return reference::product(dw, 0, dw.size()) > cols_elements(c) + dy_elements(c);
}

bool strided(const OpCase& c) {
  const IntList s = c.attrs.get_ints("stride", {});
  return std::any_of(s.begin(), s.end(), [](int64_t v) { return v != 1; });
}

TEST(ConvGemm, EveryPassComputesTheReference) {
  const std::vector<OpCase> forwards = {
      {"conv1d_1x1", Op::conv1d, {{3, 4, 9}, {6, 4, 1}}, {}},
      {"conv2d_1x1", Op::conv2d, {{5, 8, 5, 4}, {16, 8, 1, 1}}, {}},
      {"conv2d_1x1_dilated", Op::conv2d, {{2, 3, 6, 6}, {5, 3, 1, 1}}, A({{"dilation", L({2, 2})}})},
      {"conv3d_1x1", Op::conv3d, {{3, 2, 3, 4, 5}, {7, 2, 1, 1, 1}}, {}},
      // strided: the gemms on column matrices; 7 = 2 * 3 + 1 leaves a last row and column off the grid (zero in
      // dx), and the strides differ per dimension
      {"conv2d_1x1_stride2", Op::conv2d, {{3, 4, 7, 6}, {8, 4, 1, 1}}, A({{"stride", L({2, 2})}})},
      {"conv2d_1x1_stride3x1", Op::conv2d, {{2, 3, 7, 5}, {4, 3, 1, 1}}, A({{"stride", L({3, 1})}})},
      {"conv1d_1x1_stride2", Op::conv1d, {{2, 3, 9}, {5, 3, 1}}, A({{"stride", L({2})}})},
      {"conv3d_1x1_stride2", Op::conv3d, {{2, 2, 3, 4, 5}, {3, 2, 1, 1, 1}}, A({{"stride", L({2, 2, 2})}})},
      // larger kernels: padding (a window's positions in it are 0), a stem-like 7x7, dilation, a 3-D one
      {"conv2d_3x3_stride2", Op::conv2d, {{3, 4, 9, 8}, {6, 4, 3, 3}},
       A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})},
      {"conv2d_7x7_stride2", Op::conv2d, {{2, 3, 15, 13}, {5, 3, 7, 7}},
       A({{"stride", L({2, 2})}, {"pad", L({3, 3})}})},
      {"conv2d_3x2_stride2x3_dilated", Op::conv2d, {{2, 3, 11, 10}, {4, 3, 3, 2}},
       A({{"stride", L({2, 3})}, {"pad", L({2, 1})}, {"dilation", L({2, 2})}})},
      {"conv1d_5_stride3", Op::conv1d, {{2, 3, 17}, {4, 3, 5}}, A({{"stride", L({3})}, {"pad", L({2})}})},
      {"conv3d_3x3x3_stride2", Op::conv3d, {{2, 2, 5, 6, 5}, {3, 2, 3, 3, 3}},
       A({{"stride", L({2, 2, 2})}, {"pad", L({1, 1, 1})}})},
      // weights larger than a sample's data: backward-filter regroups (1x1, strided 1x1, strided 3x3)
      {"conv2d_1x1_wide", Op::conv2d, {{5, 16, 2, 3}, {32, 16, 1, 1}}, {}},
      {"conv2d_1x1_stride2_wide", Op::conv2d, {{3, 16, 3, 4}, {32, 16, 1, 1}}, A({{"stride", L({2, 2})}})},
      {"conv2d_3x3_stride2_wide", Op::conv2d, {{3, 8, 5, 4}, {16, 8, 3, 3}},
       A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})},
  };
  std::vector<OpCase> cases = {
      {"conv_transpose2d_1x1", Op::conv_transpose2d, {{3, 6, 4, 5}, {6, 5, 1, 1}}, {}},
      {"conv_transpose2d_1x1_stride2", Op::conv_transpose2d, {{3, 6, 4, 5}, {6, 5, 1, 1}},
       A({{"stride", L({2, 2})}, {"output_pad", L({1, 0})}})},
      {"conv_transpose2d_3x3_stride2", Op::conv_transpose2d, {{2, 6, 4, 5}, {6, 3, 3, 3}},
       A({{"stride", L({2, 2})}, {"pad", L({1, 1})}, {"output_pad", L({1, 1})}})},
  };
  for (const OpCase& f : forwards) {
    cases.push_back(f);
    for (OpCase& g : gradient_cases(f)) cases.push_back(std::move(g));
  }
  ASSERT_EQ(cases.size(), 51u);
  for (const OpCase& c : cases) {
    const int64_t batch = c.inputs[0].shape[0];
    const Shape w = c.op == Op::conv_backward_filter ? forward_types(c).front().shape : c.inputs[1].shape;
    auto want = run_reference_call(c, 11);
    ASSERT_TRUE(want.has_value()) << c.name << ": " << want.error().str();
    // the partials (backward-filter) and the column matrices (strided) for one sample, two, the whole batch, and a
    // limit below one sample (1); the other passes of a 1x1 stride-1 convolution take the whole batch in one call
    // whatever the limit
    for (int64_t samples : {int64_t{1}, int64_t{2}, batch, int64_t{0}}) {
      int64_t group = 0;
      int64_t partials = c.op == Op::conv_backward_filter ? w[0] * reference::product(w, 1, w.size()) : 0;
      int64_t cols = strided(c) ? cols_elements(c) : 0;
      if (partials > 0 && regroups(c)) partials = 0, cols = cols_elements(c) + dy_elements(c);
      auto got = run_gemm_conv(c, 11, samples * std::max(partials, cols), group);
      ASSERT_TRUE(got.has_value()) << c.name << ": " << got.error().str();
      EXPECT_EQ(group, partials > 0 || cols > 0 ? std::clamp<int64_t>(samples, 1, batch) : batch) << c.name;
      expect_match(c, "(gemms, " + std::to_string(group) + " samples per call)", got->outputs, want->outputs, 1e-5);
    }
  }
}

// DnnOptions::conv_gemm's choices: off takes nothing, 1x1 the 1x1 unpadded convolutions (strided or not), strided
// also the strided ones with larger kernels.
TEST(ConvGemm, TheChoiceSaysWhichConvolutions) {
  const OpCase one{"1x1", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, {}};
  const OpCase one_strided{"1x1_stride2", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, A({{"stride", L({2, 2})}})};
  const OpCase three_strided{"3x3_stride2", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 3, 3}},
                             A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})};
  auto planned = [](const OpCase& c, ConvGemm which) {
    bool got = false;
    auto r = run_direct_call(
        c, 1, [](const KernelCall&) -> Result<int64_t> { return 0; },
        [&](const KernelCall& call) -> Result<void> {
          got = cuda::gemm_conv_plan(LMS_TRY(cuda::conv_plan(call)), 1 << 20, which).has_value();
          return {};
        });
    EXPECT_TRUE(r.has_value()) << c.name;
    return got;
  };
  for (const OpCase* c : {&one, &one_strided, &three_strided}) {
    EXPECT_FALSE(planned(*c, ConvGemm::off)) << c->name;
    EXPECT_EQ(planned(*c, ConvGemm::one_by_one), c != &three_strided) << c->name;
    EXPECT_TRUE(planned(*c, ConvGemm::strided)) << c->name;
  }
}

TEST(ConvGemm, OnlyOneByOneUnpaddedOrStridedUngroupedConvolutions) {
  const std::vector<OpCase> others = {
      {"padded_1x1", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 1, 1}}, A({{"pad", L({1, 1})}})},
      {"3x3", Op::conv2d, {{2, 4, 6, 6}, {8, 4, 3, 3}}, A({{"pad", L({1, 1})}})},
      {"grouped_1x1", Op::conv2d, {{2, 4, 6, 6}, {8, 2, 1, 1}}, A({{"groups", I(2)}})},
      {"grouped_strided", Op::conv2d, {{2, 4, 6, 6}, {8, 2, 3, 3}}, A({{"groups", I(2)}, {"stride", L({2, 2})}})},
  };
  for (const OpCase& f : others) {
    std::vector<OpCase> passes = {f};
    for (OpCase& g : gradient_cases(f)) passes.push_back(std::move(g));
    for (const OpCase& c : passes) {
      int64_t group = 0;
      auto got = run_gemm_conv(c, 1, 1 << 20, group);
      ASSERT_FALSE(got.has_value()) << c.name << ": planned";
      EXPECT_EQ(got.error().str(), "no gemm plan") << c.name;
    }
  }
}

}  // namespace
}  // namespace lms
