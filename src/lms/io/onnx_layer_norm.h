// Layer normalization written out in elementary operators, recognised before import. Exports before opset 17
// (which has no LayerNormalization) and hand-written layer norms spell nn.LayerNorm over the last axis as
//   mean = ReduceMean(x, [a]); d = x - mean; var = ReduceMean(d^2, [a]); n = d / Sqrt(var + eps)
//   y = n * gamma + beta
// with d^2 as Pow(d, 2) or d * d, d possibly computed twice (two equal Subs), the division possibly as a product
// with Reciprocal(Sqrt(...)), and the products and sums with their operands in either order. `fuse_layer_norm`
// replaces each such chain by one LayerNormalization(x, gamma, beta) {axis = a, epsilon = eps}, which the
// importer maps to LMS's `layer_norm` when a is the last axis (and refuses otherwise). Only single-axis
// reductions are fused (the axis count of x is not known before import; a reduction over several axes stays
// as it was). Intermediate results must have no readers outside the chain and not be graph outputs. The fused
// op computes in one pass what the chain rounded at each node: results agree to float rounding.
#pragma once

#include <vector>

#include "lms/io/onnx.h"

namespace lms {

std::vector<OnnxNode> fuse_layer_norm(const std::vector<OnnxNode>& nodes, const OnnxModel& model);

}  // namespace lms
