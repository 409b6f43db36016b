// The gradient rules, one per differentiable forward op (or family), which the op definitions in
// src/lms/ops/*.cc install as OpDef::grad. Each takes the node's GradContext (grad_context.h), adds the
// backward nodes computing the gradient of every input that wants one, and hands them back with set_grad.
// docs/autodiff.md has the table of what each rule emits. rules_nn.cc holds the convolution, normalization
// and pooling rules; rules_tensor.cc the elementwise, linear-algebra, data-movement, reduction and loss rules.
#pragma once

#include "lms/ops/op.h"

namespace lms::autodiff {

// rules_nn.cc
Result<void> grad_conv(GradContext& c);            // conv1d/2d/3d
Result<void> grad_conv_transpose(GradContext& c);  // conv_transpose1d/2d/3d
Result<void> grad_batch_norm(GradContext& c);
Result<void> grad_layer_norm(GradContext& c);
Result<void> grad_max_pool(GradContext& c);        // max_pool1d/2d/3d
Result<void> grad_avg_pool(GradContext& c);        // avg_pool1d/2d/3d
Result<void> grad_global_avg_pool(GradContext& c);

// rules_tensor.cc
Result<void> grad_relu(GradContext& c);
Result<void> grad_gelu(GradContext& c);
Result<void> grad_silu(GradContext& c);
Result<void> grad_hardswish(GradContext& c);
Result<void> grad_sigmoid(GradContext& c);
Result<void> grad_tanh(GradContext& c);
Result<void> grad_clamp(GradContext& c);
Result<void> grad_dropout(GradContext& c);
Result<void> grad_sqrt(GradContext& c);
Result<void> grad_reciprocal(GradContext& c);
Result<void> grad_exp(GradContext& c);
Result<void> grad_log(GradContext& c);
Result<void> grad_softplus(GradContext& c);
Result<void> grad_add(GradContext& c);
Result<void> grad_mul(GradContext& c);
Result<void> grad_scale(GradContext& c);
Result<void> grad_bias_add(GradContext& c);
Result<void> grad_matmul(GradContext& c);
Result<void> grad_reshape(GradContext& c);
Result<void> grad_transpose(GradContext& c);
Result<void> grad_concat(GradContext& c);
Result<void> grad_slice(GradContext& c);
Result<void> grad_softmax(GradContext& c);
Result<void> grad_embedding(GradContext& c);
Result<void> grad_reduce(GradContext& c);          // mean and reduce_sum
Result<void> grad_broadcast_to(GradContext& c);
Result<void> grad_sum_to(GradContext& c);
Result<void> grad_cross_entropy(GradContext& c);

}  // namespace lms::autodiff
