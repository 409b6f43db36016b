// Constant evaluation for the ONNX importer (see onnx_fold.h). Plain loops over host tensors: the inputs are
// shape lists, position ranges and masks, small next to the model, so clarity wins over speed. Integer tensors
// are computed in int64 (exact), float ones in double and stored back in their dtype (for f32 Add/Sub/Mul/Div
// that is the correctly rounded f32 result).
#include "lms/io/onnx_fold.h"

#include <algorithm>
#include <cmath>

namespace lms {

namespace {

bool is_int(DType d) { return !is_float(d); }

int64_t int_at(const HostTensor& t, int64_t i) {
  if (t.type.dtype == DType::i64) return t.as<int64_t>()[static_cast<size_t>(i)];
  return static_cast<int64_t>(t.get(i));
}

void set_int(HostTensor& t, int64_t i, int64_t v) {
  if (t.type.dtype == DType::i64) {
    t.as<int64_t>()[static_cast<size_t>(i)] = v;
  } else {
    t.set(i, static_cast<double>(v));
  }
}

Result<HostTensor> make(DType dtype, Shape shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxFoldElements)
      return fail("folding a constant of shape {} (over {} elements) is not supported", to_string(shape),
                  kMaxFoldElements);
  return HostTensor(TensorType{dtype, std::move(shape)});
}

// For each element of `out` (row-major), the offset of the element of `in` it broadcasts from.
std::vector<int64_t> broadcast_offsets(const Shape& in, const Shape& out) {
  const size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> stride(r, 0);
  for (int64_t s = 1, k = static_cast<int64_t>(in.size()) - 1; k >= 0; --k) {
    if (in[static_cast<size_t>(k)] != 1) stride[lead + static_cast<size_t>(k)] = s;
    s *= in[static_cast<size_t>(k)];
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<int64_t> offsets(static_cast<size_t>(total));
  std::vector<int64_t> index(r, 0);
  int64_t off = 0;
  for (int64_t e = 0; e < total; ++e) {
    offsets[static_cast<size_t>(e)] = off;
    for (size_t k = r; k-- > 0;) {  // the odometer: bump the last index, carrying leftwards
      off += stride[k];
      if (++index[k] < out[k]) break;
      off -= stride[k] * out[k];
      index[k] = 0;
    }
  }
  return offsets;
}

// y[i] = x's element at offset(i), for every row-major multi-index i of `shape` (slices, tiles).
template <class Offset>
Result<HostTensor> gather_elements(const HostTensor& x, const Shape& shape, Offset offset) {
  HostTensor y = LMS_TRY(make(x.type.dtype, shape));
  const auto width = static_cast<size_t>(dtype_size(x.type.dtype));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t e = 0; e < y.type.num_elements(); ++e) {
    std::copy_n(x.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(offset(index)) * width), width,
                y.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(e) * width));
    for (size_t k = shape.size(); k-- > 0;) {  // the odometer
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
  return y;
}

}  // namespace

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da != db && da != 1 && db != 1) return fail("shapes {} and {} do not broadcast", to_string(a), to_string(b));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

Result<HostTensor> fold_binary(std::string_view op, const HostTensor& a, const HostTensor& b) {
  const bool equal = op == "Equal", mod = op == "Mod", fmod = op == "Fmod";
  if (!equal && !mod && !fmod && op != "Add" && op != "Sub" && op != "Mul" && op != "Div")
    return fail("cannot fold '{}' (internal: not a foldable binary op)", op);
  if (mod && !is_int(a.type.dtype)) return fail("Mod of floats needs fmod = 1");
  if (is_int(a.type.dtype) != is_int(b.type.dtype))
    return fail("'{}' of {} and {} mixes integer and float types", op, to_string(a.type), to_string(b.type));
  const Shape shape = LMS_TRY(broadcast_shapes(a.type.shape, b.type.shape));
  HostTensor out = LMS_TRY(make(equal ? DType::i64 : a.type.dtype, shape));
  const std::vector<int64_t> ia = broadcast_offsets(a.type.shape, shape), ib = broadcast_offsets(b.type.shape, shape);
  for (size_t e = 0; e < ia.size(); ++e) {
    const auto i = static_cast<int64_t>(e);
    if (is_int(a.type.dtype)) {
      const int64_t x = int_at(a, ia[e]), y = int_at(b, ib[e]);
      int64_t v = 0;
      if (equal) {
        v = x == y;
      } else if (op == "Div" || mod || fmod) {
        if (y == 0) return fail("integer division by zero");
        v = op == "Div" ? x / y : x % y;
        if (mod && v != 0 && (v < 0) != (y < 0)) v += y;  // the divisor's sign, as Python's %
      } else if ((op == "Add" && __builtin_add_overflow(x, y, &v)) ||
                 (op == "Sub" && __builtin_sub_overflow(x, y, &v)) ||
                 (op == "Mul" && __builtin_mul_overflow(x, y, &v))) {
        return fail("integer overflow in '{}' of {} and {}", op, x, y);
      }
      set_int(out, i, v);
    } else {
      const double x = a.get(ia[e]), y = b.get(ib[e]);
      const double v = equal      ? double(x == y)
                       : fmod       ? std::fmod(x, y)
                       : op == "Add" ? x + y
                       : op == "Sub" ? x - y
                       : op == "Mul" ? x * y
                                     : x / y;
      out.set(i, v);
    }
  }
  return out;
}

Result<HostTensor> fold_expand(const HostTensor& x, const Shape& shape) {
  const Shape out_shape = LMS_TRY(broadcast_shapes(x.type.shape, shape));
  HostTensor out = LMS_TRY(make(x.type.dtype, out_shape));
  const std::vector<int64_t> from = broadcast_offsets(x.type.shape, out_shape);
  const auto width = static_cast<size_t>(dtype_size(x.type.dtype));
  for (size_t e = 0; e < from.size(); ++e)
    std::copy_n(x.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(from[e]) * width), width,
                out.data.begin() + static_cast<ptrdiff_t>(e * width));
  return out;
}

Result<HostTensor> fold_tile(const HostTensor& x, std::span<const int64_t> repeats) {
  const Shape& in = x.type.shape;
  if (repeats.size() != in.size()) return fail("Tile has {} repeats for rank {}", repeats.size(), in.size());
  Shape out_shape = in;
  for (size_t k = 0; k < in.size(); ++k) {
    if (repeats[k] < 0) return fail("Tile repeat {} along axis {}", repeats[k], k);
    out_shape[k] *= repeats[k];
  }
  std::vector<int64_t> stride(in.size(), 1);
  for (size_t k = in.size(); k-- > 1;) stride[k - 1] = stride[k] * in[k];
  return gather_elements(x, out_shape, [&](const std::vector<int64_t>& index) {
    int64_t from = 0;
    for (size_t k = 0; k < in.size(); ++k) from += index[k] % in[k] * stride[k];
    return from;
  });
}

Result<HostTensor> fold_transpose(const HostTensor& x, std::span<const int64_t> perm) {
  const Shape& in = x.type.shape;
  const size_t r = in.size();
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (perm.size() != r || p < 0 || p >= static_cast<int64_t>(r) || seen[static_cast<size_t>(p)])
      return fail("perm {} does not permute the {} dims of {}", to_string(Shape(perm.begin(), perm.end())), r,
                  to_string(in));
    seen[static_cast<size_t>(p)] = true;
  }
  if (perm.size() != r) return fail("perm has {} entries for rank {}", perm.size(), r);
  Shape out_shape(r);
  std::vector<int64_t> in_stride(r, 1), stride(r);  // stride[k]: the input step of output dim k
  for (size_t k = r; k-- > 1;) in_stride[k - 1] = in_stride[k] * in[k];
  for (size_t k = 0; k < r; ++k) {
    out_shape[k] = in[static_cast<size_t>(perm[k])];
    stride[k] = in_stride[static_cast<size_t>(perm[k])];
  }
  HostTensor out = LMS_TRY(make(x.type.dtype, out_shape));
  const auto width = static_cast<size_t>(dtype_size(x.type.dtype));
  std::vector<int64_t> index(r, 0);
  int64_t from = 0;
  for (int64_t e = 0; e < out.type.num_elements(); ++e) {
    std::copy_n(x.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(from) * width), width,
                out.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(e) * width));
    for (size_t k = r; k-- > 0;) {  // the odometer over the output, tracking the input offset
      from += stride[k];
      if (++index[k] < out_shape[k]) break;
      from -= stride[k] * out_shape[k];
      index[k] = 0;
    }
  }
  return out;
}

Result<HostTensor> fold_concat(std::span<const HostTensor* const> parts, int64_t axis) {
  const Shape& first = parts.front()->type.shape;
  const auto r = static_cast<int64_t>(first.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail("Concat axis {} is out of range for rank {}", axis, r);
  const auto a = static_cast<size_t>(axis);
  Shape out_shape = first;
  out_shape[a] = 0;
  for (const HostTensor* p : parts) {
    Shape s = p->type.shape;
    if (p->type.dtype != parts.front()->type.dtype || s.size() != first.size())
      return fail("Concat of {} and {}", to_string(parts.front()->type), to_string(p->type));
    out_shape[a] += s[a];
    s[a] = first[a];
    if (s != first) return fail("Concat of {} and {} along axis {}", to_string(first), to_string(p->type.shape), axis);
  }
  HostTensor out = LMS_TRY(make(parts.front()->type.dtype, out_shape));
  // Row-major: each part contributes a block of (its axis dim x inner) elements per outer index.
  const auto width = static_cast<size_t>(dtype_size(out.type.dtype));
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < a; ++k) outer *= first[k];
  for (size_t k = a + 1; k < first.size(); ++k) inner *= first[k];
  auto to = out.data.begin();
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor* p : parts) {
      const auto block = static_cast<size_t>(p->type.shape[a] * inner) * width;
      to = std::copy_n(p->data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(o) * block), block, to);
    }
  return out;
}

Result<HostTensor> fold_scatter_nd(const HostTensor& data, const HostTensor& indices, const HostTensor& updates) {
  const Shape &d = data.type.shape, &ix = indices.type.shape, &up = updates.type.shape;
  if (ix.empty() || !is_int(indices.type.dtype)) return fail("ScatterND indices {}", to_string(indices.type));
  const auto k = static_cast<size_t>(ix.back());
  Shape want(ix.begin(), ix.end() - 1);  // updates: indices' dims but the last, then data's dims past k
  if (k > d.size()) return fail("ScatterND indices of depth {} into rank {}", k, d.size());
  want.insert(want.end(), d.begin() + static_cast<ptrdiff_t>(k), d.end());
  if (up != want || updates.type.dtype != data.type.dtype)
    return fail("ScatterND updates {} for data {} and indices {} (expected {})", to_string(updates.type),
                to_string(data.type), to_string(ix), to_string(want));
  int64_t slice = 1;
  for (size_t a = k; a < d.size(); ++a) slice *= d[a];
  HostTensor out = data;
  const auto width = static_cast<size_t>(dtype_size(data.type.dtype));
  const int64_t tuples = indices.type.num_elements() / std::max<int64_t>(static_cast<int64_t>(k), 1);
  for (int64_t t = 0; t < (k == 0 ? 1 : tuples); ++t) {
    int64_t offset = 0;
    for (size_t a = 0; a < k; ++a) {
      int64_t i = int_at(indices, t * static_cast<int64_t>(k) + static_cast<int64_t>(a));
      if (i < 0) i += d[a];
      if (i < 0 || i >= d[a]) return fail("ScatterND index {} out of range for dim {} of {}", i, a, to_string(d));
      offset = offset * d[a] + i;
    }
    const auto bytes = static_cast<size_t>(slice) * width;
    std::copy_n(updates.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(t) * bytes), bytes,
                out.data.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(offset) * bytes));
  }
  return out;
}

Result<HostTensor> fold_unary(std::string_view op, const HostTensor& x, double exponent) {
  if (!is_float(x.type.dtype)) return fail("'{}' of the integer constant {}", op, to_string(x.type));
  double (*f)(double, double) = nullptr;
  if (op == "Neg") f = [](double v, double) { return -v; };
  if (op == "Sqrt") f = [](double v, double) { return std::sqrt(v); };
  if (op == "Reciprocal") f = [](double v, double) { return 1 / v; };
  if (op == "Exp") f = [](double v, double) { return std::exp(v); };
  if (op == "Log") f = [](double v, double) { return std::log(v); };
  if (op == "Softplus") f = [](double v, double) { return v > 20 ? v : std::log1p(std::exp(v)); };
  if (op == "Mish") f = [](double v, double) { return v * std::tanh(v > 20 ? v : std::log1p(std::exp(v))); };
  if (op == "Relu") f = [](double v, double) { return std::max(v, 0.0); };
  if (op == "Sigmoid") f = [](double v, double) { return 1 / (1 + std::exp(-v)); };
  if (op == "Tanh") f = [](double v, double) { return std::tanh(v); };
  if (op == "Pow") f = [](double v, double e) { return std::pow(v, e); };
  if (f == nullptr) return fail("cannot fold '{}' (internal: not a foldable unary op)", op);
  HostTensor out(x.type);
  for (int64_t i = 0; i < x.type.num_elements(); ++i) out.set(i, f(x.get(i), exponent));
  return out;
}

HostTensor fold_not(const HostTensor& x) {
  HostTensor out(TensorType{DType::i64, x.type.shape});
  for (int64_t i = 0; i < x.type.num_elements(); ++i) out.as<int64_t>()[static_cast<size_t>(i)] = x.get(i) == 0;
  return out;
}

Result<HostTensor> fold_where(const HostTensor& cond, const HostTensor& a, const HostTensor& b) {
  if (is_int(a.type.dtype) != is_int(b.type.dtype))
    return fail("Where of {} and {} mixes integer and float types", to_string(a.type), to_string(b.type));
  const Shape shape = LMS_TRY(broadcast_shapes(cond.type.shape, LMS_TRY(broadcast_shapes(a.type.shape, b.type.shape))));
  HostTensor out = LMS_TRY(make(a.type.dtype, shape));
  const std::vector<int64_t> ic = broadcast_offsets(cond.type.shape, shape);
  const std::vector<int64_t> ia = broadcast_offsets(a.type.shape, shape), ib = broadcast_offsets(b.type.shape, shape);
  for (size_t e = 0; e < ic.size(); ++e) {
    const HostTensor& from = cond.get(ic[e]) != 0 ? a : b;
    const int64_t at = &from == &a ? ia[e] : ib[e];
    if (is_int(a.type.dtype)) {
      set_int(out, static_cast<int64_t>(e), int_at(from, at));
    } else {
      out.set(static_cast<int64_t>(e), from.get(at));
    }
  }
  return out;
}

Result<SliceBounds> slice_bounds(const Shape& in, std::span<const int64_t> starts, std::span<const int64_t> ends,
                                 std::span<const int64_t> axes, std::span<const int64_t> steps) {
  const auto r = static_cast<int64_t>(in.size());
  if (ends.size() != starts.size() || (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size()))
    return fail("Slice has {} starts, {} ends, {} axes and {} steps", starts.size(), ends.size(), axes.size(),
                steps.size());
  SliceBounds s{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1), in};
  std::vector<bool> seen(in.size(), false);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(k) : axes[k];
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r || seen[static_cast<size_t>(axis)])
      return fail("Slice axis {} is out of range or repeated for rank {}", axes.empty() ? int64_t(k) : axes[k], r);
    const auto a = static_cast<size_t>(axis);
    seen[a] = true;
    const int64_t d = in[a], step = steps.empty() ? 1 : steps[k];
    if (step == 0) return fail("Slice step 0 along axis {}", axis);
    // ONNX: negative starts/ends count from the end; then starts clamp to [0, d] (steps > 0) or [0, d-1] (< 0),
    // ends to [0, d] or [-1, d-1].
    int64_t b = starts[k] < 0 ? starts[k] + d : starts[k], e = ends[k] < 0 ? ends[k] + d : ends[k];
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    const int64_t n = step > 0 ? (e - b + step - 1) / step : (b - e - step - 1) / -step;
    s.first[a] = b;
    s.step[a] = step;
    s.count[a] = std::max<int64_t>(n, 0);
  }
  return s;
}

Result<HostTensor> fold_slice(const HostTensor& x, std::span<const int64_t> starts, std::span<const int64_t> ends,
                              std::span<const int64_t> axes, std::span<const int64_t> steps) {
  const Shape& in = x.type.shape;
  const auto r = static_cast<int64_t>(in.size());
  const SliceBounds s = LMS_TRY(slice_bounds(in, starts, ends, axes, steps));
  const std::vector<int64_t>& first = s.first;
  const std::vector<int64_t>& step = s.step;
  const Shape& out = s.count;
  std::vector<int64_t> in_stride(in.size(), 1);
  for (int64_t k = r - 2; k >= 0; --k)
    in_stride[static_cast<size_t>(k)] = in_stride[static_cast<size_t>(k) + 1] * in[static_cast<size_t>(k) + 1];
  return gather_elements(x, out, [&](const std::vector<int64_t>& index) {
    int64_t from = 0;
    for (size_t k = 0; k < in.size(); ++k) from += (first[k] + index[k] * step[k]) * in_stride[k];
    return from;
  });
}

Result<HostTensor> fold_range(const HostTensor& start, const HostTensor& limit, const HostTensor& delta) {
  if (start.type.num_elements() != 1 || limit.type.num_elements() != 1 || delta.type.num_elements() != 1)
    return fail("Range takes scalars, got {}, {} and {}", to_string(start.type), to_string(limit.type),
                to_string(delta.type));
  const double s = start.get(0), l = limit.get(0), d = delta.get(0);
  if (d == 0) return fail("Range with delta 0");
  const double count = std::max(std::ceil((l - s) / d), 0.0);
  if (!(count <= static_cast<double>(kMaxFoldElements))) return fail("Range of {} elements is too long", count);
  HostTensor out = LMS_TRY(make(start.type.dtype, {static_cast<int64_t>(count)}));
  for (int64_t i = 0; i < out.type.num_elements(); ++i) {
    if (is_int(start.type.dtype)) {
      set_int(out, i, int_at(start, 0) + i * int_at(delta, 0));
    } else {
      out.set(i, s + static_cast<double>(i) * d);
    }
  }
  return out;
}

bool is_causal_mask(const HostTensor& masked, const Shape& scores) {
  const Shape& m = masked.type.shape;
  if (scores.size() < 2 || m.size() < 2 || m.size() > scores.size()) return false;
  const int64_t rows = scores[scores.size() - 2], cols = scores.back();
  if (m[m.size() - 2] != rows || m.back() != cols) return false;  // a causal mask has every entry
  for (size_t k = 0; k + 2 < m.size(); ++k)
    if (m[k] != 1 && m[k] != scores[scores.size() - m.size() + k]) return false;
  const int64_t matrices = masked.type.num_elements() / std::max<int64_t>(rows * cols, 1);
  for (int64_t t = 0; t < matrices; ++t)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if ((masked.get((t * rows + i) * cols + j) != 0) != (j > i)) return false;
  return true;
}

}  // namespace lms
