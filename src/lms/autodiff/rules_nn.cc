// Gradient rules of the convolution, normalization and pooling ops (see rules.h). Each expands the forward
// node's attributes to full lists (defaults applied), so the gradient ops never depend on defaults.
#include <fmt/format.h>

#include "lms/autodiff/emit.h"
#include "lms/autodiff/grad_context.h"
#include "lms/autodiff/rules.h"

namespace lms::autodiff {

namespace {

// The attributes a convolution's gradient ops repeat from the forward node.
Attributes conv_attrs(const OpCall& call) {
  return attrs({{"stride", call.ints("stride")},
                {"pad", call.ints("pad")},
                {"dilation", call.ints("dilation")},
                {"groups", call.i("groups")}});
}

// Normalization ops: (x, gamma, beta) -> (out, mean, invstd); one *_norm_grad node gives dx, dgamma, dbeta.
Result<void> norm_grad(GradContext& c, Op grad_op) {
  if (c.dy(1).valid() || c.dy(2).valid())
    return fail("gradients flowing into the saved mean or invstd outputs of '{}' are not supported",
                op_name(c.op));
  std::vector<std::string> names = {c.name(0), c.name(1), c.name(2)};
  auto outs = LMS_TRY(add_named(c.b.graph(), c.b.category(), grad_op,
                                {c.dy(), c.inputs[0], c.inputs[1], c.outputs[1], c.outputs[2]}, {}, names));
  for (size_t i = 0; i < 3; ++i)
    if (c.needs(i)) c.set_grad(i, outs[i]);
  return {};
}

// A pooling window's stride and pad with the forward's defaults applied (stride = kernel, pad = zeros), and
// ceil_mode where it is on.
Attributes pool_attrs(const OpCall& call) {
  IntList kernel = call.ints("kernel"), stride = call.ints("stride"), pad = call.ints("pad");
  if (stride.empty()) stride = kernel;
  if (pad.empty()) pad = IntList(kernel.size(), 0);
  Attributes a = attrs({{"kernel", kernel}, {"stride", stride}, {"pad", pad}});
  if (call.b("ceil_mode")) a.set("ceil_mode", true);
  return a;
}

}  // namespace

Result<void> grad_conv(GradContext& c) {
  Attributes common = conv_attrs(c.call());
  if (c.needs(1)) {
    Attributes a = common;
    a.set("w_shape", c.in_type(1).shape);
    c.set_grad(1, c.emit(Op::conv_backward_filter, {c.inputs[0], c.dy()}, std::move(a), c.name(1)));
  }
  if (c.needs(0)) {
    Attributes a = common;
    a.set("x_shape", c.in_type(0).shape);
    c.set_grad(0, c.emit(Op::conv_backward_data, {c.dy(), c.inputs[1]}, std::move(a), c.name(0)));
  }
  return {};
}

// A transposed convolution is the data gradient of a plain one, so its gradients are a plain convolution of dy
// (for x) and the filter gradient with the roles of input and output swapped (for w). With output_pad >= stride
// the plain convolution of dy would be longer than x (the extra rows come from dilation alone); that corner
// is refused rather than sliced.
Result<void> grad_conv_transpose(GradContext& c) {
  OpCall call = c.call();
  IntList stride = call.ints("stride"), output_pad = call.ints("output_pad");
  for (size_t i = 0; i < stride.size(); ++i)
    if (output_pad[i] >= stride[i])
      return fail("the gradient of '{}' needs output_pad < stride, got output_pad {} and stride {} along spatial "
                  "dimension {}",
                  op_name(c.op), output_pad[i], stride[i], i);
  Attributes common = conv_attrs(call);
  int rank = c.in_type(0).rank() - 2;
  Op conv = rank == 1 ? Op::conv1d : rank == 2 ? Op::conv2d : Op::conv3d;
  if (c.needs(1)) {
    Attributes a = common;
    a.set("w_shape", c.in_type(1).shape);
    c.set_grad(1, c.emit(Op::conv_backward_filter, {c.dy(), c.inputs[0]}, std::move(a), c.name(1)));
  }
  if (c.needs(0)) c.set_grad(0, c.emit(conv, {c.dy(), c.inputs[1]}, common, c.name(0)));
  return {};
}

Result<void> grad_batch_norm(GradContext& c) { return norm_grad(c, Op::batch_norm_grad); }

Result<void> grad_layer_norm(GradContext& c) { return norm_grad(c, Op::layer_norm_grad); }

Result<void> grad_max_pool(GradContext& c) {
  if (c.needs(0)) c.set_grad(0, c.emit(Op::max_pool_grad, {c.dy(), c.inputs[0]}, pool_attrs(c.call()), c.name(0)));
  return {};
}

Result<void> grad_avg_pool(GradContext& c) {
  if (!c.needs(0)) return {};
  OpCall call = c.call();
  Attributes a = pool_attrs(call);
  a.set("count_include_pad", call.b("count_include_pad"));
  a.set("x_shape", c.in_type(0).shape);
  c.set_grad(0, c.emit(Op::avg_pool_grad, {c.dy()}, std::move(a), c.name(0)));
  return {};
}

// dy[N, C] / prod(spatial), reshaped to [N, C, 1, ...] and broadcast over the spatial positions. Scaling
// first touches N*C elements instead of all of x's.
Result<void> grad_global_avg_pool(GradContext& c) {
  if (!c.needs(0)) return {};
  const Shape& x = c.in_type(0).shape;
  int64_t positions = 1;
  for (size_t i = 2; i < x.size(); ++i) positions *= x[i];
  if (positions == 0) return fail("global_avg_pool of {} averages over no positions", to_string(c.in_type(0)));
  ValueId scaled = c.emit(Op::scale, {c.dy()}, attrs({{"factor", 1.0 / static_cast<double>(positions)}}),
                          c.name(0, "scaled"));
  Shape expanded = {x[0], x[1]};
  expanded.resize(x.size(), 1);
  ValueId r = c.emit(Op::reshape, {scaled}, attrs({{"shape", expanded}}), c.name(0, "expanded"));
  c.set_grad(0, c.emit(Op::broadcast_to, {r}, attrs({{"shape", x}}), c.name(0)));
  return {};
}

}  // namespace lms::autodiff
