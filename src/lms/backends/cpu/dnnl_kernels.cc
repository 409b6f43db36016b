// The cpu backend's kernels (see dnnl_kernels.h): the oneDNN context, CpuKernel (steps and workspace layout,
// dnnl_util.h), the shared descriptor helpers, and the dispatch from an op to its family's builder. Every
// oneDNN call is inside a try block: oneDNN reports errors as dnnl::error exceptions, and no exception may
// cross the library boundary.
#include "lms/backends/cpu/dnnl_kernels.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/backends/reference/kernels.h"
#include "lms/ops/op.h"

namespace lms::cpu {

void DnnlContextDeleter::operator()(DnnlContext* c) const { delete c; }

Result<DnnlContextPtr> make_dnnl_context() {
  try {
    return DnnlContextPtr(new DnnlContext());
  } catch (const dnnl::error& e) {
    return fail("cpu backend: cannot create the oneDNN engine: {}", e.what());
  }
}

void CpuKernel::push_step(dnnl::primitive prim, const memory::desc& scratch_md, Args args) {
  const auto bytes = static_cast<int64_t>(scratch_md.get_size());
  if (bytes > 0) {
    memory m(scratch_md, ctx_.engine, nullptr);
    args[DNNL_ARG_SCRATCHPAD] = m;
    scratchpad_mems_.push_back(m);
    scratchpad_region_ = std::max(scratchpad_region_, bytes);
  }
  steps_.push_back(Step{std::move(prim), std::move(args), {}});
}

void CpuKernel::add_primitive(dnnl::primitive prim, const memory::desc& scratch_md, Args args) {
  push_step(std::move(prim), scratch_md, std::move(args));
  for (auto& [scratch, arena] : pending_outputs_) add_reorder(scratch, arena);
  pending_outputs_.clear();
}

void CpuKernel::add_reorder(const memory& from, const memory& to) {
  dnnl::reorder::primitive_desc pd(ctx_.engine, from.get_desc(), ctx_.engine, to.get_desc(), user_scratchpad());
  push_step(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

memory CpuKernel::input_as(const memory::desc& want, const memory::desc& plain, const void* data) {
  memory arena = mem(plain, const_cast<void*>(data));
  if (want == plain) return arena;
  memory scratch = scratch_mem(add_scratch(static_cast<int64_t>(want.get_size())), want);
  add_reorder(arena, scratch);
  return scratch;
}

memory CpuKernel::output_as(const memory::desc& want, const memory::desc& plain, void* data) {
  memory arena = mem(plain, data);
  if (want == plain) return arena;
  memory scratch = scratch_mem(add_scratch(static_cast<int64_t>(want.get_size())), want);
  pending_outputs_.emplace_back(scratch, arena);
  return scratch;
}

void CpuKernel::add_loop(std::function<Result<void>()> loop) { steps_.push_back(Step{{}, {}, std::move(loop)}); }

int CpuKernel::add_scratch(int64_t bytes) {
  scratch_bytes_.push_back(bytes);
  scratch_ptr_.push_back(nullptr);
  return static_cast<int>(scratch_bytes_.size()) - 1;
}

memory CpuKernel::scratch_mem(int i, const memory::desc& md) {
  memory m(md, ctx_.engine, nullptr);
  scratch_mems_.emplace_back(i, m);
  return m;
}

int64_t CpuKernel::own_workspace() const {
  int64_t total = align_up(scratchpad_region_);
  for (int64_t b : scratch_bytes_) total += align_up(b);
  return total;
}

int64_t CpuKernel::workspace_needed() const { return own_workspace() + (tail_ ? tail_->workspace_needed() : 0); }

void CpuKernel::bind_workspace(std::byte* ws) {
  for (memory& m : scratchpad_mems_) m.set_data_handle(ws);
  int64_t offset = align_up(scratchpad_region_);
  for (size_t i = 0; i < scratch_bytes_.size(); ++i) {
    scratch_ptr_[i] = ws + offset;
    offset += align_up(scratch_bytes_[i]);
  }
  for (auto& [i, m] : scratch_mems_) m.set_data_handle(scratch_ptr_[static_cast<size_t>(i)]);
  if (tail_) tail_->bind_workspace(ws + offset);
}

KernelPtr loop_kernel(DnnlContext& ctx, std::function<Result<void>()> f) {
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_loop(std::move(f));
  return k;
}

Result<void> CpuKernel::run() {
  try {
    bool submitted = false;
    for (Step& s : steps_) {
      if (s.loop) {
        if (submitted) ctx_.stream.wait();  // the loop reads what the primitive wrote
        submitted = false;
        LMS_TRY_VOID(s.loop());
        continue;
      }
      s.prim.execute(ctx_.stream, s.args);
      submitted = true;
    }
    if (submitted) ctx_.stream.wait();
  } catch (const dnnl::error& e) {
    return fail("cpu backend: oneDNN primitive failed: {}", e.what());
  }
  return tail_ ? tail_->run() : Result<void>{};
}

std::string CpuKernel::describe() const {
  std::string s;
  for (const Step& step : steps_) {
    if (!s.empty()) s += ", ";
    if (step.loop) {
      s += "own loop";
      continue;
    }
    const char* impl = nullptr;
    const char* kind = "primitive";
    try {
      kind = dnnl_prim_kind2str(static_cast<dnnl_primitive_kind_t>(step.prim.get_kind()));
      if (dnnl_primitive_desc_query(step.prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl) !=
          dnnl_success)
        impl = nullptr;
    } catch (const dnnl::error&) {  // a primitive built without errors answers both; say so if one does not
    }
    s += fmt::format("{} {}", kind, impl ? impl : "(implementation unknown)");
  }
  if (tail_) s += (s.empty() ? "" : ", ") + tail_->describe();
  return s;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Dims row_major_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

memory::desc plain(const Dims& dims) { return memory::desc(dims, memory::data_type::f32, row_major_strides(dims)); }

Result<Dims> spatial(const KernelCall& call, std::string_view name, int rank, int64_t fill) {
  IntList v = call.attrs->get_ints(name, {});
  if (v.empty()) v.assign(static_cast<size_t>(rank), fill);
  if (static_cast<int>(v.size()) != rank)
    return fail("cpu backend: {} attribute '{}' has {} entries for {} spatial dimensions", op_def(call.op).name, name,
                v.size(), rank);
  return Dims(v.begin(), v.end());
}

double number(const KernelCall& call, std::string_view name) { return number_attr(op_def(call.op), *call.attrs, name); }

bool all_f32(const KernelCall& call) {
  for (const TensorRef& r : call.inputs)
    if (r.type->dtype != DType::f32) return false;
  for (const TensorRef& r : call.outputs)
    if (r.type->dtype != DType::f32) return false;
  return true;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

namespace {

// The family builder of `op` among those given no layouts (their operands are plain, or element-wise ops' all in
// one layout); nullptr for convolutions and normalizations (build_in_layouts) and for ops nothing here covers
// (sources, and whatever is left).
Result<KernelPtr> (*builder_of(Op op))(DnnlContext&, const KernelCall&) {
  switch (op) {
    case Op::matmul: return build_matmul;
    case Op::relu:
    case Op::gelu:
    case Op::silu:
    case Op::sigmoid:
    case Op::tanh:
    case Op::clamp:
    case Op::sqrt:
    case Op::exp:
    case Op::log:
    case Op::relu_grad:
    case Op::gelu_grad:
    case Op::silu_grad:
    case Op::sigmoid_grad:
    case Op::tanh_grad:
    case Op::clamp_grad:
    case Op::sqrt_grad:
    case Op::log_grad:
    case Op::add:
    case Op::mul:
    case Op::bias_add:
    case Op::softmax:
    case Op::softmax_grad: return build_eltwise;
    case Op::mean:
    case Op::reduce_sum:
    case Op::sum_to:
    case Op::global_avg_pool: return build_reduce;
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d:
    case Op::avg_pool1d:
    case Op::avg_pool2d:
    case Op::avg_pool3d:
    case Op::max_pool_grad:
    case Op::avg_pool_grad: return build_pool;
    case Op::max_pool_argmax:
    case Op::max_pool_grad_by_argmax: return build_pool_argmax;
    case Op::constant:
    case Op::scale:
    case Op::reshape:
    case Op::swap_out:
    case Op::swap_in:
    case Op::transpose:
    case Op::concat:
    case Op::slice:
    case Op::slice_grad:
    case Op::broadcast_to: return build_loops;
    case Op::cross_entropy:
    case Op::cross_entropy_grad:
    case Op::embedding:
    case Op::embedding_grad:
    case Op::sgd_update:
    case Op::momentum_update:
    case Op::adam_update:
    case Op::rng_advance:
    case Op::dropout:
    case Op::hardswish:
    case Op::hardswish_grad:
    case Op::bn_running_update: return build_loops_nn;
    default: return nullptr;
  }
}

// The kernel for `call` with its operands in the layouts `arena` names, which are those the op can read
// (wanted_layouts); nullptr where nothing here covers it.
Result<KernelPtr> build_in_layouts(DnnlContext& ctx, const KernelCall& call, const OperandLayouts& arena) {
  if (is_convolution(call.op)) return build_conv(ctx, call, arena);
  if (call.op == Op::batch_norm || call.op == Op::batch_norm_grad || call.op == Op::layer_norm ||
      call.op == Op::layer_norm_grad)
    return build_norm(ctx, call, arena.out.empty() ? memory::desc() : arena.out[0]);
  auto builder = builder_of(call.op);
  return builder ? builder(ctx, call) : KernelPtr();
}

bool all_plain(const std::vector<memory::desc>& layouts) {
  return std::ranges::all_of(layouts, [](const memory::desc& md) { return md.is_zero(); });
}

// A call whose inputs were reordered into scratch buffers: it owns the operand lists its spans point into.
struct ReorderedCall {
  std::vector<TensorRef> inputs, outputs;
  KernelCall call;
  explicit ReorderedCall(const KernelCall& c)
      : inputs(c.inputs.begin(), c.inputs.end()), outputs(c.outputs.begin(), c.outputs.end()), call(c) {
    call.inputs = inputs;
    call.outputs = outputs;
  }
};

// Note [Layouts at a node]: the inputs whose arena layout is not the one the op wants are reordered into
// scratch buffers at the front of the workspace, and the op's kernel runs after that on the scratch copies, with
// the rest of the workspace for itself. Where nothing here covers the op, the reference kernel runs on plain
// copies of the inputs. assign_layouts gives blocked outputs only to ops whose kernels are built here (an
// internal error otherwise: never a silent wrong answer).
Result<KernelPtr> with_reordered_inputs(DnnlContext& ctx, const KernelCall& call, const OperandLayouts& arena,
                                        const OperandLayouts& want) {
  auto k = std::make_unique<CpuKernel>(ctx);
  auto reordered = std::make_shared<ReorderedCall>(call);
  std::vector<std::pair<size_t, int>> moved;  // (input, scratch buffer)
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (want.in[i] == arena.in[i]) continue;
    const Dims dims = dims_of(in_shape(call, i));
    const memory::desc to = arena_md(want.in[i], dims);
    moved.emplace_back(i, k->add_scratch(static_cast<int64_t>(to.get_size())));
    k->add_reorder(k->mem(arena_md(arena.in[i], dims), call.inputs[i].data), k->scratch_mem(moved.back().second, to));
  }
  auto* ws = static_cast<std::byte*>(call.workspace);
  const int64_t front = k->workspace_needed();
  if (ws) k->bind_workspace(ws);
  for (auto [i, buffer] : moved) reordered->inputs[i].data = ws ? k->scratch(buffer) : nullptr;
  reordered->call.workspace = ws ? ws + front : nullptr;
  reordered->call.workspace_bytes = std::max<int64_t>(0, call.workspace_bytes - front);
  KernelPtr inner = LMS_TRY(build_in_layouts(ctx, reordered->call, want));
  if (!inner) {
    if (!all_plain(want.in) || !all_plain(want.out))
      return fail("cpu backend: internal: {} has blocked operands but no kernel", op_def(call.op).name);
    inner = loop_kernel(ctx, [reordered]() { return run_reference_kernel(reordered->call); });
  }
  k->append(std::move(inner));
  return k;
}

Result<KernelPtr> build(DnnlContext& ctx, const KernelCall& call, const OperandLayouts& arena) {
  try {
    OperandLayouts want = wanted_layouts(call, arena);
    if (want.in == arena.in) {
      KernelPtr k = LMS_TRY(build_in_layouts(ctx, call, arena));
      if (k || (all_plain(arena.in) && all_plain(arena.out))) return k;  // nullptr: the caller runs the reference
      want.in.assign(call.inputs.size(), memory::desc());  // declined: the reference kernel on plain inputs
    }
    return with_reordered_inputs(ctx, call, arena, want);
  } catch (const dnnl::error& e) {
    std::string in = call.inputs.empty() ? "()" : to_string(*call.inputs[0].type);
    std::string out = call.outputs.empty() ? "()" : to_string(*call.outputs[0].type);
    return fail("cpu backend: oneDNN cannot build a primitive for {} ({} -> {}): {}", op_def(call.op).name, in, out,
                e.what());
  }
}

}  // namespace

Result<std::unique_ptr<DnnlKernel>> prepare_dnnl_kernel(DnnlContext& ctx, const KernelCall& call,
                                                        const ValueLayouts* layouts, const Node* node) {
  KernelPtr k = LMS_TRY(build(ctx, call, operand_layouts(layouts, node, call)));
  if (!k) return std::unique_ptr<DnnlKernel>();
  const int64_t needed = k->workspace_needed();
  if (needed > 0) {
    const int64_t given = call.workspace ? call.workspace_bytes : 0;
    if (given < needed)
      return fail("cpu backend: {} needs a workspace of {} bytes, the plan gives it {} (was the program compiled "
                  "with this backend's workspace sizes?)",
                  op_def(call.op).name, needed, given);
    if (reinterpret_cast<uintptr_t>(call.workspace) % kWorkspaceAlign != 0)
      return fail("cpu backend: the workspace of {} is not {}-byte aligned", op_def(call.op).name, kWorkspaceAlign);
    k->bind_workspace(static_cast<std::byte*>(call.workspace));
  }
  return std::unique_ptr<DnnlKernel>(std::move(k));
}

Result<int64_t> dnnl_workspace_bytes(DnnlContext& ctx, const KernelCall& call, const ValueLayouts* layouts,
                                     const Node* node) {
  KernelPtr k = LMS_TRY(build(ctx, call, operand_layouts(layouts, node, call)));
  return k ? k->workspace_needed() : int64_t{0};
}

}  // namespace lms::cpu
