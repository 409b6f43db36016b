// The verifier: checks that a graph is well formed and returns every problem found, each naming the node.
// Checked: attributes are normalized for their op (known names, kinds, declared order); arity, types and
// shapes, by re-running each op's shape rule; output counts; control inputs exist and are not the node itself;
// placement rules (only copy ops read or produce a value in another place than the device); the graph is
// acyclic through data and control edges; in a `scheduled` graph every value and control input is defined
// before use in text order; graph outputs exist. Tests run it after every pass.
#pragma once

#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// All problems, in node order (an empty list means the graph is valid).
std::vector<Error> verify_graph(const Graph& g);

// The first problem as an error, with a count of the others ("... (and 3 more problems)").
Result<void> verify(const Graph& g);

// How the verifier names a node in errors: its first output ("%conv1"), or "node #N" if it has none.
std::string node_label(const Graph& g, NodeId n);

}  // namespace lms
