// Reductions and losses: mean and reduce_sum over a set of axes (all by default, optionally keeping reduced
// dimensions as size 1), and cross_entropy of class logits[N, C, *sp] against integer labels[N, *sp],
// averaged over every labelled position into an f32[] scalar (f64[] for f64 logits). All are recomputable: pure, and small outputs.
#include <algorithm>

#include <fmt/format.h>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// One add per input element; mean's divide per output element is negligible and not counted.
constexpr double kReduceFlopsPerElement = 1;
// cross_entropy per logit: a compare for the row max, subtract, exp, add to the row sum.
constexpr double kCrossEntropyFlopsPerLogit = 4;

// The reduced axes of `x`, non-negative and in order; empty `axes` means all of them.
Result<std::vector<bool>> reduced_axes(const OpCall& c, const TensorType& x) {
  IntList axes = c.ints("axes");
  std::vector<bool> reduced(x.rank(), axes.empty());
  for (int64_t a : axes) {
    int64_t r = a < 0 ? a + x.rank() : a;
    if (r < 0 || r >= x.rank())
      return fail("{} axis {} is out of range for {} (rank {})", c.def.name, a, to_string(x), x.rank());
    if (reduced[r])
      return fail("{} attribute 'axes' = {} names axis {} twice", c.def.name, to_string(Attribute{axes}), r);
    reduced[r] = true;
  }
  return reduced;
}

Result<std::vector<TensorType>> reduce_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  // An integer mean would have to round; reduce_sum of integers is exact and allowed.
  if (c.def.op == Op::mean && !is_float(x.dtype))
    return fail("mean needs a floating-point input, got {}", to_string(x));
  std::vector<bool> reduced = LMS_TRY(reduced_axes(c, x));
  bool keep = c.b("keepdims");
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) out.push_back(x.shape[d]);
    else if (keep) out.push_back(1);
  }
  return std::vector<TensorType>{TensorType{x.dtype, out}};
}

Cost reduce_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kReduceFlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

Result<std::vector<TensorType>> cross_entropy_shape(const OpCall& c) {
  const TensorType &logits = c.inputs[0], &labels = c.inputs[1];
  if (logits.rank() < 2 || !is_float(logits.dtype))
    return fail("cross_entropy logits must be floating-point [N, C, ...], got {}", to_string(logits));
  if (logits.shape[1] < 1) return fail("cross_entropy logits {} have no classes", to_string(logits));
  if (labels.dtype != DType::i32 && labels.dtype != DType::i64)
    return fail("cross_entropy labels must be i32 or i64, got {}", to_string(labels));
  // Labels are the logits' shape without the class axis 1.
  Shape expected = logits.shape;
  expected.erase(expected.begin() + 1);
  if (labels.shape != expected)
    return fail("cross_entropy labels {} must have shape {} for logits {} (the logits without axis 1)",
                to_string(labels), to_string(expected), to_string(logits));
  // The loss is f32 (accumulated in f32 for f16/bf16 logits), or f64 for f64 logits (gradient checks).
  return std::vector<TensorType>{TensorType{logits.dtype == DType::f64 ? DType::f64 : DType::f32, {}}};
}

Cost cross_entropy_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kCrossEntropyFlopsPerLogit * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

void define_reduce(OpDef& d, std::string_view doc) {
  d.inputs = {"x"};
  d.outputs = {"out"};
  d.attrs = {
      {"axes", AttrKind::IntList, Attribute{IntList{}},
       "axes to reduce (negative count from the end, no repeats); empty: all"},
      {"keepdims", AttrKind::Bool, Attribute{false}, "keep reduced axes as size 1"},
  };
  d.traits.recomputable = true;
  d.shape = reduce_shape;
  d.cost = reduce_cost;
  d.grad = autodiff::grad_reduce;
  d.doc = doc;
}

}  // namespace

void define_loss_ops(OpTable& t) {
  define_reduce(t.define(Op::mean), "arithmetic mean over the given axes");
  define_reduce(t.define(Op::reduce_sum), "sum over the given axes");
  {
    OpDef& d = t.define(Op::cross_entropy);
    d.inputs = {"logits", "labels"};
    d.outputs = {"loss"};
    d.traits.recomputable = true;
    d.shape = cross_entropy_shape;
    d.cost = cross_entropy_cost;
    d.grad = autodiff::grad_cross_entropy;
    d.doc = "mean over all N*prod(sp) positions of -log softmax(logits, axis 1)[label] -> f32[] (f64[] for f64)";
  }
}

}  // namespace lms::ops
