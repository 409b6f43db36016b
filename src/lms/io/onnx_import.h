// ONNX import: an OnnxModel (io/onnx.h) becomes a forward Graph that LMS trains like a built-in model. The data
// input becomes %x, the model's single output is taken as logits and a `cross_entropy` against a new %labels
// input becomes the graph's output (the mean loss), as every model builder ends. Float initializers become
// parameters named after them (made legal for the IR: characters outside [A-Za-z0-9_.-] become '_'), and their
// values are returned as the initial weights, together with each BatchNormalization's mean and variance as the
// initial running statistics ("<bn>.running_mean", "<bn>.running_var", the names autodiff gives them).
//
// Shape arithmetic is folded at import (Shape, Gather, Unsqueeze, Concat, Cast... on constants), so exports with a
// symbolic batch dimension import at any --batch; masks and positions are folded too (io/onnx_fold.h), so a
// causal masked_fill before a Softmax becomes a causal softmax, and the erf form of GELU is fused first
// (io/onnx_gelu.h). For token-id inputs the classes are the logits' last axis (one label per token). Flatten, Reshape, Squeeze and Unsqueeze change only the shape
// an ONNX tensor is known by; a `reshape` node is added where an op needs that shape, so chains of them cost one
// copy at most. Anything LMS cannot train exactly as ONNX defines it (an unsupported op or attribute value,
// asymmetric padding, ceil-mode pooling, a dynamic shape) is an error naming the node, never an approximation;
// the supported operators and their limits are listed in docs/onnx.md. Batch normalization trains in training
// mode (batch statistics), as in PyTorch's model.train(), whatever mode the model was exported in.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lms/io/onnx.h"
#include "lms/ir/graph.h"

namespace lms {

struct OnnxImportOptions {
  std::optional<int64_t> batch;  // the data input's first dimension; nullopt: the model's own if it is a number,
  int64_t symbolic_batch = 1;    // else (a symbolic dimension) this
  bool add_loss = true;          // append cross_entropy(output, %labels); false: the output must be a scalar loss
  std::optional<bool> classes_last;  // logits [N, ..., classes] (one row per token) rather than [N, classes, ...];
                                     // nullopt: last for integer (token id) inputs, axis 1 for float ones
  std::vector<std::string> frozen;   // float initializers that are not trained (PyTorch buffers: positional
                                     // tables, normalization constants), by name; '*' matches any run of
                                     // characters. Each pattern must match one. They are constants: folded at
                                     // import where every input is constant, else held as state
  std::map<std::string, double> input_values;  // graph inputs held at one value, by name (an attention mask of
                                               // ones: no padding; token type ids of 0): constants of the input's
                                               // type and shape (its first dimension the batch, as the data
                                               // input's), so that one data input remains
  std::map<std::string, int64_t> dims;  // sizes of the inputs' symbolic dimensions other than the batch, by their
                                        // name in the file (a sequence length exported as dynamic: "seq" -> 512)
  bool values = true;  // return the initial values (ImportedModel::weights); false: the graph alone, for planning
                       // (the values are not copied: a ViT-B's 343 MB)
};

struct ImportedModel {
  Graph forward;  // inputs %x (and %labels), one output: the scalar loss
  std::map<std::string, HostTensor> weights;  // initial values by value name: parameters and running statistics
};

// An ONNX name as the IR accepts it ([A-Za-z0-9_.-]+): other characters become '_', leading '/' are dropped.
std::string legal_name(std::string_view onnx);

// Every ONNX operator the importer maps, sorted ("Add", "AveragePool", ...).
std::vector<std::string_view> onnx_supported_ops();

// Builds the forward graph named `graph_name`. Errors name the ONNX node ("node 'Conv_3' (Conv): ...") or the
// input, with the numbers involved.
Result<ImportedModel> import_onnx(const OnnxModel& model, const std::string& graph_name,
                                  const OnnxImportOptions& opts = {});

}  // namespace lms
