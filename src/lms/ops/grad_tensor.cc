// The elementwise, data-movement and loss gradient ops autodiff emits: relu_grad, gelu_grad, silu_grad, hardswish_grad,
// sigmoid_grad, tanh_grad, clamp_grad, sqrt_grad, reciprocal_grad, log_grad, softplus_grad, softmax_grad,
// embedding_grad, cross_entropy_grad, broadcast_to and sum_to (broadcasting and its inverse), slice_grad, and batch
// norm's running-statistics update bn_running_update (in place on two `state` values, the only gradient-family op that
// is not recomputable). Semantics follow PyTorch's autograd (docs/autodiff.md, "Gradient ops"). Structural gradients
// (convolution, normalization, pooling) are in grad.cc.
#include <algorithm>

#include <fmt/format.h>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {

// relu_grad: a compare and a select per element.
constexpr double kReluGradFlopsPerElement = 1;
// gelu_grad: Phi(x) (erf) and phi(x) (exp) dominate; with the multiplies, about twice gelu's count.
constexpr double kGeluGradFlopsPerElement = 16;
// silu_grad: a sigmoid and dy * s * (1 + x (1 - s)).
constexpr double kSiluGradFlopsPerElement = 8;
// hardswish_grad: two compares and dy * (x / 3 + 1/2).
constexpr double kHardswishGradFlopsPerElement = 4;
// sigmoid_grad dy*y*(1-y), tanh_grad dy*(1-y*y), sqrt_grad dy/(2y), reciprocal_grad -dy*y*y: about three
// flops from the forward's output (log_grad's dy/x from its input, the same).
constexpr double kFromOutputGradFlopsPerElement = 3;
// softmax_grad: dy*y, its row sum, the subtraction and the final multiply.
constexpr double kSoftmaxGradFlopsPerElement = 4;
// cross_entropy_grad per logit: the row max, exp, row sum, divide, subtract the one-hot, scale.
constexpr double kCrossEntropyGradFlopsPerLogit = 6;
// sum_to and embedding_grad: one add per input element.
constexpr double kAddFlopsPerElement = 1;
// bn_running_update per channel: the running mean's multiply-add (2) and the variance from invstd (square,
// reciprocal, subtract eps, the unbiased factor: 4) plus its multiply-add (2).
constexpr double kBnRunningUpdateFlopsPerChannel = 8;

// (dy, t): two floating-point tensors of one type; the gradient has that type.
Result<std::vector<TensorType>> same_type_pair(const OpCall& c) {
  const TensorType &dy = c.inputs[0], &t = c.inputs[1];
  if (!is_float(dy.dtype) || dy != t)
    return fail("{} needs floating-point dy and {} of one type, got {} and {}", c.def.name, c.def.inputs[1],
                to_string(dy), to_string(t));
  return std::vector<TensorType>{dy};
}

Result<std::vector<TensorType>> gelu_grad_shape(const OpCall& c) {
  LMS_TRY_VOID(gelu_approximation(c));
  return same_type_pair(c);
}

Result<std::vector<TensorType>> clamp_grad_shape(const OpCall& c) {
  LMS_TRY_VOID(clamp_bounds(c));
  return same_type_pair(c);
}

Result<std::vector<TensorType>> softmax_grad_shape(const OpCall& c) {
  auto out = LMS_TRY(same_type_pair(c));
  LMS_TRY(resolve_axis(c, "axis", c.inputs[0]));
  return out;
}

Result<std::vector<TensorType>> embedding_grad_shape(const OpCall& c) {
  const TensorType &dy = c.inputs[0], &ids = c.inputs[1];
  if (ids.dtype != DType::i32 && ids.dtype != DType::i64)
    return fail("embedding_grad ids must be i32 or i64, got {}", to_string(ids));
  bool rows_match = dy.rank() == ids.rank() + 1 && std::equal(ids.shape.begin(), ids.shape.end(), dy.shape.begin());
  if (!is_float(dy.dtype) || !rows_match)
    return fail("embedding_grad dy must be floating-point with shape ids.shape + [C] = {} + [C], got {}",
                to_string(ids.shape), to_string(dy));
  int64_t vocab = c.i("vocab");
  if (vocab < 1) return fail("embedding_grad attribute 'vocab' = {} must be at least 1", vocab);
  return std::vector<TensorType>{TensorType{dy.dtype, {vocab, dy.shape.back()}}};
}

Result<std::vector<TensorType>> cross_entropy_grad_shape(const OpCall& c) {
  const TensorType &dloss = c.inputs[0], &logits = c.inputs[1], &labels = c.inputs[2];
  // The forward rule checks logits and labels and says what dtype the loss (and so dloss) has.
  auto loss = infer_types(Op::cross_entropy, std::vector<TensorType>{logits, labels}, Attributes{});
  if (!loss) return fail("cross_entropy_grad: {}", loss.error().what);
  if (dloss != (*loss)[0])
    return fail("cross_entropy_grad dloss must be the loss's type {} for logits {}, got {}", to_string((*loss)[0]),
                to_string(logits), to_string(dloss));
  return std::vector<TensorType>{logits};
}

Result<Shape> shape_attr(const OpCall& c) {
  IntList shape = c.ints("shape");
  for (int64_t d : shape)
    if (d < 0) return fail("{} attribute 'shape' = {} has negative size {}", c.def.name, to_string(shape), d);
  return shape;
}

// Whether `from` broadcasts to `to` (NumPy rules, right-aligned; each dimension equal or 1 in `from`).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

Result<std::vector<TensorType>> broadcast_to_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  Shape shape = LMS_TRY(shape_attr(c));
  if (!broadcasts_to(x.shape, shape))
    return fail("broadcast_to cannot broadcast {} to {} (dims are right-aligned; each must equal the target or be 1)",
                to_string(x), to_string(shape));
  return std::vector<TensorType>{TensorType{x.dtype, shape}};
}

Result<std::vector<TensorType>> sum_to_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  Shape shape = LMS_TRY(shape_attr(c));
  if (!broadcasts_to(shape, x.shape))
    return fail("sum_to target {} does not broadcast to the input {}, so {} cannot be summed down to it",
                to_string(shape), to_string(x), to_string(x));
  return std::vector<TensorType>{TensorType{x.dtype, shape}};
}

Result<std::vector<TensorType>> slice_grad_shape(const OpCall& c) {
  const TensorType& dy = c.inputs[0];
  int axis = LMS_TRY(resolve_axis(c, "axis", dy));
  int64_t start = c.i("start"), end = c.i("end"), dim = c.i("dim");
  if (!(0 <= start && start < end && end <= dim))
    return fail("slice_grad [{}, {}) needs 0 <= start < end <= dim = {}", start, end, dim);
  if (dy.shape[axis] != end - start)
    return fail("slice_grad dy {} has {} along axis {}, but [{}, {}) has {}", to_string(dy), dy.shape[axis], axis,
                start, end, end - start);
  TensorType out = dy;
  out.shape[axis] = dim;
  return std::vector<TensorType>{out};
}

Result<std::vector<TensorType>> bn_running_update_shape(const OpCall& c) {
  const TensorType& rm = c.inputs[0];
  if (rm.rank() != 1 || !is_float(rm.dtype))
    return fail("bn_running_update running_mean must be a floating-point vector [C], got {}", to_string(rm));
  for (size_t i = 1; i < c.inputs.size(); ++i)
    if (c.inputs[i] != rm)
      return fail("bn_running_update {} is {} but running_mean is {}; all four must have one type", c.def.inputs[i],
                  to_string(c.inputs[i]), to_string(rm));
  double momentum = c.f("momentum"), eps = c.f("eps");
  if (!(momentum >= 0 && momentum <= 1))
    return fail("bn_running_update attribute 'momentum' = {} must be in [0, 1]", momentum);
  if (!(eps > 0)) return fail("bn_running_update attribute 'eps' = {} must be positive", eps);
  // The unbiased variance divides by count - 1 (PyTorch refuses training batch norm on one value per channel).
  if (c.i("count") < 2)
    return fail("bn_running_update attribute 'count' = {} must be at least 2 (values per channel in the batch)",
                c.i("count"));
  return std::vector<TensorType>{rm, rm};
}

template <const double& FlopsPerElement>
Cost per_input_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{FlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

template <const double& FlopsPerElement>
Cost per_output_cost(const OpCall& c, std::span<const TensorType> outs) {
  return elementwise_cost(c, outs, FlopsPerElement);
}

// broadcast_to and slice_grad only move bytes (slice_grad also zero-fills the rest of its output).
Cost movement_cost(const OpCall& c, std::span<const TensorType> outs) { return elementwise_cost(c, outs, 0); }

// embedding_grad zero-fills the table gradient and adds each dy row into it: it reads dy and ids.
Cost embedding_grad_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kAddFlopsPerElement * static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

Cost cross_entropy_grad_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kCrossEntropyGradFlopsPerLogit * static_cast<double>(c.inputs[1].num_elements()),
              total_bytes(c.inputs), total_bytes(outs)};
}

OpDef& grad_op(OpDef& d, std::vector<std::string_view> inputs, std::string_view doc) {
  d.inputs = std::move(inputs);
  d.outputs = {"dx"};
  d.traits.recomputable = true;
  d.doc = doc;
  return d;
}

// A pointwise gradient (dy, t) -> dx of dy's type, `t` the forward's output ("y") or input ("x").
void pointwise_grad(OpDef& d, std::string_view t, Cost (*cost)(const OpCall&, std::span<const TensorType>),
                    std::string_view doc) {
  grad_op(d, {"dy", t}, doc);
  d.reusable_input = 0;
  d.shape = same_type_pair;
  d.cost = cost;
}

}  // namespace

void define_grad_tensor_ops(OpTable& t) {
  pointwise_grad(t.define(Op::relu_grad), "y", per_output_cost<kReluGradFlopsPerElement>,
                 "gradient of relu from its output: dy where y > 0, else 0");
  {
    OpDef& d = grad_op(t.define(Op::gelu_grad), {"dy", "x"},
                       "gradient of gelu from its input: dy * (Phi(x) + x*phi(x)), or of the tanh form");
    d.attrs = {kGeluApproximateAttr};
    d.reusable_input = 0;  // dy
    d.shape = gelu_grad_shape;
    d.cost = per_output_cost<kGeluGradFlopsPerElement>;
  }
  pointwise_grad(t.define(Op::silu_grad), "x", per_output_cost<kSiluGradFlopsPerElement>,
                 "gradient of silu from its input: dy * s * (1 + x * (1 - s)), s = sigmoid(x)");
  pointwise_grad(t.define(Op::hardswish_grad), "x", per_output_cost<kHardswishGradFlopsPerElement>,
                 "gradient of hardswish from its input, PyTorch's: 0 for x < -3, dy * (x / 3 + 1/2) for -3 <= x <= 3, "
                 "dy above");
  pointwise_grad(t.define(Op::sigmoid_grad), "y", per_output_cost<kFromOutputGradFlopsPerElement>,
                 "gradient of sigmoid from its output: dy * y * (1 - y)");
  pointwise_grad(t.define(Op::tanh_grad), "y", per_output_cost<kFromOutputGradFlopsPerElement>,
                 "gradient of tanh from its output: dy * (1 - y*y)");
  pointwise_grad(t.define(Op::sqrt_grad), "y", per_output_cost<kFromOutputGradFlopsPerElement>,
                 "gradient of sqrt from its output: dy / (2 y)");
  pointwise_grad(t.define(Op::reciprocal_grad), "y", per_output_cost<kFromOutputGradFlopsPerElement>,
                 "gradient of 1/x from its output: -dy * y * y");
  pointwise_grad(t.define(Op::log_grad), "x", per_output_cost<kFromOutputGradFlopsPerElement>,
                 "gradient of log from its input: dy / x");
  pointwise_grad(t.define(Op::softplus_grad), "x", per_output_cost<kSiluGradFlopsPerElement>,
                 "gradient of softplus from its input: dy * sigmoid(x), dy above 20 (PyTorch's)");
  {
    OpDef& d = grad_op(t.define(Op::clamp_grad), {"dy", "x"},
                       "gradient of clamp from its input: dy where min < x < max, else 0 (as hardtanh and relu6)");
    d.attrs = {kClampMinAttr, kClampMaxAttr};
    d.reusable_input = 0;  // dy
    d.shape = clamp_grad_shape;
    d.cost = per_output_cost<kReluGradFlopsPerElement>;
  }
  {
    OpDef& d = grad_op(t.define(Op::softmax_grad), {"dy", "y"},
                       "gradient of softmax from its output: y * (dy - sum(dy*y, axis)); causal masks give y = 0");
    d.attrs = {{"axis", AttrKind::Int, std::nullopt, "the forward's axis; negative counts from the end"}};
    d.reusable_input = 0;  // dy
    d.shape = softmax_grad_shape;
    d.cost = per_output_cost<kSoftmaxGradFlopsPerElement>;
  }
  {
    OpDef& d = grad_op(t.define(Op::embedding_grad), {"dy", "ids"},
                       "gradient of embedding wrt its table: dy rows summed into [vocab, C] at their ids");
    d.outputs = {"dtable"};
    d.attrs = {{"vocab", AttrKind::Int, std::nullopt, "rows of the table (the forward's V)"}};
    d.shape = embedding_grad_shape;
    d.cost = embedding_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::cross_entropy_grad), {"dloss", "logits", "labels"},
                       "gradient of cross_entropy: dloss * (softmax(logits, 1) - onehot(labels)) / (N*prod(sp))");
    d.outputs = {"dlogits"};
    d.reusable_input = 1;  // logits
    d.shape = cross_entropy_grad_shape;
    d.cost = cross_entropy_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::broadcast_to), {"x"}, "x broadcast to `shape` (NumPy rules, right-aligned)");
    d.outputs = {"out"};
    d.attrs = {{"shape", AttrKind::IntList, std::nullopt, "the target shape; x's shape must broadcast to it"}};
    d.shape = broadcast_to_shape;
    d.cost = movement_cost;
    d.grad = autodiff::grad_broadcast_to;
  }
  {
    OpDef& d = grad_op(t.define(Op::sum_to), {"x"}, "x summed down to `shape` (the inverse of broadcast_to)");
    d.outputs = {"out"};
    d.attrs = {{"shape", AttrKind::IntList, std::nullopt, "the target shape; it must broadcast to x's shape"}};
    d.shape = sum_to_shape;
    d.cost = per_input_cost<kAddFlopsPerElement>;
    d.grad = autodiff::grad_sum_to;
  }
  {
    OpDef& d = grad_op(t.define(Op::slice_grad), {"dy"},
                       "gradient of slice: dy placed at [start, end) along axis of zeros of size dim");
    d.attrs = {
        {"axis", AttrKind::Int, std::nullopt, "the forward's axis; negative counts from the end"},
        {"start", AttrKind::Int, std::nullopt, "the forward's start"},
        {"end", AttrKind::Int, std::nullopt, "the forward's end"},
        {"dim", AttrKind::Int, std::nullopt, "the size of the forward's input along axis"},
    };
    d.shape = slice_grad_shape;
    d.cost = movement_cost;
  }
  {
    OpDef& d = t.define(Op::bn_running_update);
    d.inputs = {"running_mean", "running_var", "mean", "invstd"};
    d.outputs = {"running_mean_new", "running_var_new"};
    d.aliases = {0, 1};
    d.traits.in_place = true;
    d.traits.side_effecting = true;
    d.attrs = {
        {"momentum", AttrKind::Float, Attribute{0.1}, "weight of the batch statistics, in [0, 1]"},
        {"eps", AttrKind::Float, Attribute{1e-5}, "the forward's eps, removed from 1/invstd^2 to get the variance"},
        {"count", AttrKind::Int, std::nullopt, "values per channel in the batch (N*prod(spatial)), >= 2"},
    };
    d.shape = bn_running_update_shape;
    d.cost = per_input_cost<kBnRunningUpdateFlopsPerChannel>;
    d.doc = "rm = (1-m)*rm + m*mean; rv = (1-m)*rv + m*var*count/(count-1), var = 1/invstd^2 - eps (in place)";
  }
}

}  // namespace lms::ops
