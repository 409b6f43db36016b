// The schedule: one execution order of a graph's nodes, respecting data edges and control edges (the training
// graph's in-place updates are ordered after every other reader of what they overwrite by control edges, so
// any valid order runs them last). For now the order is deterministic and simple: node-id order when it is
// already valid (model builders and autodiff append nodes in a valid order), else Kahn's algorithm taking the
// smallest ready node id first. A later issue chooses orders for memory and overlap; everything downstream
// only needs *an* order, given as a graph marked `scheduled` whose node-id order is the execution order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

// The execution order (a permutation of all node ids). Error if the graph has a cycle, naming a node on it.
Result<std::vector<NodeId>> schedule_order(const Graph& g);

// Kahn's algorithm taking the ready node with the smallest (priority[n], n) first: the order that follows
// `priority` wherever the edges allow (by NodeId; empty: node ids). Error if the graph has a cycle.
Result<std::vector<NodeId>> schedule_order_by(const Graph& g, std::span<const int64_t> priority);

// A copy of `g` renumbered into schedule order and marked `scheduled` (names, edges, outputs unchanged).
Result<Graph> schedule(const Graph& g);

// Checks that node-id order is a valid execution order: every data input and control input of a node comes
// from an earlier node. Errors name the node and the late dependency.
Result<void> check_schedule_order(const Graph& g);

}  // namespace lms
