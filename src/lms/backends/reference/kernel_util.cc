// The shared helpers of the reference kernels (kernel_util.h): Args construction, the dtype error, typed
// element loads and stores, stride and axis helpers, and the sliding-window geometry.
#include "lms/backends/reference/kernel_util.h"

#include <fmt/format.h>

#include "lms/runtime/tensor.h"

namespace lms::reference {

namespace {
const Attributes& attrs_of(const KernelCall& call) {
  static const Attributes kNone;
  return call.attrs ? *call.attrs : kNone;
}

std::vector<TensorType> types_of(std::span<const TensorRef> refs) {
  std::vector<TensorType> out;
  out.reserve(refs.size());
  for (const TensorRef& r : refs) out.push_back(*r.type);
  return out;
}
}  // namespace

Args::Args(const KernelCall& k)
    : call(k),
      def(op_def(k.op)),
      in_types(types_of(k.inputs)),
      out_types(types_of(k.outputs)),
      c{def, in_types, attrs_of(k), out_types} {}

std::unexpected<Error> unsupported_dtype(const Args& a, DType t) {
  return fail("reference backend: dtype {} is not supported for {}", dtype_name(t), a.name());
}

int64_t load_index(const TensorRef& t, int64_t i) {
  if (t.type->dtype == DType::i32) return static_cast<const int32_t*>(t.data)[i];
  return static_cast<const int64_t*>(t.data)[i];
}

double load_float(const TensorRef& t, int64_t i) {
  switch (t.type->dtype) {
    case DType::f32: return static_cast<const float*>(t.data)[i];
    case DType::f64: return static_cast<const double*>(t.data)[i];
    case DType::f16: return half_to_float(static_cast<const uint16_t*>(t.data)[i]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(t.data)[i]);
    case DType::i32: return static_cast<const int32_t*>(t.data)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(t.data)[i]);
  }
  return 0;
}

void store_any(const TensorRef& t, int64_t i, double v) {
  switch (t.type->dtype) {
    case DType::f32: static_cast<float*>(t.data)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(t.data)[i] = v; return;
    case DType::f16: static_cast<uint16_t*>(t.data)[i] = float_to_half(static_cast<float>(v)); return;
    case DType::bf16: static_cast<uint16_t*>(t.data)[i] = float_to_bf16(static_cast<float>(v)); return;
    case DType::i32: static_cast<int32_t*>(t.data)[i] = static_cast<int32_t>(v); return;
    case DType::i64: static_cast<int64_t*>(t.data)[i] = static_cast<int64_t>(v); return;
  }
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

std::string index_text(const Shape& s, int64_t flat) {
  std::vector<int64_t> index(s.size(), 0);
  for (size_t d = s.size(); d-- > 0;) {
    if (s[d] > 0) {
      index[d] = flat % s[d];
      flat /= s[d];
    }
  }
  return to_string(index);
}

AxisSplit split_at(const Shape& s, int axis) {
  auto ax = static_cast<size_t>(axis);
  return {product(s, 0, ax), s[ax], product(s, ax + 1, s.size())};
}

Result<int> axis_attr(const Args& a, std::string_view name, int rank) {
  int64_t v = a.c.i(name);
  int64_t r = v < 0 ? v + rank : v;
  if (r < 0 || r >= rank) return fail("{} attribute '{}' = {} is out of range for rank {}", a.name(), name, v, rank);
  return static_cast<int>(r);
}

double number_attr(const Args& a, std::string_view name) { return lms::number_attr(a.def, a.c.attrs, name); }

Result<IntList> spatial_attr(const Args& a, std::string_view name, int rank, int64_t fill) {
  IntList v = a.c.ints(name);
  if (v.empty()) return IntList(static_cast<size_t>(rank), fill);
  if (static_cast<int>(v.size()) != rank)
    return fail("{} attribute '{}' = {} needs {} entries (one per spatial dimension)", a.name(), name,
                to_string(Attribute{v}), rank);
  return v;
}

Result<std::vector<int64_t>> broadcast_strides(const Args& a, const Shape& in, const Shape& out) {
  if (in.size() > out.size())
    return fail("{} cannot broadcast {} to {}: more dimensions", a.name(), to_string(in), to_string(out));
  std::vector<int64_t> in_strides = strides_of(in), st(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != out[lead + i] && in[i] != 1)
      return fail("{} cannot broadcast {} to {} (dimension {} is {} vs {})", a.name(), to_string(in), to_string(out),
                  lead + i, in[i], out[lead + i]);
    st[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  return st;
}

Windows make_windows(const Shape& x, const Shape& y, const IntList& k, const IntList& stride, const IntList& pad,
                     const IntList& dil) {
  Windows w;
  int rank = static_cast<int>(x.size()) - 2;
  for (int i = 0; i < rank; ++i) {
    Window& d = w[kMaxSpatial - rank + i];
    d.in = x[2 + i];
    d.out = y[2 + i];
    d.k = k[i];
    d.stride = stride[i];
    d.pad = pad[i];
    d.dil = dil[i];
  }
  return w;
}

Result<MatmulGeometry> matmul_geometry(const Args& a) {
  const TensorType &ta = a.in(0), &tb = a.in(1), &to = a.out(0);
  if (ta.rank() < 2 || tb.rank() < 2 || ta.dtype != tb.dtype || to.dtype != ta.dtype)
    return fail("{} needs float operands of rank >= 2 and one dtype, got {} and {}", a.name(), to_string(ta),
                to_string(tb));
  MatmulGeometry g;
  g.ta = a.c.b("transpose_a");
  g.tb = a.c.b("transpose_b");
  const int ra = ta.rank(), rb = tb.rank();
  g.m = ta.shape[ra - (g.ta ? 1 : 2)];
  g.k = ta.shape[ra - (g.ta ? 2 : 1)];
  g.n = tb.shape[rb - (g.tb ? 2 : 1)];
  g.batch = product(ta.shape, 0, ta.shape.size() - 2);
  g.shared_b = rb == 2;
  Shape expected(ta.shape.begin(), ta.shape.end() - 2);
  bool batch_ok = g.shared_b || Shape(tb.shape.begin(), tb.shape.end() - 2) == expected;
  expected.push_back(g.m);
  expected.push_back(g.n);
  if (!batch_ok || tb.shape[rb - (g.tb ? 1 : 2)] != g.k || to.shape != expected)
    return fail("{} of {} and {} cannot produce {}", a.name(), to_string(ta), to_string(tb), to_string(to));
  return g;
}

}  // namespace lms::reference
