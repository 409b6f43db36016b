// Reverse-mode automatic differentiation of a forward graph whose single output is a scalar floating-point
// loss. `append_gradients` adds the backward nodes (category bwd) to a graph in place; `build_gradient_graph`
// wraps it for gradient checks and `lms opt --passes autodiff`. docs/autodiff.md describes the algorithm:
// which nodes are differentiated, the rules (rules.h), how fan-out is accumulated, and how values are named.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// The loss of a forward graph: its single output, a floating-point scalar. Errors say what the outputs are.
Result<ValueId> loss_of(const Graph& g);

// Differentiates the loss of `g` with respect to each value in `wrt` (floating-point values), appending the
// backward nodes to `g`. Returns one gradient per `wrt` entry, in order: a value of exactly that value's type,
// or an invalid id where the loss does not depend on it. The seed d(loss) is a `constant` 1.0 named
// "<loss>.grad"; the gradient of a value v is named "<v>.grad" (see docs/autodiff.md for the exception of
// gradients passed through unchanged). Errors: a graph that does not verify, no scalar loss, a non-float or
// repeated wrt value, a differentiated node whose op has no gradient rule, and rule failures, each naming
// the node.
Result<std::vector<ValueId>> append_gradients(Graph& g, std::span<const ValueId> wrt);

// A copy of `forward` (categories kept) with the backward graph appended, whose outputs are the loss followed
// by the gradient of each `wrt` value (by name: inputs, params or any floating-point value). An empty `wrt`
// means every floating-point param, in node order. A value the loss does not depend on gets a zero gradient
// (a `constant` 0.0 named "<v>.grad"). The result verifies.
Result<Graph> build_gradient_graph(const Graph& forward, std::span<const std::string> wrt);

// Nodes in a topological order over data and control edges; among ready nodes the smallest id goes first,
// so the order is deterministic. Errors name a node on a cycle.
Result<std::vector<NodeId>> topological_order(const Graph& g);

}  // namespace lms
