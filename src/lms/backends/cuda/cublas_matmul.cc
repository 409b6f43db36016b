// cuBLAS matmul for the cuda backend (cuda_dnn_util.h): a[..., M, K] @ b[..., K, N] -> out[..., M, N] with optional
// transpose_a / transpose_b, as one cublasSgemmStridedBatched (f32) or cublasDgemmStridedBatched (f64) over a's
// flattened batch dimensions. When b has rank 2 (shared by every batch) the batch stride cuBLAS would need is 0,
// which its documentation forbids: an untransposed a's batches are then one tall matrix [batch*M, K] and the
// product one gemm; a transposed a takes one gemm per batch. cuBLAS is column-major and
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
    // A shared b with an untransposed a: the batches' rows stacked, [batch*M, K] @ [K, N], one gemm.
    const bool fold = g.shared_b && !g.ta;
    n_ = LMS_TRY(to_int(fold ? g.batch * g.m : g.m, "the output's rows M", op_));
    k_ = LMS_TRY(to_int(g.k, "the reduction size K", op_));
    const int64_t batch = fold ? 1 : g.batch;
    // A shared b with a transposed a: one gemm per batch (cuBLAS's batch count 1, so its strides are unused).
    calls_ = g.shared_b ? std::max<int64_t>(batch, 1) : 1;
    batch_ = LMS_TRY(to_int(batch / calls_, "the batch count", op_));
    op_a_ = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;  // b stored [N, K] (transposed) or [K, N]
    op_b_ = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;  // a stored [K, M] (transposed) or [M, K]
    // Leading dimensions: the row length of each stored row-major matrix, at least 1 (cuBLAS's rule, which an
    // empty dimension would break; such a gemm is not run, see run()).
    lda_ = LMS_TRY(to_int(std::max<int64_t>(g.tb ? g.k : g.n, 1), "b's leading dimension", op_));
    ldb_ = LMS_TRY(to_int(std::max<int64_t>(g.ta ? g.m : g.k, 1), "a's leading dimension", op_));
    ldc_ = LMS_TRY(to_int(std::max<int64_t>(g.n, 1), "the output's leading dimension", op_));
    stride_a_ = g.k * g.n;
    stride_b_ = g.m * g.k;
    stride_c_ = g.m * g.n;
    out_bytes_ = g.batch * g.m * g.n * (f64_ ? int64_t{sizeof(double)} : int64_t{sizeof(float)});
    cublas_workspace_bytes_ = ctx_.opts.cublas_workspace_bytes;
    workspace_needed_ = cublas_workspace_bytes_ + kLibraryWorkspaceAlignment;
    return {};
  }

  Result<void> run() override {
    if (out_bytes_ == 0) return {};
    if (k_ == 0)  // every output element is an empty sum
      return cuda_ok(cudaMemsetAsync(out_, 0, static_cast<size_t>(out_bytes_), ctx_.stream), "cudaMemsetAsync", op_);
    LMS_TRY_VOID(cublas_ok(cublasSetWorkspace(ctx_.cublas, aligned_workspace(workspace_),
                                              static_cast<size_t>(cublas_workspace_bytes_)),
                           "cublasSetWorkspace", op_));
    return f64_ ? gemms<double>(cublasDgemmStridedBatched, "cublasDgemmStridedBatched")
                : gemms<float>(cublasSgemmStridedBatched, "cublasSgemmStridedBatched");
  }

 private:
  // The calls_ gemms, each over batch_ batches; call i starts at batch i of a and out (b is shared when calls_ > 1).
  template <typename T, typename Gemm>
  Result<void> gemms(Gemm gemm, std::string_view name) {
    const T one = 1, zero = 0;
    for (int64_t i = 0; i < calls_; ++i)
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, op_a_, op_b_, m_, n_, k_, &one, static_cast<const T*>(b_), lda_,
                                  stride_a_, static_cast<const T*>(a_) + i * stride_b_, ldb_, stride_b_, &zero,
                                  static_cast<T*>(out_) + i * stride_c_, ldc_, stride_c_, batch_),
                             name, op_));
    return {};
  }

  DnnContext& ctx_;
  Op op_;
  bool f64_;
  const void* a_;  // our a: cuBLAS's B
  const void* b_;  // our b: cuBLAS's A
  void* out_;
  void* workspace_;
  cublasOperation_t op_a_ = CUBLAS_OP_N, op_b_ = CUBLAS_OP_N;
  int m_ = 0, n_ = 0, k_ = 0, batch_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1;
  int64_t calls_ = 1;  // gemm calls: the batch count when a transposed a meets a shared b, else 1
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
