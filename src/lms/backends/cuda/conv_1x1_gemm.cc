// The 1x1 backward-filter on cuBLAS (DnnOptions::gemm_1x1_filter; conv_plan.h FilterGemmPlan for the layout):
// per-sample gemms in strided batches of `group` samples, each batch's partials added into dw by SumPartials
// (kernel_fns.h) in sample order. Deterministic (cuBLAS's gemms are, with a fixed workspace; the sums run in a
// fixed order) though not cuDNN's bits. Why: on an H200, cuDNN's deterministic 1x1 backward-filter algorithms
// ran at 5-14 TFLOP/s in resnet50, against 25-80 for its 3x3 ones (docs/results.md). The workspace holds
// cuBLAS's workspace and the partials, each from a kLibraryWorkspaceAlignment boundary; the partials take at
// most DnnOptions::max_workspace_bytes.
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

class FilterGemmKernel final : public PreparedKernel {
 public:
  FilterGemmKernel(DnnContext& ctx, const KernelCall& call, const FilterGemmPlan& p, bool f64)
      : ctx_(ctx), op_(call.op), p_(p), f64_(f64), x_(call.inputs[0].data), dy_(call.inputs[1].data),
        dw_(call.outputs[0].data), workspace_(call.workspace) {}

  Result<void> init() {
    m_ = LMS_TRY(to_int(p_.m, "the input channels", op_));
    n_ = LMS_TRY(to_int(p_.n, "the output channels", op_));
    k_ = LMS_TRY(to_int(p_.k, "the spatial size", op_));
    group_ = LMS_TRY(to_int(p_.group, "the samples per gemm call", op_));
    cublas_bytes_ = ctx_.opts.cublas_workspace_bytes;
    partials_at_ = cublas_bytes_ + kLibraryWorkspaceAlignment;  // from the aligned start
    const int64_t element = f64_ ? 8 : 4;
    workspace_needed_ = partials_at_ + p_.group * p_.stride_c * element + kLibraryWorkspaceAlignment;
    return {};
  }

  Result<void> run() override {
    std::byte* ws = static_cast<std::byte*>(aligned_workspace(workspace_));
    LMS_TRY_VOID(cublas_ok(cublasSetWorkspace(ctx_.cublas, ws, static_cast<size_t>(cublas_bytes_)),
                           "cublasSetWorkspace", op_));
    void* partials = aligned_workspace(ws + partials_at_);
    return f64_ ? calls<double>(cublasDgemmStridedBatched, "cublasDgemmStridedBatched", partials)
                : calls<float>(cublasSgemmStridedBatched, "cublasSgemmStridedBatched", partials);
  }

 private:
  template <typename T, typename Gemm>
  Result<void> calls(Gemm gemm, std::string_view name, void* partials_memory) {
    const T one = 1, zero = 0;
    T* partials = static_cast<T*>(partials_memory);
    for (int64_t first = 0; first < p_.batch; first += group_) {
      const int samples = static_cast<int>(std::min<int64_t>(group_, p_.batch - first));
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, m_, n_, k_, &one,
                                  static_cast<const T*>(x_) + first * p_.stride_a, k_, p_.stride_a,
                                  static_cast<const T*>(dy_) + first * p_.stride_b, k_, p_.stride_b, &zero, partials,
                                  m_, p_.stride_c, samples),
                             name, op_));
      const SumPartials<T> sum{partials, static_cast<T*>(dw_), p_.stride_c, samples, first > 0};
      const int e = device_launch(sum, p_.stride_c, ctx_.stream);
      if (e != 0) return cuda_ok(static_cast<cudaError_t>(e), "SumPartials launch", op_);
    }
    return {};
  }

  DnnContext& ctx_;
  Op op_;
  FilterGemmPlan p_;
  bool f64_;
  const void* x_;
  const void* dy_;
  void* dw_;
  void* workspace_;
  int m_ = 0, n_ = 0, k_ = 0, group_ = 0;
  int64_t cublas_bytes_ = 0, partials_at_ = 0;
};

}  // namespace

Result<PreparedPtr> build_filter_gemm(DnnContext& ctx, const KernelCall& call, const ConvPlan& plan,
                                      cudnnDataType_t t) {
  const int64_t element = t == CUDNN_DATA_DOUBLE ? 8 : 4;
  const std::optional<FilterGemmPlan> p = filter_gemm_plan(plan, ctx.opts.max_workspace_bytes / element);
  if (!p) return PreparedPtr();
  auto k = std::make_unique<FilterGemmKernel>(ctx, call, *p, t == CUDNN_DATA_DOUBLE);
  LMS_TRY_VOID(k->init());
  return PreparedPtr(std::move(k));
}

}  // namespace lms::cuda
