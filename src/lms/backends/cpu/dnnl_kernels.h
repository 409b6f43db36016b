// Internal to the cpu backend: oneDNN primitives for the ops it accelerates, built once per node at prepare
// time and run many times. This header keeps dnnl.hpp out of everything that includes it: the engine, stream,
// primitives and memory objects live behind opaque types defined in dnnl_kernels.cc.
// Covered today (f32 only): conv1d/2d/3d forward, conv_backward_data, conv_backward_filter and matmul (batched,
// transposes expressed as strides). Every other op, and every other dtype, runs the reference kernel
// (correct but slow; later steps move more ops onto oneDNN).
// Scratchpads: oneDNN runs in user scratchpad mode and each primitive gets its own buffer allocated here at
// prepare time. That is NOT yet a planned buffer (DESIGN.md wants workspaces to be buffers of the plan); the
// bytes are reported by `DnnlKernel::scratchpad_bytes` so the gap is visible.
#pragma once

#include <cstdint>
#include <memory>

#include "lms/runtime/kernel.h"
#include "lms/support/error.h"

namespace lms::cpu {

// The oneDNN CPU engine and the stream the compute thread submits to (one per backend).
class DnnlContext;
struct DnnlContextDeleter {
  void operator()(DnnlContext* c) const;
};
using DnnlContextPtr = std::unique_ptr<DnnlContext, DnnlContextDeleter>;
Result<DnnlContextPtr> make_dnnl_context();

// One node's prepared primitive with its memory objects bound to the node's arena buffers.
class DnnlKernel {
 public:
  virtual ~DnnlKernel() = default;
  // Runs the primitive and waits for it (call only from the compute stream's thread).
  virtual Result<void> run() = 0;
  // Bytes of this primitive's own scratchpad (allocated at prepare, outside the plan).
  virtual int64_t scratchpad_bytes() const = 0;
};

// A prepared primitive for `call` (buffers as they will be at run time), or nullptr when oneDNN does not
// cover this op or dtype and the caller must run the reference kernel. Errors: oneDNN refuses the shapes.
Result<std::unique_ptr<DnnlKernel>> prepare_dnnl_kernel(DnnlContext& ctx, const KernelCall& call);

}  // namespace lms::cpu
