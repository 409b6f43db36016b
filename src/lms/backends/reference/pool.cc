// Reference pooling: max_pool1d/2d/3d, avg_pool1d/2d/3d, global_avg_pool, the two windowed gradients, and
// max_pool_argmax with max_pool_grad_by_argmax (max_pool_grad in two steps, the first in the forward pass).
// PyTorch semantics: stride defaults to the kernel, pad to zeros, pad <= kernel/2, and ceil_mode's last window
// starts inside the input or its left padding, so every window holds at least one input element. Max pooling
// picks the FIRST maximum of its window in row-major window order (padding never wins; a NaN wins, as PyTorch
// propagates NaN), and max_pool_grad sends each dy element to exactly that element, so the forward op and its
// gradient agree by construction: both call window_argmax. The gradients scatter into a double accumulator
// per (n, c) plane in output order.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"
#include "lms/ops/pool_window.h"

namespace lms::reference {

namespace {

int64_t plane_size_in(const Windows& w) { return w[0].in * w[1].in * w[2].in; }
int64_t plane_size_out(const Windows& w) { return w[0].out * w[1].out * w[2].out; }
int64_t window_size(const Windows& w) { return w[0].k * w[1].k * w[2].k; }

// Calls f(offset in the input plane) for the window of output (od, oh, ow), in row-major window order,
// skipping padding positions.
template <class F>
void for_window(const Windows& w, int64_t od, int64_t oh, int64_t ow, F&& f) {
  const Window &D = w[0], &H = w[1], &W = w[2];
  for (int64_t kd = 0; kd < D.k; ++kd) {
    const int64_t id = od * D.stride - D.pad + kd;
    if (id < 0 || id >= D.in) continue;
    for (int64_t kh = 0; kh < H.k; ++kh) {
      const int64_t ih = oh * H.stride - H.pad + kh;
      if (ih < 0 || ih >= H.in) continue;
      for (int64_t kw = 0; kw < W.k; ++kw) {
        const int64_t iw = ow * W.stride - W.pad + kw;
        if (iw < 0 || iw >= W.in) continue;
        f((id * H.in + ih) * W.in + iw);
      }
    }
  }
}

// Calls f(output offset in the plane, od, oh, ow) for every output position of a plane in row-major order.
template <class F>
void for_outputs(const Windows& w, F&& f) {
  int64_t o = 0;
  for (int64_t od = 0; od < w[0].out; ++od)
    for (int64_t oh = 0; oh < w[1].out; ++oh)
      for (int64_t ow = 0; ow < w[2].out; ++ow) f(o++, od, oh, ow);
}

// The input-plane offset of the first maximum of a window (a NaN counts as the maximum; the first one wins).
template <class T>
int64_t window_argmax(const Windows& w, const T* plane, int64_t od, int64_t oh, int64_t ow) {
  int64_t best = -1;
  for_window(w, od, oh, ow, [&](int64_t i) {
    if (best < 0) {
      best = i;
      return;
    }
    const T v = plane[i], b = plane[best];
    if (!std::isnan(b) && (v > b || std::isnan(v))) best = i;
  });
  return best;  // pad <= kernel/2 guarantees a non-empty window
}

// The number avg pooling divides a window's sum by: with count_include_pad the window's positions inside the
// padded input (the kernel size but for a ceil_mode window reaching past the padding), else its input elements.
int64_t avg_divisor(const Windows& w, bool count_include_pad, int64_t od, int64_t oh, int64_t ow) {
  if (count_include_pad) {
    const int64_t o[kMaxSpatial] = {od, oh, ow};
    int64_t n = 1;
    for (int d = 0; d < kMaxSpatial; ++d) n *= counted_window(o[d], w[d].k, w[d].stride, w[d].pad, w[d].in);
    return n;
  }
  int64_t n = 0;
  for_window(w, od, oh, ow, [&](int64_t) { ++n; });
  return n;
}

// Number of (n, c) planes of a [N, C, ...] shape.
int64_t planes(const Shape& s) { return s[0] * s[1]; }

template <class T>
void max_pool_loops(const Windows& w, int64_t n_planes, const T* x, T* y) {
  const int64_t in = plane_size_in(w), out = plane_size_out(w);
  for (int64_t p = 0; p < n_planes; ++p) {
    const T* xp = x + p * in;
    T* yp = y + p * out;
    for_outputs(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) { yp[o] = xp[window_argmax(w, xp, od, oh, ow)]; });
  }
}

template <class T>
void avg_pool_loops(const Windows& w, bool include_pad, int64_t n_planes, const T* x, T* y) {
  const int64_t in = plane_size_in(w), out = plane_size_out(w);
  for (int64_t p = 0; p < n_planes; ++p) {
    const T* xp = x + p * in;
    T* yp = y + p * out;
    for_outputs(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) {
      Acc sum = 0;
      for_window(w, od, oh, ow, [&](int64_t i) { sum += static_cast<Acc>(xp[i]); });
      yp[o] = static_cast<T>(sum / static_cast<Acc>(avg_divisor(w, include_pad, od, oh, ow)));
    });
  }
}

// The input-plane offset of position `pos` (row-major over the kernel, padding counted) in the window of output
// (od, oh, ow); -1 for a position outside the window or in its padding.
int64_t window_offset(const Windows& w, int64_t pos, int64_t od, int64_t oh, int64_t ow) {
  if (pos < 0 || pos >= window_size(w)) return -1;
  const int64_t kw = pos % w[2].k, kh = (pos / w[2].k) % w[1].k, kd = pos / (w[2].k * w[1].k);
  const int64_t id = od * w[0].stride - w[0].pad + kd, ih = oh * w[1].stride - w[1].pad + kh,
                iw = ow * w[2].stride - w[2].pad + kw;
  if (id < 0 || id >= w[0].in || ih < 0 || ih >= w[1].in || iw < 0 || iw >= w[2].in) return -1;
  return (id * w[1].in + ih) * w[2].in + iw;
}

// The position of input-plane offset `i` in the window of output (od, oh, ow); window_offset's inverse.
int64_t window_position(const Windows& w, int64_t i, int64_t od, int64_t oh, int64_t ow) {
  const int64_t iw = i % w[2].in, ih = (i / w[2].in) % w[1].in, id = i / (w[2].in * w[1].in);
  return ((id - (od * w[0].stride - w[0].pad)) * w[1].k + (ih - (oh * w[1].stride - w[1].pad))) * w[2].k +
         (iw - (ow * w[2].stride - w[2].pad));
}

// dx planes from dy planes: scatter(acc, dy value, dy index, od, oh, ow, x plane) adds into the double
// accumulator.
template <class T, class Scatter>
void pool_grad_loops(const Windows& w, int64_t n_planes, const T* dy, const T* x, T* dx, Scatter scatter) {
  const int64_t in = plane_size_in(w), out = plane_size_out(w);
  std::vector<Acc> acc(static_cast<size_t>(in));
  for (int64_t p = 0; p < n_planes; ++p) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const T* dyp = dy + p * out;
    const T* xp = x ? x + p * in : nullptr;
    for_outputs(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) {
      scatter(acc, static_cast<Acc>(dyp[o]), p * out + o, od, oh, ow, xp);
    });
    T* dxp = dx + p * in;
    for (int64_t i = 0; i < in; ++i) dxp[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
  }
}

Result<void> same_dtype(const Args& a) {
  for (size_t i = 0; i < a.num_inputs(); ++i)
    if (a.in(i).dtype != a.out(0).dtype)
      return fail("{} input {} is {} but the output is {}", a.name(), i, to_string(a.in(i)), to_string(a.out(0)));
  return {};
}

}  // namespace

// kernel_util.h; the cuda backend's own pooling gradients use it too.
Result<Windows> pool_geometry(const Args& a, const Shape& x, const Shape& y) {
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > kMaxSpatial || y.size() != x.size() || y[0] != x[0] || y[1] != x[1])
    return fail("{} needs x[N,C,*sp] and y[N,C,*out] with 1 to 3 spatial dimensions, got {} and {}", a.name(),
                to_string(x), to_string(y));
  IntList kernel = a.c.ints("kernel");
  if (static_cast<int>(kernel.size()) != rank)
    return fail("{} attribute 'kernel' = {} needs {} entries", a.name(), to_string(Attribute{kernel}), rank);
  IntList stride = a.c.ints("stride");
  if (stride.empty()) stride = kernel;
  if (static_cast<int>(stride.size()) != rank)
    return fail("{} attribute 'stride' = {} needs {} entries", a.name(), to_string(Attribute{stride}), rank);
  IntList pad = LMS_TRY(spatial_attr(a, "pad", rank, 0));
  const bool ceil_mode = a.c.b("ceil_mode");
  for (int i = 0; i < rank; ++i) {
    const int64_t span = x[2 + i] + 2 * pad[i] - kernel[i];
    if (kernel[i] < 1 || stride[i] < 1 || pad[i] < 0 || pad[i] > kernel[i] / 2 || span < 0 ||
        pooled_size(x[2 + i], kernel[i], stride[i], pad[i], ceil_mode) != y[2 + i])
      return fail("{} spatial dimension {}: input {} with kernel {}, stride {}, pad {}{} does not give output {} (x "
                  "{}, y {})",
                  a.name(), i, x[2 + i], kernel[i], stride[i], pad[i], ceil_mode ? ", ceil_mode" : "", y[2 + i],
                  to_string(x), to_string(y));
  }
  return make_windows(x, y, kernel, stride, pad, IntList(static_cast<size_t>(rank), 1));
}

Result<void> max_pool(const Args& a) {
  LMS_TRY_VOID(same_dtype(a));
  Windows w = LMS_TRY(pool_geometry(a, a.in(0).shape, a.out(0).shape));
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    max_pool_loops<T>(w, planes(a.in(0).shape), a.in_data<T>(0), a.out_data<T>(0));
    return {};
  });
}

Result<void> avg_pool(const Args& a) {
  LMS_TRY_VOID(same_dtype(a));
  Windows w = LMS_TRY(pool_geometry(a, a.in(0).shape, a.out(0).shape));
  const bool include_pad = a.c.b("count_include_pad");
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    avg_pool_loops<T>(w, include_pad, planes(a.in(0).shape), a.in_data<T>(0), a.out_data<T>(0));
    return {};
  });
}

Result<void> global_avg_pool(const Args& a) {
  LMS_TRY_VOID(same_dtype(a));
  const Shape& x = a.in(0).shape;
  const int64_t spatial = product(x, 2, x.size());
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    const T* px = a.in_data<T>(0);
    T* y = a.out_data<T>(0);
    for (int64_t p = 0; p < planes(x); ++p) {
      Acc sum = 0;
      for (int64_t s = 0; s < spatial; ++s) sum += static_cast<Acc>(px[p * spatial + s]);
      y[p] = static_cast<T>(sum / static_cast<Acc>(spatial));
    }
    return {};
  });
}

// (dy, x) -> dx: each dy element goes to its window's first maximum.
Result<void> max_pool_grad(const Args& a) {
  LMS_TRY_VOID(same_dtype(a));
  if (a.out(0) != a.in(1))
    return fail("{} output {} must have x's type {}", a.name(), to_string(a.out(0)), to_string(a.in(1)));
  Windows w = LMS_TRY(pool_geometry(a, a.in(1).shape, a.in(0).shape));
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    pool_grad_loops<T>(w, planes(a.in(1).shape), a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0),
                       [&](std::vector<Acc>& acc, Acc g, int64_t, int64_t od, int64_t oh, int64_t ow, const T* xp) {
                         acc[static_cast<size_t>(window_argmax(w, xp, od, oh, ow))] += g;
                       });
    return {};
  });
}

// (x) -> i32 argmax: the position in its window of the element max_pool_grad would send each dy to.
Result<void> max_pool_argmax(const Args& a) {
  if (a.out(0).dtype != DType::i32 || a.out(0).shape.size() != a.in(0).shape.size())
    return fail("{} output must be i32 of the pooled shape, got {}", a.name(), to_string(a.out(0)));
  Windows w = LMS_TRY(pool_geometry(a, a.in(0).shape, a.out(0).shape));
  const int64_t in = plane_size_in(w), out = plane_size_out(w);
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    const T* x = a.in_data<T>(0);
    int32_t* pos = a.out_data<int32_t>(0);
    for (int64_t p = 0; p < planes(a.in(0).shape); ++p)
      for_outputs(w, [&](int64_t o, int64_t od, int64_t oh, int64_t ow) {
        const int64_t best = window_argmax(w, x + p * in, od, oh, ow);
        pos[p * out + o] = static_cast<int32_t>(window_position(w, best, od, oh, ow));
      });
    return {};
  });
}

// (dy, argmax) -> dx: each dy element goes to the input element its position names (max_pool_grad's sums when
// the positions are max_pool_argmax's).
Result<void> max_pool_grad_by_argmax(const Args& a) {
  if (a.in(0).dtype != a.out(0).dtype || a.in(1).dtype != DType::i32 || a.in(1).shape != a.in(0).shape)
    return fail("{} needs dy of dx's type and i32 positions of dy's shape, got {}, {} -> {}", a.name(),
                to_string(a.in(0)), to_string(a.in(1)), to_string(a.out(0)));
  Windows w = LMS_TRY(pool_geometry(a, a.out(0).shape, a.in(0).shape));
  const int32_t* pos = a.in_data<int32_t>(1);
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    pool_grad_loops<T>(w, planes(a.out(0).shape), a.in_data<T>(0), nullptr, a.out_data<T>(0),
                       [&](std::vector<Acc>& acc, Acc g, int64_t j, int64_t od, int64_t oh, int64_t ow, const T*) {
                         const int64_t i = window_offset(w, pos[j], od, oh, ow);
                         if (i >= 0) acc[static_cast<size_t>(i)] += g;
                       });
    return {};
  });
}

// (dy) -> dx: each dy element is spread evenly over its window's input elements.
Result<void> avg_pool_grad(const Args& a) {
  LMS_TRY_VOID(same_dtype(a));
  Windows w = LMS_TRY(pool_geometry(a, a.out(0).shape, a.in(0).shape));
  const bool include_pad = a.c.b("count_include_pad");
  return with_float(a, a.in(0).dtype, [&]<class T>() -> Result<void> {
    pool_grad_loops<T>(w, planes(a.out(0).shape), a.in_data<T>(0), nullptr, a.out_data<T>(0),
                       [&](std::vector<Acc>& acc, Acc g, int64_t, int64_t od, int64_t oh, int64_t ow, const T*) {
                         const Acc share = g / static_cast<Acc>(avg_divisor(w, include_pad, od, oh, ow));
                         for_window(w, od, oh, ow, [&](int64_t i) { acc[static_cast<size_t>(i)] += share; });
                       });
    return {};
  });
}

}  // namespace lms::reference
