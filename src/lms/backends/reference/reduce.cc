// Reference reductions and broadcasts: mean and reduce_sum over a set of axes (all when empty; keepdims
// optional), sum_to (sum down to a shape x broadcasts from: the gradient of broadcasting) and broadcast_to.
// A reduction walks its input once in row-major order, adding each element into the double accumulator of its
// output element (integers into int64), so the order of every sum is fixed.
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

// How mean and reduce_sum map input elements to output elements: the output strides per input dimension (0
// along reduced dimensions) and the output element count.
struct ReducePlan {
  std::vector<int64_t> out_strides;
  int64_t out_count = 1;
};

Result<ReducePlan> plan_axes(const Args& a) {
  const TensorType& x = a.in(0);
  IntList axes = a.c.ints("axes");
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), axes.empty());
  for (int64_t ax : axes) {
    int64_t r = ax < 0 ? ax + x.rank() : ax;
    if (r < 0 || r >= x.rank())
      return fail("{} axis {} is out of range for {}", a.name(), ax, to_string(x));
    if (reduced[r]) return fail("{} attribute 'axes' = {} names axis {} twice", a.name(), to_string(Attribute{axes}), r);
    reduced[r] = true;
  }
  Shape kept = x.shape;  // the keepdims shape
  for (size_t d = 0; d < kept.size(); ++d)
    if (reduced[d]) kept[d] = 1;
  ReducePlan p;
  p.out_strides = strides_of(kept);
  for (size_t d = 0; d < kept.size(); ++d)
    if (reduced[d]) p.out_strides[d] = 0;
  p.out_count = product(kept, 0, kept.size());
  if (a.out(0).num_elements() != p.out_count || a.out(0).dtype != x.dtype)
    return fail("{} of {} cannot produce {}", a.name(), to_string(x), to_string(a.out(0)));
  return p;
}

// Adds every element of input 0 into acc[out offset] under `out_strides`, in row-major input order.
template <class T, class A>
void accumulate(const Args& a, const std::vector<int64_t>& out_strides, std::vector<A>& acc) {
  const T* x = a.in_data<T>(0);
  for_each_broadcast(a.in(0).shape, out_strides, out_strides,
                     [&](int64_t i, int64_t o, int64_t) { acc[static_cast<size_t>(o)] += static_cast<A>(x[i]); });
}

// Sums input 0 into output 0 under `out_strides`, then multiplies by `factor` (1 for sums, 1/count for means).
Result<void> reduce(const Args& a, const std::vector<int64_t>& out_strides, int64_t out_count, Acc factor) {
  DType t = a.in(0).dtype;
  auto n = static_cast<size_t>(out_count);
  if (t == DType::i32 || t == DType::i64) {
    std::vector<int64_t> acc(n, 0);
    if (t == DType::i32) {
      accumulate<int32_t>(a, out_strides, acc);
      for (size_t i = 0; i < n; ++i) a.out_data<int32_t>(0)[i] = static_cast<int32_t>(acc[i]);
    } else {
      accumulate<int64_t>(a, out_strides, acc);
      for (size_t i = 0; i < n; ++i) a.out_data<int64_t>(0)[i] = acc[i];
    }
    return {};
  }
  return with_float(a, t, [&]<class T>() -> Result<void> {
    std::vector<Acc> acc(n, 0);
    accumulate<T>(a, out_strides, acc);
    for (size_t i = 0; i < n; ++i) a.out_data<T>(0)[i] = static_cast<T>(acc[i] * factor);
    return {};
  });
}

}  // namespace

Result<void> reduce_sum(const Args& a) {
  ReducePlan p = LMS_TRY(plan_axes(a));
  return reduce(a, p.out_strides, p.out_count, 1);
}

Result<void> mean(const Args& a) {
  if (!is_float(a.in(0).dtype)) return unsupported_dtype(a, a.in(0).dtype);
  ReducePlan p = LMS_TRY(plan_axes(a));
  const int64_t per_output = p.out_count == 0 ? 0 : a.in(0).num_elements() / p.out_count;
  // An empty reduction is 0/0, NaN, as in NumPy and PyTorch.
  return reduce(a, p.out_strides, p.out_count, 1 / static_cast<Acc>(per_output));
}

// x broadcasts from the output's shape; each output element sums the x elements that broadcast from it.
Result<void> sum_to(const Args& a) {
  if (a.in(0).dtype != a.out(0).dtype)
    return fail("{} input {} and output {} differ in dtype", a.name(), to_string(a.in(0)), to_string(a.out(0)));
  std::vector<int64_t> st = LMS_TRY(broadcast_strides(a, a.out(0).shape, a.in(0).shape));
  return reduce(a, st, a.out(0).num_elements(), 1);
}

// Any dtype: a gather of whole elements.
Result<void> broadcast_to(const Args& a) {
  if (a.in(0).dtype != a.out(0).dtype)
    return fail("{} input {} and output {} differ in dtype", a.name(), to_string(a.in(0)), to_string(a.out(0)));
  std::vector<int64_t> st = LMS_TRY(broadcast_strides(a, a.in(0).shape, a.out(0).shape));
  const auto size = static_cast<size_t>(dtype_size(a.out(0).dtype));
  const auto* x = static_cast<const std::byte*>(a.call.inputs[0].data);
  auto* y = static_cast<std::byte*>(a.call.outputs[0].data);
  for_each_broadcast(a.out(0).shape, st, st, [&](int64_t i, int64_t o, int64_t) {
    std::memcpy(y + static_cast<size_t>(i) * size, x + static_cast<size_t>(o) * size, size);
  });
  return {};
}

}  // namespace lms::reference
