// The `chunk-loss` pass: where a forward graph's loss is the cross-entropy of a projection's logits,
// loss = cross_entropy(matmul(h, W), labels) with h [N, K] and W [K, V] (or transposed), or with h [..., K] whose
// [..., V] product is reshaped to [N, V] (a language model's head over [batch, seq] tokens), and optionally a bias
// over V added, it computes the loss over `chunks` blocks of rows instead: per block of rows [s, e), h_i =
// slice(h), z_i = matmul(h_i, W) (+ the bias), l_i = cross_entropy(z_i, labels_i), and loss = sum of
// l_i * (e - s) / N. No op then reads or writes more than one
// block's logits or their gradient; at GPT-2's vocabulary those are the step's largest tensors (196 KiB a token)
// and the largest op's set the smallest budget any plan can meet. The blocks' logits are separate values, so a
// memory strategy can remake each for its backward reader (recompute) instead of keeping them all; kept, they
// take as much as the whole did. The result is not bit-identical to the unchunked loss: each block's mean is
// weighted, and W's and h's gradients are summed block by block, a different order of the same terms (within
// rounding: tests/passes/chunk_loss_test.cc). Precondition: a forward graph (before autodiff) whose single output
// is such a loss, with the logits read by nothing else. Postcondition: the graph verifies, in node order, its
// output the new loss under the old loss's name. Not undone: a change of the model the user asks for
// (TrainingOptions::loss_chunks, `--loss-chunks`).
#pragma once

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Splits the loss into `chunks` blocks of rows, as even as they divide (sizes differ by at most one); 1 changes
// nothing. Errors: no such
// loss (saying what the loss is instead), chunks < 1, or more chunks than rows.
Result<void> chunk_loss(Graph& g, int64_t chunks);

std::vector<AttrSpec> chunk_loss_options();
Result<void> run_chunk_loss_pass(Graph& g, const Attributes& options);

}  // namespace lms
