// tflms-swap: decisions from analysis/tflms_swaps, then node insertion, rewiring, sync edges and placement in
// node order (see tflms_swap.h for the rules).
#include "lms/passes/tflms_swap.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "lms/passes/rewrite.h"
#include "lms/plan/schedule.h"

namespace lms {

namespace {

Result<int> int_option(const Attributes& options, std::string_view name, int fallback) {
  int64_t v = options.get_int(name, fallback);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    return fail_at(fmt::format("option '{}'", name), "{} is out of range", v);
  return static_cast<int>(v);
}

}  // namespace

std::vector<AttrSpec> tflms_swap_options() {
  TflmsParams d;
  return {
      {"threshold", AttrKind::Int, Attribute{int64_t{d.swapout_threshold}},
       "T: a consumer is far when level(consumer) - level(source) > T; >= 0"},
      {"groupby", AttrKind::Int, Attribute{int64_t{d.swapin_groupby}},
       "G: far consumers within G levels of the previous one share a swap-in; <= 0: one swap-in each"},
      {"sync_mode", AttrKind::Int, Attribute{int64_t{0}},
       "0 async, 1 sync swap-out, 2 sync swap-in (G ignored), 3 both"},
      {"min_bytes", AttrKind::Int, Attribute{d.min_bytes}, "tensors smaller than this are never swapped"},
      {"include_ops", AttrKind::String, Attribute{std::string()},
       "op kinds whose outputs may be swapped, comma-separated; empty (and no include_names): all"},
      {"exclude_ops", AttrKind::String, Attribute{std::string()},
       "op kinds never swapped, never far consumers, never triggers, comma-separated"},
      {"include_names", AttrKind::String, Attribute{std::string()},
       "value names that may be swapped, comma-separated (with include_ops: either list admits)"},
      {"exclude_names", AttrKind::String, Attribute{std::string()},
       "value names never swapped (and nodes named by them never far consumers or triggers)"},
  };
}

Result<std::vector<std::string>> parse_name_list(const Attributes& options, std::string_view option, bool ops) {
  std::string text = options.get_string(option, "");
  std::vector<std::string> names;
  if (text.empty()) return names;
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) {
    if (!name.empty() && name.front() == '%') name.erase(0, 1);
    if (name.empty()) return fail_at(fmt::format("option '{}'", option), "has an empty name in '{}'", text);
    if (ops && !find_op(name)) return fail_at(fmt::format("option '{}'", option), "unknown op '{}'", name);
    names.push_back(name);
  }
  if (!text.empty() && text.back() == ',')
    return fail_at(fmt::format("option '{}'", option), "has an empty name in '{}'", text);
  return names;
}

Result<TflmsParams> tflms_params_from(const Attributes& options) {
  TflmsParams p;
  p.swapout_threshold = LMS_TRY(int_option(options, "threshold", p.swapout_threshold));
  p.swapin_ahead = LMS_TRY(int_option(options, "ahead", p.swapin_ahead));
  p.swapin_groupby = LMS_TRY(int_option(options, "groupby", p.swapin_groupby));
  p.trigger_window = LMS_TRY(int_option(options, "window", p.trigger_window));
  p.sync_mode = static_cast<SyncMode>(LMS_TRY(int_option(options, "sync_mode", 0)));
  p.min_bytes = options.get_int("min_bytes", p.min_bytes);
  p.include_ops = LMS_TRY(parse_name_list(options, "include_ops", true));
  p.exclude_ops = LMS_TRY(parse_name_list(options, "exclude_ops", true));
  p.include_names = LMS_TRY(parse_name_list(options, "include_names", false));
  p.exclude_names = LMS_TRY(parse_name_list(options, "exclude_names", false));
  LMS_TRY_VOID(check_tflms_params(p));
  return p;
}

Result<SwapDecisions> insert_tflms_swaps(Graph& g, const TflmsParams& params) {
  LMS_TRY_VOID(check_tflms_params(params));
  for (NodeId n : g.node_ids())
    if (g.def(n).traits.is_copy)
      return fail_at(fmt::format("%{}", g.value(g.first_output(n)).name),
                     "tflms-swap: the graph already holds swap ops; it rewrites a graph without them");
  if (!check_schedule_order(g)) g.reorder(LMS_TRY(schedule_order(g)));
  Levels levels = LMS_TRY(compute_levels(g));
  Reachability reach = LMS_TRY(compute_reachability(g, levels));
  SwapDecisions d = LMS_TRY(decide_tflms_swaps(g, levels, reach, params));

  const size_t original = g.num_nodes();
  const bool sync_out = params.sync_mode == SyncMode::sync_out || params.sync_mode == SyncMode::sync_both;
  const bool sync_in = params.sync_mode == SyncMode::sync_in || params.sync_mode == SyncMode::sync_both;
  // Where each new node goes in node order: swap-outs after their source, swap-ins before their first
  // consumer in node order (which is the target unless a later-level consumer has a smaller id).
  std::vector<std::vector<NodeId>> after(original), before(original);
  // Sync-out followers, taken from the graph before any rewiring: readers of any output of the source.
  std::vector<std::vector<NodeId>> followers(d.swaps.size());
  for (size_t i = 0; i < d.swaps.size(); ++i) {
    const TensorSwap& s = d.swaps[i];
    std::vector<NodeId> far;
    for (const SwapInGroup& grp : s.groups) far.insert(far.end(), grp.consumers.begin(), grp.consumers.end());
    for (ValueId out : g.node(s.source).outputs)
      for (NodeId c : g.value(out).consumers)
        if (std::find(far.begin(), far.end(), c) == far.end()) followers[i].push_back(c);
    std::sort(followers[i].begin(), followers[i].end());
    followers[i].erase(std::unique(followers[i].begin(), followers[i].end()), followers[i].end());
  }
  std::vector<std::pair<NodeId, NodeId>> sync_in_targets;  // (swap_in, target)
  for (size_t i = 0; i < d.swaps.size(); ++i) {
    const TensorSwap& s = d.swaps[i];
    const Value& val = g.value(s.value);
    TensorType type = val.type;
    std::string name = val.name;
    NodeId out = g.add_node(Op::swap_out, {}, std::span(&type, 1), std::vector<std::string>{name + ".out"},
                            Category::swap);
    g.set_inputs(out, {s.value});
    after[s.source.v].push_back(out);
    if (sync_out)
      for (NodeId f : followers[i]) g.add_control_input(f, out);
    for (size_t k = 0; k < s.groups.size(); ++k) {
      const SwapInGroup& grp = s.groups[k];
      NodeId in = g.add_node(Op::swap_in, {}, std::span(&type, 1),
                             std::vector<std::string>{fmt::format("{}.in{}", name, k)}, Category::swap);
      g.set_inputs(in, {g.first_output(out)});
      ValueId in_value = g.first_output(in);
      for (NodeId c : grp.consumers)
        for (size_t j = 0; j < g.node(c).inputs.size(); ++j)
          if (g.node(c).inputs[j] == s.value) g.replace_input(c, j, in_value);
      before[std::min_element(grp.consumers.begin(), grp.consumers.end())->v].push_back(in);
      if (sync_in) sync_in_targets.push_back({in, grp.target});
    }
  }
  // Sync-in edges after all rewiring, so "the target's other inputs" are what it finally reads.
  for (auto [in, target] : sync_in_targets)
    for (ValueId w : g.node(target).inputs) {
      NodeId p = g.value(w).producer;
      if (p == in || g.def(p).traits.source || g.def(p).traits.is_copy) continue;
      g.add_control_input(in, p);
    }
  LMS_TRY_VOID(place_new_nodes(g, original, before, after, "tflms-swap"));
  return d;
}

Result<void> run_tflms_swap_pass(Graph& g, const Attributes& options) {
  TflmsParams p = LMS_TRY(tflms_params_from(options));
  LMS_TRY(insert_tflms_swaps(g, p));
  return {};
}

}  // namespace lms
