// The erf form of GELU, recognised before import. Exporters without a Gelu operator (PyTorch before opset 20)
// write F.gelu(x) as five nodes: x / sqrt(2) (or x * (1/sqrt(2))), Erf, + 1, a product with x and a product
// with 0.5 (in either order of the two products). `fuse_erf_gelu` returns the model's nodes with each such
// chain replaced by one Gelu node (approximate "none") writing the chain's output, so the importer maps it to
// LMS's exact `gelu`. A chain is fused only when its intermediate results have no other readers and are not
// graph outputs; anything else stays as it was (and Erf alone is not supported). The fused op rounds once
// where the chain rounded five times: results agree with the exporter's to float rounding, not bit for bit.
#pragma once

#include <vector>

#include "lms/io/onnx.h"

namespace lms {

std::vector<OnnxNode> fuse_erf_gelu(const OnnxModel& model);

}  // namespace lms
