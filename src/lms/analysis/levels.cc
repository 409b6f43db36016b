// Levels by longest path, computed in one Kahn sweep over data and control edges.
#include "lms/analysis/levels.h"

#include "lms/ir/verifier.h"

namespace lms {

Result<Levels> compute_levels(const Graph& g) {
  size_t n = g.num_nodes();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<NodeId>> succ(n);
  auto edge = [&](NodeId from, NodeId to) {
    succ[from.v].push_back(to);
    ++pending[to.v];
  };
  for (NodeId id : g.node_ids()) {
    for (ValueId v : g.node(id).inputs) edge(g.value(v).producer, id);
    for (NodeId c : g.node(id).control_inputs) edge(c, id);
  }
  Levels lv;
  lv.of_node.assign(n, 0);
  std::vector<NodeId> ready;
  for (NodeId id : g.node_ids())
    if (pending[id.v] == 0) ready.push_back(id);
  size_t done = 0;
  // Processing order does not matter for the result: a node's level is the max over its predecessors + 1,
  // final once all of them are done.
  while (!ready.empty()) {
    NodeId id = ready.back();
    ready.pop_back();
    ++done;
    for (NodeId s : succ[id.v]) {
      lv.of_node[s.v] = std::max(lv.of_node[s.v], lv.of_node[id.v] + 1);
      if (--pending[s.v] == 0) ready.push_back(s);
    }
  }
  if (done != n) {
    for (NodeId id : g.node_ids())
      if (pending[id.v] > 0) return fail_at(node_label(g, id), "levels: the graph has a cycle through this node");
  }
  int count = 0;
  for (int l : lv.of_node) count = std::max(count, l + 1);
  lv.nodes.resize(n == 0 ? 0 : count);
  for (NodeId id : g.node_ids()) lv.nodes[lv.of_node[id.v]].push_back(id);  // ids ascending within a level
  return lv;
}

}  // namespace lms
