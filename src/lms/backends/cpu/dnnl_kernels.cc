// oneDNN primitives for the cpu backend (see dnnl_kernels.h). Every buffer is described with plain row-major
// strides (ncw/nchw/ncdhw activations, oiw/oihw/oidhw weights, goi... for groups, which is the same memory),
// so no reorders are needed and the arena layout is the IR's. Every oneDNN call is inside a try block: oneDNN
// reports errors as dnnl::error exceptions, and no exception may cross the library boundary.
#include "lms/backends/cpu/dnnl_kernels.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>
#include <vector>

#include "lms/ops/op.h"

namespace lms::cpu {

class DnnlContext {
 public:
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

void DnnlContextDeleter::operator()(DnnlContext* c) const { delete c; }

Result<DnnlContextPtr> make_dnnl_context() {
  try {
    return DnnlContextPtr(new DnnlContext());
  } catch (const dnnl::error& e) {
    return fail("cpu backend: cannot create the oneDNN engine: {}", e.what());
  }
}

namespace {

using dnnl::memory;
using Dims = memory::dims;

Dims row_major_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

memory::desc plain(const Dims& dims) { return memory::desc(dims, memory::data_type::f32, row_major_strides(dims)); }

Dims dims_of(const Shape& s) { return Dims(s.begin(), s.end()); }

// A primitive, its arguments bound to arena pointers, and its private scratchpad.
class Prepared final : public DnnlKernel {
 public:
  Prepared(DnnlContext& ctx, dnnl::primitive prim, const memory::desc& scratch_md) : ctx_(ctx), prim_(std::move(prim)) {
    scratch_bytes_ = static_cast<int64_t>(scratch_md.get_size());
    if (scratch_bytes_ > 0) {
      scratch_.resize(static_cast<size_t>(scratch_bytes_));
      args_[DNNL_ARG_SCRATCHPAD] = memory(scratch_md, ctx_.engine, scratch_.data());
    }
  }
  void bind(int arg, const memory::desc& md, void* data) { args_[arg] = memory(md, ctx_.engine, data); }

  Result<void> run() override {
    try {
      prim_.execute(ctx_.stream, args_);
      ctx_.stream.wait();
      return {};
    } catch (const dnnl::error& e) {
      return fail("cpu backend: oneDNN primitive failed: {}", e.what());
    }
  }
  int64_t scratchpad_bytes() const override { return scratch_bytes_; }

 private:
  DnnlContext& ctx_;
  dnnl::primitive prim_;
  std::unordered_map<int, memory> args_;
  std::vector<std::byte> scratch_;  // not a planned buffer yet (dnnl_kernels.h)
  int64_t scratch_bytes_ = 0;
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A list attribute with one entry per spatial dimension; empty means `rank` copies of `fill` (the gradient
// ops may be given empty lists, like the reference kernels accept).
Result<Dims> spatial(const KernelCall& call, std::string_view name, int rank, int64_t fill) {
  IntList v = call.attrs->get_ints(name, {});
  if (v.empty()) v.assign(static_cast<size_t>(rank), fill);
  if (static_cast<int>(v.size()) != rank)
    return fail("cpu backend: {} attribute '{}' has {} entries for {} spatial dimensions", op_def(call.op).name, name,
                v.size(), rank);
  return Dims(v.begin(), v.end());
}

// The plain convolution x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out], as oneDNN descriptors.
struct ConvDescs {
  memory::desc x, w, y;
  Dims stride, dil, pad_l, pad_r;
};

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

std::unique_ptr<DnnlKernel> conv_forward(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  auto pd = conv_forward_pd(ctx, d, user_scratchpad());
  auto k = std::make_unique<Prepared>(ctx, dnnl::convolution_forward(pd), pd.scratchpad_desc());
  k->bind(DNNL_ARG_SRC, d.x, call.inputs[0].data);
  k->bind(DNNL_ARG_WEIGHTS, d.w, call.inputs[1].data);
  k->bind(DNNL_ARG_DST, d.y, call.outputs[0].data);
  return k;
}

// (dy, w) -> dx.
std::unique_ptr<DnnlKernel> conv_backward_data(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  auto hint = conv_forward_pd(ctx, d, dnnl::primitive_attr());
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.x, d.w, d.y, d.stride, d.dil,
                                             d.pad_l, d.pad_r);
  dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<Prepared>(ctx, dnnl::convolution_backward_data(pd), pd.scratchpad_desc());
  k->bind(DNNL_ARG_DIFF_DST, d.y, call.inputs[0].data);
  k->bind(DNNL_ARG_WEIGHTS, d.w, call.inputs[1].data);
  k->bind(DNNL_ARG_DIFF_SRC, d.x, call.outputs[0].data);
  return k;
}

// (x, dy) -> dw.
std::unique_ptr<DnnlKernel> conv_backward_filter(DnnlContext& ctx, const KernelCall& call, const ConvDescs& d) {
  auto hint = conv_forward_pd(ctx, d, dnnl::primitive_attr());
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.x, d.w, d.y, d.stride,
                                                d.dil, d.pad_l, d.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<Prepared>(ctx, dnnl::convolution_backward_weights(pd), pd.scratchpad_desc());
  k->bind(DNNL_ARG_SRC, d.x, call.inputs[0].data);
  k->bind(DNNL_ARG_DIFF_DST, d.y, call.inputs[1].data);
  k->bind(DNNL_ARG_DIFF_WEIGHTS, d.w, call.outputs[0].data);
  return k;
}

// a[..., M, K] @ b[..., K, N] as one 3-D oneDNN matmul [B, M, K] x [B or 1, K, N]: a's batch dimensions are
// contiguous and flatten into one; a rank-2 b is broadcast over the batch (oneDNN allows batch 1 there); a
// transpose is the same bytes read with swapped strides.
Result<std::unique_ptr<DnnlKernel>> matmul(DnnlContext& ctx, const KernelCall& call) {
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
  auto kern = std::make_unique<Prepared>(ctx, dnnl::matmul(pd), pd.scratchpad_desc());
  kern->bind(DNNL_ARG_SRC, a_md, call.inputs[0].data);
  kern->bind(DNNL_ARG_WEIGHTS, b_md, call.inputs[1].data);
  kern->bind(DNNL_ARG_DST, o_md, call.outputs[0].data);
  return std::unique_ptr<DnnlKernel>(std::move(kern));
}

bool all_f32(const KernelCall& call) {
  for (const TensorRef& r : call.inputs)
    if (r.type->dtype != DType::f32) return false;
  for (const TensorRef& r : call.outputs)
    if (r.type->dtype != DType::f32) return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<DnnlKernel>> prepare_dnnl_kernel(DnnlContext& ctx, const KernelCall& call) {
  const bool conv = call.op == Op::conv1d || call.op == Op::conv2d || call.op == Op::conv3d;
  const bool covered = conv || call.op == Op::conv_backward_data || call.op == Op::conv_backward_filter ||
                       call.op == Op::matmul;
  if (!covered || !all_f32(call) || call.inputs.size() != 2 || call.outputs.size() != 1)
    return std::unique_ptr<DnnlKernel>();
  try {
    const Shape &in0 = call.inputs[0].type->shape, &in1 = call.inputs[1].type->shape,
                &out = call.outputs[0].type->shape;
    if (conv) return conv_forward(ctx, call, LMS_TRY(conv_descs(call, in0, in1, out)));
    if (call.op == Op::conv_backward_data) return conv_backward_data(ctx, call, LMS_TRY(conv_descs(call, out, in1, in0)));
    if (call.op == Op::conv_backward_filter)
      return conv_backward_filter(ctx, call, LMS_TRY(conv_descs(call, in0, out, in1)));
    return matmul(ctx, call);
  } catch (const dnnl::error& e) {
    return fail("cpu backend: oneDNN cannot build a primitive for {} ({} -> {}): {}", op_def(call.op).name,
                to_string(*call.inputs[0].type), to_string(*call.outputs[0].type), e.what());
  }
}

}  // namespace lms::cpu
