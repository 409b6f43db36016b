// Reference elementwise ops: relu, gelu (exact erf form or PyTorch's tanh approximation), silu, hardswish, sigmoid,
// tanh, clamp, sqrt, reciprocal, exp, log, softplus, dropout (the mask of ops/dropout_mask.h), add and mul (NumPy
// broadcasting), scale, bias_add, and the activation gradients relu_grad (dy where y > 0), gelu_grad (dy * (Phi(x) +
// x*phi(x)), or the tanh form's derivative), silu_grad (dy * s * (1 + x(1-s)), s = sigmoid(x)), hardswish_grad
// (PyTorch's: 0 below -3, dy * (x/3 + 1/2) on [-3, 3], dy above), sigmoid_grad (dy*y*(1-y)), tanh_grad (dy*(1-y*y)),
// clamp_grad (dy where min < x < max), sqrt_grad (dy/(2y)), reciprocal_grad (-dy*y*y), log_grad (dy/x) and
// softplus_grad (dy*sigmoid(x)). Each element is computed in double from its operands and rounded once. Unary ops may
// run in place.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"
#include "lms/ops/dropout_mask.h"
#include "lms/ops/hardswish.h"

namespace lms::reference {

namespace {

// Phi(x), the standard normal CDF, and phi(x), its density.
Acc normal_cdf(Acc x) { return 0.5 * (1 + std::erf(x / std::numbers::sqrt2)); }
Acc normal_pdf(Acc x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }

// PyTorch's gelu(approximate='tanh'): 0.5x(1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715x^3), and its derivative
// 0.5(1 + tanh(u)) + 0.5x(1 - tanh(u)^2) du/dx with du/dx = sqrt(2/pi)(1 + 3*0.044715x^2).
constexpr Acc kSqrt2OverPi = 0.79788456080286541;  // sqrt(2/pi), rounded to double
// PyTorch's softplus threshold (beta 1): above it softplus is x and its gradient dy.
constexpr Acc kSoftplusThreshold = 20;
constexpr Acc kGeluTanhCubic = 0.044715;
Acc gelu_tanh(Acc x) { return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x))); }
Acc gelu_tanh_derivative(Acc x) {
  const Acc t = std::tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kGeluTanhCubic * x * x);
}

bool tanh_approximated(const Args& a) { return a.c.s("approximate") == "tanh"; }

// Fails unless every input and the output have one type (the gradient ops take dy and y or x alike).
Result<void> same_types(const Args& a) {
  for (size_t i = 0; i < a.num_inputs(); ++i)
    if (a.in(i) != a.out(0))
      return fail("{} input {} is {} but the output is {}; they must match", a.name(), i, to_string(a.in(i)),
                  to_string(a.out(0)));
  return {};
}

// out[i] = f(x[i]) for a unary op (T -> T via double).
template <class F>
Result<void> unary(const Args& a, F f) {
  LMS_TRY_VOID(same_types(a));
  return with_float(a, a.out(0).dtype, [&]<class T>() -> Result<void> {
    const T* x = a.in_data<T>(0);
    T* y = a.out_data<T>(0);
    const int64_t n = a.out(0).num_elements();
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<Acc>(x[i])));
    return {};
  });
}

// out[i] = f(p[i], q[i]) for two same-shaped inputs.
template <class F>
Result<void> pointwise2(const Args& a, F f) {
  LMS_TRY_VOID(same_types(a));
  return with_float(a, a.out(0).dtype, [&]<class T>() -> Result<void> {
    const T *p = a.in_data<T>(0), *q = a.in_data<T>(1);
    T* y = a.out_data<T>(0);
    const int64_t n = a.out(0).num_elements();
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(static_cast<Acc>(p[i]), static_cast<Acc>(q[i])));
    return {};
  });
}

// out = f(a, b) under NumPy broadcasting.
template <class F>
Result<void> broadcast_binary(const Args& a, F f) {
  const Shape& out = a.out(0).shape;
  if (a.in(0).dtype != a.out(0).dtype || a.in(1).dtype != a.out(0).dtype)
    return fail("{} operands {} and {} must have the output's dtype {}", a.name(), to_string(a.in(0)),
                to_string(a.in(1)), dtype_name(a.out(0).dtype));
  std::vector<int64_t> sa = LMS_TRY(broadcast_strides(a, a.in(0).shape, out));
  std::vector<int64_t> sb = LMS_TRY(broadcast_strides(a, a.in(1).shape, out));
  return with_float(a, a.out(0).dtype, [&]<class T>() -> Result<void> {
    const T *pa = a.in_data<T>(0), *pb = a.in_data<T>(1);
    T* y = a.out_data<T>(0);
    for_each_broadcast(out, sa, sb, [&](int64_t i, int64_t oa, int64_t ob) {
      y[i] = static_cast<T>(f(static_cast<Acc>(pa[oa]), static_cast<Acc>(pb[ob])));
    });
    return {};
  });
}

}  // namespace

// NaN propagates, as in PyTorch.
Result<void> relu(const Args& a) {
  return unary(a, [](Acc x) { return std::isnan(x) ? x : (x > 0 ? x : 0); });
}

Result<void> gelu(const Args& a) {
  if (tanh_approximated(a)) return unary(a, gelu_tanh);
  return unary(a, [](Acc x) { return x * normal_cdf(x); });
}

Result<void> silu(const Args& a) {
  return unary(a, [](Acc x) { return x / (1 + std::exp(-x)); });
}

Result<void> hardswish(const Args& a) { return unary(a, hardswish_value); }

Result<void> sigmoid(const Args& a) {
  return unary(a, [](Acc x) { return 1 / (1 + std::exp(-x)); });
}

Result<void> tanh(const Args& a) {
  return unary(a, [](Acc x) { return std::tanh(x); });
}

Result<void> sqrt(const Args& a) {
  return unary(a, [](Acc x) { return std::sqrt(x); });
}

Result<void> reciprocal(const Args& a) {
  return unary(a, [](Acc x) { return 1 / x; });
}

Result<void> exp(const Args& a) {
  return unary(a, [](Acc x) { return std::exp(x); });
}

Result<void> log(const Args& a) {
  return unary(a, [](Acc x) { return std::log(x); });
}

Result<void> softplus(const Args& a) {
  return unary(a, [](Acc x) { return x > kSoftplusThreshold ? x : std::log1p(std::exp(x)); });
}

Result<void> clamp(const Args& a) {
  const Acc lo = a.c.f("min"), hi = a.c.f("max");
  return unary(a, [lo, hi](Acc x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); });
}

Result<void> dropout(const Args& a) {
  if (a.in(0) != a.out(0) || a.in(1) != TensorType{DType::i64, {}})
    return fail("{} needs x and the output of one type and an i64[] key, got {}, {} -> {}", a.name(),
                to_string(a.in(0)), to_string(a.in(1)), to_string(a.out(0)));
  const DropoutMask mask = dropout_mask(a.c.f("p"), a.c.i("seed"));
  const uint64_t stream = mask.stream(static_cast<uint64_t>(*a.in_data<int64_t>(1)));
  return with_float(a, a.out(0).dtype, [&]<class T>() -> Result<void> {
    const T* x = a.in_data<T>(0);
    T* y = a.out_data<T>(0);
    const int64_t n = a.out(0).num_elements();
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(mask.apply(stream, i, static_cast<Acc>(x[i])));
    return {};
  });
}

Result<void> add(const Args& a) {
  return broadcast_binary(a, [](Acc p, Acc q) { return p + q; });
}

Result<void> mul(const Args& a) {
  return broadcast_binary(a, [](Acc p, Acc q) { return p * q; });
}

Result<void> scale(const Args& a) {
  const Acc factor = a.c.f("factor");
  return unary(a, [factor](Acc x) { return x * factor; });
}

Result<void> bias_add(const Args& a) {
  const TensorType& x = a.in(0);
  int axis = LMS_TRY(axis_attr(a, "axis", x.rank()));
  if (a.in(1) != TensorType{x.dtype, {x.shape[axis]}} || a.out(0) != x)
    return fail("{} needs bias {}[{}] and output {} for x {}", a.name(), dtype_name(x.dtype), x.shape[axis],
                to_string(x), to_string(x));
  AxisSplit s = split_at(x.shape, axis);
  return with_float(a, x.dtype, [&]<class T>() -> Result<void> {
    const T *px = a.in_data<T>(0), *bias = a.in_data<T>(1);
    T* y = a.out_data<T>(0);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t d = 0; d < s.dim; ++d) {
        const int64_t base = (o * s.dim + d) * s.inner;
        const Acc b = bias[d];
        for (int64_t i = 0; i < s.inner; ++i) y[base + i] = static_cast<T>(static_cast<Acc>(px[base + i]) + b);
      }
    return {};
  });
}

Result<void> relu_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc y) { return y > 0 ? dy : 0; });
}

Result<void> gelu_grad(const Args& a) {
  if (tanh_approximated(a)) return pointwise2(a, [](Acc dy, Acc x) { return dy * gelu_tanh_derivative(x); });
  return pointwise2(a, [](Acc dy, Acc x) { return dy * (normal_cdf(x) + x * normal_pdf(x)); });
}

Result<void> silu_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc x) {
    const Acc s = 1 / (1 + std::exp(-x));
    return dy * s * (1 + x * (1 - s));
  });
}

Result<void> hardswish_grad(const Args& a) { return pointwise2(a, hardswish_derivative); }

Result<void> sigmoid_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc y) { return dy * y * (1 - y); });
}

Result<void> sqrt_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc y) { return dy / (2 * y); });
}

Result<void> reciprocal_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc y) { return -dy * y * y; });
}

Result<void> log_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc x) { return dy / x; });
}

Result<void> softplus_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc x) { return x > kSoftplusThreshold ? dy : dy / (1 + std::exp(-x)); });
}

Result<void> clamp_grad(const Args& a) {
  const Acc lo = a.c.f("min"), hi = a.c.f("max");
  return pointwise2(a, [lo, hi](Acc dy, Acc x) { return lo < x && x < hi ? dy : 0; });
}

Result<void> tanh_grad(const Args& a) {
  return pointwise2(a, [](Acc dy, Acc y) { return dy * (1 - y * y); });
}

}  // namespace lms::reference
