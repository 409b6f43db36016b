// Evaluation of a classifier: the forward graph turned into one that outputs the logits its loss reads, and
// accuracy counting. The logits are the first input of the loss's producer, which must be `cross_entropy`
// (every model builder ends that way). The evaluation graph is the forward graph with [logits] as its only
// output and dead nodes (the loss, the labels input) removed, so it runs as its own small Program whose
// parameters are loaded by name from the trained values. Batch norm, if any, normalizes with its running
// statistics there when training keeps them (bn_running_stats), with the batch's otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "lms/ir/graph.h"
#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

// The logits value of a forward graph: the first input of the producer of its single output, a
// cross_entropy. Errors say what the loss is instead.
Result<ValueId> logits_of(const Graph& forward);

// The forward graph with the logits as its only output and everything not needed for them removed. With
// `running_statistics`, every batch_norm normalizes with its running statistics instead of the batch's, as
// inference does (PyTorch's eval mode): out = x·s + (beta − running_mean·s), s = gamma / sqrt(running_var + eps),
// reading the state values "<out>.running_mean" and "<out>.running_var" that the training graph keeps
// (docs/autodiff.md), so that a row's logits do not depend on the other rows of its batch (the zero padding of
// a last partial test batch included).
Result<Graph> evaluation_graph(const Graph& forward, bool running_statistics = false);

// Correct predictions among the labels of the first `rows` samples (dim 0): a prediction is the class with the
// largest logit over axis 1 (the first on ties). `labels` has the logits' shape without axis 1
// (cross_entropy's contract), so a sample has one label per position after axis 1 (one for a classifier); or the
// logits are [N*P, C], a language model's positions flattened sample by sample, and the labels [N, P...] (a
// sample's P positions are logits rows sample*P ...).
Result<int64_t> count_correct(const HostTensor& logits, const HostTensor& labels, int64_t rows);

}  // namespace lms
