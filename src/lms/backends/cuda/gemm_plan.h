// How the cuda backend's matmul maps onto cuBLAS's column-major strided-batched gemm (cublas_matmul.cc), as a
// plain function of the matmul's geometry, so that the host tests check the mapping against the reference
// without a GPU. Our tensors are row-major: a row-major R x C matrix is the same bytes as a column-major C x R
// one, its transpose, so out = op(a) op(b) is computed as out^T = op(b)^T op(a)^T: cuBLAS's A is our b, its B is
// our a, and its m, n = N, M. A b of rank 2 is shared by every batch; the batch stride cuBLAS would need for it
// is 0, which cuBLAS's documentation forbids, so an untransposed a's batches become one tall matrix
// [batch*M, K] (one gemm) and a transposed a takes one gemm per batch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "lms/backends/reference/kernel_util.h"

namespace lms::cuda {

// The gemm calls of one matmul, in cuBLAS's terms (all counts in elements).
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;             // cuBLAS's C is m x n, the sum over k
  bool transpose_a = false;                // cuBLAS's op(A): our b is stored [N, K] (transposed) or [K, N]
  bool transpose_b = false;                // cuBLAS's op(B): our a is stored [K, M] (transposed) or [M, K]
  int64_t lda = 1, ldb = 1, ldc = 1;       // leading dimensions (at least 1, cuBLAS's rule)
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // between batches within one call (never 0)
  int64_t batch = 1;                       // batches per call
  int64_t calls = 1;                       // calls; call i starts at batch i of our a and out (b is shared)
};

inline GemmPlan gemm_plan(const reference::MatmulGeometry& g) {
  GemmPlan p;
  const bool fold = g.shared_b && !g.ta;  // a's batches stacked: [batch*M, K] @ [K, N]
  p.m = g.n;
  p.n = fold ? g.batch * g.m : g.m;
  p.k = g.k;
  p.transpose_a = g.tb;
  p.transpose_b = g.ta;
  p.lda = std::max<int64_t>(g.tb ? g.k : g.n, 1);
  p.ldb = std::max<int64_t>(g.ta ? g.m : g.k, 1);
  p.ldc = std::max<int64_t>(g.n, 1);
  p.stride_a = std::max<int64_t>(g.k * g.n, 1);
  p.stride_b = std::max<int64_t>(g.m * g.k, 1);
  p.stride_c = std::max<int64_t>(g.m * g.n, 1);
  const int64_t batch = fold ? 1 : g.batch;
  p.calls = g.shared_b ? std::max<int64_t>(batch, 1) : 1;
  p.batch = batch / p.calls;
  return p;
}

}  // namespace lms::cuda
