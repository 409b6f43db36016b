// The cuda backend's matmul layout (backends/cuda/gemm_plan.h) checked without a GPU: each plan is executed by
// a plain column-major strided-batched gemm written here to cuBLAS's documented semantics (C = op(A) op(B), each
// matrix at its leading dimension, batch t at t * stride, call i at our a and out's batch i), and the result is
// compared with the reference backend's matmul. Covers every transpose combination, batched operands, and a b
// shared by every batch (folded into one tall gemm, or one gemm per batch when a is transposed), where no
// batch stride may be 0.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/reference_test_util.h"
#include "lms/backends/cuda/gemm_plan.h"
#include "lms/backends/reference/kernels.h"

namespace lms {
namespace {

using namespace ref_test;

// cuBLAS's gemmStridedBatched on the host, in double: call i's A is `A` (our b, shared by the calls), its B and
// C start at batch i of our a and out.
void emulate(const cuda::GemmPlan& p, const float* A, const float* B, float* C) {
  for (int64_t call = 0; call < p.calls; ++call)
    for (int64_t t = 0; t < p.batch; ++t) {
      const float* a = A + t * p.stride_a;
      const float* b = B + (call + t) * p.stride_b;
      float* c = C + (call + t) * p.stride_c;
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < p.k; ++l) {
            const double x = p.transpose_a ? a[l + i * p.lda] : a[i + l * p.lda];
            const double y = p.transpose_b ? b[j + l * p.ldb] : b[l + j * p.ldb];
            sum += x * y;
          }
          c[i + j * p.ldc] = static_cast<float>(sum);
        }
    }
}

struct Case {
  std::string name;
  Shape a, b;
  bool ta = false, tb = false;
};

TEST(GemmPlan, ComputesTheReferenceMatmul) {
  const std::vector<Case> cases = {
      {"plain", {7, 13}, {13, 5}},
      {"ta", {13, 7}, {13, 5}, true},
      {"tb", {7, 13}, {5, 13}, false, true},
      {"tt", {13, 7}, {5, 13}, true, true},
      {"batched", {3, 4, 6, 9}, {3, 4, 9, 5}},
      {"batched_tt", {2, 9, 6}, {2, 5, 9}, true, true},
      {"shared_b_folded", {3, 6, 9}, {9, 5}},
      {"shared_b_tb_folded", {2, 3, 6, 9}, {5, 9}, false, true},
      {"shared_b_ta_per_batch", {3, 9, 6}, {9, 5}, true},
      {"shared_b_tt_per_batch", {4, 9, 6}, {5, 9}, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Attributes attrs = A({{"transpose_a", B(c.ta)}, {"transpose_b", B(c.tb)}});
    HostTensor a = random(DType::f32, c.a, 1), b = random(DType::f32, c.b, 2);
    HostTensor want = run1(Op::matmul, {a, b}, attrs);
    ASSERT_GT(want.type.num_elements(), 0);
    HostTensor got(want.type);
    auto normalized = normalize_attrs(op_def(Op::matmul), attrs);
    ASSERT_TRUE(normalized.has_value());
    const std::vector<TensorRef> in = {{&a.type, a.data.data()}, {&b.type, b.data.data()}};
    const std::vector<TensorRef> out = {{&got.type, got.data.data()}};
    const KernelCall call{Op::matmul, &*normalized, in, out, nullptr, 0};
    auto g = reference::matmul_geometry(reference::Args(call));
    ASSERT_TRUE(g.has_value()) << g.error().str();
    const cuda::GemmPlan p = cuda::gemm_plan(*g);
    EXPECT_GT(p.stride_a, 0);
    EXPECT_GT(p.stride_b, 0);
    EXPECT_GT(p.stride_c, 0);
    EXPECT_EQ(p.calls * p.batch, g->shared_b && !g->ta ? 1 : g->batch) << "every batch computed exactly once";
    emulate(p, b.as<float>().data(), a.as<float>().data(), got.as<float>().data());
    EXPECT_EQ(got.data, want.data) << "double sums in the reference's order round the same";
  }
}

}  // namespace
}  // namespace lms
