// Reference optimizer updates with torch.optim semantics, in place (each output may be the very buffer of the
// input it replaces, per the KernelCall contract; every element's inputs are read before its outputs are
// written, so aliased and separate output buffers give the same result). Weight decay is L2 in the gradient:
// d = g + wd*w. Each element is computed in double from its operands and rounded once per stored value. With
// the optional last input lr_scale, lr below is the attribute times lr_scale's value (the product in double).
//   sgd:      w -= lr*d
//   momentum: v = momentum*v + d; w -= lr*(nesterov ? d + momentum*v : v)
//   adam:     t += 1; m = b1*m + (1-b1)*d; v = b2*v + (1-b2)*d^2; w -= lr*(m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
//             (AdamW, decoupled_weight_decay: d = g, and the step starts from w*(1 - lr*wd) instead of w)
// And rng_advance: a dropout key += 1, wrapping as unsigned 64-bit arithmetic does.
#include <cmath>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

// Fails unless inputs `same` all have w's (input 0's) type, and an lr_scale given is a float scalar.
Result<void> like_w(const Args& a, std::initializer_list<size_t> same) {
  for (size_t i : same)
    if (a.in(i) != a.in(0))
      return fail("{} {} is {} but w is {}", a.name(), a.def.inputs[i], to_string(a.in(i)), to_string(a.in(0)));
  if (a.num_inputs() == a.def.inputs.size()) {
    const TensorType& scale = a.in_types.back();
    if (scale.num_elements() != 1 || !is_float(scale.dtype))
      return fail("{} lr_scale must be a float scalar, got {}", a.name(), to_string(scale));
  }
  return {};
}

// The step's learning rate: attribute lr, times the optional last input lr_scale.
Acc learning_rate(const Args& a) {
  const Acc lr = a.c.f("lr");
  return a.num_inputs() == a.def.inputs.size() ? lr * load_float(a.call.inputs.back(), 0) : lr;
}

template <class T>
Result<void> sgd_loops(const Args& a) {
  const Acc lr = learning_rate(a), wd = a.c.f("weight_decay");
  const T *w = a.in_data<T>(0), *g = a.in_data<T>(1);
  T* w_out = a.out_data<T>(0);
  for (int64_t i = 0; i < a.in(0).num_elements(); ++i) {
    const Acc wi = w[i];
    const Acc d = static_cast<Acc>(g[i]) + wd * wi;
    w_out[i] = static_cast<T>(wi - lr * d);
  }
  return {};
}

template <class T>
Result<void> momentum_loops(const Args& a) {
  const Acc lr = learning_rate(a), momentum = a.c.f("momentum"), wd = a.c.f("weight_decay");
  const bool nesterov = a.c.b("nesterov");
  const T *w = a.in_data<T>(0), *v = a.in_data<T>(1), *g = a.in_data<T>(2);
  T *w_out = a.out_data<T>(0), *v_out = a.out_data<T>(1);
  for (int64_t i = 0; i < a.in(0).num_elements(); ++i) {
    const Acc wi = w[i];
    const Acc d = static_cast<Acc>(g[i]) + wd * wi;
    // torch.optim.SGD keeps the buffer in the parameter's dtype: the step uses the stored (rounded) v.
    const T vi = static_cast<T>(momentum * static_cast<Acc>(v[i]) + d);
    const Acc step = nesterov ? d + momentum * static_cast<Acc>(vi) : static_cast<Acc>(vi);
    v_out[i] = vi;
    w_out[i] = static_cast<T>(wi - lr * step);
  }
  return {};
}

template <class T>
Result<void> adam_loops(const Args& a) {
  const Acc lr = learning_rate(a), b1 = a.c.f("beta1"), b2 = a.c.f("beta2"), eps = a.c.f("eps"),
            wd = a.c.f("weight_decay");
  const bool decoupled = a.c.b("decoupled_weight_decay");
  const T *w = a.in_data<T>(0), *m = a.in_data<T>(1), *v = a.in_data<T>(2), *g = a.in_data<T>(4);
  T *w_out = a.out_data<T>(0), *m_out = a.out_data<T>(1), *v_out = a.out_data<T>(2);
  // The step counter is f32[]: stored rounded, and the bias corrections use the stored value.
  const auto t = static_cast<float>(load_float(a.call.inputs[3], 0) + 1);
  store_any(a.call.outputs[3], 0, t);
  const Acc correction1 = 1 - std::pow(b1, static_cast<Acc>(t)), correction2 = 1 - std::pow(b2, static_cast<Acc>(t));
  for (int64_t i = 0; i < a.in(0).num_elements(); ++i) {
    const Acc wi = w[i];
    const Acc d = decoupled ? static_cast<Acc>(g[i]) : static_cast<Acc>(g[i]) + wd * wi;
    const Acc decayed = decoupled ? wi * (1 - lr * wd) : wi;
    const T mi = static_cast<T>(b1 * static_cast<Acc>(m[i]) + (1 - b1) * d);
    const T vi = static_cast<T>(b2 * static_cast<Acc>(v[i]) + (1 - b2) * d * d);
    const Acc m_hat = static_cast<Acc>(mi) / correction1, v_hat = static_cast<Acc>(vi) / correction2;
    m_out[i] = mi;
    v_out[i] = vi;
    w_out[i] = static_cast<T>(decayed - lr * m_hat / (std::sqrt(v_hat) + eps));
  }
  return {};
}

}  // namespace

Result<void> sgd_update(const Args& a) {
  LMS_TRY_VOID(like_w(a, {1}));
  return with_float(a, a.in(0).dtype, [&]<class T>() { return sgd_loops<T>(a); });
}

Result<void> momentum_update(const Args& a) {
  LMS_TRY_VOID(like_w(a, {1, 2}));
  return with_float(a, a.in(0).dtype, [&]<class T>() { return momentum_loops<T>(a); });
}

Result<void> adam_update(const Args& a) {
  LMS_TRY_VOID(like_w(a, {1, 2, 4}));
  if (a.in(3).num_elements() != 1 || !is_float(a.in(3).dtype))
    return fail("{} step counter t must be a float scalar, got {}", a.name(), to_string(a.in(3)));
  return with_float(a, a.in(0).dtype, [&]<class T>() { return adam_loops<T>(a); });
}

Result<void> rng_advance(const Args& a) {
  if (a.in(0) != TensorType{DType::i64, {}} || a.out(0) != a.in(0))
    return fail("{} needs an i64[] key, got {} -> {}", a.name(), to_string(a.in(0)), to_string(a.out(0)));
  const uint64_t key = static_cast<uint64_t>(*a.in_data<int64_t>(0));
  *a.out_data<int64_t>(0) = static_cast<int64_t>(key + 1);
  return {};
}

}  // namespace lms::reference
