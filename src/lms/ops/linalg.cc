// Linear algebra and data movement: matmul (batched, optional transposes), reshape, transpose, concat, slice,
// softmax (optionally causal, for attention) and embedding (a row gather). Everything here is recomputable.
// Data movement does no arithmetic but still moves bytes, which is what its cost reports; slice and embedding
// read only the elements they gather, not their whole input (see Note [Gather bytes]).
#include <algorithm>

#include <fmt/format.h>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// softmax per element: subtract the row max, exp, add to the row sum, divide; the max is one more compare.
constexpr double kSoftmaxFlopsPerElement = 5;

Result<std::vector<TensorType>> matmul_shape(const OpCall& c) {
  const TensorType &a = c.inputs[0], &b = c.inputs[1];
  if (a.rank() < 2 || b.rank() < 2)
    return fail("matmul needs inputs of rank >= 2, got {} and {}", to_string(a), to_string(b));
  if (!is_float(a.dtype) || a.dtype != b.dtype)
    return fail("matmul needs floating-point inputs of one dtype, got {} and {}", to_string(a), to_string(b));
  bool ta = c.b("transpose_a"), tb = c.b("transpose_b");
  int ra = a.rank(), rb = b.rank();
  int64_t m = a.shape[ra - (ta ? 1 : 2)], ka = a.shape[ra - (ta ? 2 : 1)];
  int64_t kb = b.shape[rb - (tb ? 1 : 2)], n = b.shape[rb - (tb ? 2 : 1)];
  Shape batch(a.shape.begin(), a.shape.end() - 2);
  if (rb != 2 && Shape(b.shape.begin(), b.shape.end() - 2) != batch)
    return fail("matmul b {} must be rank 2 or have a's batch dimensions {} (a {})", to_string(b), to_string(batch),
                to_string(a));
  if (ka != kb)
    return fail("matmul inner dimensions differ: a {} has K={}, b {} has K={} (transpose_a={}, transpose_b={})",
                to_string(a), ka, to_string(b), kb, ta, tb);
  batch.push_back(m);
  batch.push_back(n);
  return std::vector<TensorType>{TensorType{a.dtype, batch}};
}

// 2 * batch * M * N * K: one multiply-add per output element per K.
Cost matmul_cost(const OpCall& c, std::span<const TensorType> outs) {
  const TensorType& a = c.inputs[0];
  int64_t k = a.shape[a.rank() - (c.b("transpose_a") ? 2 : 1)];
  double flops = 2.0 * static_cast<double>(outs[0].num_elements()) * static_cast<double>(k);
  return Cost{flops, total_bytes(c.inputs), total_bytes(outs)};
}

Result<std::vector<TensorType>> reshape_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  IntList shape = c.ints("shape");
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0)
        return fail("reshape attribute 'shape' = {} has more than one -1", to_string(Attribute{shape}));
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return fail("reshape attribute 'shape' = {} has negative size {}", to_string(Attribute{shape}), shape[i]);
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.num_elements() % known != 0)
      return fail("reshape cannot infer the -1 in {}: {} has {} elements, not a multiple of {}",
                  to_string(Attribute{shape}), to_string(x), x.num_elements(), known);
    shape[inferred] = x.num_elements() / known;
  } else if (known != x.num_elements()) {
    return fail("reshape to {} needs {} elements but {} has {}", to_string(Attribute{shape}), known, to_string(x),
                x.num_elements());
  }
  return std::vector<TensorType>{TensorType{x.dtype, shape}};
}

Result<std::vector<TensorType>> transpose_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  IntList perm = c.ints("perm");
  if (static_cast<int>(perm.size()) != x.rank())
    return fail("transpose perm {} has {} entries for {} of rank {}", to_string(Attribute{perm}), perm.size(),
                to_string(x), x.rank());
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p])
      return fail("transpose perm {} is not a permutation of 0..{} (entry {})", to_string(Attribute{perm}),
                  x.rank() - 1, p);
    seen[p] = true;
    out.push_back(x.shape[p]);
  }
  return std::vector<TensorType>{TensorType{x.dtype, out}};
}

Result<std::vector<TensorType>> concat_shape(const OpCall& c) {
  const TensorType& first = c.inputs[0];
  int axis = LMS_TRY(resolve_axis(c, "axis", first));
  TensorType out = first;
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    const TensorType& t = c.inputs[i];
    bool same = t.dtype == first.dtype && t.rank() == first.rank();
    for (int d = 0; same && d < t.rank(); ++d) same = d == axis || t.shape[d] == first.shape[d];
    if (!same)
      return fail("concat input {} is {} but input 0 is {}: dtypes and all dimensions but axis {} must match", i,
                  to_string(t), to_string(first), axis);
    out.shape[axis] += t.shape[axis];
  }
  return std::vector<TensorType>{out};
}

Result<std::vector<TensorType>> slice_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  int axis = LMS_TRY(resolve_axis(c, "axis", x));
  int64_t start = c.i("start"), end = c.i("end"), dim = x.shape[axis];
  if (!(0 <= start && start < end && end <= dim))
    return fail("slice [{}, {}) along axis {} of {} needs 0 <= start < end <= {}", start, end, axis, to_string(x),
                dim);
  TensorType out = x;
  out.shape[axis] = end - start;
  return std::vector<TensorType>{out};
}

Result<std::vector<TensorType>> softmax_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (!is_float(x.dtype)) return fail("softmax needs a floating-point input, got {}", to_string(x));
  int axis = LMS_TRY(resolve_axis(c, "axis", x));
  if (c.b("causal")) {
    if (x.rank() < 2 || axis != x.rank() - 1)
      return fail("causal softmax needs rank >= 2 and axis the last dimension, got axis {} of {}", c.i("axis"),
                  to_string(x));
    int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1], offset = c.i("causal_offset");
    if (offset < 0) return fail("causal softmax causal_offset must be >= 0, got {}", offset);
    if (rows + offset > cols)
      return fail("causal softmax of {} has {} rows{} > {} columns; it needs rows + causal_offset <= columns",
                  to_string(x), rows, offset > 0 ? fmt::format(" from row {}", offset) : "", cols);
  } else if (c.i("causal_offset") != 0) {
    return fail("softmax causal_offset {} needs causal = true", c.i("causal_offset"));
  }
  return std::vector<TensorType>{x};
}

Cost softmax_cost(const OpCall& c, std::span<const TensorType> o) {
  return elementwise_cost(c, o, kSoftmaxFlopsPerElement);
}

Result<std::vector<TensorType>> embedding_shape(const OpCall& c) {
  const TensorType &table = c.inputs[0], &ids = c.inputs[1];
  if (table.rank() != 2 || !is_float(table.dtype))
    return fail("embedding table must be a floating-point [V, C] matrix, got {}", to_string(table));
  if (ids.dtype != DType::i32 && ids.dtype != DType::i64)
    return fail("embedding ids must be i32 or i64, got {}", to_string(ids));
  Shape out = ids.shape;
  out.push_back(table.shape[1]);
  return std::vector<TensorType>{TensorType{table.dtype, out}};
}

// Note [Gather bytes]: slice and embedding read only the elements they copy out (plus embedding's ids), so
// their bytes_read is that, not their whole input: a GPT embedding table is far larger than the rows one
// batch looks up, and a roofline charging the whole table would be badly wrong.
Cost slice_cost(const OpCall&, std::span<const TensorType> outs) {
  return Cost{0, total_bytes(outs), total_bytes(outs)};
}

Cost embedding_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{0, c.inputs[1].bytes() + total_bytes(outs), total_bytes(outs)};
}

// reshape too: it is not a copy semantically, and where the memory planner makes it a view (Note [Views]) the
// time simulator charges nothing; otherwise its output has a buffer of its own that a backend writes.
Cost movement_cost(const OpCall& c, std::span<const TensorType> outs) { return elementwise_cost(c, outs, 0); }

OpDef& basic(OpDef& d, std::vector<std::string_view> inputs, std::string_view doc) {
  d.inputs = std::move(inputs);
  d.outputs = {"out"};
  d.traits.recomputable = true;
  d.doc = doc;
  return d;
}

}  // namespace

void define_linalg_ops(OpTable& t) {
  {
    OpDef& d = basic(t.define(Op::matmul), {"a", "b"}, "a[..., M, K] @ b[..., K, N] (b rank 2 or a's batch dims)");
    d.attrs = {
        {"transpose_a", AttrKind::Bool, Attribute{false}, "use a's last two dimensions swapped"},
        {"transpose_b", AttrKind::Bool, Attribute{false}, "use b's last two dimensions swapped"},
    };
    d.shape = matmul_shape;
    d.cost = matmul_cost;
    d.grad = autodiff::grad_matmul;
  }
  {
    OpDef& d = basic(t.define(Op::reshape), {"x"}, "the same elements in row-major order with a new shape");
    d.attrs = {{"shape", AttrKind::IntList, std::nullopt, "the new shape; one entry may be -1 (inferred)"}};
    d.reusable_input = 0;
    d.view_input = 0;
    d.shape = reshape_shape;
    d.cost = movement_cost;
    d.grad = autodiff::grad_reshape;
  }
  {
    OpDef& d = basic(t.define(Op::transpose), {"x"}, "permutes dimensions: out.shape[i] = x.shape[perm[i]]");
    d.attrs = {{"perm", AttrKind::IntList, std::nullopt, "a permutation of 0..rank-1"}};
    d.shape = transpose_shape;
    d.cost = movement_cost;
    d.grad = autodiff::grad_transpose;
  }
  {
    OpDef& d = basic(t.define(Op::concat), {"x"}, "joins the inputs along one axis");
    d.variadic = true;
    d.attrs = {{"axis", AttrKind::Int, std::nullopt, "the axis to join along; negative counts from the end"}};
    d.shape = concat_shape;
    d.cost = movement_cost;
    d.grad = autodiff::grad_concat;
  }
  {
    OpDef& d = basic(t.define(Op::slice), {"x"}, "the elements start..end-1 along one axis");
    d.attrs = {
        {"axis", AttrKind::Int, std::nullopt, "the axis to slice; negative counts from the end"},
        {"start", AttrKind::Int, std::nullopt, "first index kept, >= 0"},
        {"end", AttrKind::Int, std::nullopt, "one past the last index kept, <= the dimension"},
    };
    d.shape = slice_shape;
    d.cost = slice_cost;
    d.grad = autodiff::grad_slice;
  }
  {
    OpDef& d = basic(t.define(Op::softmax), {"x"}, "exp(x) / sum(exp(x)) along an axis, optionally causal");
    d.attrs = {
        {"axis", AttrKind::Int, Attribute{int64_t{-1}}, "the axis normalized over; negative counts from the end"},
        {"causal", AttrKind::Bool, Attribute{false},
         "mask [..., i, j] with j > i (as -inf); needs axis last, rank >= 2, rows <= columns"},
        {"causal_offset", AttrKind::Int, Attribute{int64_t{0}},
         "causal: mask j > i + causal_offset instead (rows [offset, offset + rows) of a larger causal matrix); "
         "needs rows + offset <= columns"},
    };
    d.reusable_input = 0;
    d.shape = softmax_shape;
    d.cost = softmax_cost;
    d.grad = autodiff::grad_softmax;
  }
  {
    OpDef& d = basic(t.define(Op::embedding), {"table", "ids"}, "rows of table[V, C] gathered by ids[...]: [..., C]");
    d.shape = embedding_shape;
    d.cost = embedding_cost;
    d.grad = autodiff::grad_embedding;
  }
}

}  // namespace lms::ops
