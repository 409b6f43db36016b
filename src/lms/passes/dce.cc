// Dead-code elimination by a backward walk from the roots.
#include "lms/passes/dce.h"

namespace lms {

Result<int> eliminate_dead_code(Graph& g) {
  if (g.outputs().empty())
    return fail("dce: the graph has no `return` line, so nothing marks what is live");
  std::vector<bool> live(g.num_nodes(), false);
  std::vector<NodeId> stack;
  auto mark = [&](NodeId n) {
    if (!live[n.v]) {
      live[n.v] = true;
      stack.push_back(n);
    }
  };
  for (ValueId v : g.outputs()) mark(g.value(v).producer);
  for (NodeId n : g.node_ids())
    if (g.def(n).traits.side_effecting) mark(n);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    for (ValueId v : g.node(n).inputs) mark(g.value(v).producer);
    for (NodeId c : g.node(n).control_inputs) mark(c);
  }
  std::vector<bool> dead(g.num_nodes());
  int removed = 0;
  for (size_t i = 0; i < dead.size(); ++i) {
    dead[i] = !live[i];
    removed += dead[i] ? 1 : 0;
  }
  if (removed > 0) g.erase_nodes(dead);
  return removed;
}

}  // namespace lms
