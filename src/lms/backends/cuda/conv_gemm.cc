// Convolutions on cuBLAS (DnnOptions::conv_gemm; conv_plan.h GemmConvPlan for the layout): by default every 1x1
// unpadded one, with ConvGemm::strided also every strided one, as strided-batched gemms over the samples with the
// weight shared (batch stride 0). A strided convolution's gemms run on column matrices in the workspace (Im2Col of
// x for forward and backward-filter; backward-data computes them and Col2Im sums them into dx). Backward-filter's
// per-sample gemms write partials, which SumPartials (conv_gemm_fns.h) adds into dw in sample order, or, where a
// partial would be larger than the sample's data, the samples are regrouped into one gemm per call. Deterministic
// (cuBLAS's gemms are, with a fixed workspace; the sums run in a fixed order) though not cuDNN's bits. Why: on an
// H200, cuDNN's deterministic algorithms ran resnet50's 1x1 convolutions at 5-14 TFLOP/s (backward-filter), 16-22
// (backward-data) and about 31 (forward), its 1x1 stride-2 backward-data at 2.6; on cuBLAS resnet50 at batch 128
// trained 1.26 times as fast (907.7 against 720.7 samples/s in one run, docs/results.md). The workspace holds
// cuBLAS's workspace, the partials, the column matrices and (regrouped) dy, each from a kLibraryWorkspaceAlignment
// boundary; the partials and the columns (with dy) take at most DnnOptions::max_workspace_bytes each.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "lms/backends/cuda/conv_plan.h"
#include "lms/backends/cuda/cuda_dnn_util.h"
#include "lms/backends/cuda/cuda_launch.h"
#include "lms/backends/cuda/conv_gemm_fns.h"

namespace lms::cuda {

namespace {

int64_t round_up(int64_t bytes) {
  return (bytes + kLibraryWorkspaceAlignment - 1) / kLibraryWorkspaceAlignment * kLibraryWorkspaceAlignment;
}

class GemmConvKernel final : public PreparedKernel {
 public:
  GemmConvKernel(DnnContext& ctx, const KernelCall& call, ConvPass pass, const GemmConvPlan& p, bool f64)
      : ctx_(ctx), op_(call.op), sums_(pass == ConvPass::backward_filter && !p.regroup),
        gathers_(p.columns && pass != ConvPass::backward_data), scatters_(p.columns && pass == ConvPass::backward_data),
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
    if (p_.regroup) LMS_TRY_VOID(to_int(p_.group * p_.spatial, "a regrouped gemm's reduction", op_));
    const int64_t element = f64_ ? 8 : 4;
    cublas_bytes_ = ctx_.opts.cublas_workspace_bytes;
    // from the aligned start: cuBLAS's workspace, the partials, the column matrices, each at an aligned offset
    partials_at_ = round_up(cublas_bytes_);
    cols_at_ = round_up(partials_at_ + (sums_ ? p_.group * p_.stride_c * element : 0));
    dy_at_ = round_up(cols_at_ + (p_.columns || p_.regroup ? p_.group * p_.cols_sample * element : 0));
    const int64_t end = dy_at_ + (p_.regroup ? p_.group * p_.dy_sample * element : 0);
    workspace_needed_ = end + kLibraryWorkspaceAlignment;  // room to align the start
    return {};
  }

  // e.g. "cuBLAS strided-batched gemms, 64 samples per call, column matrices (Im2Col)"
  std::string describe() const override {
    std::string s =
        p_.regroup
            ? fmt::format("cuBLAS gemm, regrouped: {} samples per call, one gemm over K = samples x {}", p_.group,
                          p_.spatial)
            : fmt::format("cuBLAS strided-batched gemms, {} samples per call", p_.group);
    if (gathers_) s += ", column matrices (Im2Col)";
    if (scatters_) s += ", column matrices summed into dx (Col2Im)";
    if (sums_) s += ", per-sample partials summed in order";
    return s;
  }

  Result<void> run() override {
    std::byte* ws = static_cast<std::byte*>(aligned_workspace(workspace_));
    LMS_TRY_VOID(cublas_ok(ctx_.blas->set_workspace(ctx_.cublas, ws, static_cast<size_t>(cublas_bytes_)),
                           "cublasSetWorkspace", op_));
    return f64_ ? calls<double>(ctx_.blas->dgemm_strided_batched, "cublasDgemmStridedBatched", ws)
                : calls<float>(ctx_.blas->sgemm_strided_batched, "cublasSgemmStridedBatched", ws);
  }

 private:
  template <class F>
  Result<void> launch(const F& f, int64_t n, std::string_view what) {
    const int e = device_launch(f, n, ctx_.stream);
    return e == 0 ? Result<void>{} : cuda_ok(static_cast<cudaError_t>(e), what, op_);
  }

  template <class T, typename Gemm>
  Result<void> calls(Gemm gemm, std::string_view name, std::byte* ws) {
    const T one = 1, zero = 0;
    const T* a = static_cast<const T*>(a_);
    const T* b = static_cast<const T*>(b_);
    T* out = static_cast<T*>(out_);
    T* partials = reinterpret_cast<T*>(ws + partials_at_);
    T* cols = reinterpret_cast<T*>(ws + cols_at_);
    if (p_.regroup) return regrouped<T>(gemm, name, cols, reinterpret_cast<T*>(ws + dy_at_));
    for (int64_t first = 0; first < p_.batch; first += group_) {
      const int samples = static_cast<int>(std::min<int64_t>(group_, p_.batch - first));
      const T* a_first = a + first * p_.stride_a;
      if (gathers_) {
        LMS_TRY_VOID(launch(Im2Col<T>{a + first * p_.x_sample, cols, p_.windows}, samples * p_.cols_sample,
                            "Im2Col launch"));
        a_first = cols;
      }
      T* c = sums_ ? partials : scatters_ ? cols : out + first * p_.stride_c;
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, p_.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  p_.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m_, n_, k_, &one, a_first, lda_,
                                  p_.stride_a, b + first * p_.stride_b, ldb_, p_.stride_b, &zero, c, ldc_,
                                  p_.stride_c, samples),
                             name, op_));
      if (sums_)
        LMS_TRY_VOID(launch(SumPartials<T>{partials, out, p_.stride_c, samples, first > 0}, p_.stride_c,
                            "SumPartials launch"));
      else if (scatters_)
        LMS_TRY_VOID(launch(Col2Im<T>{cols, out + first * p_.x_sample, p_.windows}, samples * p_.x_sample,
                            "Col2Im launch"));
    }
    return {};
  }

  // Backward-filter regrouped (conv_plan.h): per call, the samples' column matrices and dy side by side, one gemm
  // over K = samples * P, adding into dw after the first call.
  template <class T, typename Gemm>
  Result<void> regrouped(Gemm gemm, std::string_view name, T* cols, T* dys) {
    const T one = 1, zero = 0;
    const T* x = static_cast<const T*>(a_);
    const T* dy = static_cast<const T*>(b_);
    for (int64_t first = 0; first < p_.batch; first += group_) {
      const int64_t samples = std::min<int64_t>(group_, p_.batch - first);
      LMS_TRY_VOID(launch(Im2Col<T>{x + first * p_.x_sample, cols, p_.windows, true, samples},
                          samples * p_.cols_sample, "Im2Col launch"));
      LMS_TRY_VOID(launch(Im2Col<T>{dy + first * p_.dy_sample, dys, p_.dy_windows, true, samples},
                          samples * p_.dy_sample, "Im2Col launch"));
      const int k = static_cast<int>(samples * p_.spatial);  // within int: init() checked group * spatial
      LMS_TRY_VOID(cublas_ok(gemm(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, m_, n_, k, &one, cols, k, int64_t{0}, dys,
                                  k, int64_t{0}, first > 0 ? &one : &zero, static_cast<T*>(out_), ldc_, int64_t{0}, 1),
                             name, op_));
    }
    return {};
  }

  DnnContext& ctx_;
  Op op_;
  bool sums_;      // backward-filter, not regrouped: partials summed into the output
  bool gathers_;   // strided forward and backward-filter: the gemms read x's column matrices
  bool scatters_;  // strided backward-data: the gemm writes dx's column matrices, which Col2Im sums into dx
  GemmConvPlan p_;
  bool f64_;
  const void* a_;  // the call's first input: cuBLAS's A (or its column matrices' source)
  const void* b_;  // its second: cuBLAS's B
  void* out_;
  void* workspace_;
  int m_ = 0, n_ = 0, k_ = 0, lda_ = 1, ldb_ = 1, ldc_ = 1, group_ = 1;
  int64_t cublas_bytes_ = 0, partials_at_ = 0, cols_at_ = 0, dy_at_ = 0;  // from the aligned workspace start
};

}  // namespace

Result<PreparedPtr> build_gemm_conv(DnnContext& ctx, const KernelCall& call, const ConvPlan& plan,
                                    cudnnDataType_t t) {
  const int64_t element = t == CUDNN_DATA_DOUBLE ? 8 : 4;
  const std::optional<GemmConvPlan> p =
      gemm_conv_plan(plan, ctx.opts.max_workspace_bytes / element, ctx.opts.conv_gemm);
  if (!p) return PreparedPtr();
  auto k = std::make_unique<GemmConvKernel>(ctx, call, plan.pass, *p, t == CUDNN_DATA_DOUBLE);
  LMS_TRY_VOID(k->init());
  return PreparedPtr(std::move(k));
}

}  // namespace lms::cuda
