// recompute: checks the chosen values, places each clone before the earliest of its readers (backward readers
// and clones of other chosen values), builds the clones in node order and rewires (see recompute.h).
#include "lms/passes/recompute.h"

#include <algorithm>

#include "lms/passes/rewrite.h"
#include "lms/passes/tflms_swap.h"
#include "lms/plan/schedule.h"

namespace lms {

namespace {

constexpr uint32_t kNowhere = UINT32_MAX;  // no reader yet



}  // namespace

std::string_view not_recomputable(const OpDef& d) {
  const Traits& t = d.traits;
  if (t.source) return "a source";
  if (t.persistent) return "persistent";
  if (t.random) return "random (a rerun would draw other numbers)";
  if (t.in_place) return "in-place";
  if (t.is_copy) return "a copy";
  if (t.side_effecting) return "side-effecting";
  if (!t.recomputable) return "not recomputable";
  return {};
}

std::vector<AttrSpec> recompute_options() {
  return {{"values", AttrKind::String, Attribute{std::string()},
           "values to recompute for their backward readers, comma-separated"}};
}

Result<RecomputeStats> insert_recompute(Graph& g, const RecomputeOptions& opts) {
  // The chosen values, checked, in node order (one output per producer, so producer order).
  std::vector<ValueId> chosen;
  for (const std::string& name : opts.values) {
    auto v = g.find_value(name);
    if (!v) return fail_at("option 'values'", "unknown value %{}", name);
    if (std::find(chosen.begin(), chosen.end(), *v) != chosen.end())
      return fail_at("option 'values'", "%{} is named twice", name);
    const NodeId p = g.value(*v).producer;
    const OpDef& d = g.def(p);
    if (std::string_view why = not_recomputable(d); !why.empty())
      return fail_at(fmt::format("%{}", name), "recompute: cannot recompute it: its producer {} is {}", d.name, why);
    for (ValueId other : chosen)
      if (g.value(other).producer == p)
        return fail_at(fmt::format("%{}", name),
                       "recompute: another output of its producer {} (%{}) is chosen too; choose one per op",
                       d.name, g.value(other).name);
    chosen.push_back(*v);
  }
  if (!check_schedule_order(g)) {
    g.reorder(LMS_TRY(schedule_order(g)));
    for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = *g.find_value(opts.values[i]);  // renumbered
  }
  std::sort(chosen.begin(), chosen.end(),
            [&](ValueId a, ValueId b) { return g.value(a).producer < g.value(b).producer; });  // one per producer

  const size_t original = g.num_nodes();
  std::vector<int> index_of(g.num_values(), -1);  // chosen value -> its index in `chosen`
  for (size_t i = 0; i < chosen.size(); ++i) index_of[chosen[i].v] = static_cast<int>(i);
  // Backward readers, and the clone's slot: before the earliest node (by id) that will read the clone. Later
  // chosen values are done first, so a clone reading another one's clone has its slot already.
  std::vector<std::vector<NodeId>> readers(chosen.size());
  std::vector<uint32_t> slot(chosen.size(), kNowhere);
  for (size_t i = chosen.size(); i-- > 0;) {
    for (NodeId c : g.value(chosen[i]).consumers)
      if (g.node(c).category == Category::bwd) readers[i].push_back(c);
    if (!readers[i].empty()) slot[i] = std::min(slot[i], readers[i].front().v);  // consumers are sorted by id
    for (ValueId in : g.node(g.value(chosen[i]).producer).inputs)
      if (index_of[in.v] >= 0) slot[index_of[in.v]] = std::min(slot[index_of[in.v]], slot[i]);
  }
  for (size_t i = 0; i < chosen.size(); ++i)
    if (slot[i] == kNowhere)
      return fail_at(fmt::format("%{}", g.value(chosen[i]).name),
                     "recompute: no backward op reads it (nothing to recompute it for)");
  // Storage overwritten in place, by whom: a clone must run before any of those that touch its inputs.
  const std::vector<std::pair<ValueId, NodeId>> overwritten = in_place_overwrites(g);

  RecomputeStats stats;
  std::vector<std::vector<NodeId>> before(original);
  std::vector<ValueId> clone_of(chosen.size());
  for (size_t i = 0; i < chosen.size(); ++i) {
    const ValueId v = chosen[i];
    const Node producer = g.node(g.value(v).producer);  // a copy: add_node may move the node storage
    const std::string name = g.value(v).name;
    std::vector<TensorType> out_types;
    std::vector<std::string> out_names;
    size_t chosen_output = 0;
    for (size_t k = 0; k < producer.outputs.size(); ++k) {
      out_types.push_back(g.value(producer.outputs[k]).type);
      out_names.push_back(free_name(g, g.value(producer.outputs[k]).name, "re"));
      if (producer.outputs[k] == v) chosen_output = k;
    }
    std::vector<ValueId> inputs;
    std::vector<TensorType> in_types;
    for (ValueId in : producer.inputs) {
      inputs.push_back(index_of[in.v] >= 0 ? clone_of[index_of[in.v]] : in);
      in_types.push_back(g.value(in).type);
    }
    for (auto [root, writer] : overwritten)
      for (ValueId in : inputs)
        if (g.storage_root(in) == root && writer.v < slot[i])
          return fail_at(fmt::format("%{}", name),
                         "recompute: its input %{} is overwritten in place by %{} before its first backward reader",
                         g.value(in).name, g.value(g.first_output(writer)).name);
    NodeId clone = g.add_node(producer.op, producer.attrs, out_types, out_names, Category::recompute);
    g.set_inputs(clone, inputs);
    for (auto [root, writer] : overwritten)
      for (ValueId in : inputs)
        if (g.storage_root(in) == root) g.add_control_input(writer, clone);
    clone_of[i] = g.node(clone).outputs[chosen_output];
    for (NodeId c : readers[i])
      for (size_t j = 0; j < g.node(c).inputs.size(); ++j)
        if (g.node(c).inputs[j] == v) g.replace_input(c, j, clone_of[i]);
    before[slot[i]].push_back(clone);  // creation order is node order, so a clone follows those it reads
    stats.clones += 1;
    stats.redirected += static_cast<int>(readers[i].size());
    stats.flops += op_cost(producer.op, in_types, producer.attrs, out_types).flops;
  }

  LMS_TRY_VOID(place_new_nodes(g, original, before, std::vector<std::vector<NodeId>>(original), "recompute"));
  return stats;
}

Result<void> run_recompute_pass(Graph& g, const Attributes& options) {
  RecomputeOptions o;
  o.values = LMS_TRY(parse_name_list(options, "values", false));
  LMS_TRY(insert_recompute(g, o));
  return {};
}

}  // namespace lms
