// Adding a node whose every output gets a chosen name. Builder names a multi-output node's later outputs
// "<first>.<output name>"; autodiff and the optimizer want each output named after what it is (the gradient
// of gamma is "<gamma>.grad", the updated momentum buffer "<param>.momentum.new"), so they use this instead.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms::autodiff {

// Normalizes `attrs`, infers the output types with the op's shape rule and adds the node with `inputs`.
// `names` holds one name hint per output (clashes get a ".N" suffix, as always). Errors name the first output.
Result<std::vector<ValueId>> add_named(Graph& g, Category cat, Op op, std::vector<ValueId> inputs, Attributes attrs,
                                       std::span<const std::string> names);

}  // namespace lms::autodiff
