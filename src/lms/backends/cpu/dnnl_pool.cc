// Pooling for the cpu backend (dnnl_util.h): max_pool1d/2d/3d and avg_pool1d/2d/3d forward on oneDNN
// (pooling_max as forward_inference, so no workspace; pooling_avg_include_padding or _exclude_padding), and
// avg_pool_grad on oneDNN's pooling backward. max_pool_grad is an OWN LOOP, not oneDNN: the op receives
// (dy, x), not the forward's indices, and oneDNN's backward would need the forward's workspace, which means
// rerunning the forward into scratch; the loop instead rescans each window for its first maximum (a NaN wins,
// padding never does) exactly as the reference does, so ties (common after relu) go to the same element.
// Geometry follows PyTorch with ceil_mode off: stride defaults to the kernel, pad to zeros; oneDNN gets
// symmetric padding, which its floor-division size check accepts. Declined (reference kernel): non-f32.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

struct PoolGeometry {
  Dims kernel, stride, pad;
};

// The window of pooling x -> y; nullopt when the attributes do not describe it (the reference reports why).
Result<std::optional<PoolGeometry>> pool_geometry(const KernelCall& call, const Shape& x, const Shape& y) {
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > 3 || y.size() != x.size() || y[0] != x[0] || y[1] != x[1])
    return std::optional<PoolGeometry>();
  PoolGeometry g;
  IntList kernel = call.attrs->get_ints("kernel", {});
  if (static_cast<int>(kernel.size()) != rank) return std::optional<PoolGeometry>();
  g.kernel = Dims(kernel.begin(), kernel.end());
  IntList stride = call.attrs->get_ints("stride", {});
  g.stride = stride.empty() ? g.kernel : Dims(stride.begin(), stride.end());
  if (static_cast<int>(g.stride.size()) != rank) return std::optional<PoolGeometry>();
  g.pad = LMS_TRY(spatial(call, "pad", rank, 0));
  for (int i = 0; i < rank; ++i) {
    const int64_t span = x[2 + i] + 2 * g.pad[i] - g.kernel[i];
    if (g.kernel[i] < 1 || g.stride[i] < 1 || g.pad[i] < 0 || g.pad[i] > g.kernel[i] / 2 ||
        span < 0 || span / g.stride[i] + 1 != y[2 + i])
      return std::optional<PoolGeometry>();
  }
  return std::optional<PoolGeometry>(std::move(g));
}

dnnl::algorithm pool_algorithm(const KernelCall& call, bool average) {
  if (!average) return dnnl::algorithm::pooling_max;
  return call.attrs->get_bool("count_include_pad", true) ? dnnl::algorithm::pooling_avg_include_padding
                                                         : dnnl::algorithm::pooling_avg_exclude_padding;
}

dnnl::pooling_forward::desc forward_desc(dnnl::prop_kind prop, dnnl::algorithm alg, const memory::desc& x,
                                         const memory::desc& y, const PoolGeometry& g) {
  return dnnl::pooling_forward::desc(prop, alg, x, y, g.stride, g.kernel, g.pad, g.pad);
}

KernelPtr pool_forward(DnnlContext& ctx, const KernelCall& call, bool average, const PoolGeometry& g) {
  const memory::desc x = plain(dims_of(in_shape(call, 0))), y = plain(dims_of(out_shape(call, 0)));
  dnnl::pooling_forward::primitive_desc pd(
      forward_desc(dnnl::prop_kind::forward_inference, pool_algorithm(call, average), x, y, g), user_scratchpad(),
      ctx.engine);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::pooling_forward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_SRC, k->mem(x, call.inputs[0].data)}, {DNNL_ARG_DST, k->mem(y, call.outputs[0].data)}});
  return k;
}

// (dy) -> dx.
KernelPtr avg_pool_backward(DnnlContext& ctx, const KernelCall& call, const PoolGeometry& g) {
  const memory::desc dx = plain(dims_of(out_shape(call, 0))), dy = plain(dims_of(in_shape(call, 0)));
  const dnnl::algorithm alg = pool_algorithm(call, true);
  dnnl::pooling_forward::primitive_desc hint(forward_desc(dnnl::prop_kind::forward_training, alg, dx, dy, g),
                                             ctx.engine);
  dnnl::pooling_backward::desc desc(alg, dx, dy, g.stride, g.kernel, g.pad, g.pad);
  dnnl::pooling_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::pooling_backward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_DIFF_DST, k->mem(dy, call.inputs[0].data)},
                    {DNNL_ARG_DIFF_SRC, k->mem(dx, call.outputs[0].data)}});
  return k;
}

// One spatial dimension of the max-pool-grad loop, padded to three like the reference (kernel_util.h).
struct Axis {
  int64_t in = 1, out = 1, k = 1, stride = 1, pad = 0;
};

// dx = 0, then each dy element is added to its window's first maximum (row-major window order; NaN wins).
void max_pool_grad_loop(const std::array<Axis, 3>& a, int64_t planes, const float* dy, const float* x, float* dx) {
  const int64_t in = a[0].in * a[1].in * a[2].in, out = a[0].out * a[1].out * a[2].out;
  std::memset(dx, 0, static_cast<size_t>(planes * in) * sizeof(float));
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in;
    const float* dyp = dy + p * out;
    float* dxp = dx + p * in;
    int64_t o = 0;
    for (int64_t od = 0; od < a[0].out; ++od) {
      const int64_t d0 = std::max<int64_t>(od * a[0].stride - a[0].pad, 0);
      const int64_t d1 = std::min(od * a[0].stride - a[0].pad + a[0].k, a[0].in);
      for (int64_t oh = 0; oh < a[1].out; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * a[1].stride - a[1].pad, 0);
        const int64_t h1 = std::min(oh * a[1].stride - a[1].pad + a[1].k, a[1].in);
        for (int64_t ow = 0; ow < a[2].out; ++ow, ++o) {
          const int64_t w0 = std::max<int64_t>(ow * a[2].stride - a[2].pad, 0);
          const int64_t w1 = std::min(ow * a[2].stride - a[2].pad + a[2].k, a[2].in);
          int64_t best = -1;
          float b = 0;
          for (int64_t id = d0; id < d1; ++id)
            for (int64_t ih = h0; ih < h1; ++ih) {
              const int64_t row = (id * a[1].in + ih) * a[2].in;
              for (int64_t iw = w0; iw < w1; ++iw) {
                const float v = xp[row + iw];
                if (best < 0 || (!std::isnan(b) && (v > b || std::isnan(v)))) {
                  best = row + iw;
                  b = v;
                }
              }
            }
          if (best >= 0) dxp[best] += dyp[o];
        }
      }
    }
  }
}

// (dy, x) -> dx.
KernelPtr max_pool_backward(DnnlContext& ctx, const KernelCall& call, const PoolGeometry& g) {
  const Shape &x = in_shape(call, 1), &y = in_shape(call, 0);
  const int rank = static_cast<int>(x.size()) - 2;
  std::array<Axis, 3> a{};
  for (int i = 0; i < rank; ++i)
    a[static_cast<size_t>(3 - rank + i)] = Axis{x[2 + i], y[2 + i], g.kernel[i], g.stride[i], g.pad[i]};
  const int64_t planes = x[0] * x[1];
  const float *pdy = in_f32(call, 0), *px = in_f32(call, 1);
  float* pdx = out_f32(call, 0);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_loop([a, planes, pdy, px, pdx]() -> Result<void> {
    max_pool_grad_loop(a, planes, pdy, px, pdx);
    return {};
  });
  return k;
}

}  // namespace

Result<KernelPtr> build_pool(DnnlContext& ctx, const KernelCall& call) {
  if (!all_f32(call) || call.outputs.size() != 1 || call.inputs.empty()) return KernelPtr();
  switch (call.op) {
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d:
    case Op::avg_pool1d:
    case Op::avg_pool2d:
    case Op::avg_pool3d: {
      const bool average = call.op == Op::avg_pool1d || call.op == Op::avg_pool2d || call.op == Op::avg_pool3d;
      auto g = LMS_TRY(pool_geometry(call, in_shape(call, 0), out_shape(call, 0)));
      if (!g) return KernelPtr();
      return pool_forward(ctx, call, average, *g);
    }
    case Op::max_pool_grad: {
      if (call.inputs.size() != 2 || out_shape(call, 0) != in_shape(call, 1)) return KernelPtr();
      auto g = LMS_TRY(pool_geometry(call, in_shape(call, 1), in_shape(call, 0)));
      if (!g) return KernelPtr();
      return max_pool_backward(ctx, call, *g);
    }
    case Op::avg_pool_grad: {
      auto g = LMS_TRY(pool_geometry(call, out_shape(call, 0), in_shape(call, 0)));
      if (!g) return KernelPtr();
      return avg_pool_backward(ctx, call, *g);
    }
    default: return KernelPtr();
  }
}

}  // namespace lms::cpu
