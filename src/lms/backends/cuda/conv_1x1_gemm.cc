// 1x1 convolutions on cuBLAS (DnnOptions::gemm_1x1, on by default; conv_plan.h Gemm1x1Plan for the layout):
// forward and backward-data as strided-batched gemms over the batch with the weight shared (batch stride 0), and
// backward-filter as per-sample gemms in strided batches of `group` samples whose partials SumPartials
// (kernel_fns.h) adds into dw in sample order. Strided ones run the same gemms on a compact copy of x's (dx's)
// grid positions. Deterministic (cuBLAS's gemms are, with a fixed workspace; the sums run in a fixed order)
// though not cuDNN's bits. Why: on an H200, cuDNN's deterministic 1x1 algorithms ran at 5-14 TFLOP/s
// (backward-filter), 16-22 (backward-data) and about 31 (forward) in resnet50, its 1x1 stride-2 backward-data at
// 2.6, and the gemms took resnet50's step at batch 64 from 92.8 to 74.1 ms of kernels (docs/results.md).
// The workspace holds cuBLAS's workspace, the partials (backward-filter) and the compact copy (strided), each
// from a kLibraryWorkspaceAlignment boundary; the partials and the copy take at most
// DnnOptions::max_workspace_bytes each.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/cuda_dnn_util.h"
#include "lms/backends/cuda/cuda_launch.h"
#include "lms/backends/cuda/kernel_fns.h"

namespace lms::cuda {

namespace {

int64_t round_up(int64_t bytes) {
  return (bytes + kLibraryWorkspaceAlignment - 1) / kLibraryWorkspaceAlignment * kLibraryWorkspaceAlignment;
}

class Gemm1x1Kernel final : public PreparedKernel {
 public:
  Gemm1x1Kernel(DnnContext& ctx, const KernelCall& call, ConvPass pass, const Gemm1x1Plan& p, bool f64)
      : ctx_(ctx), op_(call.op), sums_(pass == ConvPass::backward_filter),
        gathers_(p.strided && pass != ConvPass::backward_data), scatters_(p.strided && pass == ConvPass::backward_data),
        p_(p), f64_(f64), a_(call.inputs[0].data), b_(call.inputs[1].data), out_(call.outputs[0].data),
        workspace_(call.workspace) {}

  Result<void> init() {
    m_ = LMS_TRY(to_int(p_.m, "a gemm's rows", op_));
    n_ = LMS_TRY(to_int(p_.n, "a gemm's columns", op_));
    k_ = LMS_TRY(to_int(p_.k, "a gemm's reduction", op_));
    lda_ = LMS_TRY(to_int(p_.lda, "A's leading dimension", op_));
    ldb_ = LMS_TRY(to_int(p_.ldb, "B's leading dimension", op_));
    ldc_ = LMS_TRY(to_int(p_.ldc, "C's leading dimension", op_));
    group_ = LMS_TRY(to_int(p_.group, "the samples per gemm call", op_));
    const int64_t element = f64_ ? 8 : 4;
    cublas_bytes_ = ctx_.opts.cublas_workspace_bytes;
    // from the aligned start: cuBLAS's workspace, the partials, the compact copy, each at an aligned offset
    partials_at_ = round_up(cublas_bytes_);
    compact_at_ = round_up(partials_at_ + (sums_ ? p_.group * p_.stride_c * element : 0));
    const int64_t end = compact_at_ + (p_.strided ? p_.group * p_.compact_sample * element : 0);
    workspace_needed_ = end + kLibraryWorkspaceAlignment;  // room to align the start
    return {};
  }

  Result<void> run() override {
    std::byte* ws = static_cast<std::byte*>(aligned_workspace(workspace_));
    LMS_TRY_VOID(cublas_ok(cublasSetWorkspace(ctx_.cublas, ws, static_cast<size_t>(cublas_bytes_)),
                           "cublasSetWorkspace", op_));
    return f64_ ? calls<double>(cublasDgemmStridedBatched, "cublasDgemmStridedBatched", ws)
                : calls<float>(cublasSgemmStridedBatched, "cublasSgemmStridedBatched", ws);
  }

 private:
  Result<void> launched(int e, std::string_view what) {
    return e == 0 ? Result<void>{} : cuda_ok(static_cast<cudaError_t>(e), what, op_);
  }

  // Copies `samples` samples between x's (or dx's) grid positions and the compact copy (StridedCopy over the
  // plan's grid; `to_grid` swaps its stride sets).
  template <class T>
  Result<void> grid_copy(const T* from, T* to, int64_t samples, bool to_grid) {
    using E = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    Strided g = p_.grid;
    g.shape[0] = samples;
    if (to_grid) std::swap(g.a, g.b);
    const StridedCopy<E> copy{reinterpret_cast<const E*>(from), reinterpret_cast<E*>(to), g};
    return launched(device_launch(copy, samples * p_.compact_sample, ctx_.stream), "StridedCopy launch");
  }

  template <class T, typename Gemm>
  Result<void> calls(Gemm gemm, std::string_view name, std::byte* ws) {
    const T one = 1, zero = 0;
    const T* a = static_cast<const T*>(a_);
    const T* b = static_cast<const T*>(b_);
    T* out = static_cast<T*>(out_);
    T* partials = reinterpret_cast<T*>(ws + partials_at_);
    T* compact = reinterpret_cast<T*>(ws + compact_at_);
    for (int64_t first = 0; first < p_.batch; first += group_) {
      const int samples = static_cast<int>(std::min<int64_t>(group_, p_.batch - first));
      const T* a_first = a + first * p_.stride_a;
      if (gathers_) {
        LMS_TRY_VOID(grid_copy(a + first * p_.grid_sample, compact, samples, false));
        a_first = compact;
      }
      T* c = sums_ ? partials : scatters_ ? compact : out + first * p_.stride_c;
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, p_.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  p_.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m_, n_, k_, &one, a_first, lda_,
                                  p_.stride_a, b + first * p_.stride_b, ldb_, p_.stride_b, &zero, c, ldc_,
                                  p_.stride_c, samples),
                             name, op_));
      if (sums_) {
        const SumPartials<T> sum{partials, out, p_.stride_c, samples, first > 0};
        LMS_TRY_VOID(launched(device_launch(sum, p_.stride_c, ctx_.stream), "SumPartials launch"));
      } else if (scatters_) {
        T* dx = out + first * p_.grid_sample;
        const int64_t bytes = samples * p_.grid_sample * static_cast<int64_t>(sizeof(T));
        LMS_TRY_VOID(launched(device_memset_zero(dx, bytes, ctx_.stream), "cudaMemsetAsync"));
        LMS_TRY_VOID(grid_copy(compact, dx, samples, true));
      }
    }
    return {};
  }

  DnnContext& ctx_;
  Op op_;
  bool sums_;      // backward-filter: partials summed into the output
  bool gathers_;   // strided forward and backward-filter: x's grid positions gathered into the compact copy
  bool scatters_;  // strided backward-data: the gemm writes the compact copy, which goes onto dx's grid
  Gemm1x1Plan p_;
  bool f64_;
  const void* a_;  // the call's first input: cuBLAS's A (or the gathered copy's source)
  const void* b_;  // its second: cuBLAS's B
  void* out_;
  void* workspace_;
  int m_ = 0, n_ = 0, k_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1, group_ = 1;
  int64_t cublas_bytes_ = 0, partials_at_ = 0, compact_at_ = 0;  // bytes from the aligned workspace start
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
