// Internal to the reference backend: the kernel of each op family, one declaration per kernel, grouped by the
// file that defines it. kernels.cc maps every op of op_list.inc onto one of these.
#pragma once

#include "lms/backends/reference/kernel_util.h"

namespace lms::reference {

// conv.cc
Result<void> conv(const Args& a);                  // conv1d/2d/3d
Result<void> conv_transpose(const Args& a);        // conv_transpose1d/2d/3d
Result<void> conv_backward_data(const Args& a);    // (dy, w) -> dx
Result<void> conv_backward_filter(const Args& a);  // (x, dy) -> dw

// norm.cc
Result<void> batch_norm(const Args& a);
Result<void> layer_norm(const Args& a);
Result<void> batch_norm_grad(const Args& a);
Result<void> layer_norm_grad(const Args& a);
Result<void> bn_running_update(const Args& a);

// elementwise.cc
Result<void> relu(const Args& a);
Result<void> gelu(const Args& a);
Result<void> silu(const Args& a);
Result<void> hardswish(const Args& a);
Result<void> sigmoid(const Args& a);
Result<void> tanh(const Args& a);
Result<void> clamp(const Args& a);
Result<void> dropout(const Args& a);
Result<void> sqrt(const Args& a);
Result<void> reciprocal(const Args& a);
Result<void> exp(const Args& a);
Result<void> log(const Args& a);
Result<void> softplus(const Args& a);
Result<void> add(const Args& a);
Result<void> mul(const Args& a);
Result<void> scale(const Args& a);
Result<void> bias_add(const Args& a);
Result<void> relu_grad(const Args& a);
Result<void> gelu_grad(const Args& a);
Result<void> silu_grad(const Args& a);
Result<void> hardswish_grad(const Args& a);
Result<void> sigmoid_grad(const Args& a);
Result<void> tanh_grad(const Args& a);
Result<void> clamp_grad(const Args& a);
Result<void> sqrt_grad(const Args& a);
Result<void> reciprocal_grad(const Args& a);
Result<void> log_grad(const Args& a);
Result<void> softplus_grad(const Args& a);

// reduce.cc
Result<void> mean(const Args& a);
Result<void> reduce_sum(const Args& a);
Result<void> broadcast_to(const Args& a);
Result<void> sum_to(const Args& a);

// pool.cc
Result<void> max_pool(const Args& a);  // max_pool1d/2d/3d
Result<void> avg_pool(const Args& a);  // avg_pool1d/2d/3d
Result<void> global_avg_pool(const Args& a);
Result<void> max_pool_grad(const Args& a);
Result<void> avg_pool_grad(const Args& a);
Result<void> max_pool_argmax(const Args& a);
Result<void> max_pool_grad_by_argmax(const Args& a);

// linalg.cc
Result<void> matmul(const Args& a);
Result<void> softmax(const Args& a);
Result<void> softmax_grad(const Args& a);

// movement.cc
Result<void> constant(const Args& a);
Result<void> copy(const Args& a);  // reshape, swap_out, swap_in: the same bytes
Result<void> transpose(const Args& a);
Result<void> concat(const Args& a);
Result<void> slice(const Args& a);
Result<void> slice_grad(const Args& a);
Result<void> embedding(const Args& a);
Result<void> embedding_grad(const Args& a);

// loss.cc
Result<void> cross_entropy(const Args& a);
Result<void> cross_entropy_grad(const Args& a);

// update.cc
Result<void> sgd_update(const Args& a);
Result<void> momentum_update(const Args& a);
Result<void> adam_update(const Args& a);
Result<void> rng_advance(const Args& a);

}  // namespace lms::reference
