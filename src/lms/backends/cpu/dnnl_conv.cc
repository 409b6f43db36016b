// oneDNN convolutions and matmul for the cpu backend (dnnl_util.h): conv1d/2d/3d forward, conv_backward_data,
// conv_backward_filter, conv_transpose1d/2d/3d (the backward-data primitive, which is the definition of a
// transposed convolution) and matmul (batched, transposes expressed as strides). Weights are in the IR's plain
// row-major layout (oiw/oihw/oidhw, goi... for groups, which is the same memory); activations in the layout
// assign_layouts gave them (dnnl_layouts.cc: plain ncw/nchw/ncdhw, or the blocked layout a convolution picks).
// Convolutions let oneDNN choose its layouts (format_tag::any: blocked ones such as nChw16c, where its direct jit
// kernels are; on plain layouts it falls back to im2col + gemm, 2-3x slower here) and reorder each operand whose
// arena layout differs into workspace scratch and the result back, inside the node: the copies' memory is in
// the planned workspace, their time in the node's. Declined (reference kernel):
// non-f32, and a conv_transpose whose output_pad makes the convolution formula inconsistent for oneDNN.
#include <optional>
#include <utility>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

// The plain convolution x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out], as oneDNN descriptors.
struct ConvDescs {
  memory::desc x, w, y;
  Dims stride, dil, pad_l, pad_r;
};

// The same shapes with format_tag::any: the primitive picks its layouts (blocked ones, where its fastest
// kernels are), and CpuKernel::input_as/output_as reorder between them and the arena's plain buffers.
ConvDescs any_layout(const ConvDescs& d) {
  ConvDescs a = d;
  auto any = [](const memory::desc& md) { return memory::desc(md.dims(), md.data_type(), memory::format_tag::any); };
  a.x = any(d.x);
  a.w = any(d.w);
  a.y = any(d.y);
  return a;
}

Result<ConvDescs> conv_descs(const KernelCall& call, const Shape& x, const Shape& w, const Shape& y) {
  const int rank = static_cast<int>(x.size()) - 2;
  const int64_t groups = call.attrs->get_int("groups", 1);
  if (rank < 1 || rank > 3 || w.size() != x.size() || y.size() != x.size() || groups < 1 || w[0] % groups != 0)
    return fail("cpu backend: {} of x {}, w {}, y {} (groups {}) is not a 1-3-D convolution", op_def(call.op).name,
                to_string(x), to_string(w), to_string(y), groups);
  ConvDescs d;
  d.x = plain(dims_of(x));
  d.y = plain(dims_of(y));
  Dims wd = dims_of(w);
  if (groups > 1) {  // goi...: the same bytes as oi... with O split into (groups, O/groups)
    wd[0] /= groups;
    wd.insert(wd.begin(), groups);
  }
  d.w = plain(wd);
  d.stride = LMS_TRY(spatial(call, "stride", rank, 1));
  d.pad_l = LMS_TRY(spatial(call, "pad", rank, 0));
  d.dil = LMS_TRY(spatial(call, "dilation", rank, 1));
  // oneDNN counts dilation from 0 (0 = dense). Padding is symmetric in LMS; oneDNN checks the output size with
  // the same floor division, so the right padding is the same number.
  for (auto& v : d.dil) v -= 1;
  d.pad_r = d.pad_l;
  return d;
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(DnnlContext& ctx, const ConvDescs& d,
                                                          const dnnl::primitive_attr& attr) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, d.x,
                                       d.w, d.y, d.stride, d.dil, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, attr, ctx.engine);
}

KernelPtr conv_forward(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  auto pd = conv_forward_pd(ctx, any_layout(d), user_scratchpad());
  auto k = std::make_unique<CpuKernel>(ctx);
  memory x = k->input_as(pd.src_desc(), d.x, call.inputs[0].data);
  memory w = k->input_as(pd.weights_desc(), d.w, call.inputs[1].data);
  memory y = k->output_as(pd.dst_desc(), d.y, call.outputs[0].data);
  k->add_primitive(dnnl::convolution_forward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
  return k;
}

// (dy, w) -> dx; also conv_transpose (x, w) -> out, which is this with x in the role of dy.
dnnl::convolution_backward_data::primitive_desc backward_data_pd(
    DnnlContext& ctx, const ConvDescs& a, const dnnl::convolution_forward::primitive_desc& hint) {
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, a.x, a.w, a.y, a.stride, a.dil,
                                             a.pad_l, a.pad_r);
  return dnnl::convolution_backward_data::primitive_desc(desc, user_scratchpad(), ctx.engine, hint);
}

KernelPtr conv_backward_data(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  const ConvDescs a = any_layout(d);
  auto pd = backward_data_pd(ctx, a, conv_forward_pd(ctx, a, dnnl::primitive_attr()));
  auto k = std::make_unique<CpuKernel>(ctx);
  memory dy = k->input_as(pd.diff_dst_desc(), d.y, call.inputs[0].data);
  memory w = k->input_as(pd.weights_desc(), d.w, call.inputs[1].data);
  memory dx = k->output_as(pd.diff_src_desc(), d.x, call.outputs[0].data);
  k->add_primitive(dnnl::convolution_backward_data(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx}});
  return k;
}

// (x, dy) -> dw.
KernelPtr conv_backward_filter(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  const ConvDescs a = any_layout(d);
  auto hint = conv_forward_pd(ctx, a, dnnl::primitive_attr());
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, a.x, a.w, a.y, a.stride,
                                                a.dil, a.pad_l, a.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<CpuKernel>(ctx);
  memory x = k->input_as(pd.src_desc(), d.x, call.inputs[0].data);
  memory dy = k->input_as(pd.diff_dst_desc(), d.y, call.inputs[1].data);
  memory dw = k->output_as(pd.diff_weights_desc(), d.w, call.outputs[0].data);
  k->add_primitive(dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
  return k;
}

// a[..., M, K] @ b[..., K, N] as one 3-D oneDNN matmul [B, M, K] x [B or 1, K, N]: a's batch dimensions are
// contiguous and flatten into one; a rank-2 b is broadcast over the batch (oneDNN allows batch 1 there); a
// transpose is the same bytes read with swapped strides.
Result<KernelPtr> matmul(DnnlContext& ctx, const KernelCall& call) {
  const Shape &sa = call.inputs[0].type->shape, &sb = call.inputs[1].type->shape, &so = call.outputs[0].type->shape;
  const bool ta = call.attrs->get_bool("transpose_a", false), tb = call.attrs->get_bool("transpose_b", false);
  if (sa.size() < 2 || sb.size() < 2 || so.size() < 2)
    return fail("cpu backend: matmul of {} and {} needs rank >= 2", to_string(sa), to_string(sb));
  const int64_t m = so[so.size() - 2], n = so.back(), k = sa[sa.size() - (ta ? 2 : 1)];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < sa.size(); ++i) batch *= sa[i];
  const int64_t b_batch = sb.size() == 2 ? 1 : batch;
  memory::desc a_md({batch, m, k}, memory::data_type::f32, ta ? Dims{m * k, 1, m} : Dims{m * k, k, 1});
  memory::desc b_md({b_batch, k, n}, memory::data_type::f32, tb ? Dims{k * n, 1, k} : Dims{k * n, n, 1});
  memory::desc o_md = plain({batch, m, n});
  dnnl::matmul::desc desc(a_md, b_md, o_md);
  dnnl::matmul::primitive_desc pd(desc, user_scratchpad(), ctx.engine);
  auto kern = std::make_unique<CpuKernel>(ctx);
  kern->add_primitive(dnnl::matmul(pd), pd.scratchpad_desc(),
                      {{DNNL_ARG_SRC, kern->mem(a_md, call.inputs[0].data)},
                       {DNNL_ARG_WEIGHTS, kern->mem(b_md, call.inputs[1].data)},
                       {DNNL_ARG_DST, kern->mem(o_md, call.outputs[0].data)}});
  return kern;
}

// conv_transpose(x, w[Ci_t, Co_t/g, k]) -> out: the backward-data of the convolution out -> x with weight w. The
// extra output_pad positions at the end of `out` are covered by no window and come out zero; oneDNN checks the
// convolution's size formula with symmetric padding, which holds while output_pad < stride (floor division);
// otherwise the right padding is reduced by output_pad, and if that is not consistent either, nullopt (decline).
Result<std::optional<ConvDescs>> conv_transpose_descs(const KernelCall& call) {
  const Shape &x = in_shape(call, 0), &w = in_shape(call, 1), &out = out_shape(call, 0);
  ConvDescs d = LMS_TRY(conv_descs(call, out, w, x));
  const int rank = static_cast<int>(x.size()) - 2;
  Dims output_pad = LMS_TRY(spatial(call, "output_pad", rank, 0));
  for (int i = 0; i < rank; ++i) {
    const int64_t range = d.dil[i] * (w[2 + i] - 1) + w[2 + i];  // oneDNN's dilation counts from 0
    auto fits = [&](int64_t pad_r) { return (out[2 + i] + d.pad_l[i] + pad_r - range) / d.stride[i] + 1 == x[2 + i]; };
    if (fits(d.pad_r[i])) continue;
    d.pad_r[i] -= output_pad[i];
    if (d.pad_r[i] < 0 || !fits(d.pad_r[i])) return std::nullopt;
  }
  return d;
}

enum class ConvPass { forward, backward_data, backward_filter };

// The convolution `call` computes, as a pass over plain descriptors (x, w, y in the roles of the forward
// convolution); nullopt when build_conv declines it.
Result<std::optional<std::pair<ConvPass, ConvDescs>>> conv_of(const KernelCall& call) {
  if (!all_f32(call) || call.inputs.size() != 2 || call.outputs.size() != 1) return std::nullopt;
  const Shape &in0 = in_shape(call, 0), &in1 = in_shape(call, 1), &out = out_shape(call, 0);
  switch (call.op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d: return std::pair{ConvPass::forward, LMS_TRY(conv_descs(call, in0, in1, out))};
    case Op::conv_backward_data: return std::pair{ConvPass::backward_data, LMS_TRY(conv_descs(call, out, in1, in0))};
    case Op::conv_backward_filter:
      return std::pair{ConvPass::backward_filter, LMS_TRY(conv_descs(call, in0, out, in1))};
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d: {
      std::optional<ConvDescs> d = LMS_TRY(conv_transpose_descs(call));
      if (!d) return std::nullopt;
      return std::pair{ConvPass::backward_data, *d};
    }
    default: return std::nullopt;
  }
}

}  // namespace

Result<KernelPtr> build_conv(DnnlContext& ctx, const KernelCall& call, const OperandLayouts& arena) {
  auto conv = LMS_TRY(conv_of(call));
  if (!conv) return KernelPtr();
  auto& [pass, d] = *conv;
  // The activations' arena layouts (the weights are parameters or their gradients: always plain).
  switch (pass) {
    case ConvPass::forward:
      d.x = arena_md(arena.in[0], d.x.dims());
      d.y = arena_md(arena.out[0], d.y.dims());
      return conv_forward(ctx, call, d);
    case ConvPass::backward_data:
      d.y = arena_md(arena.in[0], d.y.dims());
      d.x = arena_md(arena.out[0], d.x.dims());
      return conv_backward_data(ctx, call, d);
    case ConvPass::backward_filter:
      d.x = arena_md(arena.in[0], d.x.dims());
      d.y = arena_md(arena.in[1], d.y.dims());
      return conv_backward_filter(ctx, call, d);
  }
  return KernelPtr();
}

Result<memory::desc> conv_output_layout(DnnlContext& ctx, const KernelCall& call) {
  auto conv = LMS_TRY(conv_of(call));
  if (!conv || conv->first == ConvPass::backward_filter) return memory::desc();
  const ConvDescs a = any_layout(conv->second);  // as the builders make them
  if (conv->first == ConvPass::forward) return conv_forward_pd(ctx, a, user_scratchpad()).dst_desc();
  return backward_data_pd(ctx, a, conv_forward_pd(ctx, a, dnnl::primitive_attr())).diff_src_desc();
}

Result<KernelPtr> build_matmul(DnnlContext& ctx, const KernelCall& call) {
  if (!all_f32(call) || call.inputs.size() != 2 || call.outputs.size() != 1) return KernelPtr();
  return matmul(ctx, call);
}

}  // namespace lms::cpu
