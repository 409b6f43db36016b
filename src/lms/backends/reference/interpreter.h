// The reference interpreter: runs a whole graph on the reference kernels with every value in its own
// HostTensor. It is the oracle of the tests (a rewritten or planned graph must compute what the interpreter
// computes on the original) and knows nothing of planning: no arenas, no streams, no reuse.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/runtime/tensor.h"
#include "lms/support/error.h"

namespace lms {

// Runs every node of `g` once and returns all values, indexed by ValueId. The order is the storage order when
// g.scheduled(), else a topological order over data and control edges that always runs the smallest ready node
// id first (deterministic). The graph is verified first.
//   input, param: fed by value name (without '%'); a missing feed or a feed of another type is an error.
//   state:        its feed if given, else filled by its `init` attribute ("zeros" or "ones").
//   constant:     filled with its `value`.
//   in-place ops: the aliased input is copied into the output's tensor and the kernel runs with the input and
//                 output pointers equal (the KernelCall contract), so the input value itself is left unchanged.
// A feed naming no value, or a value that is not an input, param or state, is an error. Kernel errors come back
// wrapped with the node's name ("%conv1: ...").
Result<std::vector<HostTensor>> interpret(const Graph& g, const std::map<std::string, HostTensor>& feeds);

}  // namespace lms
