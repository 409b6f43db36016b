// Reference normalization: batch_norm (training mode: biased variance of the batch over N and the spatial
// dims of each channel) and layer_norm (over the last dimension), their gradients, and bn_running_update,
// which folds one batch's statistics into the running mean and (unbiased) variance. Statistics are two-pass
// (mean, then squared deviations) in double. The gradients use the standard closed forms for batch statistics:
//   xhat = (x - mean) * invstd
//   dx   = invstd/M * (M*dxhat - sum(dxhat) - xhat*sum(dxhat*xhat)),  dxhat = dy*gamma
// where the sums run over the M elements normalized together.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

// Fails unless `got` is `want` (the gradient ops' operands are checked here, not only by their shape rules,
// because the loops index every buffer by x's shape).
Result<void> expect_type(const Args& a, std::string_view what, const TensorType& got, const TensorType& want) {
  if (got != want) return fail("{} {} must be {}, got {}", a.name(), what, to_string(want), to_string(got));
  return {};
}

// batch_norm's channel statistics: element (n, s) of channel c is at (n*C + c)*S + s.
template <class F>
void for_channel(int64_t n_batch, int64_t channels, int64_t spatial, int64_t c, F&& f) {
  for (int64_t n = 0; n < n_batch; ++n) {
    int64_t base = (n * channels + c) * spatial;
    for (int64_t s = 0; s < spatial; ++s) f(base + s);
  }
}

template <class T>
Result<void> batch_norm_loops(const Args& a) {
  const Shape& xs = a.in(0).shape;
  const int64_t n_batch = xs[0], channels = xs[1], spatial = product(xs, 2, xs.size());
  const Acc count = static_cast<Acc>(n_batch * spatial);
  if (n_batch * spatial == 0) return fail("{} of {} has no elements per channel", a.name(), to_string(a.in(0)));
  const Acc eps = a.c.f("eps");
  const T *x = a.in_data<T>(0), *gamma = a.in_data<T>(1), *beta = a.in_data<T>(2);
  T *out = a.out_data<T>(0), *mean = a.out_data<T>(1), *invstd = a.out_data<T>(2);
  for (int64_t c = 0; c < channels; ++c) {
    Acc sum = 0;
    for_channel(n_batch, channels, spatial, c, [&](int64_t i) { sum += static_cast<Acc>(x[i]); });
    const Acc m = sum / count;
    Acc sq = 0;
    for_channel(n_batch, channels, spatial, c, [&](int64_t i) {
      Acc d = static_cast<Acc>(x[i]) - m;
      sq += d * d;
    });
    const Acc is = 1 / std::sqrt(sq / count + eps);
    const Acc g = gamma[c], b = beta[c];
    for_channel(n_batch, channels, spatial, c,
                   [&](int64_t i) { out[i] = static_cast<T>(g * (static_cast<Acc>(x[i]) - m) * is + b); });
    mean[c] = static_cast<T>(m);
    invstd[c] = static_cast<T>(is);
  }
  return {};
}

template <class T>
Result<void> batch_norm_grad_loops(const Args& a) {
  const TensorType& xt = a.in(1);
  const Shape& xs = xt.shape;
  if (xt.rank() < 2) return fail("{} input x must have rank >= 2, got {}", a.name(), to_string(xt));
  const int64_t n_batch = xs[0], channels = xs[1], spatial = product(xs, 2, xs.size());
  TensorType per_channel{xt.dtype, {channels}};
  LMS_TRY_VOID(expect_type(a, "dy", a.in(0), xt));
  for (size_t i : {2u, 3u, 4u}) LMS_TRY_VOID(expect_type(a, a.def.inputs[i], a.in(i), per_channel));
  LMS_TRY_VOID(expect_type(a, "dx", a.out(0), xt));
  for (size_t i : {1u, 2u}) LMS_TRY_VOID(expect_type(a, a.def.outputs[i], a.out(i), per_channel));
  if (n_batch * spatial == 0) return fail("{} of {} has no elements per channel", a.name(), to_string(xt));
  const Acc count = static_cast<Acc>(n_batch * spatial);
  const T *dy = a.in_data<T>(0), *x = a.in_data<T>(1), *gamma = a.in_data<T>(2), *mean = a.in_data<T>(3),
          *invstd = a.in_data<T>(4);
  T *dx = a.out_data<T>(0), *dgamma = a.out_data<T>(1), *dbeta = a.out_data<T>(2);
  for (int64_t c = 0; c < channels; ++c) {
    const Acc m = mean[c], is = invstd[c], g = gamma[c];
    Acc sum_dy = 0, sum_dy_xhat = 0;
    for_channel(n_batch, channels, spatial, c, [&](int64_t i) {
      Acc d = dy[i];
      sum_dy += d;
      sum_dy_xhat += d * (static_cast<Acc>(x[i]) - m) * is;
    });
    for_channel(n_batch, channels, spatial, c, [&](int64_t i) {
      Acc xhat = (static_cast<Acc>(x[i]) - m) * is;
      dx[i] = static_cast<T>(g * is / count * (count * static_cast<Acc>(dy[i]) - sum_dy - xhat * sum_dy_xhat));
    });
    dgamma[c] = static_cast<T>(sum_dy_xhat);
    dbeta[c] = static_cast<T>(sum_dy);
  }
  return {};
}

template <class T>
Result<void> layer_norm_loops(const Args& a) {
  const Shape& xs = a.in(0).shape;
  const int64_t width = xs.back(), rows = product(xs, 0, xs.size() - 1);
  if (width == 0) return fail("{} of {} normalizes over an empty last dimension", a.name(), to_string(a.in(0)));
  const Acc eps = a.c.f("eps");
  const T *x = a.in_data<T>(0), *gamma = a.in_data<T>(1), *beta = a.in_data<T>(2);
  T *out = a.out_data<T>(0), *mean = a.out_data<T>(1), *invstd = a.out_data<T>(2);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * width;
    T* yr = out + r * width;
    Acc sum = 0;
    for (int64_t j = 0; j < width; ++j) sum += static_cast<Acc>(xr[j]);
    const Acc m = sum / static_cast<Acc>(width);
    Acc sq = 0;
    for (int64_t j = 0; j < width; ++j) {
      Acc d = static_cast<Acc>(xr[j]) - m;
      sq += d * d;
    }
    const Acc is = 1 / std::sqrt(sq / static_cast<Acc>(width) + eps);
    for (int64_t j = 0; j < width; ++j)
      yr[j] = static_cast<T>(static_cast<Acc>(gamma[j]) * (static_cast<Acc>(xr[j]) - m) * is +
                             static_cast<Acc>(beta[j]));
    mean[r] = static_cast<T>(m);
    invstd[r] = static_cast<T>(is);
  }
  return {};
}

template <class T>
Result<void> layer_norm_grad_loops(const Args& a) {
  const TensorType& xt = a.in(1);
  if (xt.rank() < 1) return fail("{} input x must have rank >= 1, got {}", a.name(), to_string(xt));
  const Shape& xs = xt.shape;
  const int64_t width = xs.back(), rows = product(xs, 0, xs.size() - 1);
  TensorType per_row{xt.dtype, Shape(xs.begin(), xs.end() - 1)}, per_col{xt.dtype, {width}};
  LMS_TRY_VOID(expect_type(a, "dy", a.in(0), xt));
  LMS_TRY_VOID(expect_type(a, "gamma", a.in(2), per_col));
  LMS_TRY_VOID(expect_type(a, "mean", a.in(3), per_row));
  LMS_TRY_VOID(expect_type(a, "invstd", a.in(4), per_row));
  LMS_TRY_VOID(expect_type(a, "dx", a.out(0), xt));
  for (size_t i : {1u, 2u}) LMS_TRY_VOID(expect_type(a, a.def.outputs[i], a.out(i), per_col));
  if (width == 0) return fail("{} of {} normalizes over an empty last dimension", a.name(), to_string(xt));
  const Acc n = static_cast<Acc>(width);
  const T *dy = a.in_data<T>(0), *x = a.in_data<T>(1), *gamma = a.in_data<T>(2), *mean = a.in_data<T>(3),
          *invstd = a.in_data<T>(4);
  T *dx = a.out_data<T>(0), *dgamma = a.out_data<T>(1), *dbeta = a.out_data<T>(2);
  std::vector<Acc> sum_dgamma(static_cast<size_t>(width), 0), sum_dbeta(static_cast<size_t>(width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * width, *dyr = dy + r * width;
    const Acc m = mean[r], is = invstd[r];
    Acc sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t j = 0; j < width; ++j) {
      Acc xhat = (static_cast<Acc>(xr[j]) - m) * is, d = dyr[j];
      Acc dxhat = d * static_cast<Acc>(gamma[j]);
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      sum_dgamma[j] += d * xhat;
      sum_dbeta[j] += d;
    }
    for (int64_t j = 0; j < width; ++j) {
      Acc xhat = (static_cast<Acc>(xr[j]) - m) * is;
      Acc dxhat = static_cast<Acc>(dyr[j]) * static_cast<Acc>(gamma[j]);
      dx[r * width + j] = static_cast<T>(is / n * (n * dxhat - sum_dxhat - xhat * sum_dxhat_xhat));
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    dgamma[j] = static_cast<T>(sum_dgamma[j]);
    dbeta[j] = static_cast<T>(sum_dbeta[j]);
  }
  return {};
}

// rm = (1-m)*rm + m*mean; rv = (1-m)*rv + m*var*count/(count-1), with the batch's biased variance recovered
// from invstd as 1/invstd^2 - eps (PyTorch stores the unbiased variance in running_var).
template <class T>
Result<void> bn_running_update_loops(const Args& a) {
  const TensorType& stats = a.in(0);
  for (size_t i = 1; i < 4; ++i) LMS_TRY_VOID(expect_type(a, a.def.inputs[i], a.in(i), stats));
  if (a.out_types.size() != 2) return fail("{} needs 2 outputs, has {}", a.name(), a.out_types.size());
  for (size_t i = 0; i < 2; ++i) LMS_TRY_VOID(expect_type(a, a.def.outputs[i], a.out(i), stats));
  const Acc momentum = number_attr(a, "momentum"), eps = number_attr(a, "eps"), count = number_attr(a, "count");
  if (!(count >= 2))
    return fail("{} attribute 'count' = {} must be at least 2 (the unbiased variance divides by count - 1)", a.name(),
                count);
  const Acc correction = count / (count - 1);
  const T *rm = a.in_data<T>(0), *rv = a.in_data<T>(1), *mean = a.in_data<T>(2), *invstd = a.in_data<T>(3);
  T *rm_out = a.out_data<T>(0), *rv_out = a.out_data<T>(1);
  for (int64_t c = 0; c < stats.num_elements(); ++c) {
    const Acc is = invstd[c];
    const Acc var = 1 / (is * is) - eps;
    const Acc new_rm = (1 - momentum) * static_cast<Acc>(rm[c]) + momentum * static_cast<Acc>(mean[c]);
    const Acc new_rv = (1 - momentum) * static_cast<Acc>(rv[c]) + momentum * var * correction;
    rm_out[c] = static_cast<T>(new_rm);
    rv_out[c] = static_cast<T>(new_rv);
  }
  return {};
}

}  // namespace

Result<void> batch_norm(const Args& a) {
  return with_float(a, a.in(0).dtype, [&]<class T>() { return batch_norm_loops<T>(a); });
}
Result<void> layer_norm(const Args& a) {
  return with_float(a, a.in(0).dtype, [&]<class T>() { return layer_norm_loops<T>(a); });
}
Result<void> batch_norm_grad(const Args& a) {
  return with_float(a, a.in(1).dtype, [&]<class T>() { return batch_norm_grad_loops<T>(a); });
}
Result<void> layer_norm_grad(const Args& a) {
  return with_float(a, a.in(1).dtype, [&]<class T>() { return layer_norm_grad_loops<T>(a); });
}
Result<void> bn_running_update(const Args& a) {
  return with_float(a, a.in(0).dtype, [&]<class T>() { return bn_running_update_loops<T>(a); });
}

}  // namespace lms::reference
