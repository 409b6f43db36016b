// oneDNN normalization for the cpu backend (dnnl_util.h): batch_norm (training: batch statistics) and
// layer_norm forward, and their gradients batch_norm_grad and layer_norm_grad, all with gamma and beta
// (use_scale | use_shift). The IR carries invstd = 1/sqrt(var + eps) where oneDNN carries the biased variance:
//   forward:  oneDNN writes the variance into the invstd output, then a loop turns it into invstd in place;
//   backward: a loop recovers var = 1/invstd^2 into a scratch buffer of the workspace, which the primitive
//             reads with eps = 0 (the gradient ops carry no eps; the round trip costs a few f32 ulps).
// batch_norm's x[N, C, *sp] is described as [N, C, prod(sp)] and layer_norm's x[..., W] as [rows, W]: the
// same bytes, and every rank the IR allows; batch norm's x and y (dy, x and dx) may instead be in one blocked
// layout (dnnl_layouts.cc), which oneDNN's batch norm reads directly. Declined (reference kernel): non-f32 and
// empty normalization sets (the reference reports those as errors).
#include <cmath>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

const auto kAffine = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

// The normalized data as oneDNN sees it, and its statistics' descriptor.
struct NormDescs {
  memory::desc data, stats, affine;
  int64_t num_stats = 0;
};

// batch_norm: data [N, C, S], statistics and gamma/beta [C]. layer_norm: data [rows, W], statistics [rows],
// gamma/beta [W].
std::optional<NormDescs> norm_descs(bool batch, const Shape& x) {
  if (batch) {
    if (x.size() < 2) return std::nullopt;
    const int64_t n = x[0], c = x[1], s = product(x, 2, x.size());
    if (n * s == 0 || c == 0) return std::nullopt;
    // oneDNN's fast plain-layout kernel (ncsp) takes nc, nchw and ncdhw; other ranks go as [N, C, S] (ncw).
    const Dims data = x.size() == 2 || x.size() == 4 || x.size() == 5 ? Dims(x.begin(), x.end()) : Dims{n, c, s};
    return NormDescs{plain(data), plain({c}), plain({c}), c};
  }
  if (x.empty()) return std::nullopt;
  const int64_t w = x.back(), rows = product(x, 0, x.size() - 1);
  if (w == 0 || rows == 0) return std::nullopt;
  return NormDescs{plain({rows, w}), plain({rows}), plain({w}), rows};
}

// invstd[i] = 1/sqrt(var[i] + eps), in place over the variance oneDNN wrote.
void variance_to_invstd(float* v, int64_t n, float eps) {
  for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / std::sqrt(v[i] + eps);
}

// var[i] = 1/invstd[i]^2.
void invstd_to_variance(const float* is, float* var, int64_t n) {
  for (int64_t i = 0; i < n; ++i) var[i] = 1.0f / (is[i] * is[i]);
}

// (x, gamma, beta) -> (out, mean, invstd).
KernelPtr norm_forward(DnnlContext& ctx, const KernelCall& call, bool batch, const NormDescs& d) {
  const auto eps = static_cast<float>(number(call, "eps"));
  dnnl::primitive_attr attr = user_scratchpad();
  auto k = std::make_unique<CpuKernel>(ctx);
  float* invstd = out_f32(call, 2);
  const int64_t n = d.num_stats;
  Args args = {{DNNL_ARG_SRC, k->mem(d.data, call.inputs[0].data)},
               {DNNL_ARG_SCALE, k->mem(d.affine, call.inputs[1].data)},
               {DNNL_ARG_SHIFT, k->mem(d.affine, call.inputs[2].data)},
               {DNNL_ARG_DST, k->mem(d.data, call.outputs[0].data)},
               {DNNL_ARG_MEAN, k->mem(d.stats, call.outputs[1].data)},
               {DNNL_ARG_VARIANCE, k->mem(d.stats, invstd)}};
  if (batch) {
    dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_training, d.data, eps, kAffine);
    dnnl::batch_normalization_forward::primitive_desc pd(desc, attr, ctx.engine);
    k->add_primitive(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc(), std::move(args));
  } else {
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, d.data, d.stats, eps, kAffine);
    dnnl::layer_normalization_forward::primitive_desc pd(desc, attr, ctx.engine);
    k->add_primitive(dnnl::layer_normalization_forward(pd), pd.scratchpad_desc(), std::move(args));
  }
  k->add_loop([invstd, n, eps]() -> Result<void> {
    variance_to_invstd(invstd, n, eps);
    return {};
  });
  return k;
}

// (dy, x, gamma, mean, invstd) -> (dx, dgamma, dbeta).
KernelPtr norm_backward(DnnlContext& ctx, const KernelCall& call, bool batch, const NormDescs& d) {
  // The gradient ops carry no eps (invstd already holds it): var = 1/invstd^2 with oneDNN adding eps = 0.
  constexpr float eps = 0.0f;
  auto k = std::make_unique<CpuKernel>(ctx);
  const int64_t n = d.num_stats;
  const int var = k->add_scratch(n * static_cast<int64_t>(sizeof(float)));
  const float* invstd = in_f32(call, 4);
  CpuKernel* kp = k.get();
  k->add_loop([kp, var, invstd, n]() -> Result<void> {
    invstd_to_variance(invstd, reinterpret_cast<float*>(kp->scratch(var)), n);
    return {};
  });
  Args args = {{DNNL_ARG_DIFF_DST, k->mem(d.data, call.inputs[0].data)},
               {DNNL_ARG_SRC, k->mem(d.data, call.inputs[1].data)},
               {DNNL_ARG_SCALE, k->mem(d.affine, call.inputs[2].data)},
               // oneDNN 2.6 lists SHIFT as an input of the use_shift backward although dx does not depend on
               // beta; gamma's buffer stands in (never read for the math).
               {DNNL_ARG_SHIFT, k->mem(d.affine, call.inputs[2].data)},
               {DNNL_ARG_MEAN, k->mem(d.stats, call.inputs[3].data)},
               {DNNL_ARG_VARIANCE, k->scratch_mem(var, d.stats)},
               {DNNL_ARG_DIFF_SRC, k->mem(d.data, call.outputs[0].data)},
               {DNNL_ARG_DIFF_SCALE, k->mem(d.affine, call.outputs[1].data)},
               {DNNL_ARG_DIFF_SHIFT, k->mem(d.affine, call.outputs[2].data)}};
  if (batch) {
    dnnl::batch_normalization_forward::desc fwd(dnnl::prop_kind::forward_training, d.data, eps, kAffine);
    dnnl::batch_normalization_forward::primitive_desc hint(fwd, ctx.engine);
    dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, d.data, d.data, eps, kAffine);
    dnnl::batch_normalization_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
    k->add_primitive(dnnl::batch_normalization_backward(pd), pd.scratchpad_desc(), std::move(args));
  } else {
    dnnl::layer_normalization_forward::desc fwd(dnnl::prop_kind::forward_training, d.data, d.stats, eps, kAffine);
    dnnl::layer_normalization_forward::primitive_desc hint(fwd, ctx.engine);
    dnnl::layer_normalization_backward::desc desc(dnnl::prop_kind::backward, d.data, d.data, d.stats, eps, kAffine);
    dnnl::layer_normalization_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
    k->add_primitive(dnnl::layer_normalization_backward(pd), pd.scratchpad_desc(), std::move(args));
  }
  return k;
}

}  // namespace

Result<KernelPtr> build_norm(DnnlContext& ctx, const KernelCall& call, const memory::desc& data_layout) {
  if (!all_f32(call) || call.outputs.size() != 3) return KernelPtr();
  const bool batch = call.op == Op::batch_norm || call.op == Op::batch_norm_grad;
  const bool backward = call.op == Op::batch_norm_grad || call.op == Op::layer_norm_grad;
  if (call.inputs.size() != (backward ? 5u : 3u)) return KernelPtr();
  std::optional<NormDescs> d = norm_descs(batch, in_shape(call, backward ? 1 : 0));
  if (!d) return KernelPtr();
  if (!data_layout.is_zero()) {  // a blocked layout (rank 4 or 5: the data descriptor has x's dimensions)
    if (!batch || data_layout.dims() != d->data.dims())
      return fail("cpu backend: internal: {} was given a blocked layout it cannot read", op_def(call.op).name);
    d->data = data_layout;
  }
  return backward ? norm_backward(ctx, call, batch, *d) : norm_forward(ctx, call, batch, *d);
}

}  // namespace lms::cpu
