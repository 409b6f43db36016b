// The own-kernel dispatcher (see cuda_ops.h): reads each op's attributes and geometry with the reference backend's
// helpers (the same attribute defaults and checks as the oracle), and binds one or more element functions of
// kernel_fns.h to the call's buffers.
#include "lms/backends/cuda/cuda_ops.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/cuda/own_ops.h"
#include "lms/backends/cuda/pool_fns.h"
#include "lms/backends/reference/kernel_util.h"
#include "lms/backends/reference/kernels.h"
#include "lms/ops/pool_window.h"

namespace lms::cuda {

using namespace own;

namespace {

Result<void> zero_bytes(const Launcher& l, void* p, int64_t bytes) {
  if (bytes <= 0) return {};
  if (l.host) {
    std::fill_n(static_cast<std::byte*>(p), bytes, std::byte{0});
    return {};
  }
#ifdef LMS_HAVE_CUDA_BACKEND
  if (int e = device_memset_zero(p, bytes, l.stream); e != 0) return fail("cudaMemsetAsync: {}", device_error_string(e));
  return {};
#else
  return fail("cuda backend: not in this build");
#endif
}

Result<void> copy_bytes(const Launcher& l, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return {};
  if (l.host) {
    std::copy_n(static_cast<const std::byte*>(src), bytes, static_cast<std::byte*>(dst));
    return {};
  }
#ifdef LMS_HAVE_CUDA_BACKEND
  if (int e = device_copy(dst, src, bytes, l.stream); e != 0) return fail("cudaMemcpyAsync: {}", device_error_string(e));
  return {};
#else
  return fail("cuda backend: not in this build");
#endif
}

// Runs body.template operator()<E>() with E an unsigned integer of the dtype's size (pure data movement).
template <class F>
Result<OwnKernel> with_element(DType t, F&& body) {
  switch (dtype_size(t)) {
    case 1: return body.template operator()<uint8_t>();
    case 2: return body.template operator()<uint16_t>();
    case 4: return body.template operator()<uint32_t>();
    default: return body.template operator()<uint64_t>();
  }
}

// A Strided geometry over `shape` with operand strides `a` and `b`, simplified: size-1 dimensions dropped and
// neighbours that both stride sets traverse contiguously merged (outer o, inner d: s[o] == s[d] * shape[d]), so
// the kernels divide less per element (a same-shape add becomes rank 1: no division at all) at the same offsets
// and in the same row-major order. A reduction's kept and reduced dimensions never merge (its `b` is 0 along
// exactly the reduced ones).
Result<Strided> strided(const Args& a, const Shape& shape, const std::vector<int64_t>& sa,
                        const std::vector<int64_t>& sb) {
  Strided g;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int o = g.rank - 1;
    if (o >= 0 && g.a[o] == sa[d] * shape[d] && g.b[o] == sb[d] * shape[d]) {
      g.shape[o] *= shape[d];
      g.a[o] = sa[d];
      g.b[o] = sb[d];
      continue;
    }
    if (g.rank == kMaxDims)
      return fail("cuda backend: {} over {} needs more than the {} dimensions its kernels handle", a.name(),
                  to_string(shape), kMaxDims);
    g.shape[g.rank] = shape[d];
    g.a[g.rank] = sa[d];
    g.b[g.rank] = sb[d];
    ++g.rank;
  }
  g.narrow = reference::product(shape, 0, shape.size()) <= int64_t{UINT32_MAX};
  return g;
}

// ---- the ops ----

Result<OwnKernel> constant(const Args& a, const Launcher& l) {
  const double value = a.c.f("value");
  const TensorType& y = a.out(0);
  switch (y.dtype) {
    case DType::f32: return single(l, Fill<float>{out<float>(a, 0), static_cast<float>(value)}, elements(y));
    case DType::f64: return single(l, Fill<double>{out<double>(a, 0), value}, elements(y));
    case DType::i32: return single(l, Fill<int32_t>{out<int32_t>(a, 0), static_cast<int32_t>(value)}, elements(y));
    case DType::i64: return single(l, Fill<int64_t>{out<int64_t>(a, 0), static_cast<int64_t>(value)}, elements(y));
    case DType::f16:
    case DType::bf16: break;
  }
  return unsupported(a, y.dtype);
}

// Packed4 over n f32 elements when every pointer is 16-byte aligned and n a multiple of 4, else nothing.
std::optional<OwnKernel> packed(const Launcher& l, PackedKind kind, const void* a, const void* b, void* y,
                                int64_t n) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % alignof(Float4) == 0; };
  if (n % 4 != 0 || !aligned(a) || !aligned(b) || !aligned(y)) return std::nullopt;
  return single(l, Packed4{static_cast<const Float4*>(a), static_cast<const Float4*>(b), static_cast<Float4*>(y), kind},
                n / 4);
}

// gelu and gelu_grad with approximate = "tanh" (the shape rule has checked the value).
bool tanh_approximated(const Args& a) { return a.c.s("approximate") == "tanh"; }

// clamp's bounds (absent: unbounded).
std::pair<double, double> clamp_bounds(const Args& a) { return {a.c.f("min"), a.c.f("max")}; }

Result<OwnKernel> unary(const Args& a, const Launcher& l, UnaryKind kind, double p0 = 1, double p1 = 0) {
  if (kind == UnaryKind::relu && a.out(0).dtype == DType::f32)
    if (auto k = packed(l, PackedKind::relu, in<float>(a, 0), in<float>(a, 0), out<float>(a, 0), elements(a.out(0))))
      return *k;
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, Unary<T>{in<T>(a, 0), out<T>(a, 0), kind, p0, p1}, elements(a.out(0)));
  });
}

Result<OwnKernel> activation_grad(const Args& a, const Launcher& l, GradKind kind, double lo = 0, double hi = 0) {
  if (kind == GradKind::relu && a.out(0).dtype == DType::f32)
    if (auto k = packed(l, PackedKind::relu_grad, in<float>(a, 0), in<float>(a, 1), out<float>(a, 0),
                        elements(a.out(0))))
      return *k;
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, ActivationGrad<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), kind, lo, hi}, elements(a.out(0)));
  });
}

const TensorType kKeyType{DType::i64, {}};  // a dropout key

Result<OwnKernel> dropout(const Args& a, const Launcher& l) {
  if (a.in(1) != kKeyType) return fail("{} key must be i64[], got {}", a.name(), to_string(a.in(1)));
  const DropoutMask mask = dropout_mask(a.c.f("p"), a.c.i("seed"));
  const auto* key = static_cast<const int64_t*>(a.call.inputs[1].data);
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, Dropout<T>{in<T>(a, 0), key, out<T>(a, 0), mask}, elements(a.out(0)));
  });
}

Result<OwnKernel> rng_advance(const Args& a, const Launcher& l) {
  if (a.in(0) != kKeyType) return fail("{} key must be i64[], got {}", a.name(), to_string(a.in(0)));
  return single(l, KeyAdvance{in<int64_t>(a, 0), out<int64_t>(a, 0)}, 1);
}

Result<OwnKernel> broadcast_binary(const Args& a, const Launcher& l, BinaryKind kind) {
  const Shape& y = a.out(0).shape;
  std::vector<int64_t> sa = LMS_TRY(reference::broadcast_strides(a, a.in(0).shape, y));
  std::vector<int64_t> sb = LMS_TRY(reference::broadcast_strides(a, a.in(1).shape, y));
  Strided g = LMS_TRY(strided(a, y, sa, sb));
  if (g.rank == 1 && g.a[0] == 1 && g.b[0] == 1 && a.out(0).dtype == DType::f32)  // same shape, contiguous
    if (auto k = packed(l, kind == BinaryKind::add ? PackedKind::add : PackedKind::mul, in<float>(a, 0),
                        in<float>(a, 1), out<float>(a, 0), elements(a.out(0))))
      return *k;
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, BroadcastBinary<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), kind, g}, elements(a.out(0)));
  });
}

Result<OwnKernel> bias_add(const Args& a, const Launcher& l) {
  const int axis = LMS_TRY(reference::axis_attr(a, "axis", a.in(0).rank()));
  const reference::AxisSplit s = reference::split_at(a.in(0).shape, axis);
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, BiasAdd<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), s.dim, s.inner}, elements(a.out(0)));
  });
}

// A reduction of input 0 into output 0; `out_strides` per input dimension, 0 along the reduced ones.
Result<OwnKernel> reduce(const Args& a, const Launcher& l, const std::vector<int64_t>& out_strides, double factor,
                         bool divide) {
  const Shape& x = a.in(0).shape;
  Strided g = LMS_TRY(strided(a, x, reference::strides_of(x), out_strides));
  int64_t reduced = 1;
  for (size_t d = 0; d < x.size(); ++d)
    if (out_strides[d] == 0) reduced *= x[d];
  const int64_t n = elements(a.out(0));
  switch (a.in(0).dtype) {
    case DType::i32:
      return single(l, Reduce<int32_t, int64_t>{in<int32_t>(a, 0), out<int32_t>(a, 0), g, reduced, 1, false}, n);
    case DType::i64:
      return single(l, Reduce<int64_t, int64_t>{in<int64_t>(a, 0), out<int64_t>(a, 0), g, reduced, 1, false}, n);
    default: break;
  }
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, Reduce<T, double>{in<T>(a, 0), out<T>(a, 0), g, reduced, factor, divide}, n);
  });
}

// mean and reduce_sum: the output strides of the axes attribute (all axes when empty).
Result<std::vector<int64_t>> axes_strides(const Args& a) {
  const TensorType& x = a.in(0);
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), a.c.ints("axes").empty());
  for (int64_t ax : a.c.ints("axes")) {
    const int64_t r = ax < 0 ? ax + x.rank() : ax;
    if (r < 0 || r >= x.rank()) return fail("{} axis {} is out of range for {}", a.name(), ax, to_string(x));
    reduced[static_cast<size_t>(r)] = true;
  }
  Shape kept = x.shape;
  for (size_t d = 0; d < kept.size(); ++d)
    if (reduced[d]) kept[d] = 1;
  std::vector<int64_t> st = reference::strides_of(kept);
  for (size_t d = 0; d < kept.size(); ++d)
    if (reduced[d] || kept[d] == 1) st[d] = 0;  // a size-1 dimension contributes nothing either way
  return st;
}

Result<OwnKernel> mean_or_sum(const Args& a, const Launcher& l, bool mean) {
  std::vector<int64_t> st = LMS_TRY(axes_strides(a));
  if (!mean) return reduce(a, l, st, 1, false);
  if (!is_float(a.in(0).dtype)) return unsupported(a, a.in(0).dtype);
  const int64_t outputs = elements(a.out(0));
  const int64_t per_output = outputs == 0 ? 0 : elements(a.in(0)) / outputs;
  return reduce(a, l, st, 1 / static_cast<double>(per_output), false);
}

Result<OwnKernel> sum_to(const Args& a, const Launcher& l) {
  std::vector<int64_t> st = LMS_TRY(reference::broadcast_strides(a, a.out(0).shape, a.in(0).shape));
  return reduce(a, l, st, 1, false);
}

Result<OwnKernel> global_avg_pool(const Args& a, const Launcher& l) {
  const Shape& x = a.in(0).shape;
  std::vector<int64_t> st(x.size(), 0);
  st[0] = x[1];
  st[1] = 1;
  return reduce(a, l, st, static_cast<double>(reference::product(x, 2, x.size())), true);
}

// The reference's checked geometry of pooling x -> y, as the element functions take it.
Result<PoolWindows> pool_windows(const Args& a, const Shape& x, const Shape& y) {
  const reference::Windows r = LMS_TRY(reference::pool_geometry(a, x, y));
  PoolWindows w{};
  for (int d = 0; d < 3; ++d) {
    w.in[d] = r[static_cast<size_t>(d)].in;
    w.out[d] = r[static_cast<size_t>(d)].out;
    w.k[d] = r[static_cast<size_t>(d)].k;
    w.stride[d] = r[static_cast<size_t>(d)].stride;
    w.pad[d] = r[static_cast<size_t>(d)].pad;
  }
  const int64_t most = std::max(reference::product(x, 0, x.size()), reference::product(y, 0, y.size()));
  w.narrow = most + std::max({w.pad[0], w.pad[1], w.pad[2], w.stride[0], w.stride[1], w.stride[2]}) <=
             int64_t{UINT32_MAX};
  return w;
}

// max_pool_grad (dy, x) -> dx: each window's first maximum once (a byte per output, in the workspace), then a
// gather per input element; windows too large for a byte find their maximum again per input element.
Result<OwnKernel> max_pool_grad(const Args& a, const Launcher& l) {
  const PoolWindows w = LMS_TRY(pool_windows(a, a.in(1).shape, a.in(0).shape));
  return for_float(a, a.in(1).dtype, [&]<class T>() -> Result<OwnKernel> {
    if (w.window_volume() >= MaxPoolArgmax<T>::kNoWindowPosition)
      return single(l, MaxPoolGrad<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), w}, elements(a.in(1)));
    auto* pos = static_cast<uint8_t*>(a.call.workspace);
    return sequence({step(l, MaxPoolArgmax<T>{in<T>(a, 1), pos, w}, elements(a.in(0))),
                     step(l, MaxPoolGradByPosition<T>{in<T>(a, 0), pos, out<T>(a, 0), w}, elements(a.in(1)))});
  });
}

// max or average pooling with ceil_mode (is_own_call): the reference's loops, one output element per index.
Result<OwnKernel> pool_forward(const Args& a, const Launcher& l, bool average) {
  const PoolWindows w = LMS_TRY(pool_windows(a, a.in(0).shape, a.out(0).shape));
  const bool include_pad = average && a.c.b("count_include_pad");
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, PoolForward<T>{in<T>(a, 0), out<T>(a, 0), w, average, include_pad}, elements(a.out(0)));
  });
}

// max_pool_argmax (x) -> i32 positions: max_pool_grad's first pass, as an op.
Result<OwnKernel> max_pool_argmax(const Args& a, const Launcher& l) {
  if (a.out(0).dtype != DType::i32) return fail("{} output must be i32, got {}", a.name(), to_string(a.out(0)));
  const PoolWindows w = LMS_TRY(pool_windows(a, a.in(0).shape, a.out(0).shape));
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, MaxPoolArgmax<T, int32_t>{in<T>(a, 0), out<int32_t>(a, 0), w}, elements(a.out(0)));
  });
}

// max_pool_grad_by_argmax (dy, argmax) -> dx: max_pool_grad's second pass, as an op.
Result<OwnKernel> max_pool_grad_by_argmax(const Args& a, const Launcher& l) {
  if (a.in(1).dtype != DType::i32 || a.in(1).shape != a.in(0).shape)
    return fail("{} argmax must be i32 of dy's shape, got {}", a.name(), to_string(a.in(1)));
  const PoolWindows w = LMS_TRY(pool_windows(a, a.out(0).shape, a.in(0).shape));
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, MaxPoolGradByPosition<T, int32_t>{in<T>(a, 0), in<int32_t>(a, 1), out<T>(a, 0), w},
                  elements(a.out(0)));
  });
}

// max_pool_grad's workspace: a byte per output element when its windows have fewer than 255 positions.
int64_t max_pool_grad_workspace(const KernelCall& call) {
  int64_t volume = 1;
  for (int64_t k : call.attrs->get_ints("kernel", {})) volume *= k;
  return volume < 255 ? reference::product(call.inputs[0].type->shape, 0, call.inputs[0].type->shape.size()) : 0;
}

// avg_pool_grad (dy) -> dx of x_shape.
Result<OwnKernel> avg_pool_grad(const Args& a, const Launcher& l) {
  const PoolWindows w = LMS_TRY(pool_windows(a, a.out(0).shape, a.in(0).shape));
  const bool include_pad = a.c.b("count_include_pad");
  return for_float(a, a.out(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, AvgPoolGrad<T>{in<T>(a, 0), out<T>(a, 0), w, include_pad}, elements(a.out(0)));
  });
}

// out = in under a strided index space, any dtype (the bases already folded into the pointers).
Result<OwnKernel> strided_copy(const Args& a, const Launcher& l, const void* src, void* dst, const Strided& g,
                               int64_t n) {
  return with_element(a.out(0).dtype, [&]<class E>() -> Result<OwnKernel> {
    return single(l, StridedCopy<E>{static_cast<const E*>(src), static_cast<E*>(dst), g}, n);
  });
}

const std::byte* in_bytes(const Args& a, size_t i) { return static_cast<const std::byte*>(a.call.inputs[i].data); }
std::byte* out_bytes(const Args& a, size_t i) { return static_cast<std::byte*>(a.call.outputs[i].data); }

Result<OwnKernel> broadcast_to(const Args& a, const Launcher& l) {
  const Shape& y = a.out(0).shape;
  Strided g = LMS_TRY(strided(a, y, LMS_TRY(reference::broadcast_strides(a, a.in(0).shape, y)), reference::strides_of(y)));
  return strided_copy(a, l, in_bytes(a, 0), out_bytes(a, 0), g, elements(a.out(0)));
}

Result<OwnKernel> transpose(const Args& a, const Launcher& l) {
  const TensorType &x = a.in(0), &y = a.out(0);
  const IntList perm = a.c.ints("perm");
  std::vector<int64_t> xs = reference::strides_of(x.shape), walk(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) walk[i] = xs[static_cast<size_t>(perm[i])];  // checked by the shape rule
  Strided g = LMS_TRY(strided(a, y.shape, walk, reference::strides_of(y.shape)));
  return strided_copy(a, l, in_bytes(a, 0), out_bytes(a, 0), g, elements(y));
}

Result<OwnKernel> concat(const Args& a, const Launcher& l) {
  const TensorType& y = a.out(0);
  const int axis = LMS_TRY(reference::axis_attr(a, "axis", y.rank()));
  const std::vector<int64_t> ys = reference::strides_of(y.shape);
  const auto size = static_cast<size_t>(dtype_size(y.dtype));
  std::vector<Step> steps;
  int64_t at = 0;  // the input's first index along the axis
  for (size_t t = 0; t < a.num_inputs(); ++t) {
    const Shape& s = a.in(t).shape;
    Strided g = LMS_TRY(strided(a, s, reference::strides_of(s), ys));
    std::byte* dst = out_bytes(a, 0) + static_cast<size_t>(at * ys[static_cast<size_t>(axis)]) * size;
    at += s[static_cast<size_t>(axis)];
    if (in_bytes(a, t) == dst) continue;  // already in place (Note [Parts], plan/liveness.h)
    steps.push_back(LMS_TRY(strided_copy(a, l, in_bytes(a, t), dst, g, elements(a.in(t)))));
  }
  return sequence(std::move(steps));
}

// slice (x -> y) and slice_grad (dy -> zeros with dy at [start, end)): `whole` is the tensor with the full axis.
Result<OwnKernel> slice(const Args& a, const Launcher& l, bool grad) {
  const TensorType& whole = grad ? a.out(0) : a.in(0);
  const TensorType& part = grad ? a.in(0) : a.out(0);
  const int axis = LMS_TRY(reference::axis_attr(a, "axis", whole.rank()));
  const std::vector<int64_t> ws = reference::strides_of(whole.shape), ps = reference::strides_of(part.shape);
  const auto skip = static_cast<size_t>(a.c.i("start") * ws[static_cast<size_t>(axis)] * dtype_size(whole.dtype));
  if (!grad) {
    if (in_bytes(a, 0) + skip == out_bytes(a, 0)) return sequence({});  // a view (Note [Parts], plan/liveness.h)
    Strided g = LMS_TRY(strided(a, part.shape, ws, ps));
    return strided_copy(a, l, in_bytes(a, 0) + skip, out_bytes(a, 0), g, elements(part));
  }
  Strided g = LMS_TRY(strided(a, part.shape, ps, ws));
  OwnKernel place = LMS_TRY(strided_copy(a, l, in_bytes(a, 0), out_bytes(a, 0) + skip, g, elements(part)));
  void* dx = out_bytes(a, 0);
  const int64_t bytes = whole.bytes();
  return sequence({[l, dx, bytes] { return zero_bytes(l, dx, bytes); }, std::move(place)});
}

Result<OwnKernel> reshape(const Args& a, const Launcher& l) {
  void* dst = a.call.outputs[0].data;
  const void* src = a.call.inputs[0].data;
  const int64_t bytes = a.out(0).bytes();
  return sequence({[l, dst, src, bytes] { return copy_bytes(l, dst, src, bytes); }});
}

Result<OwnKernel> softmax(const Args& a, const Launcher& l) {
  const TensorType& x = a.in(0);
  const int axis = LMS_TRY(reference::axis_attr(a, "axis", x.rank()));
  const bool causal = a.c.b("causal");
  if (causal && (axis != x.rank() - 1 || x.rank() < 2))
    return fail("causal {} needs rank >= 2 and the last axis, got axis {} of {}", a.name(), axis, to_string(x));
  const reference::AxisSplit s = reference::split_at(x.shape, axis);
  const int64_t rows = causal ? x.shape[static_cast<size_t>(x.rank() - 2)] : 1;
  return for_float(a, x.dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, Softmax<T>{in<T>(a, 0), out<T>(a, 0), s.dim, s.inner, causal, rows, a.c.i("causal_offset")},
                  s.outer * s.inner);
  });
}

Result<OwnKernel> softmax_grad(const Args& a, const Launcher& l) {
  const TensorType& y = a.in(1);
  const int axis = LMS_TRY(reference::axis_attr(a, "axis", y.rank()));
  const reference::AxisSplit s = reference::split_at(y.shape, axis);
  return for_float(a, y.dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, SoftmaxGrad<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), s.dim, s.inner}, s.outer * s.inner);
  });
}

Result<OwnKernel> embedding(const Args& a, const Launcher& l) {
  const TensorType& table = a.in(0);
  const int64_t width = table.shape[1], vocab = table.shape[0];
  return with_element(table.dtype, [&]<class E>() -> Result<OwnKernel> {
    return single(l,
                  EmbeddingGather<E>{static_cast<const E*>(a.call.inputs[0].data), ids_of(a.call.inputs[1]),
                                     static_cast<E*>(a.call.outputs[0].data), width, vocab, l.status},
                  elements(a.out(0)));
  });
}

// embedding_grad's workspace: first[V+1], next[V], order[N], int64 each.
int64_t embedding_grad_workspace(const TensorType& ids, const TensorType& dtable) {
  return (2 * dtable.shape[0] + 1 + ids.num_elements()) * static_cast<int64_t>(sizeof(int64_t));
}

Result<OwnKernel> embedding_grad(const Args& a, const Launcher& l) {
  const TensorType &ids = a.in(1), &dtable = a.out(0);
  const int64_t vocab = dtable.shape[0], width = dtable.shape[1], n = ids.num_elements();
  auto* first = static_cast<int64_t*>(a.call.workspace);
  int64_t* next = first + vocab + 1;
  int64_t* order = next + vocab;
  EmbeddingGradSort sort{ids_of(a.call.inputs[1]), n, vocab, first, next, order, l.status};
  return for_float(a, dtable.dtype, [&]<class T>() -> Result<OwnKernel> {
    return sequence({step(l, sort, 1),
                     step(l, EmbeddingGradRows<T>{in<T>(a, 0), first, order, out<T>(a, 0), width}, vocab * width)});
  });
}

}  // namespace

bool is_own_op(Op op) {
  switch (op) {
    case Op::constant:
    case Op::relu:
    case Op::gelu:
    case Op::silu:
    case Op::hardswish:
    case Op::sigmoid:
    case Op::tanh:
    case Op::clamp:
    case Op::sqrt:
    case Op::reciprocal:
    case Op::exp:
    case Op::log:
    case Op::softplus:
    case Op::dropout:
    case Op::add:
    case Op::mul:
    case Op::scale:
    case Op::bias_add:
    case Op::global_avg_pool:
    case Op::reshape:
    case Op::transpose:
    case Op::concat:
    case Op::slice:
    case Op::softmax:
    case Op::embedding:
    case Op::mean:
    case Op::reduce_sum:
    case Op::cross_entropy:
    case Op::sgd_update:
    case Op::momentum_update:
    case Op::adam_update:
    case Op::rng_advance:
    case Op::relu_grad:
    case Op::gelu_grad:
    case Op::silu_grad:
    case Op::hardswish_grad:
    case Op::sigmoid_grad:
    case Op::tanh_grad:
    case Op::clamp_grad:
    case Op::sqrt_grad:
    case Op::reciprocal_grad:
    case Op::log_grad:
    case Op::softplus_grad:
    case Op::layer_norm:
    case Op::layer_norm_grad:
    case Op::batch_norm_grad:
    case Op::softmax_grad:
    case Op::embedding_grad:
    case Op::cross_entropy_grad:
    case Op::broadcast_to:
    case Op::sum_to:
    case Op::slice_grad:
    case Op::bn_running_update:
    case Op::max_pool_grad:
    case Op::max_pool_argmax:
    case Op::max_pool_grad_by_argmax:
    case Op::avg_pool_grad: return true;
    default: return false;
  }
}

bool is_own_call(const KernelCall& call) {
  if (is_own_op(call.op)) return true;
  return (is_max_pool(call.op) || is_avg_pool(call.op)) && call.attrs != nullptr &&
         call.attrs->get_bool("ceil_mode", false);
}

Result<int64_t> own_workspace_bytes(const KernelCall& call) {
  const auto doubles = [](int64_t n) { return n * static_cast<int64_t>(sizeof(double)); };
  switch (call.op) {
    case Op::cross_entropy:
      if (call.inputs.size() != 2) break;
      return doubles(2 * loss_shape(*call.inputs[0].type).positions);
    case Op::cross_entropy_grad:
      if (call.inputs.size() != 3) break;
      return doubles(loss_shape(*call.inputs[1].type).positions);
    case Op::embedding_grad:
      if (call.inputs.size() != 2 || call.outputs.size() != 1 || call.outputs[0].type->rank() != 2) break;
      return embedding_grad_workspace(*call.inputs[1].type, *call.outputs[0].type);
    case Op::max_pool_grad:
      if (call.inputs.size() != 2 || call.attrs == nullptr) break;
      return max_pool_grad_workspace(call);
    case Op::batch_norm_grad:
      if (call.inputs.size() != 5) break;
      return bn_grad_workspace(*call.inputs[1].type);
    default: return int64_t{0};
  }
  return fail("cuda backend: {} call has the wrong number of operands", op_def(call.op).name);
}

Result<std::optional<OwnKernel>> prepare_own_kernel(const KernelCall& call, const Launcher& l) {
  if (!is_own_call(call)) return std::optional<OwnKernel>{};
  LMS_TRY_VOID(check_kernel_call(call));
  const int64_t need = LMS_TRY(own_workspace_bytes(call));
  if (call.workspace_bytes < need || (need > 0 && call.workspace == nullptr))
    return fail("cuda backend: {} needs a workspace of {} bytes, the call has {}", op_def(call.op).name, need,
                call.workspace_bytes);
  const Args a(call);
  Result<OwnKernel> k = [&]() -> Result<OwnKernel> {
    switch (call.op) {
      case Op::constant: return constant(a, l);
      case Op::relu: return unary(a, l, UnaryKind::relu);
      case Op::gelu: return unary(a, l, tanh_approximated(a) ? UnaryKind::gelu_tanh : UnaryKind::gelu);
      case Op::silu: return unary(a, l, UnaryKind::silu);
      case Op::hardswish: return unary(a, l, UnaryKind::hardswish);
      case Op::sigmoid: return unary(a, l, UnaryKind::sigmoid);
      case Op::tanh: return unary(a, l, UnaryKind::tanh);
      case Op::sqrt: return unary(a, l, UnaryKind::sqrt);
      case Op::reciprocal: return unary(a, l, UnaryKind::reciprocal);
      case Op::exp: return unary(a, l, UnaryKind::exp);
      case Op::log: return unary(a, l, UnaryKind::log);
      case Op::softplus: return unary(a, l, UnaryKind::softplus);
      case Op::clamp: return unary(a, l, UnaryKind::clamp, clamp_bounds(a).first, clamp_bounds(a).second);
      case Op::scale: return unary(a, l, UnaryKind::scale, a.c.f("factor"));
      case Op::dropout: return dropout(a, l);
      case Op::add: return broadcast_binary(a, l, BinaryKind::add);
      case Op::mul: return broadcast_binary(a, l, BinaryKind::mul);
      case Op::bias_add: return bias_add(a, l);
      case Op::relu_grad: return activation_grad(a, l, GradKind::relu);
      case Op::gelu_grad: return activation_grad(a, l, tanh_approximated(a) ? GradKind::gelu_tanh : GradKind::gelu);
      case Op::silu_grad: return activation_grad(a, l, GradKind::silu);
      case Op::hardswish_grad: return activation_grad(a, l, GradKind::hardswish);
      case Op::sigmoid_grad: return activation_grad(a, l, GradKind::sigmoid);
      case Op::tanh_grad: return activation_grad(a, l, GradKind::tanh);
      case Op::sqrt_grad: return activation_grad(a, l, GradKind::sqrt);
      case Op::reciprocal_grad: return activation_grad(a, l, GradKind::reciprocal);
      case Op::log_grad: return activation_grad(a, l, GradKind::log);
      case Op::softplus_grad: return activation_grad(a, l, GradKind::softplus);
      case Op::clamp_grad:
        return activation_grad(a, l, GradKind::clamp, clamp_bounds(a).first, clamp_bounds(a).second);
      case Op::global_avg_pool: return global_avg_pool(a, l);
      case Op::max_pool1d:
      case Op::max_pool2d:
      case Op::max_pool3d: return pool_forward(a, l, false);
      case Op::avg_pool1d:
      case Op::avg_pool2d:
      case Op::avg_pool3d: return pool_forward(a, l, true);
      case Op::max_pool_grad: return max_pool_grad(a, l);
      case Op::max_pool_argmax: return max_pool_argmax(a, l);
      case Op::max_pool_grad_by_argmax: return max_pool_grad_by_argmax(a, l);
      case Op::avg_pool_grad: return avg_pool_grad(a, l);
      case Op::mean: return mean_or_sum(a, l, true);
      case Op::reduce_sum: return mean_or_sum(a, l, false);
      case Op::sum_to: return sum_to(a, l);
      case Op::broadcast_to: return broadcast_to(a, l);
      case Op::reshape: return reshape(a, l);
      case Op::transpose: return transpose(a, l);
      case Op::concat: return concat(a, l);
      case Op::slice: return slice(a, l, false);
      case Op::slice_grad: return slice(a, l, true);
      case Op::softmax: return softmax(a, l);
      case Op::softmax_grad: return softmax_grad(a, l);
      case Op::embedding: return embedding(a, l);
      case Op::embedding_grad: return embedding_grad(a, l);
      case Op::layer_norm: return layer_norm(a, l);
      case Op::layer_norm_grad: return layer_norm_grad(a, l);
      case Op::batch_norm_grad: return batch_norm_grad(a, l);
      case Op::bn_running_update: return bn_running_update(a, l);
      case Op::cross_entropy: return cross_entropy(a, l);
      case Op::cross_entropy_grad: return cross_entropy_grad(a, l);
      case Op::sgd_update: return sgd_update(a, l);
      case Op::momentum_update: return momentum_update(a, l);
      case Op::adam_update: return adam_update(a, l);
      case Op::rng_advance: return rng_advance(a, l);
      default: return fail("cuda backend: {} is not an own kernel", a.name());
    }
  }();
  if (!k) return std::unexpected(k.error());
  return std::optional<OwnKernel>(std::move(*k));
}

}  // namespace lms::cuda
