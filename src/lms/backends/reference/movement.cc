// Reference data movement and fills: constant, plain copies (reshape, swap_out, swap_in: the same bytes),
// transpose, concat, slice and its gradient slice_grad, embedding (a row gather) and embedding_grad (a row
// scatter-add). Everything but embedding_grad moves whole elements, so it works for every dtype, f16 and
// bf16 included. embedding_grad accumulates each table row in double over its positions in ascending order.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

const std::byte* in_bytes(const Args& a, size_t i) { return static_cast<const std::byte*>(a.call.inputs[i].data); }
std::byte* out_bytes(const Args& a, size_t i) { return static_cast<std::byte*>(a.call.outputs[i].data); }
size_t elem_size(const TensorType& t) { return static_cast<size_t>(dtype_size(t.dtype)); }

// Fails unless every element of the id tensor `ids` (input `input`) is in [0, vocab).
Result<void> check_ids(const Args& a, size_t input, int64_t vocab) {
  const TensorRef& ids = a.call.inputs[input];
  const int64_t n = a.in(input).num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = load_index(ids, i);
    if (id < 0 || id >= vocab)
      return fail("{} id {} at position {} (element {} of {}) is outside [0, {})", a.name(), id,
                  index_text(a.in(input).shape, i), i, to_string(a.in(input)), vocab);
  }
  return {};
}

Result<void> check_id_dtype(const Args& a, size_t input) {
  DType t = a.in(input).dtype;
  if (t != DType::i32 && t != DType::i64)
    return fail("{} ids must be i32 or i64, got {}", a.name(), to_string(a.in(input)));
  return {};
}

}  // namespace

Result<void> constant(const Args& a) {
  const double value = a.c.f("value");
  const TensorRef& out = a.call.outputs[0];
  for (int64_t i = 0; i < a.out(0).num_elements(); ++i) store_any(out, i, value);
  return {};
}

Result<void> copy(const Args& a) {
  if (a.in(0).bytes() != a.out(0).bytes() || a.in(0).dtype != a.out(0).dtype)
    return fail("{} of {} cannot produce {}", a.name(), to_string(a.in(0)), to_string(a.out(0)));
  if (a.call.inputs[0].data != a.call.outputs[0].data)
    std::memmove(a.call.outputs[0].data, a.call.inputs[0].data, static_cast<size_t>(a.out(0).bytes()));
  return {};
}

Result<void> transpose(const Args& a) {
  const TensorType &x = a.in(0), &y = a.out(0);
  IntList perm = a.c.ints("perm");
  if (static_cast<int>(perm.size()) != x.rank() || y.rank() != x.rank() || y.dtype != x.dtype)
    return fail("{} perm {} does not map {} to {}", a.name(), to_string(Attribute{perm}), to_string(x), to_string(y));
  std::vector<int64_t> xs = strides_of(x.shape), walk(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= x.rank() || y.shape[i] != x.shape[perm[i]])
      return fail("{} perm {} does not map {} to {}", a.name(), to_string(Attribute{perm}), to_string(x),
                  to_string(y));
    walk[i] = xs[perm[i]];  // stepping output dimension i steps input dimension perm[i]
  }
  const size_t size = elem_size(x);
  const std::byte* px = in_bytes(a, 0);
  std::byte* py = out_bytes(a, 0);
  for_each_broadcast(y.shape, walk, walk, [&](int64_t i, int64_t o, int64_t) {
    std::memcpy(py + static_cast<size_t>(i) * size, px + static_cast<size_t>(o) * size, size);
  });
  return {};
}

Result<void> concat(const Args& a) {
  const TensorType& y = a.out(0);
  const int axis = LMS_TRY(axis_attr(a, "axis", y.rank()));
  int64_t total = 0;
  for (size_t t = 0; t < a.num_inputs(); ++t) {
    Shape expect = y.shape;
    expect[axis] = a.in(t).rank() == y.rank() ? a.in(t).shape[axis] : -1;
    if (a.in(t).dtype != y.dtype || a.in(t).shape != expect)
      return fail("{} input {} {} does not fit output {} along axis {}", a.name(), t, to_string(a.in(t)), to_string(y),
                  axis);
    total += a.in(t).shape[axis];
  }
  if (total != y.shape[axis])
    return fail("{} inputs add up to {} along axis {}, output {} has {}", a.name(), total, axis, to_string(y),
                y.shape[axis]);
  const AxisSplit s = split_at(y.shape, axis);
  const size_t size = elem_size(y);
  std::byte* py = out_bytes(a, 0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (size_t t = 0; t < a.num_inputs(); ++t) {  // each input's block of this outer index, in input order
      const auto block = static_cast<size_t>(a.in(t).shape[axis] * s.inner) * size;
      const std::byte* from = in_bytes(a, t) + static_cast<size_t>(o) * block;
      if (from != py) std::memcpy(py, from, block);  // else already in place (Note [Parts], plan/liveness.h)
      py += block;
    }
  return {};
}

Result<void> slice(const Args& a) {
  const TensorType &x = a.in(0), &y = a.out(0);
  const int axis = LMS_TRY(axis_attr(a, "axis", x.rank()));
  const int64_t start = a.c.i("start"), end = a.c.i("end");
  Shape expect = x.shape;
  expect[axis] = end - start;
  if (!(0 <= start && start < end && end <= x.shape[axis]) || y.shape != expect || y.dtype != x.dtype)
    return fail("{} [{}, {}) along axis {} of {} cannot produce {}", a.name(), start, end, axis, to_string(x),
                to_string(y));
  const AxisSplit s = split_at(x.shape, axis);
  const size_t size = elem_size(x);
  const auto in_block = static_cast<size_t>(s.dim * s.inner) * size;
  const auto out_block = static_cast<size_t>((end - start) * s.inner) * size;
  const auto skip = static_cast<size_t>(start * s.inner) * size;
  if (in_bytes(a, 0) + skip == out_bytes(a, 0)) return {};  // a view of its range (Note [Parts], plan/liveness.h)
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(out_bytes(a, 0) + static_cast<size_t>(o) * out_block,
                in_bytes(a, 0) + static_cast<size_t>(o) * in_block + skip, out_block);
  return {};
}

// dx is zeros except dy at [start, end) along the axis.
Result<void> slice_grad(const Args& a) {
  const TensorType &dy = a.in(0), &dx = a.out(0);
  const int axis = LMS_TRY(axis_attr(a, "axis", dx.rank()));
  const int64_t start = a.c.i("start"), end = a.c.i("end");
  Shape expect = dx.shape;
  expect[axis] = end - start;
  if (!(0 <= start && start < end && end <= dx.shape[axis]) || dy.shape != expect || dy.dtype != dx.dtype)
    return fail("{} [{}, {}) along axis {} of {} does not match dy {}", a.name(), start, end, axis, to_string(dx),
                to_string(dy));
  if (a.c.attrs.has("dim") && a.c.i("dim") != dx.shape[axis])
    return fail("{} attribute 'dim' = {} but the output {} has {} along axis {}", a.name(), a.c.i("dim"),
                to_string(dx), dx.shape[axis], axis);
  const AxisSplit s = split_at(dx.shape, axis);
  const size_t size = elem_size(dx);
  const auto out_block = static_cast<size_t>(s.dim * s.inner) * size;
  const auto in_block = static_cast<size_t>((end - start) * s.inner) * size;
  const auto skip = static_cast<size_t>(start * s.inner) * size;
  std::memset(out_bytes(a, 0), 0, static_cast<size_t>(dx.bytes()));  // all-zero bytes are 0 in every dtype
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(out_bytes(a, 0) + static_cast<size_t>(o) * out_block + skip,
                in_bytes(a, 0) + static_cast<size_t>(o) * in_block, in_block);
  return {};
}

Result<void> embedding(const Args& a) {
  const TensorType &table = a.in(0), &ids = a.in(1), &y = a.out(0);
  LMS_TRY_VOID(check_id_dtype(a, 1));
  Shape expect = ids.shape;
  if (table.rank() != 2) return fail("{} table must be [V, C], got {}", a.name(), to_string(table));
  expect.push_back(table.shape[1]);
  if (y.shape != expect || y.dtype != table.dtype)
    return fail("{} of {} by {} cannot produce {}", a.name(), to_string(table), to_string(ids), to_string(y));
  LMS_TRY_VOID(check_ids(a, 1, table.shape[0]));
  const auto row = static_cast<size_t>(table.shape[1]) * elem_size(table);
  for (int64_t i = 0; i < ids.num_elements(); ++i)
    std::memcpy(out_bytes(a, 0) + static_cast<size_t>(i) * row,
                in_bytes(a, 0) + static_cast<size_t>(load_index(a.call.inputs[1], i)) * row, row);
  return {};
}

// dtable[v, :] = sum of dy[p, :] over the positions p with ids[p] == v, in ascending p. The positions are
// grouped by id with a counting sort (stable, so ascending within each id) rather than scattering into a
// [V, C] double buffer, which for a GPT vocabulary would be hundreds of megabytes.
Result<void> embedding_grad(const Args& a) {
  const TensorType &dy = a.in(0), &ids = a.in(1), &dtable = a.out(0);
  LMS_TRY_VOID(check_id_dtype(a, 1));
  if (dtable.rank() != 2 || dy.rank() != ids.rank() + 1 || dy.dtype != dtable.dtype ||
      Shape(dy.shape.begin(), dy.shape.end() - 1) != ids.shape || dy.shape.back() != dtable.shape[1])
    return fail("{} of dy {} and ids {} cannot produce {}", a.name(), to_string(dy), to_string(ids),
                to_string(dtable));
  if (a.c.attrs.has("vocab") && a.c.i("vocab") != dtable.shape[0])
    return fail("{} attribute 'vocab' = {} but the output is {}", a.name(), a.c.i("vocab"), to_string(dtable));
  const int64_t vocab = dtable.shape[0], width = dtable.shape[1], n = ids.num_elements();
  LMS_TRY_VOID(check_ids(a, 1, vocab));
  std::vector<int64_t> first(static_cast<size_t>(vocab) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) ++first[static_cast<size_t>(load_index(a.call.inputs[1], p)) + 1];
  for (size_t v = 1; v < first.size(); ++v) first[v] += first[v - 1];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t p = 0; p < n; ++p)
    order[static_cast<size_t>(next[static_cast<size_t>(load_index(a.call.inputs[1], p))]++)] = p;
  return with_float(a, dy.dtype, [&]<class T>() -> Result<void> {
    const T* pdy = a.in_data<T>(0);
    T* out = a.out_data<T>(0);
    std::vector<Acc> acc(static_cast<size_t>(width));
    for (int64_t v = 0; v < vocab; ++v) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = first[static_cast<size_t>(v)]; j < first[static_cast<size_t>(v) + 1]; ++j) {
        const T* row = pdy + order[static_cast<size_t>(j)] * width;
        for (int64_t c = 0; c < width; ++c) acc[static_cast<size_t>(c)] += static_cast<Acc>(row[c]);
      }
      for (int64_t c = 0; c < width; ++c) out[v * width + c] = static_cast<T>(acc[static_cast<size_t>(c)]);
    }
    return {};
  });
}

}  // namespace lms::reference
