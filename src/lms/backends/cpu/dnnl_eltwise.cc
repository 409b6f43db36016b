// oneDNN elementwise ops for the cpu backend (dnnl_util.h): relu, gelu (eltwise_gelu_erf, or eltwise_gelu_tanh
// for approximate = "tanh"), silu (eltwise_swish, alpha 1), sigmoid (eltwise_logistic), tanh, sqrt, exp, log and
// clamp (eltwise_clip_v2: gradient only strictly inside the bounds), and their gradients (relu_grad, sigmoid_grad,
// tanh_grad and sqrt_grad read y: the use_dst_for_bwd algorithms, so relu_grad is dy where y > 0; gelu_grad,
// silu_grad, log_grad and clamp_grad read x; exp's gradient is a mul),
// add and mul with NumPy broadcasting and bias_add (binary, the broadcast operand as src1 with size-1
// dimensions), softmax and softmax_grad along any axis, and causal softmax as an own loop (oneDNN has no masked
// softmax). Unary ops see their tensors as one flat f32 vector.
// Declined (reference kernel): reciprocal and its gradient (oneDNN's pow backward reads x, the IR's grad y),
// softplus and its gradient (PyTorch's threshold at 20, which oneDNN's soft_relu does not have),
// non-f32, empty tensors, and add/mul where neither operand has the output's shape (both broadcast: oneDNN's
// binary only broadcasts src1).
#include <algorithm>
#include <cmath>
#include <limits>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

memory::desc flat(const KernelCall& call) { return plain({call.outputs[0].type->num_elements()}); }

// clamp's bound `name` as oneDNN's float alpha or beta (absent: unbounded).
float bound(const KernelCall& call, std::string_view name) {
  const double inf = std::numeric_limits<double>::infinity();
  return static_cast<float>(call.attrs->get_float(name, name == "min" ? -inf : inf));
}

dnnl::algorithm gelu_algorithm(const KernelCall& call) {
  return call.attrs->get_string("approximate", "none") == "tanh" ? dnnl::algorithm::eltwise_gelu_tanh
                                                                  : dnnl::algorithm::eltwise_gelu_erf;
}

KernelPtr eltwise_forward(DnnlContext& ctx, const KernelCall& call, dnnl::algorithm alg, float alpha = 0,
                          float beta = 0) {
  const memory::desc md = flat(call);
  dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, alg, md, alpha, beta);
  dnnl::eltwise_forward::primitive_desc pd(desc, user_scratchpad(), ctx.engine);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::eltwise_forward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_SRC, k->mem(md, call.inputs[0].data)}, {DNNL_ARG_DST, k->mem(md, call.outputs[0].data)}});
  return k;
}

// (dy, t) -> dx, where t is the forward's output (use_dst algorithms) or input.
KernelPtr eltwise_backward(DnnlContext& ctx, const KernelCall& call, dnnl::algorithm alg, int t_arg, float alpha = 0,
                           float beta = 0) {
  const memory::desc md = flat(call);
  dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, alg, md, alpha, beta);
  dnnl::eltwise_forward::primitive_desc hint(fwd, ctx.engine);
  dnnl::eltwise_backward::desc desc(alg, md, md, alpha, beta);
  dnnl::eltwise_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::eltwise_backward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_DIFF_DST, k->mem(md, call.inputs[0].data)},
                    {t_arg, k->mem(md, call.inputs[1].data)},
                    {DNNL_ARG_DIFF_SRC, k->mem(md, call.outputs[0].data)}});
  return k;
}

// `s` right-aligned into `rank` dimensions (leading 1s).
Dims padded(const Shape& s, size_t rank) {
  Dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

KernelPtr binary_kernel(DnnlContext& ctx, dnnl::algorithm alg, const Dims& d0, const void* p0, const Dims& d1,
                        const void* p1, const Dims& dout, void* pout) {
  const memory::desc m0 = plain(d0), m1 = plain(d1), mo = plain(dout);
  dnnl::binary::desc desc(alg, m0, m1, mo);
  dnnl::binary::primitive_desc pd(desc, user_scratchpad(), ctx.engine);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::binary(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_SRC_0, k->mem(m0, const_cast<void*>(p0))},
                    {DNNL_ARG_SRC_1, k->mem(m1, const_cast<void*>(p1))},
                    {DNNL_ARG_DST, k->mem(mo, pout)}});
  return k;
}

// add/mul: the operand with the output's shape is src0 (both ops commute, bit for bit).
KernelPtr broadcast_binary(DnnlContext& ctx, const KernelCall& call, dnnl::algorithm alg) {
  const Shape& o = out_shape(call, 0);
  const size_t rank = std::max<size_t>(o.size(), 1);
  const Dims dout = padded(o, rank), da = padded(in_shape(call, 0), rank), db = padded(in_shape(call, 1), rank);
  if (da == dout) return binary_kernel(ctx, alg, da, call.inputs[0].data, db, call.inputs[1].data, dout,
                                       call.outputs[0].data);
  if (db == dout) return binary_kernel(ctx, alg, db, call.inputs[1].data, da, call.inputs[0].data, dout,
                                       call.outputs[0].data);
  return KernelPtr();
}

Result<KernelPtr> bias_add(DnnlContext& ctx, const KernelCall& call) {
  const Shape& x = in_shape(call, 0);
  int64_t axis = call.attrs->get_int("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  if (axis < 0 || axis >= static_cast<int64_t>(x.size()) || in_shape(call, 1) != Shape{x[axis]})
    return KernelPtr();  // the reference kernel reports the mismatch
  Dims bias(x.size(), 1);
  bias[static_cast<size_t>(axis)] = x[axis];
  return binary_kernel(ctx, dnnl::algorithm::binary_add, dims_of(x), call.inputs[0].data, bias, call.inputs[1].data,
                       dims_of(x), call.outputs[0].data);
}

Result<int> softmax_axis(const KernelCall& call, const Shape& s) {
  int64_t axis = call.attrs->get_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    return fail("cpu backend: {} axis {} is out of range for {}", op_def(call.op).name, call.attrs->get_int("axis", -1),
                to_string(s));
  return static_cast<int>(axis);
}

// Causal softmax over the last axis of x[..., R, W]: row i (the index along dim -2) keeps columns j <= i +
// causal_offset and writes exact zeros elsewhere, like the reference.
KernelPtr causal_softmax(DnnlContext& ctx, const KernelCall& call) {
  const Shape& s = in_shape(call, 0);
  const int64_t width = s.back(), rows = s[s.size() - 2], outer = product(s, 0, s.size() - 1);
  const int64_t offset = call.attrs->get_int("causal_offset", 0);
  const float* x = in_f32(call, 0);
  float* y = out_f32(call, 0);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_loop([=]() -> Result<void> {
    for (int64_t o = 0; o < outer; ++o) {
      const float* xr = x + o * width;
      float* yr = y + o * width;
      const int64_t kept = std::min(width, o % rows + 1 + offset);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < kept; ++j) max = std::max(max, xr[j]);
      float sum = 0;
      for (int64_t j = 0; j < kept; ++j) {
        yr[j] = std::exp(xr[j] - max);
        sum += yr[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < kept; ++j) yr[j] *= inv;
      for (int64_t j = kept; j < width; ++j) yr[j] = 0;
    }
    return {};
  });
  return k;
}

Result<KernelPtr> softmax(DnnlContext& ctx, const KernelCall& call, bool backward) {
  const Shape& s = out_shape(call, 0);
  const int axis = LMS_TRY(softmax_axis(call, s));
  if (!backward && call.attrs->get_bool("causal", false)) {
    if (s.size() < 2 || axis != static_cast<int>(s.size()) - 1) return KernelPtr();  // the reference reports it
    return causal_softmax(ctx, call);
  }
  const memory::desc md = plain(dims_of(s));
  dnnl::softmax_forward::desc fwd(dnnl::prop_kind::forward_training, md, axis);
  auto k = std::make_unique<CpuKernel>(ctx);
  if (!backward) {
    dnnl::softmax_forward::primitive_desc pd(fwd, user_scratchpad(), ctx.engine);
    k->add_primitive(dnnl::softmax_forward(pd), pd.scratchpad_desc(),
                     {{DNNL_ARG_SRC, k->mem(md, call.inputs[0].data)},
                      {DNNL_ARG_DST, k->mem(md, call.outputs[0].data)}});
    return k;
  }
  dnnl::softmax_forward::primitive_desc hint(fwd, ctx.engine);
  dnnl::softmax_backward::desc desc(md, md, axis);
  dnnl::softmax_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  k->add_primitive(dnnl::softmax_backward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_DIFF_DST, k->mem(md, call.inputs[0].data)},
                    {DNNL_ARG_DST, k->mem(md, call.inputs[1].data)},
                    {DNNL_ARG_DIFF_SRC, k->mem(md, call.outputs[0].data)}});
  return k;
}

}  // namespace

Result<KernelPtr> build_eltwise(DnnlContext& ctx, const KernelCall& call) {
  if (!all_f32(call) || call.outputs.size() != 1 || call.inputs.empty()) return KernelPtr();
  if (call.outputs[0].type->num_elements() == 0) return KernelPtr();
  using dnnl::algorithm;
  const bool two = call.inputs.size() == 2;
  switch (call.op) {
    case Op::relu: return eltwise_forward(ctx, call, algorithm::eltwise_relu);
    case Op::gelu: return eltwise_forward(ctx, call, gelu_algorithm(call));
    case Op::silu: return eltwise_forward(ctx, call, algorithm::eltwise_swish, 1.0f);
    case Op::sigmoid: return eltwise_forward(ctx, call, algorithm::eltwise_logistic);
    case Op::tanh: return eltwise_forward(ctx, call, algorithm::eltwise_tanh);
    case Op::sqrt: return eltwise_forward(ctx, call, algorithm::eltwise_sqrt);
    case Op::exp: return eltwise_forward(ctx, call, algorithm::eltwise_exp);
    case Op::log: return eltwise_forward(ctx, call, algorithm::eltwise_log);
    case Op::clamp: return eltwise_forward(ctx, call, algorithm::eltwise_clip_v2, bound(call, "min"), bound(call, "max"));
    case Op::relu_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_relu_use_dst_for_bwd, DNNL_ARG_DST);
    case Op::gelu_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, gelu_algorithm(call), DNNL_ARG_SRC);
    case Op::silu_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_swish, DNNL_ARG_SRC, 1.0f);
    case Op::sigmoid_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_logistic_use_dst_for_bwd, DNNL_ARG_DST);
    case Op::tanh_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_tanh_use_dst_for_bwd, DNNL_ARG_DST);
    case Op::sqrt_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_sqrt_use_dst_for_bwd, DNNL_ARG_DST);
    case Op::log_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_log, DNNL_ARG_SRC);
    case Op::clamp_grad:
      if (!two || in_shape(call, 1) != out_shape(call, 0)) return KernelPtr();
      return eltwise_backward(ctx, call, algorithm::eltwise_clip_v2, DNNL_ARG_SRC, bound(call, "min"),
                              bound(call, "max"));
    case Op::add: return two ? broadcast_binary(ctx, call, algorithm::binary_add) : KernelPtr();
    case Op::mul: return two ? broadcast_binary(ctx, call, algorithm::binary_mul) : KernelPtr();
    case Op::bias_add: return two ? bias_add(ctx, call) : KernelPtr();
    case Op::softmax: return softmax(ctx, call, false);
    case Op::softmax_grad: return two ? softmax(ctx, call, true) : KernelPtr();
    default: return KernelPtr();
  }
}

}  // namespace lms::cpu
