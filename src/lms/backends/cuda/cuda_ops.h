// Internal to the cuda backend: the own-kernel dispatcher. For every op that is neither a cuDNN/cuBLAS node
// (cuda_dnn.h), a copy between device and host (the backend's copy streams) nor a source fed by the runtime, it
// turns a KernelCall into a prepared sequence of element-function launches (kernel_fns.h). A Launcher says where
// they run: on the GPU, enqueued on the compute stream, or on the host in plain loops. The host mode exists so
// that CI, which has no GPU, runs exactly these geometries and numerics against the reference backend
// (tests/backends/cuda_ops_test.cc); it is compiled into every build (cuda_ops.cc and cuda_ops_nn.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "lms/runtime/kernel.h"
#include "lms/support/error.h"

namespace lms::cuda {

struct Launcher {
  bool host = false;           // run element functions in host loops (tests) instead of on the GPU
  void* stream = nullptr;      // the cudaStream_t to enqueue on (GPU mode)
  int32_t* status = nullptr;   // where kernels report invalid ids and labels (kernel_fns.h StatusCode)
};

// A prepared node: enqueues (GPU) or runs (host) the node's launches in order.
using OwnKernel = std::function<Result<void>()>;

// True for the ops prepare_own_kernel handles.
bool is_own_op(Op op);
// True for the calls prepare_own_kernel handles: those of own ops, and max and average pooling with ceil_mode
// (cuDNN's pooling takes symmetric padding only; pooling without it runs on cuDNN).
bool is_own_call(const KernelCall& call);

// The node's launches with its buffers and geometry bound, after checking the call against the op's shape
// rule. nullopt: not an own op. Errors: a malformed call, an unsupported dtype, a rank above kMaxDims, or a
// workspace smaller than own_workspace_bytes.
Result<std::optional<OwnKernel>> prepare_own_kernel(const KernelCall& call, const Launcher& launcher);

// The workspace bytes an own op needs (the per-position doubles of the losses, embedding_grad's sort), from types
// alone; 0 for every other op.
Result<int64_t> own_workspace_bytes(const KernelCall& call);

}  // namespace lms::cuda
