// tflms-triggers: bypass the copies, search each untriggered swap-in's trigger on that graph, add the edges and
// move the swap-ins (see tflms_triggers.h).
#include "lms/passes/tflms_triggers.h"

#include <algorithm>

#include "lms/passes/tflms_swap.h"
#include "lms/plan/schedule.h"

namespace lms {

Result<BypassedGraph> bypass_swaps(const Graph& g) {
  BypassedGraph b{g, {}};
  std::vector<bool> dead(g.num_nodes(), false);
  for (NodeId n : g.node_ids()) {
    Op op = g.node(n).op;
    if (!g.def(n).traits.is_copy) continue;
    dead[n.v] = true;
    if (op != Op::swap_in) continue;
    ValueId host = g.node(n).inputs.front();
    NodeId out = g.value(host).producer;
    if (g.node(out).op != Op::swap_out)
      return fail_at(fmt::format("%{}", g.value(g.first_output(n)).name), "swap_in does not read a swap_out");
    ValueId original = g.node(out).inputs.front();
    ValueId in_value = g.first_output(n);
    for (NodeId c : g.value(in_value).consumers)
      for (size_t j = 0; j < b.graph.node(c).inputs.size(); ++j)
        if (b.graph.node(c).inputs[j] == in_value) b.graph.replace_input(c, j, original);
  }
  for (ValueId v : g.outputs())
    if (dead[g.value(v).producer.v])
      return fail_at(fmt::format("%{}", g.value(v).name), "a copy's output is a graph output");
  for (NodeId n : g.node_ids())
    if (!dead[n.v]) b.old_of_new.push_back(n);
  b.graph.erase_nodes(dead);
  return b;
}

Result<int> add_tflms_triggers(Graph& g, const TflmsParams& params) {
  LMS_TRY_VOID(check_tflms_params(params));
  BypassedGraph b = LMS_TRY(bypass_swaps(g));
  std::vector<NodeId> new_of_old(g.num_nodes());
  for (uint32_t i = 0; i < b.old_of_new.size(); ++i) new_of_old[b.old_of_new[i].v] = NodeId{i};
  Levels levels = LMS_TRY(compute_levels(b.graph));
  Reachability reach = LMS_TRY(compute_reachability(b.graph, levels));

  std::vector<std::vector<NodeId>> after(g.num_nodes());  // swap-ins moved behind each node
  std::vector<bool> moved(g.num_nodes(), false);
  int added = 0;
  for (NodeId in : g.node_ids()) {
    if (g.node(in).op != Op::swap_in || !g.node(in).control_inputs.empty()) continue;
    NodeId out = g.value(g.node(in).inputs.front()).producer;
    NodeId source = new_of_old[g.value(g.node(out).inputs.front()).producer.v];
    const auto& readers = g.value(g.first_output(in)).consumers;
    if (readers.empty()) continue;  // nothing to prefetch for
    // The target: the earliest reader by (level, id) in the bypassed graph, as decide_tflms_swaps orders them.
    NodeId target = new_of_old[readers.front().v];
    for (NodeId r : readers) {
      NodeId c = new_of_old[r.v];
      if (levels[c] < levels[target] || (levels[c] == levels[target] && c < target)) target = c;
    }
    auto trigger = find_swapin_trigger(b.graph, levels, reach, source, target, params);
    if (!trigger) continue;  // fallback: stays synchronous
    NodeId t = b.old_of_new[trigger->v];
    g.add_control_input(in, t);
    after[std::max(t, out).v].push_back(in);
    moved[in.v] = true;
    ++added;
  }
  if (added == 0) return 0;
  std::vector<NodeId> order;
  order.reserve(g.num_nodes());
  for (NodeId n : g.node_ids()) {
    if (!moved[n.v]) order.push_back(n);
    order.insert(order.end(), after[n.v].begin(), after[n.v].end());  // by swap_in id
  }
  g.reorder(order);
  if (!check_schedule_order(g)) g.reorder(LMS_TRY(schedule_order(g)));
  return added;
}

std::vector<AttrSpec> tflms_triggers_options() {
  TflmsParams d;
  return {
      {"ahead", AttrKind::Int, Attribute{int64_t{d.swapin_ahead}},
       "A: the search starts at level(target) - A - 1; >= 0"},
      {"window", AttrKind::Int, Attribute{int64_t{d.trigger_window}},
       "levels searched below level(target) - A before falling back to synchronous; >= 0"},
      {"exclude_ops", AttrKind::String, Attribute{std::string()}, "op kinds never chosen as triggers, comma-separated"},
      {"exclude_names", AttrKind::String, Attribute{std::string()},
       "nodes (named by their first output) never chosen as triggers, comma-separated"},
  };
}

Result<void> run_tflms_triggers_pass(Graph& g, const Attributes& options) {
  TflmsParams p = LMS_TRY(tflms_params_from(options));
  LMS_TRY(add_tflms_triggers(g, p));
  return {};
}

}  // namespace lms
