// The cuda backend's own pooling kernels as element functions (kernel_fns.h says what that means and how they are
// checked): the window geometry of up to 3 spatial dimensions (PoolWindows), the forward pass where cuDNN's differs
// (ceil_mode), max_pool_grad, max_pool_argmax and max_pool_grad_by_argmax, and avg_pool_grad.
#pragma once

#include <cstdint>

#include "lms/backends/cuda/kernel_fns.h"

namespace lms::cuda {

// Pooling geometry: up to 3 spatial dimensions, lower ranks padded at the front with trivial ones (as the
// reference's Windows), dilation 1.
struct PoolWindows {
  int64_t in[3], out[3], k[3], stride[3], pad[3];
  bool narrow = false;  // every offset (plus padding) fits 32 bits: the divisions run on uint32 (quot above)
  // a / b and a % b for a >= 0, b > 0
  LMS_HD int64_t quot(int64_t a, int64_t b) const { return lms::cuda::quot(a, b, narrow); }
  LMS_HD int64_t rem(int64_t a, int64_t b) const { return a - quot(a, b) * b; }
  LMS_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  LMS_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  // The input-plane offset of the first maximum of output (o0, o1, o2)'s window in row-major window order,
  // skipping padding; a NaN counts as the maximum (the first one wins). The reference's window_argmax.
  template <class T>
  LMS_HD int64_t argmax(const T* plane, int64_t o0, int64_t o1, int64_t o2) const {
    int64_t best = -1;
    for (int64_t k0 = 0; k0 < k[0]; ++k0) {
      const int64_t i0 = o0 * stride[0] - pad[0] + k0;
      if (i0 < 0 || i0 >= in[0]) continue;
      for (int64_t k1 = 0; k1 < k[1]; ++k1) {
        const int64_t i1 = o1 * stride[1] - pad[1] + k1;
        if (i1 < 0 || i1 >= in[1]) continue;
        for (int64_t k2 = 0; k2 < k[2]; ++k2) {
          const int64_t i2 = o2 * stride[2] - pad[2] + k2;
          if (i2 < 0 || i2 >= in[2]) continue;
          const int64_t i = (i0 * in[1] + i1) * in[2] + i2;
          if (best < 0) {
            best = i;
            continue;
          }
          const T v = plane[i], b = plane[best];
          if (!(b != b) && (v > b || v != v)) best = i;
        }
      }
    }
    return best;
  }
  // The coordinates (c0, c1, c2) of row-major offset `at` in a plane of sizes `dims`.
  LMS_HD void coords(int64_t at, const int64_t (&dims)[3], int64_t& c0, int64_t& c1, int64_t& c2) const {
    int64_t c[3];
    coords3(at, dims, narrow, c);
    c0 = c[0], c1 = c[1], c2 = c[2];
  }
  // Input position (i0, i1, i2)'s place in output (o0, o1, o2)'s window, row-major over k.
  LMS_HD int64_t window_position(int64_t i0, int64_t i1, int64_t i2, int64_t o0, int64_t o1, int64_t o2) const {
    return ((i0 - (o0 * stride[0] - pad[0])) * k[1] + (i1 - (o1 * stride[1] - pad[1]))) * k[2] +
           (i2 - (o2 * stride[2] - pad[2]));
  }
  LMS_HD int64_t window_volume() const { return k[0] * k[1] * k[2]; }
  // How many positions of output o's window along dimension d an average counting padding divides by: the
  // window clipped to the padded input (ops/pool_window.h's counted_window).
  LMS_HD int64_t counted(int d, int64_t o) const {
    const int64_t first = o * stride[d] - pad[d], end = first + k[d];
    return (end < in[d] + pad[d] ? end : in[d] + pad[d]) - first;
  }
  // The input positions along dimension d in output o's window (padding excluded).
  LMS_HD int64_t valid(int d, int64_t o) const {
    const int64_t first = o * stride[d] - pad[d], last = first + k[d] - 1;
    return (last < in[d] - 1 ? last : in[d] - 1) - (first > 0 ? first : 0) + 1;
  }
  // The outputs along dimension d whose windows hold input position i: [first, last] (empty when first > last).
  LMS_HD void covering(int d, int64_t i, int64_t& first, int64_t& last) const {
    const int64_t hi = i + pad[d];  // o*stride <= i + pad, and o*stride + k - 1 >= i + pad
    const int64_t lo = hi - k[d] + 1;
    first = lo <= 0 ? 0 : quot(lo + stride[d] - 1, stride[d]);
    last = quot(hi, stride[d]);
    if (last > out[d] - 1) last = out[d] - 1;
  }
  // Calls f(input plane offset, output plane offset, output position in its plane, o0, o1, o2) for input element
  // i (over all planes) and each output of its plane whose window holds it, in ascending output order.
  template <class F>
  LMS_HD void for_covering(int64_t i, F&& f) const {
    const int64_t plane = quot(i, in_plane());
    int64_t i0, i1, i2, f0, l0, f1, l1, f2, l2;
    coords(i - plane * in_plane(), in, i0, i1, i2);
    covering(0, i0, f0, l0);
    covering(1, i1, f1, l1);
    covering(2, i2, f2, l2);
    for (int64_t o0 = f0; o0 <= l0; ++o0)
      for (int64_t o1 = f1; o1 <= l1; ++o1)
        for (int64_t o2 = f2; o2 <= l2; ++o2)
          f(plane * in_plane(), plane * out_plane(), (o0 * out[1] + o1) * out[2] + o2, o0, o1, o2);
  }
};

// Max or average pooling forward, one output element per index, as the reference's loops: the window's first
// maximum, or its sum in double in row-major window order over the divisor AvgPoolGrad uses. The cuda backend
// runs it for ceil_mode pools only (cuDNN's pooling takes symmetric padding); the rest run on cuDNN.
template <class T>
struct PoolForward {
  const T* x;
  T* y;
  PoolWindows w;
  bool average, include_pad;
  LMS_HD void operator()(int64_t j) const {
    const int64_t plane = w.quot(j, w.out_plane());
    int64_t o0, o1, o2;
    w.coords(w.rem(j, w.out_plane()), w.out, o0, o1, o2);
    const T* xp = x + plane * w.in_plane();
    if (!average) {
      const int64_t best = w.argmax(xp, o0, o1, o2);
      y[j] = best < 0 ? T(0) : xp[best];
      return;
    }
    double sum = 0;
    for (int64_t k0 = 0; k0 < w.k[0]; ++k0) {
      const int64_t i0 = o0 * w.stride[0] - w.pad[0] + k0;
      if (i0 < 0 || i0 >= w.in[0]) continue;
      for (int64_t k1 = 0; k1 < w.k[1]; ++k1) {
        const int64_t i1 = o1 * w.stride[1] - w.pad[1] + k1;
        if (i1 < 0 || i1 >= w.in[1]) continue;
        for (int64_t k2 = 0; k2 < w.k[2]; ++k2) {
          const int64_t i2 = o2 * w.stride[2] - w.pad[2] + k2;
          if (i2 < 0 || i2 >= w.in[2]) continue;
          sum += static_cast<double>(xp[(i0 * w.in[1] + i1) * w.in[2] + i2]);
        }
      }
    }
    const int64_t divisor = include_pad ? w.counted(0, o0) * w.counted(1, o1) * w.counted(2, o2)
                                        : w.valid(0, o0) * w.valid(1, o1) * w.valid(2, o2);
    y[j] = static_cast<T>(sum / static_cast<double>(divisor));
  }
};

// The first maximum of each output's window (PoolWindows::argmax), one output element per index, stored as its
// position in the window (row-major over k; kNoWindowPosition: an empty window): max_pool_grad's first pass
// (P = uint8_t, windows of < 255 positions) and the max_pool_argmax op (P = int32_t).
template <class T, class P = uint8_t>
struct MaxPoolArgmax {
  const T* x;
  P* pos;
  PoolWindows w;
  LMS_HD void operator()(int64_t j) const {
    const int64_t plane = w.quot(j, w.out_plane());
    int64_t o0, o1, o2, b0, b1, b2;
    w.coords(w.rem(j, w.out_plane()), w.out, o0, o1, o2);
    const int64_t best = w.argmax(x + plane * w.in_plane(), o0, o1, o2);
    if (best < 0) {
      pos[j] = kNoWindowPosition;
      return;
    }
    w.coords(best, w.in, b0, b1, b2);
    pos[j] = static_cast<P>(w.window_position(b0, b1, b2, o0, o1, o2));
  }
  static constexpr P kNoWindowPosition = static_cast<P>(-1);
};

// max_pool_grad's second pass (and max_pool_grad_by_argmax, P = int32_t), one input element per index: the sum
// of the dy elements whose window's recorded position (MaxPoolArgmax) is this element, in ascending output
// order, in double (the reference scatters in that order into a double accumulator, so the sums are the same).
// A position outside the window or in its padding matches no element: that dy is dropped, as in the reference.
template <class T, class P = uint8_t>
struct MaxPoolGradByPosition {
  const T* dy;
  const P* pos;
  T* dx;
  PoolWindows w;
  LMS_HD void operator()(int64_t i) const {
    int64_t i0, i1, i2;
    w.coords(w.rem(i, w.in_plane()), w.in, i0, i1, i2);
    double acc = 0;
    w.for_covering(i, [&](int64_t, int64_t out_base, int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      if (pos[out_base + o] == w.window_position(i0, i1, i2, o0, o1, o2))
        acc += static_cast<double>(dy[out_base + o]);
    });
    dx[i] = static_cast<T>(acc);
  }
};

// max_pool_grad in one pass for windows of more than 254 positions: as MaxPoolGradByPosition, each window's
// maximum found again for every input element it holds.
template <class T>
struct MaxPoolGrad {
  const T *dy, *x;
  T* dx;
  PoolWindows w;
  LMS_HD void operator()(int64_t i) const {
    double acc = 0;
    w.for_covering(i, [&](int64_t in_base, int64_t out_base, int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      if (w.argmax(x + in_base, o0, o1, o2) == i - in_base) acc += static_cast<double>(dy[out_base + o]);
    });
    dx[i] = static_cast<T>(acc);
  }
};

// avg_pool_grad by gathering, one input element per index: the sum of dy / divisor over the windows holding
// it, in ascending output order, in double: the reference scatters the same shares in that order into a double
// accumulator. The divisor is the window's positions inside the padded input (the window size but for a ceil_mode
// window reaching past the padding), or with count_include_pad off its positions inside the input (the product
// of the per-dimension counts, as the reference's count of the window's positions).
template <class T>
struct AvgPoolGrad {
  const T* dy;
  T* dx;
  PoolWindows w;
  bool include_pad;
  LMS_HD void operator()(int64_t i) const {
    double acc = 0;
    w.for_covering(i, [&](int64_t, int64_t out_base, int64_t o, int64_t o0, int64_t o1, int64_t o2) {
      const int64_t divisor = include_pad ? w.counted(0, o0) * w.counted(1, o1) * w.counted(2, o2)
                                          : w.valid(0, o0) * w.valid(1, o1) * w.valid(2, o2);
      acc += static_cast<double>(dy[out_base + o]) / static_cast<double>(divisor);
    });
    dx[i] = static_cast<T>(acc);
  }
};

}  // namespace lms::cuda
