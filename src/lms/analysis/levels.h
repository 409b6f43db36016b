// Levels: the categorized topological ordering of TFLMS (shared/TFLMS.md). Dependencies are data inputs plus
// control inputs; level 0 holds the nodes with no dependencies and level i the nodes whose dependencies all lie
// in earlier levels, so a node's level is the length of the longest path to it from a source. Nodes of one
// level are mutually independent. distance(u, v) = level(v) - level(u), >= 1 along every edge.
// Precondition: the graph is acyclic (an error names a node on a cycle otherwise).
#pragma once

#include <vector>

#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

struct Levels {
  std::vector<int> of_node;               // level of each node, indexed by NodeId
  std::vector<std::vector<NodeId>> nodes;  // nodes of each level, sorted by id

  int count() const { return static_cast<int>(nodes.size()); }
  int operator[](NodeId n) const { return of_node[n.v]; }
  int distance(NodeId from, NodeId to) const { return of_node[to.v] - of_node[from.v]; }
};

Result<Levels> compute_levels(const Graph& g);

}  // namespace lms
