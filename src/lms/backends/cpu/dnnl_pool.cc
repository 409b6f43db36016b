// Pooling for the cpu backend (dnnl_util.h): max_pool1d/2d/3d and avg_pool1d/2d/3d forward on oneDNN
// (pooling_max as forward_inference, so no workspace; pooling_avg_include_padding or _exclude_padding), and
// avg_pool_grad on oneDNN's pooling backward. max_pool_grad is an OWN LOOP, not oneDNN: the op receives (dy, x),
// not the forward's indices, and oneDNN's backward would need the forward's workspace, which means rerunning the
// forward into scratch; the loop instead rescans each window for its first maximum (a NaN wins, padding never
// does) exactly as the reference does, so ties (common after relu) go to the same element. max_pool_argmax and
// max_pool_grad_by_argmax are the same loop split in two (f32 with i32 positions).
// Geometry follows PyTorch: stride defaults to the kernel, pad to zeros; oneDNN gets the padding on the left and,
// on the right, that padding plus what ceil_mode's last window reaches past it, which its floor-division size
// check accepts. Declined (reference kernel): non-f32, and an average that counts padding where a ceil_mode
// window reaches past the padding (oneDNN would count those positions too; PyTorch and the reference do not).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"
#include "lms/ops/pool_window.h"

namespace lms::cpu {

namespace {

struct PoolGeometry {
  Dims kernel, stride, pad;
  Dims pad_end;  // right padding: pad, plus how far ceil_mode's last window reaches past it
  bool past_padding() const { return pad_end != pad; }
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
  const bool ceil_mode = call.attrs->get_bool("ceil_mode", false);
  for (int i = 0; i < rank; ++i) {
    const int64_t span = x[2 + i] + 2 * g.pad[i] - g.kernel[i];
    if (g.kernel[i] < 1 || g.stride[i] < 1 || g.pad[i] < 0 || g.pad[i] > g.kernel[i] / 2 || span < 0 ||
        pooled_size(x[2 + i], g.kernel[i], g.stride[i], g.pad[i], ceil_mode) != y[2 + i])
      return std::optional<PoolGeometry>();
    g.pad_end.push_back(std::max(g.pad[i], (y[2 + i] - 1) * g.stride[i] + g.kernel[i] - x[2 + i] - g.pad[i]));
  }
  return std::optional<PoolGeometry>(std::move(g));
}

bool counts_padding(const KernelCall& call) { return call.attrs->get_bool("count_include_pad", true); }

dnnl::algorithm pool_algorithm(const KernelCall& call, bool average) {
  if (!average) return dnnl::algorithm::pooling_max;
  return counts_padding(call) ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
}

dnnl::pooling_forward::desc forward_desc(dnnl::prop_kind prop, dnnl::algorithm alg, const memory::desc& x,
                                         const memory::desc& y, const PoolGeometry& g) {
  return dnnl::pooling_forward::desc(prop, alg, x, y, g.stride, g.kernel, g.pad, g.pad_end);
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
  dnnl::pooling_backward::desc desc(alg, dx, dy, g.stride, g.kernel, g.pad, g.pad_end);
  dnnl::pooling_backward::primitive_desc pd(desc, user_scratchpad(), ctx.engine, hint);
  auto k = std::make_unique<CpuKernel>(ctx);
  k->add_primitive(dnnl::pooling_backward(pd), pd.scratchpad_desc(),
                   {{DNNL_ARG_DIFF_DST, k->mem(dy, call.inputs[0].data)},
                    {DNNL_ARG_DIFF_SRC, k->mem(dx, call.outputs[0].data)}});
  return k;
}

// One spatial dimension of the max-pool loops, padded to three like the reference (kernel_util.h).
struct Axis {
  int64_t in = 1, out = 1, k = 1, stride = 1, pad = 0;
  int64_t origin(int64_t o) const { return o * stride - pad; }  // the window's first position (may be padding)
};

// Calls f(plane, output offset in the plane, od, oh, ow) for every pooled output: planes on OpenMP threads, a
// plane's outputs in order.
template <class F>
void for_each_output(const std::array<Axis, 3>& a, int64_t planes, F&& f) {
  // Planes are independent (each writes only its own outputs), and within a plane the order is kept: the same
  // bits on any number of threads.
#pragma omp parallel for schedule(static) if (planes * a[0].out * a[1].out * a[2].out > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    int64_t o = 0;
    for (int64_t od = 0; od < a[0].out; ++od)
      for (int64_t oh = 0; oh < a[1].out; ++oh)
        for (int64_t ow = 0; ow < a[2].out; ++ow, ++o) f(p, o, od, oh, ow);
  }
}

// The input-plane offset of the first maximum of output (od, oh, ow)'s window over plane xp (row-major window
// order; a NaN wins; padding never does); -1 for an empty window.
int64_t window_max(const std::array<Axis, 3>& a, const float* xp, int64_t od, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float b = 0;
  for (int64_t id = std::max<int64_t>(a[0].origin(od), 0); id < std::min(a[0].origin(od) + a[0].k, a[0].in); ++id)
    for (int64_t ih = std::max<int64_t>(a[1].origin(oh), 0); ih < std::min(a[1].origin(oh) + a[1].k, a[1].in);
         ++ih) {
      const int64_t row = (id * a[1].in + ih) * a[2].in;
      for (int64_t iw = std::max<int64_t>(a[2].origin(ow), 0); iw < std::min(a[2].origin(ow) + a[2].k, a[2].in);
           ++iw) {
        const float v = xp[row + iw];
        if (best < 0 || (!std::isnan(b) && (v > b || std::isnan(v)))) {
          best = row + iw;
          b = v;
        }
      }
    }
  return best;
}

// Window position (row-major over the kernel) <-> input-plane offset, for output (od, oh, ow); -1 where the
// position is outside the window or in padding.
int64_t position_of(const std::array<Axis, 3>& a, int64_t i, int64_t od, int64_t oh, int64_t ow) {
  const int64_t iw = i % a[2].in, ih = (i / a[2].in) % a[1].in, id = i / (a[2].in * a[1].in);
  return ((id - a[0].origin(od)) * a[1].k + (ih - a[1].origin(oh))) * a[2].k + (iw - a[2].origin(ow));
}
int64_t offset_of(const std::array<Axis, 3>& a, int64_t pos, int64_t od, int64_t oh, int64_t ow) {
  if (pos < 0 || pos >= a[0].k * a[1].k * a[2].k) return -1;
  const int64_t id = a[0].origin(od) + pos / (a[2].k * a[1].k), ih = a[1].origin(oh) + (pos / a[2].k) % a[1].k,
                iw = a[2].origin(ow) + pos % a[2].k;
  if (id < 0 || id >= a[0].in || ih < 0 || ih >= a[1].in || iw < 0 || iw >= a[2].in) return -1;
  return (id * a[1].in + ih) * a[2].in + iw;
}

int64_t in_plane(const std::array<Axis, 3>& a) { return a[0].in * a[1].in * a[2].in; }
int64_t out_plane(const std::array<Axis, 3>& a) { return a[0].out * a[1].out * a[2].out; }

// The loops' geometry from x's and y's shapes.
std::array<Axis, 3> axes(const Shape& x, const Shape& y, const PoolGeometry& g) {
  const int rank = static_cast<int>(x.size()) - 2;
  std::array<Axis, 3> a{};
  for (int i = 0; i < rank; ++i)
    a[static_cast<size_t>(3 - rank + i)] = Axis{x[2 + i], y[2 + i], g.kernel[i], g.stride[i], g.pad[i]};
  return a;
}

// (dy, x) -> dx: dx = 0, then each dy element is added to its window's first maximum, in output order.
// (dy, argmax) -> dx: the same adds in the same order, at the positions max_pool_argmax recorded, so the two
// give the same bits. (x) -> argmax: each window's first maximum as its window position.
KernelPtr max_pool_loop(DnnlContext& ctx, const KernelCall& call, const PoolGeometry& g) {
  const bool by_argmax = call.op == Op::max_pool_grad_by_argmax, argmax = call.op == Op::max_pool_argmax;
  const std::array<Axis, 3> a =
      argmax ? axes(in_shape(call, 0), out_shape(call, 0), g) : axes(out_shape(call, 0), in_shape(call, 0), g);
  const int64_t planes = in_shape(call, 0)[0] * in_shape(call, 0)[1], in = in_plane(a), out = out_plane(a);
  auto k = std::make_unique<CpuKernel>(ctx);
  if (argmax) {
    const float* px = in_f32(call, 0);
    auto* pos = static_cast<int32_t*>(call.outputs[0].data);
    k->add_loop([a, planes, in, out, px, pos]() -> Result<void> {
      for_each_output(a, planes, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
        const int64_t best = window_max(a, px + p * in, od, oh, ow);
        pos[p * out + o] = static_cast<int32_t>(best < 0 ? -1 : position_of(a, best, od, oh, ow));
      });
      return {};
    });
    return k;
  }
  const float* pdy = in_f32(call, 0);
  const void* second = call.inputs[1].data;  // x, or the positions
  float* pdx = out_f32(call, 0);
  k->add_loop([a, planes, in, out, pdy, second, pdx, by_argmax]() -> Result<void> {
    std::memset(pdx, 0, static_cast<size_t>(planes * in) * sizeof(float));
    for_each_output(a, planes, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
      const int64_t j = p * out + o;
      const int64_t i = by_argmax ? offset_of(a, static_cast<const int32_t*>(second)[j], od, oh, ow)
                                  : window_max(a, static_cast<const float*>(second) + p * in, od, oh, ow);
      if (i >= 0) pdx[p * in + i] += pdy[j];
    });
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
      if (!g || (average && counts_padding(call) && g->past_padding())) return KernelPtr();
      return pool_forward(ctx, call, average, *g);
    }
    case Op::max_pool_grad: {
      if (call.inputs.size() != 2 || out_shape(call, 0) != in_shape(call, 1)) return KernelPtr();
      auto g = LMS_TRY(pool_geometry(call, in_shape(call, 1), in_shape(call, 0)));
      if (!g) return KernelPtr();
      return max_pool_loop(ctx, call, *g);
    }
    case Op::avg_pool_grad: {
      auto g = LMS_TRY(pool_geometry(call, out_shape(call, 0), in_shape(call, 0)));
      if (!g || (counts_padding(call) && g->past_padding())) return KernelPtr();
      return avg_pool_backward(ctx, call, *g);
    }
    default: return KernelPtr();
  }
}

// max_pool_argmax and max_pool_grad_by_argmax: an f32 operand and i32 positions.
Result<KernelPtr> build_pool_argmax(DnnlContext& ctx, const KernelCall& call) {
  const bool argmax = call.op == Op::max_pool_argmax;
  const size_t n_in = argmax ? 1 : 2;
  if (call.inputs.size() != n_in || call.outputs.size() != 1 || call.inputs[0].type->dtype != DType::f32 ||
      (argmax ? call.outputs[0].type->dtype != DType::i32
              : call.inputs[1].type->dtype != DType::i32 || call.outputs[0].type->dtype != DType::f32 ||
                    in_shape(call, 1) != in_shape(call, 0)))
    return KernelPtr();
  const Shape& x = argmax ? in_shape(call, 0) : out_shape(call, 0);
  const Shape& y = argmax ? out_shape(call, 0) : in_shape(call, 0);
  auto g = LMS_TRY(pool_geometry(call, x, y));
  if (!g) return KernelPtr();
  return max_pool_loop(ctx, call, *g);
}

}  // namespace lms::cpu
