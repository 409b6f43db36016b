// The reference backend's entry point: checks a kernel call (arity, buffers, and output types against the op's
// shape rule) and dispatches it to the family kernel for its op. The dispatch is a switch over Op with no
// default, so -Wswitch (an error under LMS_WERROR) names any op of op_list.inc left without a kernel.
#include "lms/backends/reference/kernels.h"

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms {

namespace {

std::string types_text(std::span<const TensorType> ts) {
  std::vector<std::string> s;
  for (const TensorType& t : ts) s.push_back(to_string(t));
  return fmt::format("({})", fmt::join(s, ", "));
}

// Everything that must hold before a kernel may touch the buffers.
Result<void> check_call(const KernelCall& call) {
  if (static_cast<int>(call.op) >= kNumOps)
    return fail("reference backend: op id {} is out of range", static_cast<int>(call.op));
  const OpDef& d = op_def(call.op);
  if (!accepts_input_count(d, call.inputs.size()))
    return fail("{} takes {} inputs, the call has {}", d.name, input_count_text(d), call.inputs.size());
  if (call.outputs.size() != d.outputs.size())
    return fail("{} has {} outputs, the call has {}", d.name, d.outputs.size(), call.outputs.size());
  auto check_refs = [&](std::span<const TensorRef> refs, std::string_view kind) -> Result<void> {
    for (size_t i = 0; i < refs.size(); ++i) {
      if (refs[i].type == nullptr) return fail("{} {} {} has no type", d.name, kind, i);
      if (refs[i].data == nullptr && refs[i].type->bytes() > 0)
        return fail("{} {} {} ({}) has no buffer", d.name, kind, i, to_string(*refs[i].type));
    }
    return {};
  };
  LMS_TRY_VOID(check_refs(call.inputs, "input"));
  LMS_TRY_VOID(check_refs(call.outputs, "output"));
  return {};
}

// The output types must be what the shape rule derives: the kernels index the buffers by these types.
Result<void> check_types(const reference::Args& a) {
  auto expected = infer_types(a.call.op, a.in_types, a.c.attrs, a.out_types);
  if (!expected) return std::unexpected(expected.error());
  if (*expected != a.out_types)
    return fail("{} of {} gives {}, but the call's outputs are {}", a.name(), types_text(a.in_types),
                types_text(*expected), types_text(a.out_types));
  return {};
}

Result<void> dispatch(const reference::Args& a) {
  namespace r = reference;
  switch (a.call.op) {
    case Op::input:
    case Op::param:
    case Op::state:
      return fail("{} is a source fed by the runtime, not a kernel", a.name());
    case Op::constant: return r::constant(a);
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d: return r::conv(a);
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d: return r::conv_transpose(a);
    case Op::batch_norm: return r::batch_norm(a);
    case Op::layer_norm: return r::layer_norm(a);
    case Op::relu: return r::relu(a);
    case Op::gelu: return r::gelu(a);
    case Op::silu: return r::silu(a);
    case Op::hardswish: return r::hardswish(a);
    case Op::sigmoid: return r::sigmoid(a);
    case Op::tanh: return r::tanh(a);
    case Op::clamp: return r::clamp(a);
    case Op::dropout: return r::dropout(a);
    case Op::sqrt: return r::sqrt(a);
    case Op::reciprocal: return r::reciprocal(a);
    case Op::exp: return r::exp(a);
    case Op::log: return r::log(a);
    case Op::softplus: return r::softplus(a);
    case Op::add: return r::add(a);
    case Op::mul: return r::mul(a);
    case Op::scale: return r::scale(a);
    case Op::bias_add: return r::bias_add(a);
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d: return r::max_pool(a);
    case Op::avg_pool1d:
    case Op::avg_pool2d:
    case Op::avg_pool3d: return r::avg_pool(a);
    case Op::global_avg_pool: return r::global_avg_pool(a);
    case Op::matmul: return r::matmul(a);
    case Op::reshape: return r::copy(a);
    case Op::transpose: return r::transpose(a);
    case Op::concat: return r::concat(a);
    case Op::slice: return r::slice(a);
    case Op::softmax: return r::softmax(a);
    case Op::embedding: return r::embedding(a);
    case Op::mean: return r::mean(a);
    case Op::reduce_sum: return r::reduce_sum(a);
    case Op::cross_entropy: return r::cross_entropy(a);
    case Op::sgd_update: return r::sgd_update(a);
    case Op::momentum_update: return r::momentum_update(a);
    case Op::adam_update: return r::adam_update(a);
    case Op::rng_advance: return r::rng_advance(a);
    case Op::swap_out:
    case Op::swap_in: return r::copy(a);
    case Op::conv_backward_data: return r::conv_backward_data(a);
    case Op::conv_backward_filter: return r::conv_backward_filter(a);
    case Op::relu_grad: return r::relu_grad(a);
    case Op::gelu_grad: return r::gelu_grad(a);
    case Op::silu_grad: return r::silu_grad(a);
    case Op::hardswish_grad: return r::hardswish_grad(a);
    case Op::sigmoid_grad: return r::sigmoid_grad(a);
    case Op::tanh_grad: return r::tanh_grad(a);
    case Op::clamp_grad: return r::clamp_grad(a);
    case Op::sqrt_grad: return r::sqrt_grad(a);
    case Op::reciprocal_grad: return r::reciprocal_grad(a);
    case Op::log_grad: return r::log_grad(a);
    case Op::softplus_grad: return r::softplus_grad(a);
    case Op::batch_norm_grad: return r::batch_norm_grad(a);
    case Op::layer_norm_grad: return r::layer_norm_grad(a);
    case Op::max_pool_grad: return r::max_pool_grad(a);
    case Op::avg_pool_grad: return r::avg_pool_grad(a);
    case Op::max_pool_argmax: return r::max_pool_argmax(a);
    case Op::max_pool_grad_by_argmax: return r::max_pool_grad_by_argmax(a);
    case Op::softmax_grad: return r::softmax_grad(a);
    case Op::embedding_grad: return r::embedding_grad(a);
    case Op::cross_entropy_grad: return r::cross_entropy_grad(a);
    case Op::broadcast_to: return r::broadcast_to(a);
    case Op::sum_to: return r::sum_to(a);
    case Op::slice_grad: return r::slice_grad(a);
    case Op::bn_running_update: return r::bn_running_update(a);
  }
  return fail("reference backend: op id {} has no kernel", static_cast<int>(a.call.op));
}

}  // namespace

Result<void> check_kernel_call(const KernelCall& call) {
  LMS_TRY_VOID(check_call(call));
  return check_types(reference::Args(call));
}

Result<void> run_reference_kernel(const KernelCall& call) {
  LMS_TRY_VOID(check_call(call));
  reference::Args a(call);
  if (a.def.traits.source && call.op != Op::constant) return dispatch(a);  // the source error, before shape rules
  LMS_TRY_VOID(check_types(a));
  return dispatch(a);
}

}  // namespace lms
