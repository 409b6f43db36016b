// The autodiff passes of `lms opt` (registered in passes/registry.cc): `autodiff{wrt=...}` replaces the graph
// by its gradient graph (autodiff.h) and `train{optimizer=..., lr=...}` by its training graph (optimizer.h).
#pragma once

#include <vector>

#include "lms/ir/attributes.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Options of `autodiff`: wrt, a comma-separated list of value names (empty: every parameter).
std::vector<AttrSpec> autodiff_pass_options();
Result<void> run_autodiff_pass(Graph& g, const Attributes& options);

// Options of `train`: training_option_specs() (optimizer.h).
Result<void> run_train_pass(Graph& g, const Attributes& options);

}  // namespace lms
