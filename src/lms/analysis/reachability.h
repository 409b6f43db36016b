// Reachability over data edges: is node `a` an ancestor of node `b` (a path of data inputs from a to b)? The
// trigger search of TFLMS asks this for many (candidate, target) pairs, so queries must be cheap on graphs of
// 100k nodes: no search per query. Built once per graph; answers only for the graph it was built from.
// Precondition: acyclic.
#pragma once

#include <cstdint>
#include <vector>

#include "lms/analysis/levels.h"
#include "lms/ir/graph.h"
#include "lms/support/error.h"

namespace lms {

class Reachability {
 public:
  // True when a == b or a reaches b through data edges (control edges do not count: TFLMS.md, trigger rule).
  bool reaches(NodeId a, NodeId b) const;
  size_t num_nodes() const { return num_nodes_; }
  // Bytes held by the labels (for benchmarks and the memory statement in reachability.cc).
  size_t memory_bytes() const;

 private:
  friend Result<Reachability> compute_reachability(const Graph& g, const Levels& levels);
  size_t num_nodes_ = 0;
  // Representation is the implementation's choice (see Note [Ancestor interval labels] in reachability.cc).
  std::vector<int> level_;          // level of each node: a node reaches only nodes of higher levels
  std::vector<uint32_t> post_;      // each node's number in a depth-first post-order over data predecessors
  std::vector<uint64_t> offset_;    // node b's intervals: [offset_[post_[b]], offset_[post_[b] + 1]) in lo_/hi_
  std::vector<uint32_t> lo_, hi_;   // inclusive post-order intervals holding exactly the node's ancestors
};

Result<Reachability> compute_reachability(const Graph& g, const Levels& levels);

}  // namespace lms
