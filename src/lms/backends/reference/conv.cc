// Reference convolutions: conv1d/2d/3d, conv_transpose1d/2d/3d and the two convolution gradients. Every one
// is written against one geometry, the plain convolution x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out], padded to
// three spatial dimensions (kernel_util.h). The kernels gather: each output element is one double accumulator
// over its contributions in a fixed order, so no output is read back and rounded twice.
//   conv:                 y  from x and w
//   conv_backward_data:   dx from dy and w (gradient wrt the input)
//   conv_transpose:       the same loop as conv_backward_data, with x in the role of dy (the definition of a
//                         transposed convolution: the gradient of a convolution wrt its input)
//   conv_backward_filter: dw from x and dy
#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

// The plain convolution's operands, as the loops see them.
struct ConvGeometry {
  int64_t batch = 0;
  int64_t in_channels = 0;   // Ci (x's channels)
  int64_t out_channels = 0;  // Co (y's channels)
  int64_t groups = 1;
  Windows win;               // in = x's spatial sizes, out = y's

  int64_t cin_g() const { return in_channels / groups; }
  int64_t cout_g() const { return out_channels / groups; }
  int64_t in_size() const { return win[0].in * win[1].in * win[2].in; }
  int64_t out_size() const { return win[0].out * win[1].out * win[2].out; }
  int64_t k_size() const { return win[0].k * win[1].k * win[2].k; }
};

// Builds and checks the geometry of x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out]: the loops below index all
// three buffers by it, so every size must agree with the convolution formula whatever the shape rule checked.
Result<ConvGeometry> geometry(const Args& a, const Shape& x, const Shape& w, const Shape& y) {
  int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > kMaxSpatial || w.size() != x.size() || y.size() != x.size())
    return fail("{} needs x, w and y of one rank 3..5, got {}, {} and {}", a.name(), to_string(x), to_string(w),
                to_string(y));
  ConvGeometry g;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = y[1];
  g.groups = a.c.i("groups");
  if (g.groups < 1) return fail("{} attribute 'groups' = {} must be at least 1", a.name(), g.groups);
  IntList stride = LMS_TRY(spatial_attr(a, "stride", rank, 1));
  IntList pad = LMS_TRY(spatial_attr(a, "pad", rank, 0));
  IntList dil = LMS_TRY(spatial_attr(a, "dilation", rank, 1));
  if (y[0] != g.batch || g.in_channels % g.groups != 0 || g.out_channels % g.groups != 0 ||
      w[0] != g.out_channels || w[1] * g.groups != g.in_channels)
    return fail("{} channels do not agree: x {}, w {}, y {}, groups {}", a.name(), to_string(x), to_string(w),
                to_string(y), g.groups);
  IntList k(w.begin() + 2, w.end());
  for (int i = 0; i < rank; ++i) {
    if (stride[i] < 1 || dil[i] < 1 || pad[i] < 0)
      return fail("{} stride {}, dilation {}, pad {} out of range along spatial dimension {}", a.name(), stride[i],
                  dil[i], pad[i], i);
    int64_t span = x[2 + i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1;
    if (span < 0 || span / stride[i] + 1 != y[2 + i])
      return fail("{} spatial dimension {}: input {} with kernel {}, stride {}, pad {}, dilation {} does not give "
                  "output {} (x {}, y {})",
                  a.name(), i, x[2 + i], k[i], stride[i], pad[i], dil[i], y[2 + i], to_string(x), to_string(y));
  }
  g.win = make_windows(x, y, k, stride, pad, dil);
  return g;
}

// y[n, oc, o] = sum over (icg, kernel position) of x[n, g*cin_g + icg, o*s - p + k*d] * w[oc, icg, k].
template <class T>
void conv_loops(const ConvGeometry& g, const T* x, const T* w, T* y) {
  const Window &D = g.win[0], &H = g.win[1], &W = g.win[2];
  const int64_t cin_g = g.cin_g(), cout_g = g.cout_g(), in_sp = g.in_size(), k_sp = g.k_size();
  T* out = y;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oc = 0; oc < g.out_channels; ++oc) {
      const T* x_group = x + (n * g.in_channels + (oc / cout_g) * cin_g) * in_sp;
      const T* w_oc = w + oc * cin_g * k_sp;
      for (int64_t od = 0; od < D.out; ++od)
        for (int64_t oh = 0; oh < H.out; ++oh)
          for (int64_t ow = 0; ow < W.out; ++ow) {
            Acc acc = 0;
            for (int64_t icg = 0; icg < cin_g; ++icg) {
              const T* xc = x_group + icg * in_sp;
              const T* wc = w_oc + icg * k_sp;
              for (int64_t kd = 0; kd < D.k; ++kd) {
                int64_t id = od * D.stride - D.pad + kd * D.dil;
                if (id < 0 || id >= D.in) continue;
                for (int64_t kh = 0; kh < H.k; ++kh) {
                  int64_t ih = oh * H.stride - H.pad + kh * H.dil;
                  if (ih < 0 || ih >= H.in) continue;
                  const T* x_row = xc + (id * H.in + ih) * W.in;
                  const T* w_row = wc + (kd * H.k + kh) * W.k;
                  for (int64_t kw = 0; kw < W.k; ++kw) {
                    int64_t iw = ow * W.stride - W.pad + kw * W.dil;
                    if (iw < 0 || iw >= W.in) continue;
                    acc += static_cast<Acc>(x_row[iw]) * static_cast<Acc>(w_row[kw]);
                  }
                }
              }
            }
            *out++ = static_cast<T>(acc);
          }
    }
}

// The output position o of a window dimension whose kernel element j reads input position i, if any.
inline bool output_of(const Window& d, int64_t i, int64_t j, int64_t& o) {
  int64_t t = i + d.pad - j * d.dil;
  if (t < 0 || t % d.stride != 0) return false;
  o = t / d.stride;
  return o < d.out;
}

// dx[n, ic, i] = sum over (ocg, kernel position k with i = o*s - p + k*d) of dy[n, g*cout_g + ocg, o] *
// w[g*cout_g + ocg, icg, k], where ic = g*cin_g + icg.
template <class T>
void data_grad_loops(const ConvGeometry& g, const T* dy, const T* w, T* dx) {
  const Window &D = g.win[0], &H = g.win[1], &W = g.win[2];
  const int64_t cin_g = g.cin_g(), cout_g = g.cout_g(), out_sp = g.out_size(), k_sp = g.k_size();
  T* out = dx;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t ic = 0; ic < g.in_channels; ++ic) {
      const int64_t grp = ic / cin_g, icg = ic % cin_g;
      for (int64_t id = 0; id < D.in; ++id)
        for (int64_t ih = 0; ih < H.in; ++ih)
          for (int64_t iw = 0; iw < W.in; ++iw) {
            Acc acc = 0;
            for (int64_t ocg = 0; ocg < cout_g; ++ocg) {
              const int64_t oc = grp * cout_g + ocg;
              const T* dyc = dy + (n * g.out_channels + oc) * out_sp;
              const T* wc = w + (oc * cin_g + icg) * k_sp;
              for (int64_t kd = 0; kd < D.k; ++kd) {
                int64_t od = 0;
                if (!output_of(D, id, kd, od)) continue;
                for (int64_t kh = 0; kh < H.k; ++kh) {
                  int64_t oh = 0;
                  if (!output_of(H, ih, kh, oh)) continue;
                  for (int64_t kw = 0; kw < W.k; ++kw) {
                    int64_t ow = 0;
                    if (!output_of(W, iw, kw, ow)) continue;
                    acc += static_cast<Acc>(dyc[(od * H.out + oh) * W.out + ow]) *
                           static_cast<Acc>(wc[(kd * H.k + kh) * W.k + kw]);
                  }
                }
              }
            }
            *out++ = static_cast<T>(acc);
          }
    }
}

// dw[oc, icg, k] = sum over (n, o) of x[n, g*cin_g + icg, o*s - p + k*d] * dy[n, oc, o].
template <class T>
void filter_grad_loops(const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  const Window &D = g.win[0], &H = g.win[1], &W = g.win[2];
  const int64_t cin_g = g.cin_g(), cout_g = g.cout_g(), in_sp = g.in_size(), out_sp = g.out_size();
  T* out = dw;
  for (int64_t oc = 0; oc < g.out_channels; ++oc)
    for (int64_t icg = 0; icg < cin_g; ++icg) {
      const int64_t ic = (oc / cout_g) * cin_g + icg;
      for (int64_t kd = 0; kd < D.k; ++kd)
        for (int64_t kh = 0; kh < H.k; ++kh)
          for (int64_t kw = 0; kw < W.k; ++kw) {
            Acc acc = 0;
            for (int64_t n = 0; n < g.batch; ++n) {
              const T* xc = x + (n * g.in_channels + ic) * in_sp;
              const T* dyc = dy + (n * g.out_channels + oc) * out_sp;
              for (int64_t od = 0; od < D.out; ++od) {
                int64_t id = od * D.stride - D.pad + kd * D.dil;
                if (id < 0 || id >= D.in) continue;
                for (int64_t oh = 0; oh < H.out; ++oh) {
                  int64_t ih = oh * H.stride - H.pad + kh * H.dil;
                  if (ih < 0 || ih >= H.in) continue;
                  const T* x_row = xc + (id * H.in + ih) * W.in;
                  const T* dy_row = dyc + (od * H.out + oh) * W.out;
                  for (int64_t ow = 0; ow < W.out; ++ow) {
                    int64_t iw = ow * W.stride - W.pad + kw * W.dil;
                    if (iw < 0 || iw >= W.in) continue;
                    acc += static_cast<Acc>(x_row[iw]) * static_cast<Acc>(dy_row[ow]);
                  }
                }
              }
            }
            *out++ = static_cast<T>(acc);
          }
    }
}

// Both operands and the output share one float dtype.
Result<DType> common_float(const Args& a) {
  DType t = a.in(0).dtype;
  if (a.in(1).dtype != t || a.out(0).dtype != t)
    return fail("{} operands differ in dtype: {}, {} -> {}", a.name(), to_string(a.in(0)), to_string(a.in(1)),
                to_string(a.out(0)));
  return t;
}

}  // namespace

Result<void> conv(const Args& a) {
  DType t = LMS_TRY(common_float(a));
  ConvGeometry g = LMS_TRY(geometry(a, a.in(0).shape, a.in(1).shape, a.out(0).shape));
  return with_float(a, t, [&]<class T>() -> Result<void> {
    conv_loops<T>(g, a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0));
    return {};
  });
}

// conv_transpose(x, w[Ci_t, Co_t/g, k]) is the input gradient of the convolution out -> x with weight w: that
// convolution's input is `out`, its output is `x`, and its weight layout [Co, Ci/g, k] is w's. output_pad needs
// no code: it only makes `out` longer, and the gather finds no contributions for the extra positions beyond
// the last window.
Result<void> conv_transpose(const Args& a) {
  DType t = LMS_TRY(common_float(a));
  int rank = a.in(0).rank() - 2;
  if (rank < 1 || rank > kMaxSpatial || a.out(0).rank() != a.in(0).rank())
    return fail("{} needs input and output of one rank 3..5, got {} and {}", a.name(), to_string(a.in(0)),
                to_string(a.out(0)));
  IntList output_pad = LMS_TRY(spatial_attr(a, "output_pad", rank, 0));
  // The plain convolution's output-size formula holds for `out` without its output_pad trailing positions;
  // check the geometry on that, then let the loops cover the full `out`.
  Shape conv_in = a.out(0).shape;
  for (int i = 0; i < rank; ++i) conv_in[2 + i] -= output_pad[i];
  ConvGeometry g = LMS_TRY(geometry(a, conv_in, a.in(1).shape, a.in(0).shape));
  for (int i = 0; i < rank; ++i) g.win[kMaxSpatial - rank + i].in = a.out(0).shape[2 + i];
  return with_float(a, t, [&]<class T>() -> Result<void> {
    data_grad_loops<T>(g, a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0));
    return {};
  });
}

Result<void> conv_backward_data(const Args& a) {
  DType t = LMS_TRY(common_float(a));
  ConvGeometry g = LMS_TRY(geometry(a, a.out(0).shape, a.in(1).shape, a.in(0).shape));
  return with_float(a, t, [&]<class T>() -> Result<void> {
    data_grad_loops<T>(g, a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0));
    return {};
  });
}

Result<void> conv_backward_filter(const Args& a) {
  DType t = LMS_TRY(common_float(a));
  ConvGeometry g = LMS_TRY(geometry(a, a.in(0).shape, a.out(0).shape, a.in(1).shape));
  return with_float(a, t, [&]<class T>() -> Result<void> {
    filter_grad_loops<T>(g, a.in_data<T>(0), a.in_data<T>(1), a.out_data<T>(0));
    return {};
  });
}

}  // namespace lms::reference
