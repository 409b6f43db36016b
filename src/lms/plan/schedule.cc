// Schedule: node-id order when valid, else Kahn's algorithm by smallest id (see schedule.h).
#include "lms/plan/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "lms/ir/verifier.h"

namespace lms {

namespace {
// Calls f(dependency) for every node that must run before `n`: producers of its inputs and its control inputs.
template <class F>
void for_each_dependency(const Graph& g, NodeId n, F&& f) {
  for (ValueId v : g.node(n).inputs) f(g.value(v).producer);
  for (NodeId c : g.node(n).control_inputs) f(c);
}
}  // namespace

Result<void> check_schedule_order(const Graph& g) {
  for (NodeId n : g.node_ids()) {
    std::optional<NodeId> late;
    for_each_dependency(g, n, [&](NodeId d) {
      if (d >= n && !late) late = d;
    });
    if (late)
      return fail_at(node_label(g, n), "not in schedule order: it depends on {}, which comes at or after it",
                     node_label(g, *late));
  }
  return {};
}

Result<std::vector<NodeId>> schedule_order(const Graph& g) {
  if (check_schedule_order(g)) return g.node_ids();
  return schedule_order_by(g, {});
}

Result<std::vector<NodeId>> schedule_order_by(const Graph& g, std::span<const int64_t> priority) {
  // Kahn's algorithm; ties go to the smallest (priority, node id), so the order is deterministic.
  auto key = [&](NodeId n) { return std::pair{priority.empty() ? int64_t{n.v} : priority[n.v], n.v}; };
  std::vector<int> pending(g.num_nodes(), 0);
  std::vector<std::vector<NodeId>> dependents(g.num_nodes());
  for (NodeId n : g.node_ids()) {
    std::vector<NodeId> deps;
    for_each_dependency(g, n, [&](NodeId d) { deps.push_back(d); });
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    pending[n.v] = static_cast<int>(deps.size());
    for (NodeId d : deps) dependents[d.v].push_back(n);
  }
  using Entry = std::pair<int64_t, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (NodeId n : g.node_ids())
    if (pending[n.v] == 0) ready.push(key(n));
  std::vector<NodeId> order;
  order.reserve(g.num_nodes());
  while (!ready.empty()) {
    NodeId n{ready.top().second};
    ready.pop();
    order.push_back(n);
    for (NodeId m : dependents[n.v])
      if (--pending[m.v] == 0) ready.push(key(m));
  }
  if (order.size() != g.num_nodes()) {
    // Every unscheduled node has an unscheduled dependency; walking those back must revisit a node, which
    // therefore lies on a cycle.
    std::vector<bool> scheduled(g.num_nodes(), false), seen(g.num_nodes(), false);
    for (NodeId n : order) scheduled[n.v] = true;
    NodeId n{0};
    while (scheduled[n.v]) n.v++;
    while (!seen[n.v]) {
      seen[n.v] = true;
      NodeId next = n;
      for_each_dependency(g, n, [&](NodeId d) {
        if (!scheduled[d.v] && next == n) next = d;
      });
      n = next;
    }
    return fail_at(node_label(g, n), "cannot schedule: the graph has a cycle through this node");
  }
  return order;
}

Result<Graph> schedule(const Graph& g) {
  std::vector<NodeId> order = LMS_TRY(schedule_order(g));
  Graph out = g;
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i].v == i;
  if (!identity) out.reorder(order);
  out.set_scheduled(true);
  return out;
}

}  // namespace lms
