// GELU written out in elementary operators, recognised before import. Exporters without a Gelu operator (PyTorch
// before opset 20) and hand-written activations (GPT-2's "gelu_new") spell it as a chain:
//   - the erf form: x / sqrt(2) (or x * (1/sqrt(2))), Erf, + 1, a product with x and a product with 0.5;
//   - the tanh form: x^3 (Pow(x, 3), or x*x*x as two Muls), * 0.044715, + x, * sqrt(2/pi), Tanh, + 1, a
//     product with x and a product with 0.5;
// with the two final products in either order and constants on either side. `fuse_gelu` returns the nodes with
// each such chain replaced by one Gelu node (approximate "none" or "tanh") writing the chain's output, so the
// importer maps it to LMS's `gelu`. A chain is fused only when its intermediate results have no other readers
// and are not graph outputs; anything else stays as it was (Erf, Pow and a lone Tanh chain are then imported
// or refused one node at a time). The fused op rounds once where the chain rounded at every node: results agree
// with the exporter's to float rounding, not bit for bit.
#pragma once

#include <vector>

#include "lms/io/onnx.h"

namespace lms {

std::vector<OnnxNode> fuse_gelu(const std::vector<OnnxNode>& nodes, const OnnxModel& model);

}  // namespace lms
