// Pooling in the NC... layout: max_pool1d/2d/3d and avg_pool1d/2d/3d over windows of x[N,C,*sp] (PyTorch
// semantics: stride defaults to the kernel, padding to zero, padding may be at most half the kernel, and
// ceil_mode rounds the output size up, as ops/pool_window.h computes it), and global_avg_pool, which averages all
// spatial positions into [N,C]. The windowed ops share one shape rule, a template on the spatial rank. All are
// recomputable.
#include <fmt/format.h>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"
#include "lms/ops/pool_window.h"

namespace lms::ops {

namespace {

// One compare (max) or add (avg) per window element read; avg's final divide per output is not counted.
constexpr double kPoolFlopsPerWindowElement = 1;
// global_avg_pool: one add per input element.
constexpr double kGlobalPoolFlopsPerElement = 1;

// Reads int-list attribute `name`: empty means `fallback`; otherwise one entry per spatial dimension, each at
// least `min`.
Result<IntList> window_list(const OpCall& c, std::string_view name, int rank, int64_t min, IntList fallback) {
  IntList v = c.ints(name);
  if (v.empty() && !fallback.empty()) return fallback;
  if (static_cast<int>(v.size()) != rank)
    return fail("{} attribute '{}' = {} needs {} entries (one per spatial dimension), got {}", c.def.name, name,
                to_string(Attribute{v}), rank, v.size());
  for (int64_t e : v)
    if (e < min)
      return fail("{} attribute '{}' = {} has entry {} below the minimum {}", c.def.name, name,
                  to_string(Attribute{v}), e, min);
  return v;
}

template <int Rank>
Result<std::vector<TensorType>> pool_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (x.rank() != Rank + 2)
    return fail("{} input must have rank {} (N, C and {} spatial), got {}", c.def.name, Rank + 2, Rank,
                to_string(x));
  if (!is_float(x.dtype)) return fail("{} needs a floating-point input, got {}", c.def.name, to_string(x));
  IntList kernel = LMS_TRY(window_list(c, "kernel", Rank, 1, {}));
  IntList stride = LMS_TRY(window_list(c, "stride", Rank, 1, kernel));
  IntList pad = LMS_TRY(window_list(c, "pad", Rank, 0, IntList(Rank, 0)));
  Shape out = {x.shape[0], x.shape[1]};
  for (int i = 0; i < Rank; ++i) {
    // PyTorch's rule: a window must always overlap the unpadded input.
    if (pad[i] > kernel[i] / 2)
      return fail("{} pad {} along spatial dimension {} exceeds half the kernel {}", c.def.name, pad[i], i,
                  kernel[i]);
    int64_t in = x.shape[2 + i];
    int64_t span = in + 2 * pad[i] - kernel[i];
    if (span < 0)
      return fail("{} output size <= 0 along spatial dimension {}: input {} + 2*pad {} is smaller than kernel {} "
                  "(input {})",
                  c.def.name, i, in, pad[i], kernel[i], to_string(x));
    out.push_back(pooled_size(in, kernel[i], stride[i], pad[i], c.b("ceil_mode")));
  }
  return std::vector<TensorType>{TensorType{x.dtype, out}};
}

Result<std::vector<TensorType>> global_avg_pool_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (x.rank() < 3) return fail("global_avg_pool input must have rank >= 3 (N, C, spatial...), got {}", to_string(x));
  if (!is_float(x.dtype)) return fail("global_avg_pool needs a floating-point input, got {}", to_string(x));
  return std::vector<TensorType>{TensorType{x.dtype, {x.shape[0], x.shape[1]}}};
}

Cost pool_cost(const OpCall& c, std::span<const TensorType> outs) {
  double window = 1;
  for (int64_t k : c.ints("kernel")) window *= static_cast<double>(k);
  return Cost{kPoolFlopsPerWindowElement * window * static_cast<double>(outs[0].num_elements()),
              total_bytes(c.inputs), total_bytes(outs)};
}

Cost global_avg_pool_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kGlobalPoolFlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

template <int Rank>
void define_pool(OpDef& d, bool average, std::string_view doc) {
  d.inputs = {"x"};
  d.outputs = {"out"};
  d.attrs = {
      {"kernel", AttrKind::IntList, std::nullopt, "window size per spatial dimension"},
      {"stride", AttrKind::IntList, Attribute{IntList{}}, "step per spatial dimension; empty: equal to kernel"},
      {"pad", AttrKind::IntList, Attribute{IntList{}},
       "padding on both sides per spatial dimension, at most kernel/2; empty: zeros"},
      kCeilModeAttr,
  };
  if (average)
    d.attrs.push_back({"count_include_pad", AttrKind::Bool, Attribute{true},
                       "divide by the window's positions, padding included but not past it (else by the valid "
                       "elements)"});
  d.traits.recomputable = true;
  d.shape = pool_shape<Rank>;
  d.cost = pool_cost;
  d.grad = average ? autodiff::grad_avg_pool : autodiff::grad_max_pool;
  d.doc = doc;
}

}  // namespace

void define_pool_ops(OpTable& t) {
  define_pool<1>(t.define(Op::max_pool1d), false, "maximum over 1-D windows of x[N,C,L]; padding counts as -inf");
  define_pool<2>(t.define(Op::max_pool2d), false, "maximum over 2-D windows of x[N,C,H,W]; padding counts as -inf");
  define_pool<3>(t.define(Op::max_pool3d), false,
                 "maximum over 3-D windows of x[N,C,D,H,W]; padding counts as -inf");
  define_pool<1>(t.define(Op::avg_pool1d), true, "average over 1-D windows of x[N,C,L]");
  define_pool<2>(t.define(Op::avg_pool2d), true, "average over 2-D windows of x[N,C,H,W]");
  define_pool<3>(t.define(Op::avg_pool3d), true, "average over 3-D windows of x[N,C,D,H,W]");
  {
    OpDef& d = t.define(Op::global_avg_pool);
    d.inputs = {"x"};
    d.outputs = {"out"};
    d.traits.recomputable = true;
    d.shape = global_avg_pool_shape;
    d.cost = global_avg_pool_cost;
    d.grad = autodiff::grad_global_avg_pool;
    d.doc = "average over all spatial positions: x[N,C,*sp] -> [N,C]";
  }
}

}  // namespace lms::ops
