// Graph statistics: the numbers `lms stats` prints and tests check (parameter count, FLOPs, bytes by kind).
// Everything is computed from op traits and each op's own cost function, so any graph (forward, training,
// rewritten) can be summarized; only the parameter/state split and the multiply-add count of convolutions
// and matmuls look at specific ops, because that is what they are about.
#pragma once

#include <cstdint>

#include "lms/ir/graph.h"
#include "lms/ops/op.h"

namespace lms {

struct GraphStats {
  int64_t nodes = 0;             // nodes in the graph
  int64_t params = 0;            // elements of `param` outputs (trainable parameters)
  int64_t param_bytes = 0;       // bytes of `param` outputs
  int64_t state_bytes = 0;       // bytes of other persistent sources (`state`: optimizer moments, running stats)
  double flops = 0;              // sum of op_cost flops over all nodes (2 per multiply-add)
  int64_t activation_bytes = 0;  // bytes of all non-persistent values produced by non-source ops
  int64_t input_bytes = 0;       // bytes of non-persistent source outputs (graph inputs, constants)
};

GraphStats graph_stats(const Graph& g);

// One node's work from its op's cost function (FLOPs, bytes read and written) on the node's types.
Cost node_cost(const Graph& g, const Node& n);

// Multiply-adds of the convolutions (plain and transposed, any rank) and matmuls: their op_cost flops / 2.
// The number papers quote as a model's "FLOPs" (e.g. ResNet-50: 4.1e9 per 224x224 image).
double matmul_conv_macs(const Graph& g);

}  // namespace lms
