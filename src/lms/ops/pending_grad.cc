// TEMPORARY scaffolding while the gradient ops are written: each gets a shape rule that fails. Deleted when
// ops/grad*.cc lands.
#include "lms/ops/op_table.h"

namespace lms::ops {
namespace {
Result<std::vector<TensorType>> pending(const OpCall& c) { return fail("op '{}' is not defined yet", c.def.name); }
Cost none(const OpCall&, std::span<const TensorType>) { return {}; }
}  // namespace
void define_grad_ops(OpTable& t) {
  for (Op op : {Op::conv_backward_data, Op::conv_backward_filter, Op::relu_grad, Op::gelu_grad, Op::batch_norm_grad,
                Op::layer_norm_grad, Op::max_pool_grad, Op::avg_pool_grad, Op::softmax_grad, Op::embedding_grad,
                Op::cross_entropy_grad, Op::broadcast_to, Op::sum_to, Op::slice_grad, Op::bn_running_update}) {
    OpDef& d = t.define(op);
    d.outputs = {"out"};
    d.shape = pending;
    d.cost = none;
  }
}
}  // namespace lms::ops
