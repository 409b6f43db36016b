// TFLMS's swap decisions (shared/TFLMS.md; docs/tflms.md lists every rule as implemented): eligibility of each
// tensor, near/far split by the threshold, grouping of far consumers into swap-ins, and the trigger search.
// Pure: reads the graph, its levels and reachability, and returns data; the passes and the simulator share it.
#include "lms/analysis/tflms_swaps.h"

#include <algorithm>

namespace lms {

namespace {

bool contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// The far consumers of one tensor grouped into swap-ins (TFLMS.md "The inserted ops"). `far` is sorted by
// (level, id). In the synchronous swap-in modes G is ignored and every far consumer gets its own swap-in
// (ours: a just-in-time copy serves exactly the op it waits for).
std::vector<std::vector<NodeId>> group_consumers(const std::vector<NodeId>& far, const Levels& levels,
                                                 const TflmsParams& p) {
  bool sync_in = p.sync_mode == SyncMode::sync_in || p.sync_mode == SyncMode::sync_both;
  int g = sync_in ? 0 : p.swapin_groupby;
  std::vector<std::vector<NodeId>> groups;
  for (NodeId c : far) {
    if (g > 0 && !groups.empty() && levels[c] - levels[groups.back().back()] <= g) groups.back().push_back(c);
    else groups.push_back({c});
  }
  return groups;
}

}  // namespace

Result<void> check_tflms_params(const TflmsParams& p) {
  if (p.swapout_threshold < 0)
    return fail_at("option 'threshold'", "must be >= 0 (a consumer is far when its distance exceeds it), got {}",
                   p.swapout_threshold);
  if (p.swapin_ahead < 0) return fail_at("option 'ahead'", "must be >= 0, got {}", p.swapin_ahead);
  if (p.trigger_window < 0) return fail_at("option 'window'", "must be >= 0, got {}", p.trigger_window);
  if (p.min_bytes < 0) return fail_at("option 'min_bytes'", "must be >= 0, got {}", p.min_bytes);
  int mode = static_cast<int>(p.sync_mode);
  if (mode < 0 || mode > 3)
    return fail_at("option 'sync_mode'", "must be 0 (async), 1 (sync swap-out), 2 (sync swap-in) or 3 (both), got {}",
                   mode);
  return {};
}

bool tflms_node_excluded(const Graph& g, NodeId n, const TflmsParams& p) {
  const Traits& t = g.def(n).traits;
  if (t.source || t.persistent || t.random || t.side_effecting || t.in_place || t.is_copy) return true;
  if (contains(p.exclude_ops, op_name(g.node(n).op))) return true;
  const Node& node = g.node(n);
  return !node.outputs.empty() && contains(p.exclude_names, g.value(node.outputs.front()).name);
}

std::optional<NodeId> find_swapin_trigger(const Graph& g, const Levels& levels, const Reachability& reach,
                                          NodeId source, NodeId target, const TflmsParams& p) {
  int ub = levels[target] - p.swapin_ahead;
  int lb = std::max(ub - p.trigger_window, levels[source] + 1);
  for (int i = ub - 1; i >= lb; --i) {
    // levels.nodes[i] is sorted by id, so the first eligible one is the smallest id (the tie-break, ours).
    for (NodeId c : levels.nodes[static_cast<size_t>(i)])
      if (!tflms_node_excluded(g, c, p) && reach.reaches(c, target)) return c;
  }
  return std::nullopt;
}

Result<SwapDecisions> decide_tflms_swaps(const Graph& g, const Levels& levels, const Reachability& reach,
                                         const TflmsParams& params) {
  LMS_TRY_VOID(check_tflms_params(params));
  if (levels.of_node.size() != g.num_nodes() || reach.num_nodes() != g.num_nodes())
    return fail("tflms: levels ({} nodes) or reachability ({} nodes) were not computed for this graph ({} nodes)",
                levels.of_node.size(), reach.num_nodes(), g.num_nodes());
  for (NodeId n : g.node_ids())
    if (g.def(n).traits.is_copy)
      return fail("tflms: the graph already holds copy op {} ('{}'); decide on the graph without swap ops",
                  g.value(g.first_output(n)).name, op_name(g.node(n).op));
  bool async_in = params.sync_mode == SyncMode::async || params.sync_mode == SyncMode::sync_out;
  bool include_all = params.include_ops.empty() && params.include_names.empty();

  SwapDecisions d;
  d.params = params;
  for (NodeId src : g.node_ids()) {
    if (tflms_node_excluded(g, src, params)) continue;
    bool op_included = contains(params.include_ops, op_name(g.node(src).op));
    for (ValueId v : g.node(src).outputs) {
      const Value& val = g.value(v);
      // Rule 1: rank <= 1, the size floor; then tensors that are not plain device buffers of their own
      // (host values, persistent values, aliases of another buffer: TFLMS's "identities").
      if (val.type.rank() <= 1 || val.type.bytes() < params.min_bytes) continue;
      if (val.placement != Placement::device || g.is_persistent(v) || g.storage_root(v) != v) continue;
      if (contains(params.exclude_names, val.name)) continue;
      if (!include_all && !op_included && !contains(params.include_names, val.name)) continue;
      // Rule 2: far consumers (strict threshold), minus excluded ones, which keep the device tensor (near).
      std::vector<NodeId> far, near;
      for (NodeId c : val.consumers) {
        if (levels.distance(src, c) > params.swapout_threshold && !tflms_node_excluded(g, c, params))
          far.push_back(c);
        else
          near.push_back(c);
      }
      if (far.empty()) continue;
      std::sort(far.begin(), far.end(), [&](NodeId a, NodeId b) {
        return levels[a] != levels[b] ? levels[a] < levels[b] : a < b;  // tie-break: node id
      });
      TensorSwap s;
      s.value = v;
      s.source = src;
      s.near_consumers = std::move(near);  // consumers are stored sorted by id
      s.bytes = val.type.bytes();
      for (auto& members : group_consumers(far, levels, params)) {
        SwapInGroup grp;
        grp.target = members.front();
        grp.consumers = std::move(members);
        if (async_in) grp.trigger = find_swapin_trigger(g, levels, reach, src, grp.target, params);
        s.groups.push_back(std::move(grp));
      }
      d.swap_out_bytes += s.bytes;
      d.swap_in_bytes += s.bytes * static_cast<int64_t>(s.groups.size());
      d.swaps.push_back(std::move(s));
    }
  }
  std::sort(d.swaps.begin(), d.swaps.end(),
            [](const TensorSwap& a, const TensorSwap& b) { return a.value < b.value; });  // value ids are unique
  return d;
}

}  // namespace lms
