// Normalization: batch_norm (training mode: statistics of the batch, per channel of NC...) and layer_norm
// (statistics over the last dimension). Both return, besides the normalized output, the mean and inverse
// standard deviation they computed, because the backward pass needs them and recomputing them would read x
// again. Both are recomputable.
#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// Per element of x: the mean (1 add), the variance (subtract, multiply, add: 3), normalizing (subtract,
// multiply: 2) and the affine gamma*x+beta (1 multiply-add: 2). The per-channel or per-row work (sqrt,
// division) is negligible next to it and not counted.
constexpr double kNormFlopsPerElement = 8;

// Checks gamma and beta: both must be `dtype`[channels].
Result<void> check_affine(const OpCall& c, int64_t channels, std::string_view what) {
  const TensorType& x = c.inputs[0];
  for (int i = 1; i <= 2; ++i) {
    const TensorType& p = c.inputs[i];
    if (p.rank() != 1 || p.shape[0] != channels || p.dtype != x.dtype)
      return fail("{} {} must be {}[{}] ({} of {}), got {}", c.def.name, c.def.inputs[i], dtype_name(x.dtype),
                  channels, what, to_string(x), to_string(p));
  }
  return {};
}

Result<void> check_eps(const OpCall& c) {
  if (!(c.f("eps") > 0)) return fail("{} attribute 'eps' = {} must be positive", c.def.name, c.f("eps"));
  return {};
}

Result<std::vector<TensorType>> batch_norm_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (x.rank() < 2) return fail("batch_norm input must have rank >= 2 (N, C, ...), got {}", to_string(x));
  if (!is_float(x.dtype)) return fail("batch_norm needs a floating-point input, got {}", to_string(x));
  LMS_TRY_VOID(check_affine(c, x.shape[1], "the channels"));
  LMS_TRY_VOID(check_eps(c));
  double momentum = c.f("momentum");
  if (!(momentum >= 0 && momentum <= 1))
    return fail("batch_norm attribute 'momentum' = {} must be in [0, 1]", momentum);
  TensorType stats{x.dtype, {x.shape[1]}};
  return std::vector<TensorType>{x, stats, stats};
}

Result<std::vector<TensorType>> layer_norm_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (x.rank() < 1) return fail("layer_norm input must have rank >= 1, got {}", to_string(x));
  if (!is_float(x.dtype)) return fail("layer_norm needs a floating-point input, got {}", to_string(x));
  LMS_TRY_VOID(check_affine(c, x.shape.back(), "the last dimension"));
  LMS_TRY_VOID(check_eps(c));
  TensorType stats{x.dtype, Shape(x.shape.begin(), x.shape.end() - 1)};
  return std::vector<TensorType>{x, stats, stats};
}

Cost norm_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kNormFlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

}  // namespace

void define_norm_ops(OpTable& t) {
  {
    OpDef& d = t.define(Op::batch_norm);
    d.inputs = {"x", "gamma", "beta"};
    d.outputs = {"out", "mean", "invstd"};
    d.attrs = {
        {"eps", AttrKind::Float, Attribute{1e-5}, "added to the variance before the square root"},
        {"momentum", AttrKind::Float, Attribute{0.1},
         "weight of the batch statistics when updating running statistics, in [0, 1]"},
    };
    d.traits.recomputable = true;
    d.shape = batch_norm_shape;
    d.cost = norm_cost;
    d.grad = autodiff::grad_batch_norm;
    d.doc = "training-mode batch norm over N and spatial dims per channel; also returns mean[C] and invstd[C]";
  }
  {
    OpDef& d = t.define(Op::layer_norm);
    d.inputs = {"x", "gamma", "beta"};
    d.outputs = {"out", "mean", "invstd"};
    d.attrs = {{"eps", AttrKind::Float, Attribute{1e-5}, "added to the variance before the square root"}};
    d.traits.recomputable = true;
    d.shape = layer_norm_shape;
    d.cost = norm_cost;
    d.grad = autodiff::grad_layer_norm;
    d.doc = "layer norm over the last dimension; also returns mean and invstd of shape x.shape[:-1]";
  }
}

}  // namespace lms::ops
