// Dead-code elimination: removes every node that no root needs. Roots are the graph outputs (the `return` line)
// and side-effecting nodes; a node is needed if a needed node reads one of its outputs or lists it as a control
// input. Precondition: the graph has a `return` line (without one nothing marks what is live, which is an
// error rather than deleting everything). Nothing undoes it; it is idempotent.
#pragma once

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// Returns the number of nodes removed.
Result<int> eliminate_dead_code(Graph& g);

}  // namespace lms
