// The structural gradient ops autodiff emits: convolution data and filter gradients (any spatial rank),
// batch-norm and layer-norm gradients, max/avg pooling gradients, and the pair the argmax-pool pass puts in
// max_pool_grad's place (max_pool_argmax in the forward pass, max_pool_grad_by_argmax). Their semantics follow
// PyTorch's autograd (docs/autodiff.md, "Gradient ops"). Each shape rule checks its operands by re-running the
// forward op's own shape rule on the shapes the gradient op is told about (x_shape, w_shape, the pooling window),
// so a gradient op accepts exactly the configurations its forward op accepts and the two cannot drift apart. The
// elementwise, reduction, data-movement and loss gradients, and bn_running_update, are in grad_tensor.cc.
// All gradient ops are recomputable: pure functions of their inputs.
#include <fmt/format.h>

#include "lms/ops/op_table.h"

namespace lms::ops {

void define_grad_tensor_ops(OpTable& t);  // grad_tensor.cc

namespace {

// Per element of x: batch_norm_grad and layer_norm_grad reduce dy and dy*xhat (2 multiply-adds: 4), then
// form dx = invstd*(dy - mean(dy) - xhat*mean(dy*xhat)) with gamma folded in (3 multiplies, 2 subtracts: 5)
// and xhat itself (subtract, multiply: 2).
constexpr double kNormGradFlopsPerElement = 11;
// max_pool_grad rescans each window to find its first maximum (1 compare per window element) and adds dy
// there; avg_pool_grad adds dy/count to each window element (1 add per window element).
constexpr double kPoolGradFlopsPerWindowElement = 1;

// Reads int-list attribute `name`; it must have exactly `rank` entries.
Result<IntList> full_list(const OpCall& c, std::string_view name, int rank) {
  IntList v = c.ints(name);
  if (static_cast<int>(v.size()) != rank)
    return fail("{} attribute '{}' = {} needs {} entries (one per spatial dimension), got {}", c.def.name, name,
                to_string(Attribute{v}), rank, v.size());
  return v;
}

// The spatial rank that a shape attribute of rank r+2 implies; must be 1..3 (the conv and pool families).
Result<int> spatial_rank_of(const OpCall& c, std::string_view what, int full_rank) {
  int r = full_rank - 2;
  if (r < 1 || r > 3)
    return fail("{} {} has rank {}; it needs rank 3 to 5 (N, C and 1 to 3 spatial dimensions)", c.def.name, what,
                full_rank);
  return r;
}

Op conv_op_of_rank(int r) { return r == 1 ? Op::conv1d : r == 2 ? Op::conv2d : Op::conv3d; }

// Checks that the forward convolution of x (x_type) with w (w_type) under this node's stride/pad/dilation/
// groups is valid and produces exactly dy's type.
Result<void> check_conv_forward(const OpCall& c, const TensorType& x_type, const TensorType& w_type,
                                const TensorType& dy, int rank) {
  if (!is_float(dy.dtype)) return fail("{} needs a floating-point dy, got {}", c.def.name, to_string(dy));
  for (int64_t d : x_type.shape)
    if (d < 0) return fail("{} has a negative dimension in {}", c.def.name, to_string(x_type));
  for (int64_t d : w_type.shape)
    if (d < 0) return fail("{} has a negative dimension in {}", c.def.name, to_string(w_type));
  Attributes a;
  a.set("stride", LMS_TRY(full_list(c, "stride", rank)));
  a.set("pad", LMS_TRY(full_list(c, "pad", rank)));
  a.set("dilation", LMS_TRY(full_list(c, "dilation", rank)));
  a.set("groups", c.i("groups"));
  auto fwd = infer_types(conv_op_of_rank(rank), std::vector<TensorType>{x_type, w_type}, a);
  if (!fwd)
    return fail("{}: the forward convolution of x {} with w {} is invalid: {}", c.def.name, to_string(x_type),
                to_string(w_type), fwd.error().what);
  if ((*fwd)[0] != dy)
    return fail("{} dy is {} but the forward convolution of x {} with w {} gives {}", c.def.name, to_string(dy),
                to_string(x_type), to_string(w_type), to_string((*fwd)[0]));
  return {};
}

Result<std::vector<TensorType>> conv_backward_data_shape(const OpCall& c) {
  const TensorType &dy = c.inputs[0], &w = c.inputs[1];
  int rank = LMS_TRY(spatial_rank_of(c, "weight w", w.rank()));
  TensorType x{dy.dtype, c.ints("x_shape")};
  if (x.rank() != w.rank())
    return fail("{} attribute 'x_shape' = {} must have w's rank {} (w {})", c.def.name, to_string(x.shape),
                w.rank(), to_string(w));
  LMS_TRY_VOID(check_conv_forward(c, x, w, dy, rank));
  return std::vector<TensorType>{x};
}

Result<std::vector<TensorType>> conv_backward_filter_shape(const OpCall& c) {
  const TensorType &x = c.inputs[0], &dy = c.inputs[1];
  TensorType w{x.dtype, c.ints("w_shape")};
  int rank = LMS_TRY(spatial_rank_of(c, "attribute 'w_shape'", w.rank()));
  if (x.rank() != w.rank())
    return fail("{} input x {} must have the rank of w_shape {}", c.def.name, to_string(x), to_string(w.shape));
  LMS_TRY_VOID(check_conv_forward(c, x, w, dy, rank));
  return std::vector<TensorType>{w};
}

// Both data and filter gradients do the forward's multiply-adds: 2 * n(dy) * (Cin/groups) * prod(k).
Cost conv_grad_cost(const OpCall& c, std::span<const TensorType> outs) {
  const TensorType& dy = c.def.op == Op::conv_backward_data ? c.inputs[0] : c.inputs[1];
  const Shape w_shape = c.def.op == Op::conv_backward_data ? c.inputs[1].shape : outs[0].shape;
  double per_point = 1;
  for (size_t i = 1; i < w_shape.size(); ++i) per_point *= static_cast<double>(w_shape[i]);
  return Cost{2.0 * static_cast<double>(dy.num_elements()) * per_point, total_bytes(c.inputs), total_bytes(outs)};
}

// (dy, x, gamma, mean, invstd): dy has x's type; gamma is [C]; mean and invstd have `stats`' shape.
Result<void> check_norm_grad(const OpCall& c, int64_t channels, const Shape& stats, std::string_view what) {
  const TensorType &dy = c.inputs[0], &x = c.inputs[1];
  if (dy != x) return fail("{} dy {} must have x's type {}", c.def.name, to_string(dy), to_string(x));
  const TensorType gamma{x.dtype, {channels}};
  if (c.inputs[2] != gamma)
    return fail("{} gamma must be {} ({} of {}), got {}", c.def.name, to_string(gamma), what, to_string(x),
                to_string(c.inputs[2]));
  const TensorType stat{x.dtype, stats};
  for (int i = 3; i <= 4; ++i)
    if (c.inputs[i] != stat)
      return fail("{} {} must be {} for x {}, got {}", c.def.name, c.def.inputs[i], to_string(stat), to_string(x),
                  to_string(c.inputs[i]));
  return {};
}

Result<std::vector<TensorType>> batch_norm_grad_shape(const OpCall& c) {
  const TensorType& x = c.inputs[1];
  if (x.rank() < 2 || !is_float(x.dtype))
    return fail("batch_norm_grad x must be floating-point with rank >= 2 (N, C, ...), got {}", to_string(x));
  LMS_TRY_VOID(check_norm_grad(c, x.shape[1], {x.shape[1]}, "the channels"));
  TensorType per_channel{x.dtype, {x.shape[1]}};
  return std::vector<TensorType>{x, per_channel, per_channel};
}

Result<std::vector<TensorType>> layer_norm_grad_shape(const OpCall& c) {
  const TensorType& x = c.inputs[1];
  if (x.rank() < 1 || !is_float(x.dtype))
    return fail("layer_norm_grad x must be floating-point with rank >= 1, got {}", to_string(x));
  LMS_TRY_VOID(check_norm_grad(c, x.shape.back(), Shape(x.shape.begin(), x.shape.end() - 1), "the last dimension"));
  TensorType per_feature{x.dtype, {x.shape.back()}};
  return std::vector<TensorType>{x, per_feature, per_feature};
}

Cost norm_grad_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{kNormGradFlopsPerElement * static_cast<double>(c.inputs[1].num_elements()), total_bytes(c.inputs),
              total_bytes(outs)};
}

Op pool_op_of_rank(bool average, int r) {
  if (average) return r == 1 ? Op::avg_pool1d : r == 2 ? Op::avg_pool2d : Op::avg_pool3d;
  return r == 1 ? Op::max_pool1d : r == 2 ? Op::max_pool2d : Op::max_pool3d;
}

// Checks that the forward pooling of x_type with this node's (full) kernel/stride/pad is valid and gives dy.
Result<void> check_pool_forward(const OpCall& c, bool average, const TensorType& x_type, const TensorType& dy) {
  int rank = LMS_TRY(spatial_rank_of(c, "x", x_type.rank()));
  for (int64_t d : x_type.shape)
    if (d < 0) return fail("{} has a negative dimension in {}", c.def.name, to_string(x_type));
  Attributes a;
  a.set("kernel", LMS_TRY(full_list(c, "kernel", rank)));
  a.set("stride", LMS_TRY(full_list(c, "stride", rank)));
  a.set("pad", LMS_TRY(full_list(c, "pad", rank)));
  a.set("ceil_mode", c.b("ceil_mode"));
  if (average) a.set("count_include_pad", c.b("count_include_pad"));
  auto fwd = infer_types(pool_op_of_rank(average, rank), std::vector<TensorType>{x_type}, a);
  if (!fwd)
    return fail("{}: the forward pooling of x {} is invalid: {}", c.def.name, to_string(x_type), fwd.error().what);
  if ((*fwd)[0] != dy)
    return fail("{} dy is {} but pooling x {} gives {}", c.def.name, to_string(dy), to_string(x_type),
                to_string((*fwd)[0]));
  return {};
}

Result<std::vector<TensorType>> max_pool_grad_shape(const OpCall& c) {
  LMS_TRY_VOID(check_pool_forward(c, false, c.inputs[1], c.inputs[0]));
  return std::vector<TensorType>{c.inputs[1]};
}

// (x) -> i32 positions of x's max pooling's shape.
Result<std::vector<TensorType>> max_pool_argmax_shape(const OpCall& c) {
  const TensorType& x = c.inputs[0];
  if (!is_float(x.dtype)) return fail("{} needs a floating-point x, got {}", c.def.name, to_string(x));
  const int rank = LMS_TRY(spatial_rank_of(c, "x", x.rank()));
  Attributes a;
  a.set("kernel", LMS_TRY(full_list(c, "kernel", rank)));
  a.set("stride", LMS_TRY(full_list(c, "stride", rank)));
  a.set("pad", LMS_TRY(full_list(c, "pad", rank)));
  a.set("ceil_mode", c.b("ceil_mode"));
  auto fwd = infer_types(pool_op_of_rank(false, rank), std::vector<TensorType>{x}, a);
  if (!fwd) return fail("{}: the max pooling of x {} is invalid: {}", c.def.name, to_string(x), fwd.error().what);
  return std::vector<TensorType>{TensorType{DType::i32, (*fwd)[0].shape}};
}

// (dy, argmax) -> dx of x_shape; argmax is i32 of dy's shape.
Result<std::vector<TensorType>> max_pool_grad_by_argmax_shape(const OpCall& c) {
  const TensorType &dy = c.inputs[0], &pos = c.inputs[1];
  if (!is_float(dy.dtype)) return fail("{} needs a floating-point dy, got {}", c.def.name, to_string(dy));
  const TensorType want{DType::i32, dy.shape};
  if (pos != want)
    return fail("{} argmax must be i32 of dy's shape {}, got {}", c.def.name, to_string(want), to_string(pos));
  TensorType x{dy.dtype, c.ints("x_shape")};
  LMS_TRY_VOID(check_pool_forward(c, false, x, dy));
  return std::vector<TensorType>{x};
}

Result<std::vector<TensorType>> avg_pool_grad_shape(const OpCall& c) {
  TensorType x{c.inputs[0].dtype, c.ints("x_shape")};
  LMS_TRY_VOID(check_pool_forward(c, true, x, c.inputs[0]));
  return std::vector<TensorType>{x};
}

Cost pool_grad_cost(const OpCall& c, std::span<const TensorType> outs) {
  double window = 1;
  for (int64_t k : c.ints("kernel")) window *= static_cast<double>(k);
  return Cost{kPoolGradFlopsPerWindowElement * window * static_cast<double>(c.inputs[0].num_elements()),
              total_bytes(c.inputs), total_bytes(outs)};
}

// max_pool_grad_by_argmax: one add per dy element, into the input element its argmax names.
Cost max_pool_grad_by_argmax_cost(const OpCall& c, std::span<const TensorType> outs) {
  return Cost{static_cast<double>(c.inputs[0].num_elements()), total_bytes(c.inputs), total_bytes(outs)};
}

// max_pool_argmax: one compare per window element, as max pooling.
Cost max_pool_argmax_cost(const OpCall& c, std::span<const TensorType> outs) {
  double window = 1;
  for (int64_t k : c.ints("kernel")) window *= static_cast<double>(k);
  return Cost{kPoolGradFlopsPerWindowElement * window * static_cast<double>(outs[0].num_elements()),
              total_bytes(c.inputs), total_bytes(outs)};
}

// The attributes a convolution gradient repeats from its forward node, all required: the gradient ops are
// emitted by autodiff with the forward's attributes expanded, so nothing is left to defaults.
std::vector<AttrSpec> conv_grad_attrs(AttrSpec shape) {
  return {
      {"stride", AttrKind::IntList, std::nullopt, "the forward's step per spatial dimension"},
      {"pad", AttrKind::IntList, std::nullopt, "the forward's zero padding per spatial dimension"},
      {"dilation", AttrKind::IntList, std::nullopt, "the forward's kernel spacing per spatial dimension"},
      {"groups", AttrKind::Int, std::nullopt, "the forward's channel groups"},
      shape,
  };
}

std::vector<AttrSpec> pool_grad_attrs() {
  return {
      {"kernel", AttrKind::IntList, std::nullopt, "the forward's window, one entry per spatial dimension"},
      {"stride", AttrKind::IntList, std::nullopt, "the forward's step, one entry per spatial dimension"},
      {"pad", AttrKind::IntList, std::nullopt, "the forward's padding, one entry per spatial dimension"},
      kCeilModeAttr,
  };
}

OpDef& grad_op(OpDef& d, std::vector<std::string_view> inputs, std::vector<std::string_view> outputs,
               std::string_view doc) {
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.traits.recomputable = true;
  d.doc = doc;
  return d;
}

}  // namespace

void define_grad_ops(OpTable& t) {
  {
    OpDef& d = grad_op(t.define(Op::conv_backward_data), {"dy", "w"}, {"dx"},
                       "gradient of conv1d/2d/3d wrt its input x: dx of x_shape");
    d.attrs = conv_grad_attrs({"x_shape", AttrKind::IntList, std::nullopt, "the full shape of the forward's x"});
    d.shape = conv_backward_data_shape;
    d.cost = conv_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::conv_backward_filter), {"x", "dy"}, {"dw"},
                       "gradient of conv1d/2d/3d wrt its weight: dw of w_shape");
    d.attrs = conv_grad_attrs({"w_shape", AttrKind::IntList, std::nullopt, "the full shape of the forward's w"});
    d.shape = conv_backward_filter_shape;
    d.cost = conv_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::batch_norm_grad), {"dy", "x", "gamma", "mean", "invstd"},
                       {"dx", "dgamma", "dbeta"},
                       "gradient of training-mode batch_norm (batch statistics over N and spatial, channel axis 1)");
    d.reusable_input = 0;  // dy
    d.shape = batch_norm_grad_shape;
    d.cost = norm_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::layer_norm_grad), {"dy", "x", "gamma", "mean", "invstd"},
                       {"dx", "dgamma", "dbeta"}, "gradient of layer_norm over the last dimension");
    d.reusable_input = 0;  // dy
    d.shape = layer_norm_grad_shape;
    d.cost = norm_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::max_pool_grad), {"dy", "x"}, {"dx"},
                       "gradient of max pooling: each dy goes to the first maximum of its window (row-major)");
    d.attrs = pool_grad_attrs();
    d.shape = max_pool_grad_shape;
    d.cost = pool_grad_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::max_pool_argmax), {"x"}, {"argmax"},
                       "where max_pool_grad would send each window's dy: the first maximum's position in its window, "
                       "row-major over the kernel (padding positions counted), as i32 of the pooled shape");
    d.attrs = pool_grad_attrs();
    d.shape = max_pool_argmax_shape;
    d.cost = max_pool_argmax_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::max_pool_grad_by_argmax), {"dy", "argmax"}, {"dx"},
                       "max_pool_grad from max_pool_argmax's positions instead of x: each dy element goes to the "
                       "input element its position names (none for a position in padding or outside the window)");
    d.attrs = pool_grad_attrs();
    d.attrs.push_back({"x_shape", AttrKind::IntList, std::nullopt, "the full shape of the forward's x"});
    d.shape = max_pool_grad_by_argmax_shape;
    d.cost = max_pool_grad_by_argmax_cost;
  }
  {
    OpDef& d = grad_op(t.define(Op::avg_pool_grad), {"dy"}, {"dx"},
                       "gradient of average pooling: dy/count spread over each window");
    d.attrs = pool_grad_attrs();
    d.attrs.push_back({"count_include_pad", AttrKind::Bool, std::nullopt, "the forward's count_include_pad"});
    d.attrs.push_back({"x_shape", AttrKind::IntList, std::nullopt, "the full shape of the forward's x"});
    d.shape = avg_pool_grad_shape;
    d.cost = pool_grad_cost;
  }
  define_grad_tensor_ops(t);
}

}  // namespace lms::ops
