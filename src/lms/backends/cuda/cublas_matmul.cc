// cuBLAS matmul for the cuda backend (cuda_dnn_util.h): a[..., M, K] @ b[..., K, N] -> out[..., M, N] with optional
// transpose_a / transpose_b, as cublasSgemmStridedBatched (f32) or cublasDgemmStridedBatched (f64) calls laid out
// by gemm_plan (gemm_plan.h: the row-major trick, and a shared b without a zero batch stride).
// Each node hands cuBLAS its planned workspace (DnnOptions::cublas_workspace_bytes, plus alignment slack) right
// before its gemm, because every node shares the context's handle; the size is the same for every node and run,
// so cuBLAS's kernel choice, which may depend on it, is too. Precondition: the call passed the op's shape rule
// (the geometry is rechecked here as the reference checks it).
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "lms/backends/cuda/cuda_dnn_util.h"
#include "lms/backends/cuda/gemm_plan.h"

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
    const GemmPlan p = gemm_plan(g);
    m_ = LMS_TRY(to_int(p.m, "the output's columns N", op_));
    n_ = LMS_TRY(to_int(p.n, "the output's rows M (times the batch when folded)", op_));
    k_ = LMS_TRY(to_int(p.k, "the reduction size K", op_));
    batch_ = LMS_TRY(to_int(p.batch, "the batch count", op_));
    op_a_ = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_b_ = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    lda_ = LMS_TRY(to_int(p.lda, "b's leading dimension", op_));
    ldb_ = LMS_TRY(to_int(p.ldb, "a's leading dimension", op_));
    ldc_ = LMS_TRY(to_int(p.ldc, "the output's leading dimension", op_));
    stride_a_ = p.stride_a;
    stride_b_ = p.stride_b;
    stride_c_ = p.stride_c;
    calls_ = p.calls;
    out_bytes_ = g.batch * g.m * g.n * (f64_ ? int64_t{sizeof(double)} : int64_t{sizeof(float)});
    cublas_workspace_bytes_ = ctx_.opts.cublas_workspace_bytes;
    workspace_needed_ = cublas_workspace_bytes_ + kLibraryWorkspaceAlignment;
    return {};
  }

  std::string describe() const override {
    return fmt::format("cuBLAS strided-batched gemm{}, {} x {} x {}, batch {}", calls_ == 1 ? "" : "s", m_, n_, k_,
                       batch_);
  }

  Result<void> run() override {
    if (out_bytes_ == 0) return {};
    if (k_ == 0)  // every output element is an empty sum
      return cuda_ok(cudaMemsetAsync(out_, 0, static_cast<size_t>(out_bytes_), ctx_.stream), "cudaMemsetAsync", op_);
    LMS_TRY_VOID(cublas_ok(ctx_.blas->set_workspace(ctx_.cublas, aligned_workspace(workspace_),
                                                    static_cast<size_t>(cublas_workspace_bytes_)),
                           "cublasSetWorkspace", op_));
    return f64_ ? gemms<double>(ctx_.blas->dgemm_strided_batched, "cublasDgemmStridedBatched")
                : gemms<float>(ctx_.blas->sgemm_strided_batched, "cublasSgemmStridedBatched");
  }

 private:
  // The calls_ gemms, each over batch_ batches; call i starts at batch i of a and out (gemm_plan).
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
  int m_ = 0, n_ = 0, k_ = 0, batch_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1;  // gemm_plan's, as cuBLAS's ints
  int64_t calls_ = 1;
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
