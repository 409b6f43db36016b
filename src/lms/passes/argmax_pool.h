// The `argmax-pool` pass: where a max pooling p = max_pool(y) reads a relu's output y and the backward pass
// computes y's gradient as relu_grad(max_pool_grad(dp, y), y), it computes it as
// max_pool_grad_by_argmax(relu_grad(dp, p), a) instead, with a = max_pool_argmax(y) added right after the
// pooling. The backward pass then reads the pooled p (a quarter of y for a 2x2-strided window, and already
// kept for the next layer's gradients) and i32 positions of p's shape, not y, so y dies in the forward pass;
// in a ResNet that is the stem's largest activation. The result is bit-identical: each dy element still goes
// to its window's first maximum, and y at that element equals p of that window, so masking dy by p > 0 drops
// exactly the elements relu_grad would zero (a NaN maximum is dropped by both), summed in the same order.
// Precondition: a gradient or training graph whose node order is a valid schedule (before any planning pass:
// recompute, swap, tflms-*). Postcondition: the graph verifies, its order is a valid schedule. Undone by
// keep_pool_input (running it again finds no pattern). `lms train`/`plan` run it as part of building the training
// graph (TrainingOptions::argmax_pool).
#pragma once

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Returns the number of poolings rewritten.
Result<int> use_pool_argmax(Graph& g);

// The inverse, on a graph use_pool_argmax rewrote and nothing else has since: each
// max_pool_grad_by_argmax(relu_grad(dp, p), max_pool_argmax(y)) becomes relu_grad(max_pool_grad(dp, y), y) again
// (the argmax and the masking dropped). Returns the number restored. The auto strategy plans the restored graph
// when the rewritten one does not fit (at the edge of capacity the positions, recomputed from clones of the
// stem's batch norm and relu, can cost more there than the relu output did).
Result<int> keep_pool_input(Graph& g);

Result<void> run_argmax_pool_pass(Graph& g, const Attributes& options);

}  // namespace lms
