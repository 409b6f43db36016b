// The `chunk-attention` pass: every attention core of a forward graph, c = matmul(softmax(s), v) over the scores
// s = matmul(q, k) (optionally scaled: scale(matmul(q, k))), batched over leading dimensions L (batch and heads, or
// their product as ONNX exports have it), is computed over `chunks` blocks of those P = prod(L) attention matrices
// instead: q, k and v are viewed as [P, ., .], each block [a, b) of P takes its slices of them, computes its own
// scores, probabilities and context, and the blocks' contexts are joined by a concat (viewed back as c's shape,
// under c's name). No op then reads or writes more than one block's [S, S] scores or probabilities, or their
// gradients (the blocks' gradients of q, k and v come back as concats, docs/autodiff.md); those set the smallest
// budget any plan can meet for a long sequence or a large batch (GPT-2 small at seq 1024: 48 MiB a sample per
// tensor). Each block's probabilities are values of their own that a strategy can remake or swap; kept, they take
// as much as the whole did. Every attention matrix is computed as before, from the same rows, by the same ops;
// whether a backend's batched kernels give the same bits for a block as for the whole batch is the backend's (so
// the pass is a change of the model the user asks for: TrainingOptions::attention_chunks, `--attention-chunks`).
// Attention with anything else between its ops (a mask added to the scores, dropout on the probabilities), or
// whose intermediate values have other readers, is left alone. Precondition: a forward graph (before autodiff)
// in node order. Postcondition: the graph verifies, in node order. Not undone.
#pragma once

#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Splits every attention core into `chunks` blocks (as even as they divide; a core with fewer than `chunks`
// attention matrices gets one block each); 1 changes nothing. Returns the number of attention cores split. Error:
// chunks < 1.
Result<int> chunk_attention(Graph& g, int64_t chunks);

std::vector<AttrSpec> chunk_attention_options();
Result<void> run_chunk_attention_pass(Graph& g, const Attributes& options);

}  // namespace lms
