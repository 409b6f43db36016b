// Internal to the cuda backend's cuDNN/cuBLAS nodes (cuda_dnn.h), included only by cuda_dnn.cc, cudnn_conv.cc,
// cudnn_norm_pool.cc and cublas_matmul.cc (it pulls in cudnn.h and cublas_v2.h (cublas_api.h), which must stay out of
// cuda_dnn.h): the DnnContext, `PreparedKernel` (a DnnKernel that knows its workspace size), the conversion of
// cuDNN/cuBLAS/CUDA statuses into one-line errors naming the call and the op, RAII wrappers for cuDNN descriptors,
// and the attribute and shape helpers the families share. Precondition for everything here: the call passed the
// op's shape rule (the builders still check what they index by, and fail with a message rather than crash).
// A builder reads only types and attributes, never the data behind the call's pointers, so one builder serves
// dnn_workspace_bytes (null pointers) and prepare_dnn_kernel, and both see the same algorithm and workspace size.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "lms/backends/cuda/cublas_api.h"
#include "lms/backends/cuda/cuda_dnn.h"
#include "lms/backends/reference/kernel_util.h"
#include "lms/ops/op.h"

namespace lms::cuda {

class DnnContext {
 public:
  cudnnHandle_t cudnn = nullptr;    // bound to `stream`
  cublasHandle_t cublas = nullptr;  // bound to `stream`; its workspace is set by each matmul node before its gemm
  const CublasApi* blas = nullptr;  // the loaded cuBLAS entry points (set whenever `cublas` is)
  cudaStream_t stream = nullptr;    // the backend's compute stream (not owned)
  DnnOptions opts;
};

// One node's prepared kernel and the workspace it was prepared for.
class PreparedKernel : public DnnKernel {
 public:
  // Bytes of KernelCall::workspace the kernel uses (0: none).
  int64_t workspace_needed() const { return workspace_needed_; }

 protected:
  int64_t workspace_needed_ = 0;
};
using PreparedPtr = std::unique_ptr<PreparedKernel>;

// Library workspaces (cuBLAS's, cuDNN's convolution algorithms') start at a multiple of this many bytes:
// cublasSetWorkspace refuses anything less, and cuDNN documents no alignment for them, so they get the same. Planned
// buffers are aligned to less (64), so such a node asks for this much more than the library needs and starts the
// library's part at the next multiple (aligned_workspace).
inline constexpr int64_t kLibraryWorkspaceAlignment = 256;
inline void* aligned_workspace(void* ws) {
  const auto at = reinterpret_cast<uintptr_t>(ws), align = static_cast<uintptr_t>(kLibraryWorkspaceAlignment);
  return reinterpret_cast<void*>((at + align - 1) / align * align);
}

// The builders, by family (each for the ops cuda_dnn.cc dispatches to it).
Result<PreparedPtr> build_conv(DnnContext& ctx, const KernelCall& call);    // conv*, conv_transpose*, conv grads
// A convolution pass on cuBLAS (conv_gemm.cc), or nullptr when DnnOptions::conv_gemm does not take `plan`.
struct ConvPlan;
Result<PreparedPtr> build_gemm_conv(DnnContext& ctx, const KernelCall& call, const ConvPlan& plan,
                                    cudnnDataType_t t);
Result<PreparedPtr> build_norm(DnnContext& ctx, const KernelCall& call);    // batch_norm
Result<PreparedPtr> build_pool(DnnContext& ctx, const KernelCall& call);    // max/avg pooling and their grads
Result<PreparedPtr> build_matmul(DnnContext& ctx, const KernelCall& call);  // matmul

// A kernel that zero-fills every output: what a convolution or matmul computes when its reduction is over no
// elements (the reference's empty sums), and a no-op when the outputs are empty too.
PreparedPtr zero_fill_kernel(DnnContext& ctx, const KernelCall& call);

// Status conversion: "<call> for <op>: <status name>" (plus cuDNN's last error message when it has one).
Result<void> cudnn_ok(cudnnStatus_t s, std::string_view call, Op op);
Result<void> cublas_ok(cublasStatus_t s, std::string_view call, Op op);
Result<void> cuda_ok(cudaError_t e, std::string_view call, Op op);
// Reads and drops cuDNN's last error message after a failure the caller tolerates (a tried algorithm), so that a
// later error is not reported with its text.
void clear_cudnn_error();

// An owned cuDNN descriptor: created by `make`, destroyed with the object.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  CudnnDescriptor(CudnnDescriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  CudnnDescriptor& operator=(CudnnDescriptor&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  ~CudnnDescriptor() { reset(); }

  // `create_name` is the create function's name, for the error.
  static Result<CudnnDescriptor> make(std::string_view create_name, Op op) {
    CudnnDescriptor r;
    LMS_TRY_VOID(cudnn_ok(Create(&r.d_), create_name, op));
    return r;
  }
  T get() const { return d_; }

 private:
  void reset() {
    if (d_) (void)Destroy(d_);  // destroying a valid descriptor cannot fail in a way we could act on
    d_ = nullptr;
  }
  T d_ = nullptr;
};

using TensorDesc = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDesc =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolingDesc =
    CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// The cuDNN data type every operand of `call` shares: f32 or f64. Errors name the op and the dtype (or the
// mismatching operands).
Result<cudnnDataType_t> common_dnn_dtype(const KernelCall& call);

// The host scaling factors cuDNN and cuBLAS read: float for f32 data, double for f64 (cuDNN's rule).
struct Scaling {
  const void* one;
  const void* zero;
};
Scaling scaling_for(cudnnDataType_t t);

// A fully packed row-major NC... tensor descriptor of `dims` (4 or 5 of them). Errors: a dimension or stride
// above INT_MAX (cuDNN's legacy descriptors are 32-bit), or cuDNN refusing the shape.
Result<TensorDesc> packed_tensor(const std::vector<int64_t>& dims, cudnnDataType_t t, Op op);

// `v` as an int for a cuDNN or cuBLAS argument; errors name `what` and the op.
Result<int> to_int(int64_t v, std::string_view what, Op op);
using reference::product;  // s[from, to)
inline const Shape& in_shape(const KernelCall& c, size_t i) { return c.inputs[i].type->shape; }
inline const Shape& out_shape(const KernelCall& c, size_t i) { return c.outputs[i].type->shape; }
// True when some input or output has no elements.
bool any_empty(const KernelCall& call);

}  // namespace lms::cuda
