// The `chunk-attention` pass: every attention core of a forward graph, c = matmul(softmax(s), v) over the scores
// s = matmul(q, k) (optionally scaled: scale(matmul(q, k))), batched over leading dimensions L (batch and heads, or
// their product as ONNX exports have it), is computed over `chunks` blocks instead: q, k and v are viewed as
// [P, ., .] (P = prod(L) attention matrices); with chunks <= P each block is a group of whole matrices, with more
// each matrix alone has its query rows in ceil(chunks / P) blocks, a causal softmax's mask starting at the block's
// first row (causal_offset). Each block computes its own scores, probabilities and context; the contexts are joined
// by concats (viewed back as c's shape, under c's name). No op then reads or writes more than one block's scores or
// probabilities, or their gradients (the blocks' gradients of q, k and v come back as concats, or, for k and v read
// by several row blocks, sums; docs/autodiff.md); those set the smallest budget any plan can meet for a long
// sequence or a large batch (GPT-2 small at seq 1024: 48 MiB a sample per tensor). Each block's probabilities are
// values of their own that a strategy can remake or swap; kept, they take as much as the whole did. Every row of
// every attention matrix is computed by the same ops from the same rows; whether a backend's batched kernels give
// a block the bits of the whole is the backend's, and row blocks sum k's and v's gradients in another order (so the
// pass is a change of the model the user asks for: TrainingOptions::attention_chunks, `--attention-chunks`).
// Attention with anything else between its ops (a mask added to the scores, dropout on the probabilities), or
// whose intermediate values have other readers, is left alone. Precondition: a forward graph (before autodiff)
// in node order. Postcondition: the graph verifies, in node order. Not undone.
#pragma once

#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Splits every attention core into `chunks` blocks (as even as they divide; past P, P times ceil(chunks / P) of
// them, at most one per query row); 1 changes nothing. Returns the number of attention cores split. Error:
// chunks < 1.
Result<int> chunk_attention(Graph& g, int64_t chunks);

std::vector<AttrSpec> chunk_attention_options();
Result<void> run_chunk_attention_pass(Graph& g, const Attributes& options);

}  // namespace lms
