// cuBLAS matmul for the cuda backend (cuda_dnn_util.h): a[..., M, K] @ b[..., K, N] -> out[..., M, N] with optional
// transpose_a / transpose_b, as one cublasSgemmStridedBatched (f32) or cublasDgemmStridedBatched (f64) over a's
// flattened batch dimensions, b shared by every batch (stride 0) when it has rank 2. cuBLAS is column-major and
// our tensors are row-major: a row-major R x C matrix is the same bytes as a column-major C x R one, its transpose,
// so out = op(a) op(b) is computed as out^T = op(b)^T op(a)^T, i.e. cuBLAS's A is b, its B is a, and m, n = N, M.
// Each node hands cuBLAS its planned workspace (DnnOptions::cublas_workspace_bytes, plus alignment slack) right
// before its gemm, because every node shares the context's handle; the size is the same for every node and run,
// so cuBLAS's kernel choice, which may depend on it, is too. Precondition: the call passed the op's shape rule
// (the geometry is rechecked here as the reference checks it).
#include <algorithm>
#include <cstdint>

#include "lms/backends/cuda/cuda_dnn_util.h"

namespace lms::cuda {

namespace {

using reference::MatmulGeometry;

class MatmulKernel final : public PreparedKernel {
 public:
  MatmulKernel(DnnContext& ctx, const KernelCall& call, cudnnDataType_t t)
      : ctx_(ctx),
        op_(call.op),
        f64_(t == CUDNN_DATA_DOUBLE),
        a_(call.inputs[0].data),
        b_(call.inputs[1].data),
        out_(call.outputs[0].data),
        workspace_(call.workspace) {}

  Result<void> init(const MatmulGeometry& g) {
    // cuBLAS computes the column-major m_ x n_ matrix C = op(A) op(B), i.e. out^T: m_ = N, n_ = M, A = b, B = a.
    m_ = LMS_TRY(to_int(g.n, "the output's columns N", op_));
    n_ = LMS_TRY(to_int(g.m, "the output's rows M", op_));
    k_ = LMS_TRY(to_int(g.k, "the reduction size K", op_));
    batch_ = LMS_TRY(to_int(g.batch, "the batch count", op_));
    op_a_ = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // b stored [N, K] (transposed) or [K, N]
    op_b_ = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // a stored [K, M] (transposed) or [M, K]
    // Leading dimensions: the row length of each stored row-major matrix, at least 1 (cuBLAS's rule, which an
    // empty dimension would break; such a gemm is not run, see run()).
    lda_ = LMS_TRY(to_int(std::max<int64_t>(g.tb ? g.k : g.n, 1), "b's leading dimension", op_));
    ldb_ = LMS_TRY(to_int(std::max<int64_t>(g.ta ? g.m : g.k, 1), "a's leading dimension", op_));
    ldc_ = LMS_TRY(to_int(std::max<int64_t>(g.n, 1), "the output's leading dimension", op_));
    stride_a_ = g.shared_b ? 0 : g.k * g.n;
    stride_b_ = g.m * g.k;
    stride_c_ = g.m * g.n;
    out_bytes_ = g.batch * g.m * g.n * (f64_ ? int64_t{sizeof(double)} : int64_t{sizeof(float)});
    cublas_workspace_bytes_ = ctx_.opts.cublas_workspace_bytes;
    if (cublas_workspace_bytes_ > 0) workspace_needed_ = cublas_workspace_bytes_ + kLibraryWorkspaceAlignment;
    return {};
  }

  Result<void> run() override {
    if (out_bytes_ == 0) return {};
    if (k_ == 0)  // every output element is an empty sum
      return cuda_ok(cudaMemsetAsync(out_, 0, static_cast<size_t>(out_bytes_), ctx_.stream), "cudaMemsetAsync", op_);
    void* ws = cublas_workspace_bytes_ > 0 ? aligned_workspace(workspace_) : nullptr;
    // Size 0 (no workspace configured) keeps cuBLAS from falling back on its own pool, which would allocate.
    LMS_TRY_VOID(cublas_ok(cublasSetWorkspace(ctx_.cublas, ws, static_cast<size_t>(cublas_workspace_bytes_)),
                           "cublasSetWorkspace", op_));
    if (f64_) {
      const double one = 1, zero = 0;
      return cublas_ok(cublasDgemmStridedBatched(ctx_.cublas, op_a_, op_b_, m_, n_, k_, &one,
                                                 static_cast<const double*>(b_), lda_, stride_a_,
                                                 static_cast<const double*>(a_), ldb_, stride_b_, &zero,
                                                 static_cast<double*>(out_), ldc_, stride_c_, batch_),
                       "cublasDgemmStridedBatched", op_);
    }
    const float one = 1, zero = 0;
    return cublas_ok(cublasSgemmStridedBatched(ctx_.cublas, op_a_, op_b_, m_, n_, k_, &one,
                                               static_cast<const float*>(b_), lda_, stride_a_,
                                               static_cast<const float*>(a_), ldb_, stride_b_, &zero,
                                               static_cast<float*>(out_), ldc_, stride_c_, batch_),
                     "cublasSgemmStridedBatched", op_);
  }

 private:
  DnnContext& ctx_;
  Op op_;
  bool f64_;
  const void* a_;  // our a: cuBLAS's B
  const void* b_;  // our b: cuBLAS's A
  void* out_;
  void* workspace_;
  cublasOperation_t op_a_ = CUBLAS_OP_N, op_b_ = CUBLAS_OP_N;
  int m_ = 0, n_ = 0, k_ = 0, batch_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1;
  long long stride_a_ = 0, stride_b_ = 0, stride_c_ = 0;  // elements between batches (cuBLAS's long long)
  int64_t out_bytes_ = 0;
  int64_t cublas_workspace_bytes_ = 0;  // what cuBLAS is told it has
};

}  // namespace

Result<PreparedPtr> build_matmul(DnnContext& ctx, const KernelCall& call) {
  const cudnnDataType_t t = LMS_TRY(common_dnn_dtype(call));
  const MatmulGeometry g = LMS_TRY(reference::matmul_geometry(reference::Args(call)));
  auto k = std::make_unique<MatmulKernel>(ctx, call, t);
  LMS_TRY_VOID(k->init(g));
  return PreparedPtr(std::move(k));
}

}  // namespace lms::cuda
