// Internal to the cuda backend: the nodes that run on cuDNN and cuBLAS, each prepared once (descriptors,
// algorithm, workspace size) and then enqueued on the backend's compute stream as often as it runs. Covered:
// convolutions 1/2/3-D forward, conv_backward_data, conv_backward_filter and transposed convolutions (cuDNN's
// legacy convolution API, which cuDNN 9 keeps), batch_norm (cuDNN, spatial mode; its gradient is an own kernel), max
// and avg pooling (cuDNN; the pooling gradients are own kernels), matmul (cuBLAS, batched and strided), in f32 and
// f64. Every other op is one of the backend's own CUDA kernels (cuda_ops.h).
// Algorithms: chosen from cuDNN's heuristics (never by timing runs, so the choice depends on the shapes and the
// options alone and two programs with the same nodes compute the same bits), deterministic ones only, the
// fastest whose workspace fits DnnOptions::max_workspace_bytes (a convolution whose batch needs more runs in
// chunks of the batch). TF32 is off unless DnnOptions::allow_tf32.
// Workspaces are buffers of the memory plan (KernelCall::workspace); nothing here allocates device memory after
// the context is made. This header keeps cudnn.h and cublas_v2.h out of everything that includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lms/runtime/backend.h"
#include "lms/runtime/kernel.h"
#include "lms/support/error.h"

namespace lms::cuda {

struct DnnOptions {
  int64_t max_workspace_bytes = int64_t{256} << 20;  // the largest workspace one node's algorithm may ask for
  int64_t cublas_workspace_bytes = int64_t{4} << 20;  // workspace each matmul node gives cuBLAS (planned)
  bool allow_tf32 = false;  // let f32 convolutions and matmuls use TF32 tensor cores (not bit-comparable)
  int64_t max_conv_batch = 0;  // at most this many samples per cuDNN convolution call (0: the whole batch, unless
                               // its workspace passes max_workspace_bytes; cudnn_conv.cc, batch chunks)
  ConvGemm conv_gemm = ConvGemm::one_by_one;  // the convolutions on cuBLAS (conv_gemm.cc) instead of cuDNN
};

// The cuDNN and cuBLAS handles, bound to the backend's compute stream (a cudaStream_t passed as void*).
class DnnContext;
struct DnnContextDeleter {
  void operator()(DnnContext* c) const;
};
using DnnContextPtr = std::unique_ptr<DnnContext, DnnContextDeleter>;
Result<DnnContextPtr> make_dnn_context(void* compute_stream, const DnnOptions& opts);

// Loads cuBLAS (cublas_api.h: at run time, once per process) and resolves every entry point the backend calls:
// the library file, or the error make_dnn_context would report. Needs no GPU.
Result<std::string> load_cublas();

// One node's prepared kernel, its descriptors bound to the node's arena buffers.
class DnnKernel {
 public:
  virtual ~DnnKernel() = default;
  // Enqueues the node on the context's compute stream (asynchronous; errors are launch/setup errors).
  virtual Result<void> run() = 0;
  // How it runs, for Backend::kernel_description (empty: nothing to say beyond the op).
  virtual std::string describe() const { return {}; }
};

// A prepared kernel for `call` (buffers as they will be at run time), or nullptr when the op is not one of
// those listed above (the backend's own kernels run it). Errors: an unsupported dtype for a covered op, shapes
// cuDNN refuses, no deterministic algorithm within the workspace limit, or call.workspace_bytes smaller than
// dnn_workspace_bytes (naming the op and both sizes).
Result<std::unique_ptr<DnnKernel>> prepare_dnn_kernel(DnnContext& ctx, const KernelCall& call);

// The workspace bytes `call`'s kernel needs, from types and attributes alone (data pointers may be null); 0 for
// ops this file does not cover. Deterministic for a given call and options.
Result<int64_t> dnn_workspace_bytes(DnnContext& ctx, const KernelCall& call);

}  // namespace lms::cuda
