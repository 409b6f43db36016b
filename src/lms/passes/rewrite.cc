// Shared pieces of the rewriting passes (see rewrite.h).
#include "lms/passes/rewrite.h"

#include <fmt/format.h>

#include "lms/plan/schedule.h"

namespace lms {

std::string free_name(const Graph& g, const std::string& base, std::string_view suffix) {
  std::string name = fmt::format("{}.{}", base, suffix);
  for (int k = 2; g.find_value(name); ++k) name = fmt::format("{}.{}{}", base, suffix, k);
  return name;
}

std::vector<std::pair<ValueId, NodeId>> in_place_overwrites(const Graph& g) {
  std::vector<std::pair<ValueId, NodeId>> out;
  for (NodeId n : g.node_ids()) {
    const OpDef& d = g.def(n);
    if (!d.traits.in_place) continue;
    for (int a : d.aliases)
      if (a >= 0 && a < static_cast<int>(g.node(n).inputs.size()))
        out.push_back({g.storage_root(g.node(n).inputs[a]), n});
  }
  return out;
}

Result<void> place_new_nodes(Graph& g, size_t original, const std::vector<std::vector<NodeId>>& before,
                             const std::vector<std::vector<NodeId>>& after, std::string_view pass) {
  std::vector<NodeId> order;
  order.reserve(g.num_nodes());
  for (uint32_t i = 0; i < original; ++i) {
    order.insert(order.end(), before[i].begin(), before[i].end());
    order.push_back(NodeId{i});
    order.insert(order.end(), after[i].begin(), after[i].end());
  }
  g.reorder(order);
  auto ok = check_schedule_order(g);
  if (!ok) return wrap(fmt::format("{}: internal error, the rewrite broke the schedule order", pass), ok.error());
  return {};
}

}  // namespace lms
