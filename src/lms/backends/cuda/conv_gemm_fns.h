// The element functions of the cuda backend's convolutions as gemms (conv_gemm.cc, layout in conv_plan.h): column
// matrices gathered from x (Im2Col) and summed back into dx (Col2Im), and backward-filter's per-sample partials
// added into dw (SumPartials). Like kernel_fns.h, whose conventions they follow: plain C++20 that runs on the GPU
// (cuda_kernels.cu launches it) and on the host (conv_gemm_test.cc runs the plans with it), deterministic, no
// atomics.
#pragma once

#include <cstdint>

#include "lms/backends/cuda/kernel_fns.h"

namespace lms::cuda {

// A convolution's windows over up to 3 spatial dimensions (trailing ones of size 1, kernel 1, stride 1, pad 0,
// dilation 1), for the column matrix of one sample: cols[(c, k0, k1, k2), (o0, o1, o2)] =
// x[c, o0*s0 - p0 + k0*d0, ...], 0 where that falls in the padding. `channels` is x's.
struct ConvColumns {
  int64_t in[3], out[3], k[3], stride[3], pad[3], dil[3];
  int64_t channels;
  bool narrow = false;  // every offset fits 32 bits: the divisions run on uint32 (kernel_fns.h quot)
  LMS_HD int64_t quot(int64_t a, int64_t b) const { return lms::cuda::quot(a, b, narrow); }
  LMS_HD int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  LMS_HD int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  LMS_HD int64_t volume() const { return k[0] * k[1] * k[2]; }
  LMS_HD int64_t rows() const { return channels * volume(); }  // of one sample's column matrix
  LMS_HD void coords(int64_t at, const int64_t (&dims)[3], int64_t (&c)[3]) const { coords3(at, dims, narrow, c); }
};

// The column matrices of consecutive samples, one element per index j = (sample * rows + row) * out_plane + o:
// x's element under window position `row` of output position `o`, or 0 in the padding, written at j, or with
// `samples_inner` (backward-filter's regrouped gemm) at (row * samples + sample) * out_plane + o: the `samples`
// samples' matrices side by side as one [rows, samples * out_plane]. x points at the first sample's.
template <class T>
struct Im2Col {
  const T* x;
  T* cols;
  ConvColumns g;
  bool samples_inner = false;
  int64_t samples = 1;  // with samples_inner: how many
  LMS_HD void operator()(int64_t j) const {
    const int64_t plane = g.out_plane(), line = g.quot(j, plane), o = j - line * plane;
    const int64_t n = g.quot(line, g.rows()), row = line - n * g.rows();
    const int64_t c = g.quot(row, g.volume()), kk = row - c * g.volume();
    const int64_t to = samples_inner ? (row * samples + n) * plane + o : j;
    int64_t oc[3], kc[3], at = 0;
    g.coords(o, g.out, oc);
    g.coords(kk, g.k, kc);
    for (int d = 0; d < 3; ++d) {
      const int64_t i = oc[d] * g.stride[d] - g.pad[d] + kc[d] * g.dil[d];
      if (i < 0 || i >= g.in[d]) {
        cols[to] = T(0);
        return;
      }
      at = at * g.in[d] + i;
    }
    cols[to] = x[(n * g.channels + c) * g.in_plane() + at];
  }
};

// The inverse gather (backward-data): each element of dx, one per index over consecutive samples, is the sum of
// the column entries that Im2Col would copy from it, in ascending window position, in double, rounded once
// (0 where no window reaches it). dcols points at the first sample's column matrix.
template <class T>
struct Col2Im {
  const T* dcols;
  T* dx;
  ConvColumns g;
  LMS_HD void operator()(int64_t i) const {
    const int64_t plane = g.in_plane(), line = g.quot(i, plane), at = i - line * plane;  // line = n*C + c
    int64_t ic[3], o[3];
    g.coords(at, g.in, ic);
    double acc = 0;
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
          const int64_t kc[3] = {k0, k1, k2};
          bool hit = true;
          for (int d = 0; d < 3 && hit; ++d) {
            const int64_t t = ic[d] + g.pad[d] - kc[d] * g.dil[d];  // o * stride when this window position holds it
            o[d] = t < 0 ? 0 : g.quot(t, g.stride[d]);
            hit = t >= 0 && o[d] * g.stride[d] == t && o[d] < g.out[d];
          }
          if (!hit) continue;
          const int64_t row = line * g.volume() + (k0 * g.k[1] + k1) * g.k[2] + k2;  // (n*C + c)*K + k
          acc += static_cast<double>(dcols[row * g.out_plane() + (o[0] * g.out[1] + o[1]) * g.out[2] + o[2]]);
        }
    dx[i] = static_cast<T>(acc);
  }
};

// The sum of `groups` partial results of `count` elements each, one element per index: y[e] = (accumulate ?
// y[e] : 0) + the sum over g of parts[g * count + e], summed in double in g order and rounded once (the
// backward-filter's per-sample gemms, conv_gemm.cc; not an op of its own).
template <class T>
struct SumPartials {
  const T* parts;
  T* y;
  int64_t count;
  int64_t groups;
  bool accumulate;
  LMS_HD void operator()(int64_t e) const {
    double acc = accumulate ? static_cast<double>(y[e]) : 0.0;
    double sum = 0;
    for (int64_t g = 0; g < groups; ++g) sum += static_cast<double>(parts[g * count + e]);
    y[e] = static_cast<T>(acc + sum);
  }
};

}  // namespace lms::cuda
