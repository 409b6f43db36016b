// Elementwise ops: relu, gelu (exact or tanh-approximated), silu, hardswish, sigmoid, tanh, clamp, sqrt, reciprocal,
// exp, log, softplus, dropout, add and mul (with NumPy broadcasting), scale by a constant, bias_add along an axis. All
// are recomputable: cheap, pure, and their inputs are usually small to keep. Dropout is pure too: its mask is a
// function of its key input, a state value the training graph advances once per step (ops/dropout_mask.h).
#include <algorithm>

#include "lms/autodiff/rules.h"
#include "lms/ops/op_table.h"

namespace lms::ops {

namespace {
Result<std::vector<TensorType>> unary(const OpCall& c) {
  if (!is_float(c.inputs[0].dtype))
    return fail("'{}' needs a floating-point input, got {}", c.def.name, to_string(c.inputs[0]));
  return std::vector<TensorType>{c.inputs[0]};
}

// NumPy broadcasting: shapes are aligned at the right; each pair of dimensions is equal or one of them is 1.
Result<std::vector<TensorType>> broadcast(const OpCall& c) {
  const TensorType &a = c.inputs[0], &b = c.inputs[1];
  if (a.dtype != b.dtype)
    return fail("'{}' inputs differ in dtype: {} and {}", c.def.name, to_string(a), to_string(b));
  size_t r = std::max(a.shape.size(), b.shape.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.shape.size() ? 1 : a.shape[i - (r - a.shape.size())];
    int64_t db = i < r - b.shape.size() ? 1 : b.shape[i - (r - b.shape.size())];
    if (da != db && da != 1 && db != 1)
      return fail("'{}' cannot broadcast {} with {} (dimension {} is {} vs {})", c.def.name, to_string(a),
                  to_string(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return std::vector<TensorType>{TensorType{a.dtype, out}};
}

Result<std::vector<TensorType>> bias_add(const OpCall& c) {
  const TensorType &x = c.inputs[0], &b = c.inputs[1];
  int64_t axis = c.i("axis");
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank())
    return fail("bias_add axis {} is out of range for {}", c.i("axis"), to_string(x));
  if (b.rank() != 1 || b.shape[0] != x.shape[axis] || b.dtype != x.dtype)
    return fail("bias_add bias must be {}[{}] for {} along axis {}, got {}", dtype_name(x.dtype), x.shape[axis],
                to_string(x), axis, to_string(b));
  return std::vector<TensorType>{x};
}

Result<std::vector<TensorType>> clamp_shape(const OpCall& c) {
  LMS_TRY_VOID(clamp_bounds(c));
  return unary(c);
}

// dropout: p in [0, 1) (p = 1 would scale by infinity) and the key an i64 scalar.
Result<std::vector<TensorType>> dropout_shape(const OpCall& c) {
  const double p = c.f("p");
  if (!(p >= 0 && p < 1)) return fail("dropout p = {} must be in [0, 1)", p);
  if (c.inputs[1] != TensorType{DType::i64, {}})
    return fail("dropout key must be i64[] (a state value advanced every step), got {}", to_string(c.inputs[1]));
  return unary(c);
}

Result<std::vector<TensorType>> gelu_shape(const OpCall& c) {
  LMS_TRY_VOID(gelu_approximation(c));
  return unary(c);
}

// Flops per output element: 1 for the arithmetic ops; gelu (erf or tanh based), sigmoid (an exp, an add and a
// divide) and tanh (two exps' worth) count a handful.
constexpr double kArithmeticFlopsPerElement = 1;
constexpr double kGeluFlopsPerElement = 8;
constexpr double kSigmoidFlopsPerElement = 4;
constexpr double kSiluFlopsPerElement = 5;  // sigmoid's and a multiply
constexpr double kHardswishFlopsPerElement = 4;  // an add, a clamp, a multiply and a divide
constexpr double kTanhFlopsPerElement = 6;
constexpr double kDivideFlopsPerElement = 4;  // sqrt and reciprocal: a divide's worth
constexpr double kExpFlopsPerElement = 4;     // exp and log: as sigmoid's exp
template <double FlopsPerElement>
Cost cost(const OpCall& c, std::span<const TensorType> o) {
  return elementwise_cost(c, o, FlopsPerElement);
}
constexpr auto cost1 = cost<kArithmeticFlopsPerElement>;

void elementwise(OpDef& d, std::vector<std::string_view> inputs, Result<std::vector<TensorType>> (*shape)(const OpCall&),
                 Cost (*cost)(const OpCall&, std::span<const TensorType>), GradFn grad, std::string_view doc) {
  d.inputs = std::move(inputs);
  d.outputs = {"out"};
  d.traits.recomputable = true;
  d.reusable_input = 0;
  d.shape = shape;
  d.cost = cost;
  d.grad = grad;
  d.doc = doc;
}
}  // namespace

void define_elementwise_ops(OpTable& t) {
  elementwise(t.define(Op::relu), {"x"}, unary, cost1, autodiff::grad_relu, "max(x, 0)");
  {
    OpDef& d = t.define(Op::gelu);
    elementwise(d, {"x"}, gelu_shape, cost<kGeluFlopsPerElement>, autodiff::grad_gelu,
                "x * Phi(x), exact (erf) or PyTorch's tanh approximation");
    d.attrs = {kGeluApproximateAttr};
  }
  elementwise(t.define(Op::silu), {"x"}, unary, cost<kSiluFlopsPerElement>, autodiff::grad_silu,
              "x * sigmoid(x) = x / (1 + exp(-x)) (swish, PyTorch's silu)");
  elementwise(t.define(Op::hardswish), {"x"}, unary, cost<kHardswishFlopsPerElement>, autodiff::grad_hardswish,
              "x * clamp(x + 3, 0, 6) / 6 (PyTorch's hardswish, ONNX's HardSwish)");
  elementwise(t.define(Op::sigmoid), {"x"}, unary, cost<kSigmoidFlopsPerElement>, autodiff::grad_sigmoid,
              "1 / (1 + exp(-x))");
  elementwise(t.define(Op::tanh), {"x"}, unary, cost<kTanhFlopsPerElement>, autodiff::grad_tanh, "tanh(x)");
  elementwise(t.define(Op::sqrt), {"x"}, unary, cost<kDivideFlopsPerElement>, autodiff::grad_sqrt,
              "sqrt(x); NaN for x < 0");
  elementwise(t.define(Op::exp), {"x"}, unary, cost<kExpFlopsPerElement>, autodiff::grad_exp,
              "e^x; +inf above ~88.7 in f32");
  elementwise(t.define(Op::log), {"x"}, unary, cost<kExpFlopsPerElement>, autodiff::grad_log,
              "the natural logarithm of x; -inf at 0, NaN for x < 0");
  elementwise(t.define(Op::softplus), {"x"}, unary, cost<kSigmoidFlopsPerElement>, autodiff::grad_softplus,
              "log(1 + e^x), and x above 20 (PyTorch's threshold; the difference is below f32's resolution there)");
  elementwise(t.define(Op::reciprocal), {"x"}, unary, cost<kDivideFlopsPerElement>, autodiff::grad_reciprocal,
              "1 / x");
  {
    OpDef& d = t.define(Op::dropout);
    elementwise(d, {"x", "key"}, dropout_shape, cost1, autodiff::grad_dropout,
                "x * (kept ? 1/(1-p) : 0), the mask drawn from (key, seed, element); docs/ops.md");
    d.attrs = {{"p", AttrKind::Float, Attribute{0.5}, "the probability of dropping an element, in [0, 1)"},
               {"seed", AttrKind::Int, Attribute{int64_t{0}},
                "distinguishes the dropouts of one graph: each draws its own mask from the shared key"}};
  }
  {
    OpDef& d = t.define(Op::clamp);
    elementwise(d, {"x"}, clamp_shape, cost1, autodiff::grad_clamp, "min(max(x, min), max); NaN stays NaN");
    d.attrs = {kClampMinAttr, kClampMaxAttr};
  }
  elementwise(t.define(Op::add), {"a", "b"}, broadcast, cost1, autodiff::grad_add, "a + b with NumPy broadcasting");
  elementwise(t.define(Op::mul), {"a", "b"}, broadcast, cost1, autodiff::grad_mul, "a * b with NumPy broadcasting");
  {
    OpDef& d = t.define(Op::scale);
    elementwise(d, {"x"}, unary, cost1, autodiff::grad_scale, "x * factor");
    d.attrs = {{"factor", AttrKind::Float, std::nullopt, "the constant multiplier"}};
  }
  {
    OpDef& d = t.define(Op::bias_add);
    elementwise(d, {"x", "bias"}, bias_add, cost1, autodiff::grad_bias_add, "x + bias broadcast along one axis");
    d.attrs = {{"axis", AttrKind::Int, Attribute{int64_t{1}}, "the axis the bias runs along (1: channels of NC...)"}};
  }
}

}  // namespace lms::ops
