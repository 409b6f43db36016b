// SiLU (swish) written out, recognised before import. PyTorch exports nn.SiLU and F.silu before opset 24 as
// Mul(x, Sigmoid(x)) (either operand order). `fuse_silu` returns the nodes with each such pair replaced by one
// node of the internal type "Silu" (not an ONNX operator) writing the Mul's output, which the importer maps to
// LMS's `silu`, so that training keeps x alone for the backward pass instead of x and sigmoid(x), and the gradient
// is one op. A pair is fused only when the Sigmoid's output has no reader but the Mul and is not a graph output.
// The fused op rounds once where the pair rounded twice: results agree with the exporter's to float rounding.
#pragma once

#include <vector>

#include "lms/io/onnx.h"

namespace lms {

std::vector<OnnxNode> fuse_silu(const std::vector<OnnxNode>& nodes, const OnnxModel& model);

}  // namespace lms
