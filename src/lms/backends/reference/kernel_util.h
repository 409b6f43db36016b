// Internal to the reference backend: what every kernel family shares. `Args` wraps one KernelCall with typed
// access to its buffers and OpCall-style attribute getters (which apply the op's declared defaults); the
// dtype dispatcher instantiates a kernel template for f32 and f64; and small index helpers (row-major strides,
// splitting a shape around an axis, the sliding-window geometry of convolutions and pooling).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lms/runtime/kernel.h"
#include "lms/support/error.h"

namespace lms::reference {

// Note [Reference accumulation]: every sum, reduction and dot product accumulates in double, whatever the
// tensor dtype, and runs in one fixed order. The reference backend is the oracle other backends and planned
// rewrites are compared against; f32 accumulation over, say, a 50000-element batch-norm channel would add an
// error that depends on loop order, and then "bit-identical after a rewrite" could not be tested.
using Acc = double;

// One kernel call, checked (see run_reference_kernel) and ready to read.
class Args {
 public:
  explicit Args(const KernelCall& call);
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;

  const KernelCall& call;
  const OpDef& def;
  std::vector<TensorType> in_types;
  std::vector<TensorType> out_types;
  OpCall c;  // attribute getters with the op's defaults: c.i("groups"), c.ints("stride"), ...

  std::string_view name() const { return def.name; }
  size_t num_inputs() const { return in_types.size(); }
  const TensorType& in(size_t i) const { return in_types[i]; }
  const TensorType& out(size_t i) const { return out_types[i]; }
  template <class T>
  const T* in_data(size_t i) const {
    return static_cast<const T*>(call.inputs[i].data);
  }
  template <class T>
  T* out_data(size_t i) const {
    return static_cast<T*>(call.outputs[i].data);
  }
};

// "reference backend: dtype bf16 is not supported for conv2d".
std::unexpected<Error> unsupported_dtype(const Args& a, DType t);

// Runs `f.template operator()<T>()` with T = float or double for dtype `t`; other dtypes are an error.
template <class F>
Result<void> with_float(const Args& a, DType t, F&& f) {
  switch (t) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::f16:
    case DType::bf16:
    case DType::i32:
    case DType::i64: break;
  }
  return unsupported_dtype(a, t);
}

// Reads element i of an id or label tensor (i32 or i64; the shape rules allow no other dtype).
int64_t load_index(const TensorRef& t, int64_t i);
// Reads element i of a float tensor of any float dtype, as double.
double load_float(const TensorRef& t, int64_t i);
// Stores v into element i of a tensor of any dtype (f16/bf16 rounded to nearest even, integers truncated).
void store_any(const TensorRef& t, int64_t i, double v);

// Row-major strides of `s` (the last dimension has stride 1).
std::vector<int64_t> strides_of(const Shape& s);
// Product of s[from, to).
int64_t product(const Shape& s, size_t from, size_t to);

// The multi-index of row-major element `flat` of `s`, as text: "[1,0,2]" (for errors naming a position).
std::string index_text(const Shape& s, int64_t flat);

// A shape viewed as [outer, dim, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1;  // product of the dimensions before the axis
  int64_t dim = 1;    // the axis' size
  int64_t inner = 1;  // product of the dimensions after it
};
AxisSplit split_at(const Shape& s, int axis);

// Int attribute `name` as an axis of a rank-`rank` tensor (negative counts from the end).
Result<int> axis_attr(const Args& a, std::string_view name, int rank);

// A number attribute that may be declared int or float (reads either kind; the op's default otherwise).
double number_attr(const Args& a, std::string_view name);

// Int-list attribute `name` with one entry per spatial dimension; an empty list means `rank` copies of
// `fill` (the gradient ops' lists, and pooling's stride and pad, may be given empty).
Result<IntList> spatial_attr(const Args& a, std::string_view name, int rank, int64_t fill);

// Strides for reading `in` while walking `out` under NumPy broadcasting (shapes aligned at the right; a
// dimension of `in` is equal to out's or 1, which gets stride 0). Fails naming both shapes otherwise.
Result<std::vector<int64_t>> broadcast_strides(const Args& a, const Shape& in, const Shape& out);

// Calls f(i, offset_a, offset_b) for every element i of `out` in row-major order, with the offsets of the
// elements of two broadcast operands whose strides (broadcast_strides) are `sa` and `sb`.
template <class F>
void for_each_broadcast(const Shape& out, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb, F&& f) {
  const int rank = static_cast<int>(out.size());
  const int64_t n = product(out, 0, out.size());
  std::vector<int64_t> index(out.size(), 0);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, oa, ob);
    for (int d = rank - 1; d >= 0; --d) {  // advance the row-major counter, carrying into outer dimensions
      if (++index[d] < out[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      index[d] = 0;
      oa -= sa[d] * (out[d] - 1);
      ob -= sb[d] * (out[d] - 1);
    }
  }
}

// A matmul a[..., M, K] @ b[..., K, N] -> out[..., M, N] (each operand optionally transposed), as the loops of any
// backend see it: batch = the product of a's leading dimensions.
struct MatmulGeometry {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  bool shared_b = false;  // b is rank 2, used by every batch
};
// The geometry of a matmul call; fails unless the operands have rank >= 2 and one dtype and the output is their
// product's shape.
Result<MatmulGeometry> matmul_geometry(const Args& a);

// Convolutions and pooling run on up to 3 spatial dimensions; lower ranks are padded at the front with
// trivial dimensions (size 1, kernel 1, stride 1, no padding) so that one loop nest serves every rank.
inline constexpr int kMaxSpatial = 3;

// One spatial dimension of a sliding window: output o reads input positions o*stride - pad + j*dil, j < k.
struct Window {
  int64_t in = 1;      // input size
  int64_t out = 1;     // output size
  int64_t k = 1;       // kernel size
  int64_t stride = 1;
  int64_t pad = 0;     // padding before the first element
  int64_t dil = 1;     // dilation
};
using Windows = std::array<Window, kMaxSpatial>;

// The window geometry of `x` (input, [N, C, *sp]) and `y` (output, [N, C', *o]) for kernel sizes `k`:
// entry kMaxSpatial - rank + i describes spatial dimension i.
Windows make_windows(const Shape& x, const Shape& y, const IntList& k, const IntList& stride, const IntList& pad,
                     const IntList& dil);

// The checked window geometry of pooling x[N,C,*in] -> y[N,C,*out] (1 to 3 spatial dimensions) under a's
// kernel/stride/pad attributes (stride defaults to the kernel, pad to 0, pad <= kernel/2): kernels index both
// buffers by it, so the output sizes must follow the pooling formula whatever the shape rule checked.
Result<Windows> pool_geometry(const Args& a, const Shape& x, const Shape& y);

}  // namespace lms::reference
