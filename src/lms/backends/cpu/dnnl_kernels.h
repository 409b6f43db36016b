// Internal to the cpu backend: each node's kernel, built once at prepare time and run many times: a oneDNN
// primitive (or a few in a row) where oneDNN has the op, an own tight f32 loop where it is a small elementwise
// op, a loss, an optimizer update or a data movement. This header keeps dnnl.hpp out of everything that
// includes it: the engine, stream, primitives and memory objects live behind opaque types (dnnl_util.h, which
// only the backend's .cc files include).
// Covered (f32; ids and labels i32/i64): see the builders in dnnl_conv.cc, dnnl_norm.cc, dnnl_eltwise.cc,
// dnnl_pool.cc, dnnl_reduce.cc, cpu_loops.cc and cpu_loops_nn.cc. Every other op or dtype runs the reference
// kernel (prepare_dnnl_kernel returns nullptr), and so do the few configurations a builder declines (named
// in its file comment).
// Workspaces: oneDNN runs in user scratchpad mode; a kernel's scratchpad and its own temporaries are one
// workspace of dnnl_workspace_bytes, which the plan provides as a buffer (KernelCall::workspace).
// Layouts: a value is either in the IR's plain row-major layout or in a oneDNN blocked layout that
// assign_layouts chose for it (dnnl_layouts.cc); a kernel whose op cannot read an operand's layout reorders it
// into its workspace first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lms/ir/graph.h"
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

// One node's prepared kernel with its memory objects bound to the node's arena buffers.
class DnnlKernel {
 public:
  virtual ~DnnlKernel() = default;
  // Runs the kernel and waits for it. A kernel with oneDNN steps submits to the context's one stream, so it
  // runs only on the compute stream's thread; the loop-only copies (swap_out, swap_in) may run on any.
  virtual Result<void> run() = 0;
  // Bytes of this kernel's workspace (oneDNN scratchpads and own temporaries; see dnnl_workspace_bytes).
  virtual int64_t scratchpad_bytes() const = 0;
  // Its steps in order, for `lms profile`: each oneDNN primitive's kind and implementation (e.g. "convolution
  // brg:avx512_core"), "own loop" for each of the kernel's own loops.
  virtual std::string describe() const = 0;
};

// The arena layout of every value of one graph (dnnl_layouts.cc), opaque here.
class ValueLayouts;
struct ValueLayoutsDeleter {
  void operator()(ValueLayouts* l) const;
};
using ValueLayoutsPtr = std::unique_ptr<ValueLayouts, ValueLayoutsDeleter>;
// Chooses each value's layout, from the graph alone (the same graph gives the same layouts, so workspace sizes
// and prepared kernels agree). Errors: oneDNN refuses a convolution's shapes.
Result<ValueLayoutsPtr> assign_layouts(DnnlContext& ctx, const Graph& g);

// A prepared kernel for `call` (buffers as they will be at run time), or nullptr when this backend does not
// cover this op or dtype and the caller must run the reference kernel. The kernel's scratch lives in
// call.workspace (call.workspace_bytes long). `layouts` with `node` (the call's node) give the operands'
// layouts; without them every operand is plain. Errors: oneDNN refuses the shapes, or the workspace is smaller
// than dnnl_workspace_bytes (naming the op and both sizes).
Result<std::unique_ptr<DnnlKernel>> prepare_dnnl_kernel(DnnlContext& ctx, const KernelCall& call,
                                                        const ValueLayouts* layouts = nullptr,
                                                        const Node* node = nullptr);

// The workspace bytes `call`'s kernel needs: the oneDNN scratchpad (user mode) plus the kernel's own
// temporaries, each piece aligned to 64 bytes, summed. Computed from types and attributes only (the call's
// data pointers may be null). 0 when the op runs the reference kernel or needs no scratch.
Result<int64_t> dnnl_workspace_bytes(DnnlContext& ctx, const KernelCall& call, const ValueLayouts* layouts = nullptr,
                                     const Node* node = nullptr);

}  // namespace lms::cpu
