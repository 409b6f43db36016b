// Own loops for the cpu backend (dnnl_util.h), data movement and fills: constant and scale (f32), and the
// element movers reshape, swap_out, swap_in (one memcpy), transpose and broadcast_to (a strided gather whose
// innermost loop runs over the output's last dimension), concat, slice and slice_grad (block memcpys). The
// movers copy whole elements of any dtype, as the reference does (an element is 1, 2, 4 or 8 bytes and moves
// as an unsigned integer of that size), so they are not limited to f32. These loops are single-threaded (the
// copies are memory-bound); g++ -O2 vectorizes the contiguous ones. Declined
// (reference kernel): constant and scale of non-f32 dtypes, and shapes the reference would reject (it reports
// them).
#include <cstdint>
#include <cstring>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

const std::byte* in_bytes(const KernelCall& c, size_t i) { return static_cast<const std::byte*>(c.inputs[i].data); }
std::byte* out_bytes(const KernelCall& c, size_t i) { return static_cast<std::byte*>(c.outputs[i].data); }

// out[i] = in[offset(i)] over out's row-major elements, where stepping output dimension d steps the input by
// walk[d] elements. The innermost dimension is a tight strided loop.
template <class T>
void strided_gather(const Shape& out, const std::vector<int64_t>& walk, const T* in, T* y) {
  const size_t rank = out.size();
  if (rank == 0) {
    y[0] = in[0];
    return;
  }
  const int64_t inner = out[rank - 1], step = walk[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= out[d];
  std::vector<int64_t> index(rank, 0);
  int64_t base = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = in + base;
    T* dst = y + r * inner;
    if (step == 1) {
      std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(T));
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * step];
    }
    next_row(index, out, walk, base);
  }
}

// A strided gather for any element size.
KernelPtr gather_kernel(DnnlContext& ctx, const KernelCall& call, std::vector<int64_t> walk) {
  const Shape out = out_shape(call, 0);
  const void* x = call.inputs[0].data;
  void* y = call.outputs[0].data;
  const int64_t size = dtype_size(call.outputs[0].type->dtype);
  return loop_kernel(ctx, [out, walk = std::move(walk), x, y, size]() -> Result<void> {
    switch (size) {
      case 1: strided_gather(out, walk, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y)); break;
      case 2: strided_gather(out, walk, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y)); break;
      case 4: strided_gather(out, walk, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y)); break;
      default: strided_gather(out, walk, static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y)); break;
    }
    return {};
  });
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

KernelPtr transpose(DnnlContext& ctx, const KernelCall& call) {
  const Shape &x = in_shape(call, 0), &y = out_shape(call, 0);
  IntList perm = call.attrs->get_ints("perm", {});
  if (perm.size() != x.size() || y.size() != x.size()) return KernelPtr();
  std::vector<int64_t> xs = strides_of(x), walk(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(x.size()) || y[i] != x[static_cast<size_t>(perm[i])])
      return KernelPtr();
    walk[i] = xs[static_cast<size_t>(perm[i])];
  }
  return gather_kernel(ctx, call, std::move(walk));
}

KernelPtr broadcast_to(DnnlContext& ctx, const KernelCall& call) {
  const Shape &x = in_shape(call, 0), &y = out_shape(call, 0);
  if (x.size() > y.size()) return KernelPtr();
  const size_t lead = y.size() - x.size();
  std::vector<int64_t> xs = strides_of(x), walk(y.size(), 0);
  for (size_t d = lead; d < y.size(); ++d) {
    if (x[d - lead] == y[d]) walk[d] = xs[d - lead];
    else if (x[d - lead] != 1) return KernelPtr();
  }
  return gather_kernel(ctx, call, std::move(walk));
}

// The axis attribute of a rank-`rank` tensor, or -1 when out of range.
int axis_of(const KernelCall& call, size_t rank) {
  int64_t a = call.attrs->get_int("axis", 0);
  if (a < 0) a += static_cast<int64_t>(rank);
  return a < 0 || a >= static_cast<int64_t>(rank) ? -1 : static_cast<int>(a);
}

KernelPtr concat(DnnlContext& ctx, const KernelCall& call) {
  const Shape& y = out_shape(call, 0);
  const int axis = axis_of(call, y.size());
  if (axis < 0) return KernelPtr();
  const auto size = static_cast<size_t>(dtype_size(call.outputs[0].type->dtype));
  const int64_t outer = product(y, 0, static_cast<size_t>(axis)), inner = product(y, static_cast<size_t>(axis) + 1, y.size());
  std::vector<size_t> blocks;
  std::vector<const std::byte*> ins;
  int64_t total = 0;
  for (size_t t = 0; t < call.inputs.size(); ++t) {
    Shape expect = y;
    const Shape& s = in_shape(call, t);
    if (s.size() != y.size() || call.inputs[t].type->dtype != call.outputs[0].type->dtype) return KernelPtr();
    expect[static_cast<size_t>(axis)] = s[static_cast<size_t>(axis)];
    if (s != expect) return KernelPtr();
    total += s[static_cast<size_t>(axis)];
    blocks.push_back(static_cast<size_t>(s[static_cast<size_t>(axis)] * inner) * size);
    ins.push_back(in_bytes(call, t));
  }
  if (total != y[static_cast<size_t>(axis)]) return KernelPtr();
  std::byte* py = out_bytes(call, 0);
  return loop_kernel(ctx, [outer, blocks, ins, py]() -> Result<void> {
    std::byte* dst = py;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t t = 0; t < blocks.size(); ++t) {  // each input's block of this outer index, in input order
        const std::byte* from = ins[t] + static_cast<size_t>(o) * blocks[t];
        if (from != dst) std::memcpy(dst, from, blocks[t]);  // else in place (Note [Parts], plan/liveness.h)
        dst += blocks[t];
      }
    return {};
  });
}

// slice (x -> y) and slice_grad (dy -> dx, zeros elsewhere): `big` is x or dx, the window [start, end) along
// the axis is y or dy.
KernelPtr slice(DnnlContext& ctx, const KernelCall& call, bool grad) {
  const Shape& big = grad ? out_shape(call, 0) : in_shape(call, 0);
  const Shape& small = grad ? in_shape(call, 0) : out_shape(call, 0);
  const int axis = axis_of(call, big.size());
  if (axis < 0 || call.inputs[0].type->dtype != call.outputs[0].type->dtype) return KernelPtr();
  const auto ax = static_cast<size_t>(axis);
  const int64_t start = call.attrs->get_int("start", 0), end = call.attrs->get_int("end", 0);
  Shape expect = big;
  expect[ax] = end - start;
  if (!(0 <= start && start < end && end <= big[ax]) || small != expect) return KernelPtr();
  if (grad && call.attrs->has("dim") && call.attrs->get_int("dim", 0) != big[ax]) return KernelPtr();
  const auto size = static_cast<size_t>(dtype_size(call.outputs[0].type->dtype));
  const int64_t outer = product(big, 0, ax), inner = product(big, ax + 1, big.size());
  const auto big_block = static_cast<size_t>(big[ax] * inner) * size;
  const auto small_block = static_cast<size_t>((end - start) * inner) * size;
  const auto skip = static_cast<size_t>(start * inner) * size;
  const std::byte* src = in_bytes(call, 0);
  std::byte* dst = out_bytes(call, 0);
  return loop_kernel(ctx, [=]() -> Result<void> {
    if (!grad && src + skip == dst) return {};  // a view of its range (Note [Parts], plan/liveness.h)
    if (grad) std::memset(dst, 0, big_block * static_cast<size_t>(outer));  // all-zero bytes are 0 in every dtype
    for (int64_t o = 0; o < outer; ++o) {
      const auto ou = static_cast<size_t>(o);
      if (grad) std::memcpy(dst + ou * big_block + skip, src + ou * small_block, small_block);
      else std::memcpy(dst + ou * small_block, src + ou * big_block + skip, small_block);
    }
    return {};
  });
}

}  // namespace

Result<KernelPtr> build_loops(DnnlContext& ctx, const KernelCall& call) {
  if (call.outputs.size() != 1) return KernelPtr();
  const TensorType& out = *call.outputs[0].type;
  switch (call.op) {
    case Op::constant: {
      if (out.dtype != DType::f32 || !call.inputs.empty()) return KernelPtr();
      const auto value = static_cast<float>(number(call, "value"));
      float* y = out_f32(call, 0);
      const int64_t n = out.num_elements();
      return loop_kernel(ctx, [y, n, value]() -> Result<void> {
        for (int64_t i = 0; i < n; ++i) y[i] = value;
        return {};
      });
    }
    case Op::scale: {
      if (!all_f32(call) || call.inputs.size() != 1 || in_shape(call, 0) != out.shape) return KernelPtr();
      const auto factor = static_cast<float>(number(call, "factor"));
      const float* x = in_f32(call, 0);
      float* y = out_f32(call, 0);
      const int64_t n = out.num_elements();
      return loop_kernel(ctx, [x, y, n, factor]() -> Result<void> {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor;
        return {};
      });
    }
    default: break;
  }
  if (call.inputs.empty()) return KernelPtr();
  switch (call.op) {
    case Op::reshape:
    case Op::swap_out:
    case Op::swap_in: {
      const TensorType& in = *call.inputs[0].type;
      if (call.inputs.size() != 1 || in.bytes() != out.bytes() || in.dtype != out.dtype) return KernelPtr();
      const void* x = call.inputs[0].data;
      void* y = call.outputs[0].data;
      const auto bytes = static_cast<size_t>(out.bytes());
      return loop_kernel(ctx, [x, y, bytes]() -> Result<void> {
        if (x != y && bytes > 0) std::memmove(y, x, bytes);  // like the reference: overlap-safe
        return {};
      });
    }
    case Op::transpose:
    case Op::broadcast_to:
      if (call.inputs.size() != 1 || call.inputs[0].type->dtype != out.dtype) return KernelPtr();
      return call.op == Op::transpose ? transpose(ctx, call) : broadcast_to(ctx, call);
    case Op::concat: return concat(ctx, call);
    case Op::slice: return call.inputs.size() == 1 ? slice(ctx, call, false) : KernelPtr();
    case Op::slice_grad: return call.inputs.size() == 1 ? slice(ctx, call, true) : KernelPtr();
    default: return KernelPtr();
  }
}

}  // namespace lms::cpu
