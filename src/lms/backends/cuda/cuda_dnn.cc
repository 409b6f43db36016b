// The cuda backend's cuDNN/cuBLAS nodes (cuda_dnn.h): the context (a cuDNN and a cuBLAS handle bound to the
// compute stream), the dispatch from an op to its family's builder (cudnn_conv.cc, cudnn_norm_pool.cc,
// cublas_matmul.cc), the workspace check of prepare_dnn_kernel, and the helpers every family shares
// (cuda_dnn_util.h): status conversion, descriptors, dtypes, attributes. Precondition: a CUDA device is current
// on the calling thread when the context is made and when kernels are prepared and run (the backend's job).
#include "lms/backends/cuda/cuda_dnn.h"

#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "lms/backends/cuda/cuda_dnn_util.h"

namespace lms::cuda {

namespace {

// cuDNN's last error message is copied into a buffer of this many bytes (longer ones are cut).
constexpr size_t kCudnnMessageBytes = 1024;

// Newlines become "; " so that an error stays one line.
std::string one_line(const char* text) {
  std::string out;
  for (const char* p = text; *p; ++p) {
    if (*p == '\n' || *p == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else {
      out += *p;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

std::unexpected<Error> cudnn_error(cudnnStatus_t s, std::string_view call, std::string_view subject) {
  char message[kCudnnMessageBytes] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  const std::string detail = one_line(message);
  if (detail.empty()) return fail("{} for {}: {}", call, subject, cudnnGetErrorString(s));
  return fail("{} for {}: {} ({})", call, subject, cudnnGetErrorString(s), detail);
}

std::unexpected<Error> cublas_error(cublasStatus_t s, std::string_view call, std::string_view subject) {
  auto api = cublas_api();  // loaded whenever there is a status to name
  if (!api) return fail("{} for {}: cuBLAS status {}", call, subject, static_cast<int>(s));
  return fail("{} for {}: {}", call, subject, (*api)->get_status_name(s));
}

constexpr std::string_view kContextSubject = "the cuda backend's cuDNN/cuBLAS context";

// Zero-fills outputs with cudaMemsetAsync (all-zero bytes are +0.0 in f32 and f64).
class ZeroFillKernel final : public PreparedKernel {
 public:
  ZeroFillKernel(DnnContext& ctx, const KernelCall& call) : ctx_(ctx), op_(call.op) {
    for (const TensorRef& r : call.outputs)
      if (r.type->bytes() > 0) fills_.emplace_back(r.data, static_cast<size_t>(r.type->bytes()));
  }

  std::string describe() const override { return "zero fill (an empty reduction)"; }

  Result<void> run() override {
    for (const auto& [data, bytes] : fills_)
      LMS_TRY_VOID(cuda_ok(cudaMemsetAsync(data, 0, bytes, ctx_.stream), "cudaMemsetAsync", op_));
    return {};
  }

 private:
  DnnContext& ctx_;
  Op op_;
  std::vector<std::pair<void*, size_t>> fills_;
};

// The family builder of `op`; nullptr for ops not covered here (the backend's own kernels run them).
Result<PreparedPtr> (*builder_of(Op op))(DnnContext&, const KernelCall&) {
  switch (op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
    case Op::conv_backward_data:
    case Op::conv_backward_filter: return build_conv;
    case Op::batch_norm: return build_norm;
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d:
    case Op::avg_pool1d:
    case Op::avg_pool2d:
    case Op::avg_pool3d: return build_pool;
    case Op::matmul: return build_matmul;
    default: return nullptr;
  }
}

// The call as the builders read it: its arity checked (they index inputs and outputs by the op's declared
// arity) and `attrs` never null (a call without attributes has none set, so the op's defaults apply).
Result<KernelCall> checked(const KernelCall& call) {
  static const Attributes kNoAttributes;
  const OpDef& def = op_def(call.op);
  if (call.inputs.size() != def.inputs.size() || call.outputs.size() != def.outputs.size())
    return fail("cuda backend: {} called with {} inputs and {} outputs, the op has {} and {}", def.name,
                call.inputs.size(), call.outputs.size(), def.inputs.size(), def.outputs.size());
  KernelCall c = call;
  if (!c.attrs) c.attrs = &kNoAttributes;
  return c;
}

}  // namespace

Result<void> cudnn_ok(cudnnStatus_t s, std::string_view call, Op op) {
  if (s == CUDNN_STATUS_SUCCESS) return {};
  return cudnn_error(s, call, op_name(op));
}

void clear_cudnn_error() {
  char message[kCudnnMessageBytes] = {};
  cudnnGetLastErrorString(message, sizeof(message));
}

Result<void> cublas_ok(cublasStatus_t s, std::string_view call, Op op) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return cublas_error(s, call, op_name(op));
}

Result<void> cuda_ok(cudaError_t e, std::string_view call, Op op) {
  if (e == cudaSuccess) return {};
  return fail("{} for {}: {} ({})", call, op_name(op), cudaGetErrorName(e), cudaGetErrorString(e));
}

void DnnContextDeleter::operator()(DnnContext* c) const {
  if (!c) return;
  // Destruction statuses are ignored: there is nothing a destructor could do about them.
  if (c->cublas) (void)c->blas->destroy(c->cublas);
  if (c->cudnn) (void)cudnnDestroy(c->cudnn);
  delete c;
}

Result<std::string> load_cublas() { return LMS_TRY(cublas_api())->path; }

Result<DnnContextPtr> make_dnn_context(void* compute_stream, const DnnOptions& opts) {
  // cuBLAS: "Workspace size equal to or larger than 16KiB is enough to prevent CUBLAS_STATUS_ALLOC_FAILED".
  constexpr int64_t kMinCublasWorkspace = int64_t{16} << 10;
  if (opts.max_workspace_bytes < 0 || opts.cublas_workspace_bytes < kMinCublasWorkspace)
    return fail("cuda backend: DnnOptions workspace limits out of range (max_workspace_bytes {} must be >= 0, "
                "cublas_workspace_bytes {} >= {})",
                opts.max_workspace_bytes, opts.cublas_workspace_bytes, kMinCublasWorkspace);
  if (opts.max_conv_batch < 0)
    return fail("cuda backend: DnnOptions max_conv_batch {} must be >= 0 (0: no limit)", opts.max_conv_batch);
  DnnContextPtr ctx(new DnnContext());
  ctx->stream = static_cast<cudaStream_t>(compute_stream);
  ctx->opts = opts;
  auto dnn = [](cudnnStatus_t s, std::string_view call) -> Result<void> {
    if (s == CUDNN_STATUS_SUCCESS) return {};
    return cudnn_error(s, call, kContextSubject);
  };
  auto blas = [](cublasStatus_t s, std::string_view call) -> Result<void> {
    if (s == CUBLAS_STATUS_SUCCESS) return {};
    return cublas_error(s, call, kContextSubject);
  };
  LMS_TRY_VOID(dnn(cudnnCreate(&ctx->cudnn), "cudnnCreate"));
  LMS_TRY_VOID(dnn(cudnnSetStream(ctx->cudnn, ctx->stream), "cudnnSetStream"));
  const CublasApi* api = LMS_TRY(cublas_api());
  LMS_TRY_VOID(blas(api->create(&ctx->cublas), "cublasCreate"));
  ctx->blas = api;
  // cublasSetStream resets the handle's workspace to cuBLAS's own pool; every matmul node sets its planned
  // workspace right before its gemm, so the order here does not matter for them.
  LMS_TRY_VOID(blas(api->set_stream(ctx->cublas, ctx->stream), "cublasSetStream"));
  // alpha and beta are host scalars; atomics stay off (cuBLAS's default; it concerns routines like symv, gemm sums
  // split reductions deterministically either way).
  LMS_TRY_VOID(blas(api->set_pointer_mode(ctx->cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode"));
  LMS_TRY_VOID(blas(api->set_atomics_mode(ctx->cublas, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode"));
  // DEFAULT keeps f32 gemms in f32 (TF32 only when asked for); it does not affect f64.
  LMS_TRY_VOID(blas(api->set_math_mode(ctx->cublas, opts.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                    "cublasSetMathMode"));
  return ctx;
}

Result<std::unique_ptr<DnnKernel>> prepare_dnn_kernel(DnnContext& ctx, const KernelCall& call) {
  auto builder = builder_of(call.op);
  if (!builder) return std::unique_ptr<DnnKernel>();
  const KernelCall c = LMS_TRY(checked(call));
  PreparedPtr k = LMS_TRY(builder(ctx, c));
  const int64_t needed = k->workspace_needed();
  if (needed > 0) {
    const int64_t given = call.workspace ? call.workspace_bytes : 0;
    if (given < needed)
      return fail("cuda backend: {} needs a workspace of {} bytes, the plan gives it {} (was the program compiled "
                  "with this backend's workspace sizes and options?)",
                  op_name(call.op), needed, given);
  }
  return std::unique_ptr<DnnKernel>(std::move(k));
}

Result<int64_t> dnn_workspace_bytes(DnnContext& ctx, const KernelCall& call) {
  auto builder = builder_of(call.op);
  if (!builder) return int64_t{0};
  const KernelCall c = LMS_TRY(checked(call));
  PreparedPtr k = LMS_TRY(builder(ctx, c));
  return k->workspace_needed();
}

PreparedPtr zero_fill_kernel(DnnContext& ctx, const KernelCall& call) {
  return std::make_unique<ZeroFillKernel>(ctx, call);
}

Result<cudnnDataType_t> common_dnn_dtype(const KernelCall& call) {
  const TensorRef& first = call.inputs.empty() ? call.outputs[0] : call.inputs[0];
  const DType t = first.type->dtype;
  auto check = [&](const TensorRef& r) -> Result<void> {
    if (r.type->dtype != t)
      return fail("cuda backend: {} operands differ in dtype: {} and {}", op_name(call.op), to_string(*first.type),
                  to_string(*r.type));
    return {};
  };
  for (const TensorRef& r : call.inputs) LMS_TRY_VOID(check(r));
  for (const TensorRef& r : call.outputs) LMS_TRY_VOID(check(r));
  if (t == DType::f32) return CUDNN_DATA_FLOAT;
  if (t == DType::f64) return CUDNN_DATA_DOUBLE;
  return fail("cuda backend: dtype {} is not supported for {} (its cuDNN/cuBLAS kernel takes f32 and f64)",
              dtype_name(t), op_name(call.op));
}

Scaling scaling_for(cudnnDataType_t t) {
  static const float kOneF = 1.0f, kZeroF = 0.0f;
  static const double kOneD = 1.0, kZeroD = 0.0;
  if (t == CUDNN_DATA_DOUBLE) return Scaling{&kOneD, &kZeroD};
  return Scaling{&kOneF, &kZeroF};
}

Result<TensorDesc> packed_tensor(const std::vector<int64_t>& dims, cudnnDataType_t t, Op op) {
  const size_t rank = dims.size();
  if (rank < 4 || rank > 5)
    return fail("cuda backend: {} needs a 4-D or 5-D cuDNN tensor, got {}", op_name(op), to_string(dims));
  std::vector<int> d(rank), s(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    if (dims[i] < 1)
      return fail("cuda backend: {} cannot describe the empty tensor {} to cuDNN", op_name(op), to_string(dims));
    d[i] = LMS_TRY(to_int(dims[i], "a tensor dimension", op));
    s[i] = LMS_TRY(to_int(stride, "a tensor stride", op));
    stride *= dims[i];
  }
  // cuDNN's legacy kernels index with 32 bits (PyTorch splits larger batches for the same reason).
  if (auto count = to_int(stride, "a tensor's element count", op); !count) return std::unexpected(count.error());
  TensorDesc desc = LMS_TRY(TensorDesc::make("cudnnCreateTensorDescriptor", op));
  LMS_TRY_VOID(cudnn_ok(cudnnSetTensorNdDescriptor(desc.get(), t, static_cast<int>(rank), d.data(), s.data()),
                        "cudnnSetTensorNdDescriptor", op));
  return desc;
}

Result<int> to_int(int64_t v, std::string_view what, Op op) {
  if (v < INT_MIN || v > INT_MAX)
    return fail("cuda backend: {} of {} is {}, beyond the 32-bit range cuDNN and cuBLAS take", what, op_name(op), v);
  return static_cast<int>(v);
}

bool any_empty(const KernelCall& call) {
  for (const TensorRef& r : call.inputs)
    if (r.type->num_elements() == 0) return true;
  for (const TensorRef& r : call.outputs)
    if (r.type->num_elements() == 0) return true;
  return false;
}

}  // namespace lms::cuda
