// Internal to the cpu backend, included only by its .cc files (it pulls in dnnl.hpp, which must stay out of
// dnnl_kernels.h and cpu_backend.h): the oneDNN context, `CpuKernel` (one node's prepared work: oneDNN
// primitives and own loops run in order, plus the scratch space they need, laid out in one workspace), the
// descriptor helpers every family shares, and one builder per op family (dnnl_conv.cc, dnnl_norm.cc,
// dnnl_eltwise.cc, dnnl_pool.cc, cpu_loops.cc, cpu_loops_nn.cc). A builder returns nullptr when it does not
// cover the configuration (the reference kernel runs instead); it reads only types and attributes, never the
// data behind the call's pointers, so the same builder serves dnnl_workspace_bytes (null pointers) and
// prepare_dnnl_kernel.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lms/backends/cpu/dnnl_kernels.h"

namespace lms::cpu {

class DnnlContext {
 public:
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

using dnnl::memory;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;

// Every piece of a workspace starts at a multiple of this (oneDNN's own scratchpad alignment; a cache line).
inline constexpr int64_t kWorkspaceAlign = 64;
inline int64_t align_up(int64_t n) { return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// One node's kernel: steps run in order on the compute thread. The workspace is [scratchpad region | scratch
// buffer 0 | scratch buffer 1 | ...], each piece 64-byte aligned: the steps run one after another, so their
// oneDNN scratchpads share one region (its size is the largest of them); scratch buffers are the kernel's own
// temporaries (e.g. batch-norm variances) and each gets its own piece.
class CpuKernel final : public DnnlKernel {
 public:
  explicit CpuKernel(DnnlContext& ctx) : ctx_(ctx) {}
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  DnnlContext& ctx() const { return ctx_; }
  // A memory object over an arena buffer (or over nothing, when `data` is null in a workspace query).
  memory mem(const memory::desc& md, void* data) const { return memory(md, ctx_.engine, data); }
  // Adds a oneDNN step built in user scratchpad mode; `scratch_md` is its primitive descriptor's scratchpad.
  void add_primitive(dnnl::primitive prim, const memory::desc& scratch_md, Args args);
  // Adds an own loop (it may read scratch(i) when it runs).
  void add_loop(std::function<Result<void>()> loop);
  // Reserves a scratch buffer of `bytes`; returns its index for scratch() and scratch_mem().
  int add_scratch(int64_t bytes);
  // A memory object over scratch buffer `i`, pointed at it when the workspace is bound.
  memory scratch_mem(int i, const memory::desc& md);
  // The operand in the layout a primitive chose (`want`, from a descriptor made with format_tag::any) over an
  // arena buffer in the IR's plain layout (`plain`): the buffer itself when they agree; otherwise a scratch
  // buffer in `want`, filled by a reorder step added now (input_as), or copied back to the buffer by a reorder
  // step that add_primitive adds right after the next primitive (output_as).
  memory input_as(const memory::desc& want, const memory::desc& plain, const void* data);
  memory output_as(const memory::desc& want, const memory::desc& plain, void* data);
  // Adds a reorder step copying `from` into `to` (same dimensions, any layouts).
  void add_reorder(const memory& from, const memory& to);
  // Runs `tail` after this kernel's steps, with its workspace after this kernel's own pieces.
  void append(std::unique_ptr<CpuKernel> tail) { tail_ = std::move(tail); }
  // Scratch buffer `i` (valid once the workspace is bound, i.e. at run time).
  std::byte* scratch(int i) const { return scratch_ptr_[static_cast<size_t>(i)]; }

  // Bytes of workspace this kernel needs (0: none).
  int64_t workspace_needed() const;
  // Points every scratch memory object and scratch() into `ws` (at least workspace_needed() bytes).
  void bind_workspace(std::byte* ws);

  Result<void> run() override;
  int64_t scratchpad_bytes() const override { return workspace_needed(); }
  std::string describe() const override;

 private:
  struct Step {
    dnnl::primitive prim;  // empty for a loop step
    Args args;
    std::function<Result<void>()> loop;
  };
  DnnlContext& ctx_;
  std::vector<Step> steps_;
  int64_t scratchpad_region_ = 0;                  // the largest step scratchpad
  std::vector<memory> scratchpad_mems_;            // bound to the region's start
  std::vector<int64_t> scratch_bytes_;             // by scratch buffer
  std::vector<std::pair<int, memory>> scratch_mems_;  // (buffer, memory object over it)
  std::vector<std::byte*> scratch_ptr_;            // by scratch buffer, once bound
  std::vector<std::pair<memory, memory>> pending_outputs_;  // (scratch, arena) reorders after the next primitive
  std::unique_ptr<CpuKernel> tail_;                // runs after steps_ (append)

  void push_step(dnnl::primitive prim, const memory::desc& scratch_md, Args args);
  int64_t own_workspace() const;
};

using KernelPtr = std::unique_ptr<CpuKernel>;

// Advances a row-major walk by one row: `index` counts the outer dimensions of `extent` (all but the last, the
// last outer one fastest) and `base` moves by walk[d] per step of dimension d, back to its start on wrap-around.
template <class Extent>
void next_row(std::vector<int64_t>& index, const Extent& extent, const std::vector<int64_t>& walk, int64_t& base) {
  for (int d = static_cast<int>(extent.size()) - 2; d >= 0; --d) {
    if (++index[d] < extent[d]) {
      base += walk[d];
      return;
    }
    index[d] = 0;
    base -= walk[d] * (extent[d] - 1);
  }
}

// The arena layout of each operand of one node: a oneDNN descriptor for a value that assign_layouts keeps in a
// blocked layout, an empty (zero) descriptor for the IR's plain row-major layout.
struct OperandLayouts {
  std::vector<memory::desc> in, out;
};
// Elements per OpenMP thread below which an own element-wise loop stays on one thread (thread start-up costs
// microseconds; a loop this short takes about as long).
inline constexpr int64_t kParallelGrain = int64_t{1} << 15;

// A kernel of one loop step.
KernelPtr loop_kernel(DnnlContext& ctx, std::function<Result<void>()> f);

// Primitive attributes with the scratchpad in user mode (the workspace provides it).
dnnl::primitive_attr user_scratchpad();
// Row-major strides and an f32 descriptor with them.
Dims row_major_strides(const Dims& dims);
memory::desc plain(const Dims& dims);
inline Dims dims_of(const Shape& s) { return Dims(s.begin(), s.end()); }
// The ops build_conv builds (each reads its activations in any layout).
bool is_convolution(Op op);
// The layouts of `node`'s operands under `layouts` (all plain when either is null; dnnl_layouts.cc).
OperandLayouts operand_layouts(const ValueLayouts* layouts, const Node* node, const KernelCall& call);
// The layouts `call`'s op reads its inputs in, given its operands' arena layouts: convolutions read any (they
// reorder inside the node); batch norm's data inputs and the elementwise ops' same-shape inputs their output's
// layout; everything else plain. Outputs: as in `arena`.
OperandLayouts wanted_layouts(const KernelCall& call, const OperandLayouts& arena);
// `layout` where it names one (OperandLayouts), else the plain layout of `dims`.
inline memory::desc arena_md(const memory::desc& layout, const Dims& dims) {
  return layout.is_zero() ? plain(dims) : layout;
}
// A list attribute with one entry per spatial dimension; empty means `rank` copies of `fill`.
Result<Dims> spatial(const KernelCall& call, std::string_view name, int rank, int64_t fill);
// Typed views of the call's buffers.
inline const float* in_f32(const KernelCall& c, size_t i) { return static_cast<const float*>(c.inputs[i].data); }
inline float* out_f32(const KernelCall& c, size_t i) { return static_cast<float*>(c.outputs[i].data); }
inline const Shape& in_shape(const KernelCall& c, size_t i) { return c.inputs[i].type->shape; }
inline const Shape& out_shape(const KernelCall& c, size_t i) { return c.outputs[i].type->shape; }
// A number attribute (int or float), or the op's declared default; NaN when neither exists (the shape rules
// make every attribute read here present or defaulted).
double number(const KernelCall& call, std::string_view name);
// True when every input and output is f32.
bool all_f32(const KernelCall& call);
// Product of s[from, to).
int64_t product(const Shape& s, size_t from, size_t to);

// The builders, by family. Each returns nullptr for a configuration it does not cover.
// conv*, conv_transpose*, grads; the activations (not the weights) in the layouts `arena` names
Result<KernelPtr> build_conv(DnnlContext& ctx, const KernelCall& call, const OperandLayouts& arena);
Result<KernelPtr> build_matmul(DnnlContext& ctx, const KernelCall& call);      // matmul
// batch/layer norm and grads; batch norm's data operands (x, y; dy, x, dx) all in `data_layout` (zero: plain)
Result<KernelPtr> build_norm(DnnlContext& ctx, const KernelCall& call, const memory::desc& data_layout);
Result<KernelPtr> build_eltwise(DnnlContext& ctx, const KernelCall& call);     // relu, gelu, binary, softmax, ...
Result<KernelPtr> build_reduce(DnnlContext& ctx, const KernelCall& call);      // mean, reduce_sum, sum_to, gap
Result<KernelPtr> build_pool(DnnlContext& ctx, const KernelCall& call);        // pooling and grads
Result<KernelPtr> build_pool_argmax(DnnlContext& ctx, const KernelCall& call);  // max_pool_argmax, ..._by_argmax
Result<KernelPtr> build_loops(DnnlContext& ctx, const KernelCall& call);       // movement, fills, copies
Result<KernelPtr> build_loops_nn(DnnlContext& ctx, const KernelCall& call);    // losses, embedding, updates
// The layout oneDNN picks for the output of a conv2d/conv3d (dst) or conv_backward_data (diff_src) given free
// choice; a zero descriptor for every other op or a configuration build_conv declines.
Result<memory::desc> conv_output_layout(DnnlContext& ctx, const KernelCall& call);

}  // namespace lms::cpu
