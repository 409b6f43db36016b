// 1x1 convolutions on cuBLAS (DnnOptions::gemm_1x1; conv_plan.h Gemm1x1Plan for the layout): forward and
// backward-data as one strided-batched gemm over the batch with the weight shared (batch stride 0), and
// backward-filter as per-sample gemms in strided batches of `group` samples whose partials SumPartials
// (kernel_fns.h) adds into dw in sample order. Deterministic (cuBLAS's gemms are, with a fixed workspace; the sums
// run in a fixed order) though not cuDNN's bits. Why: on an H200, cuDNN's deterministic 1x1 algorithms ran at
// 5-14 TFLOP/s (backward-filter), 16-22 (backward-data) and about 31 (forward) in resnet50 (docs/results.md).
// The workspace holds cuBLAS's workspace and, for backward-filter, the partials, each from a
// kLibraryWorkspaceAlignment boundary; the partials take at most DnnOptions::max_workspace_bytes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/cuda_dnn_util.h"
#include "lms/backends/cuda/cuda_launch.h"
#include "lms/backends/cuda/kernel_fns.h"

namespace lms::cuda {

namespace {

class Gemm1x1Kernel final : public PreparedKernel {
 public:
  Gemm1x1Kernel(DnnContext& ctx, const KernelCall& call, ConvPass pass, const Gemm1x1Plan& p, bool f64)
      : ctx_(ctx), op_(call.op), sums_(pass == ConvPass::backward_filter), p_(p), f64_(f64),
        a_(call.inputs[0].data), b_(call.inputs[1].data), out_(call.outputs[0].data), workspace_(call.workspace) {}

  Result<void> init() {
    m_ = LMS_TRY(to_int(p_.m, "a gemm's rows", op_));
    n_ = LMS_TRY(to_int(p_.n, "a gemm's columns", op_));
    k_ = LMS_TRY(to_int(p_.k, "a gemm's reduction", op_));
    lda_ = LMS_TRY(to_int(p_.lda, "A's leading dimension", op_));
    ldb_ = LMS_TRY(to_int(p_.ldb, "B's leading dimension", op_));
    ldc_ = LMS_TRY(to_int(p_.ldc, "C's leading dimension", op_));
    group_ = LMS_TRY(to_int(p_.group, "the samples per gemm call", op_));
    cublas_bytes_ = ctx_.opts.cublas_workspace_bytes;
    partials_at_ = cublas_bytes_ + kLibraryWorkspaceAlignment;  // from the aligned start
    const int64_t partials = sums_ ? p_.group * p_.stride_c * (f64_ ? 8 : 4) + kLibraryWorkspaceAlignment : 0;
    workspace_needed_ = partials_at_ + partials;
    return {};
  }

  Result<void> run() override {
    std::byte* ws = static_cast<std::byte*>(aligned_workspace(workspace_));
    LMS_TRY_VOID(cublas_ok(cublasSetWorkspace(ctx_.cublas, ws, static_cast<size_t>(cublas_bytes_)),
                           "cublasSetWorkspace", op_));
    void* partials = sums_ ? aligned_workspace(ws + partials_at_) : nullptr;
    return f64_ ? calls<double>(cublasDgemmStridedBatched, "cublasDgemmStridedBatched", partials)
                : calls<float>(cublasSgemmStridedBatched, "cublasSgemmStridedBatched", partials);
  }

 private:
  template <typename T, typename Gemm>
  Result<void> calls(Gemm gemm, std::string_view name, void* partials_memory) {
    const T one = 1, zero = 0;
    T* c = sums_ ? static_cast<T*>(partials_memory) : static_cast<T*>(out_);
    for (int64_t first = 0; first < p_.batch; first += group_) {
      const int samples = static_cast<int>(std::min<int64_t>(group_, p_.batch - first));
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, p_.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  p_.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m_, n_, k_, &one,
                                  static_cast<const T*>(a_) + first * p_.stride_a, lda_, p_.stride_a,
                                  static_cast<const T*>(b_) + first * p_.stride_b, ldb_, p_.stride_b, &zero,
                                  sums_ ? c : c + first * p_.stride_c, ldc_, p_.stride_c, samples),
                             name, op_));
      if (!sums_) continue;
      const SumPartials<T> sum{c, static_cast<T*>(out_), p_.stride_c, samples, first > 0};
      const int e = device_launch(sum, p_.stride_c, ctx_.stream);
      if (e != 0) return cuda_ok(static_cast<cudaError_t>(e), "SumPartials launch", op_);
    }
    return {};
  }

  DnnContext& ctx_;
  Op op_;
  bool sums_;  // backward-filter: partials summed into the output
  Gemm1x1Plan p_;
  bool f64_;
  const void* a_;  // the call's first input: cuBLAS's A
  const void* b_;  // its second: cuBLAS's B
  void* out_;
  void* workspace_;
  int m_ = 0, n_ = 0, k_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1, group_ = 1;
  int64_t cublas_bytes_ = 0, partials_at_ = 0;
};

}  // namespace

Result<PreparedPtr> build_gemm_1x1(DnnContext& ctx, const KernelCall& call, const ConvPlan& plan,
                                   cudnnDataType_t t) {
  const int64_t element = t == CUDNN_DATA_DOUBLE ? 8 : 4;
  const std::optional<Gemm1x1Plan> p = gemm_1x1_plan(plan, ctx.opts.max_workspace_bytes / element);
  if (!p) return PreparedPtr();
  auto k = std::make_unique<Gemm1x1Kernel>(ctx, call, plan.pass, *p, t == CUDNN_DATA_DOUBLE);
  LMS_TRY_VOID(k->init());
  return PreparedPtr(std::move(k));
}

}  // namespace lms::cuda
