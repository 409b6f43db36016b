// Internal to the cuda backend's own-kernel dispatcher (cuda_ops.h), shared by its two files: the helpers that
// bind element functions (kernel_fns.h) to a call's buffers and launch them (on the GPU, or in host loops), and
// the normalization, loss and optimizer ops that cuda_ops_nn.cc prepares for cuda_ops.cc's dispatch.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "lms/backends/cuda/cuda_ops.h"
#include "lms/backends/cuda/kernel_fns.h"
#include "lms/backends/reference/kernel_util.h"
#ifdef LMS_HAVE_CUDA_BACKEND
#include "lms/backends/cuda/cuda_launch.h"
#endif

namespace lms::cuda::own {

using reference::Args;

// One launch of an element function over [0, n) (n == 0 launches nothing).
template <class F>
Result<void> launch(const Launcher& l, const F& f, int64_t n) {
  if (n <= 0) return {};
  if (l.host) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return {};
  }
#ifdef LMS_HAVE_CUDA_BACKEND
  if (int e = device_launch(f, n, l.stream); e != 0) return fail("cuda kernel launch: {}", device_error_string(e));
  return {};
#else
  return fail("cuda backend: not in this build");
#endif
}

// A prepared node is a list of steps run in order.
using Step = std::function<Result<void>()>;
inline OwnKernel sequence(std::vector<Step> steps) {
  return [steps = std::move(steps)]() -> Result<void> {
    for (const Step& s : steps) LMS_TRY_VOID(s());
    return {};
  };
}
template <class F>
Step step(const Launcher& l, F f, int64_t n) {
  return [l, f, n] { return launch(l, f, n); };
}
template <class F>
OwnKernel single(const Launcher& l, F f, int64_t n) {
  return sequence({step(l, f, n)});
}

inline std::unexpected<Error> unsupported(const Args& a, DType t) {
  return fail("cuda backend: dtype {} is not supported for {}", dtype_name(t), a.name());
}

// Runs body.template operator()<T>() with T = float or double (a node kernel, unlike reference::with_float).
template <class F>
Result<OwnKernel> for_float(const Args& a, DType t, F&& body) {
  if (t == DType::f32) return body.template operator()<float>();
  if (t == DType::f64) return body.template operator()<double>();
  return unsupported(a, t);
}

inline Ids ids_of(const TensorRef& t) { return Ids{t.data, t.type->dtype == DType::i64}; }
inline Scalar scalar_of(const TensorRef& t) { return Scalar{t.data, t.type->dtype == DType::f64}; }

template <class T>
const T* in(const Args& a, size_t i) {
  return a.in_data<T>(i);
}
template <class T>
T* out(const Args& a, size_t i) {
  return a.out_data<T>(i);
}
inline int64_t elements(const TensorType& t) { return t.num_elements(); }

// ---- the normalization, loss and optimizer ops (cuda_ops_nn.cc) ----

Result<OwnKernel> layer_norm(const Args& a, const Launcher& l);
Result<OwnKernel> layer_norm_grad(const Args& a, const Launcher& l);
Result<OwnKernel> batch_norm_grad(const Args& a, const Launcher& l);
Result<OwnKernel> bn_running_update(const Args& a, const Launcher& l);
Result<OwnKernel> cross_entropy(const Args& a, const Launcher& l);
Result<OwnKernel> cross_entropy_grad(const Args& a, const Launcher& l);
Result<OwnKernel> sgd_update(const Args& a, const Launcher& l);
Result<OwnKernel> momentum_update(const Args& a, const Launcher& l);
Result<OwnKernel> adam_update(const Args& a, const Launcher& l);

// Their workspaces: batch_norm_grad's sums (by x's type), the losses' per-position doubles.
int64_t bn_grad_workspace(const TensorType& x);
// logits [N, C, *sp] as positions N*S and classes C.
struct LossShape {
  int64_t classes = 0, spatial = 1, positions = 0;
};
LossShape loss_shape(const TensorType& logits);

}  // namespace lms::cuda::own
