// TEMPORARY scaffolding while the op families are written: every op not yet defined gets a shape rule that
// fails. This file is deleted when the last family lands.
#include "lms/ops/op_table.h"

namespace lms::ops {
namespace {
Result<std::vector<TensorType>> pending(const OpCall& c) { return fail("op '{}' is not defined yet", c.def.name); }
Cost none(const OpCall&, std::span<const TensorType>) { return {}; }
void pend(OpTable& t, std::initializer_list<Op> ops) {
  for (Op op : ops) {
    OpDef& d = t.define(op);
    d.outputs = {"out"};
    d.shape = pending;
    d.cost = none;
  }
}
}  // namespace
void define_conv_ops(OpTable& t) {
  pend(t, {Op::conv1d, Op::conv2d, Op::conv3d, Op::conv_transpose1d, Op::conv_transpose2d, Op::conv_transpose3d});
}
void define_norm_ops(OpTable& t) { pend(t, {Op::batch_norm, Op::layer_norm}); }
void define_pool_ops(OpTable& t) {
  pend(t, {Op::max_pool1d, Op::max_pool2d, Op::max_pool3d, Op::avg_pool1d, Op::avg_pool2d, Op::avg_pool3d,
           Op::global_avg_pool});
}
void define_linalg_ops(OpTable& t) {
  pend(t, {Op::matmul, Op::reshape, Op::transpose, Op::concat, Op::slice, Op::softmax, Op::embedding});
}
void define_loss_ops(OpTable& t) { pend(t, {Op::mean, Op::reduce_sum, Op::cross_entropy}); }
void define_update_ops(OpTable& t) { pend(t, {Op::sgd_update, Op::momentum_update, Op::adam_update}); }
}  // namespace lms::ops
