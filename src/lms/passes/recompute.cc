// recompute: checks the chosen values and segments, places each one's clones before the earliest reader of the
// value it makes for backward readers (backward readers and clones of other chosen values), builds the clones in
// node order and rewires (see recompute.h).
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
           "values to recompute for their backward readers, comma-separated"},
          {"segments", AttrKind::String, Attribute{std::string()},
           "segments recomputed whole for their last value's backward readers: comma-separated values, "
           "segments separated by ';'"}};
}

Result<RecomputeStats> insert_recompute(Graph& g, const RecomputeOptions& opts) {
  if (opts.values.empty() && opts.segments.empty()) return RecomputeStats{};
  if (!check_schedule_order(g)) g.reorder(LMS_TRY(schedule_order(g)));
  // The chosen values by name, checked: ordinary ones one unit each, each segment one unit.
  auto lookup = [&](const std::string& name, std::string_view option) -> Result<ValueId> {
    auto v = g.find_value(name);
    if (!v) return fail_at(fmt::format("option '{}'", option), "unknown value %{}", name);
    const OpDef& d = g.def(g.value(*v).producer);
    if (std::string_view why = not_recomputable(d); !why.empty())
      return fail_at(fmt::format("%{}", name), "recompute: cannot recompute it: its producer {} is {}", d.name, why);
    return *v;
  };
  // Two values of one producer in `vs` (one output per producer: the clone makes them all).
  auto same_producer = [&](const std::vector<ValueId>& vs, ValueId v) -> Result<void> {
    for (ValueId other : vs)
      if (g.value(other).producer == g.value(v).producer)
        return fail_at(fmt::format("%{}", g.value(v).name),
                       "recompute: another output of its producer {} (%{}) is chosen too; choose one per op",
                       g.def(g.value(v).producer).name, g.value(other).name);
    return {};
  };
  std::vector<ValueId> values;
  for (const std::string& name : opts.values) {
    const ValueId v = LMS_TRY(lookup(name, "values"));
    if (std::find(values.begin(), values.end(), v) != values.end())
      return fail_at("option 'values'", "%{} is named twice", name);
    LMS_TRY_VOID(same_producer(values, v));
    values.push_back(v);
  }
  std::vector<std::vector<ValueId>> segments;
  for (const auto& names : opts.segments) {
    std::vector<ValueId> seg;
    for (const std::string& name : names) {
      const ValueId v = LMS_TRY(lookup(name, "segments"));
      if (std::find(seg.begin(), seg.end(), v) != seg.end())
        return fail_at("option 'segments'", "%{} is named twice in one segment", name);
      LMS_TRY_VOID(same_producer(seg, v));
      seg.push_back(v);
    }
    if (!seg.empty()) segments.push_back(std::move(seg));
  }
  auto by_producer = [&](ValueId a, ValueId b) { return g.value(a).producer < g.value(b).producer; };

  // Units, by the position of what they make for backward readers (the target): an ordinary value alone, or a
  // segment, whose target is its last-produced value and whose other values are made for it only.
  struct Unit {
    std::vector<ValueId> members;  // in node order; the last is the target
    bool segment = false;
  };
  std::vector<Unit> units;
  for (ValueId v : values) units.push_back({{v}, false});
  for (auto& seg : segments) {
    std::sort(seg.begin(), seg.end(), by_producer);
    units.push_back({seg, true});
  }
  std::sort(units.begin(), units.end(),
            [&](const Unit& a, const Unit& b) { return by_producer(a.members.back(), b.members.back()); });
  std::vector<int> unit_of(g.num_values(), -1);  // target -> its unit
  for (size_t u = 0; u < units.size(); ++u) {
    const ValueId t = units[u].members.back();
    if (unit_of[t.v] >= 0)
      return fail_at(fmt::format("%{}", g.value(t).name),
                     "recompute: it is chosen twice (as a value and as a segment's last value, or in two segments)");
    unit_of[t.v] = static_cast<int>(u);
  }
  // A segment's value read by no later value of it would be cloned for nothing.
  for (const Unit& u : units)
    for (size_t i = 0; u.segment && i + 1 < u.members.size(); ++i) {
      bool read = false;
      for (size_t j = i + 1; j < u.members.size() && !read; ++j)
        for (ValueId in : g.node(g.value(u.members[j]).producer).inputs)
          read = read || g.value(in).producer == g.value(u.members[i]).producer;
      if (!read)
        return fail_at(fmt::format("%{}", g.value(u.members[i]).name),
                       "recompute: no later value of its segment reads it (nothing to recompute it for)");
    }
  // Is `in` made inside unit `u` (by one of its members' producers)?
  auto internal = [&](const Unit& u, ValueId in) {
    for (ValueId m : u.members)
      if (g.value(m).producer == g.value(in).producer) return true;
    return false;
  };

  const size_t original = g.num_nodes();
  // Backward readers of each target, and each unit's slot: before the earliest node (by id) that will read its
  // target's clone. Later units are done first, so a clone reading another unit's clone has its slot already.
  std::vector<std::vector<NodeId>> readers(units.size());
  std::vector<uint32_t> slot(units.size(), kNowhere);
  for (size_t u = units.size(); u-- > 0;) {
    for (NodeId c : g.value(units[u].members.back()).consumers)
      if (g.node(c).category == Category::bwd) readers[u].push_back(c);
    if (!readers[u].empty()) slot[u] = std::min(slot[u], readers[u].front().v);  // consumers are sorted by id
    for (ValueId m : units[u].members)
      for (ValueId in : g.node(g.value(m).producer).inputs)
        if (unit_of[in.v] >= 0 && !internal(units[u], in)) slot[unit_of[in.v]] = std::min(slot[unit_of[in.v]], slot[u]);
  }
  for (size_t u = 0; u < units.size(); ++u)
    if (slot[u] == kNowhere)
      return fail_at(fmt::format("%{}", g.value(units[u].members.back()).name),
                     "recompute: no backward op reads it (nothing to recompute it for)");
  // Storage overwritten in place, by whom: a clone must run before any of those that touch its inputs.
  const std::vector<std::pair<ValueId, NodeId>> overwritten = in_place_overwrites(g);

  RecomputeStats stats;
  std::vector<std::vector<NodeId>> before(original);
  std::vector<ValueId> clone_of(units.size());  // each unit's clone of its target
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<std::pair<NodeId, NodeId>> cloned;  // (producer, its clone) in this unit
    for (ValueId v : units[u].members) {
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
        ValueId read = in;
        const NodeId p = g.value(in).producer;
        auto inside = std::find_if(cloned.begin(), cloned.end(), [&](const auto& pc) { return pc.first == p; });
        if (inside != cloned.end()) {
          const auto& outs = g.node(p).outputs;
          read = g.node(inside->second).outputs[std::find(outs.begin(), outs.end(), in) - outs.begin()];
        } else if (unit_of[in.v] >= 0) {
          read = clone_of[unit_of[in.v]];
        }
        inputs.push_back(read);
        in_types.push_back(g.value(in).type);
      }
      std::vector<std::pair<ValueId, NodeId>> writers;  // (input, in-place writer of its storage)
      for (ValueId in : inputs) {
        const ValueId root = g.storage_root(in);
        for (auto [r, writer] : overwritten)
          if (r == root) writers.emplace_back(in, writer);
      }
      for (auto [in, writer] : writers)
        if (writer.v < slot[u])
          return fail_at(fmt::format("%{}", name),
                         "recompute: its input %{} is overwritten in place by %{} before its first backward reader",
                         g.value(in).name, g.value(g.first_output(writer)).name);
      NodeId clone = g.add_node(producer.op, producer.attrs, out_types, out_names, Category::recompute);
      g.set_inputs(clone, inputs);
      for (auto [in, writer] : writers) g.add_control_input(writer, clone);
      cloned.push_back({g.value(v).producer, clone});
      before[slot[u]].push_back(clone);  // creation order is node order, so a clone follows those it reads
      stats.clones += 1;
      stats.flops += op_cost(producer.op, in_types, producer.attrs, out_types).flops;
      if (v == units[u].members.back()) clone_of[u] = g.node(clone).outputs[chosen_output];
    }
    const ValueId t = units[u].members.back();
    for (NodeId c : readers[u])
      for (size_t j = 0; j < g.node(c).inputs.size(); ++j)
        if (g.node(c).inputs[j] == t) g.replace_input(c, j, clone_of[u]);
    stats.redirected += static_cast<int>(readers[u].size());
  }

  LMS_TRY_VOID(place_new_nodes(g, original, before, std::vector<std::vector<NodeId>>(original), "recompute"));
  return stats;
}

Result<void> run_recompute_pass(Graph& g, const Attributes& options) {
  RecomputeOptions o;
  o.values = LMS_TRY(parse_name_list(options, "values", false));
  // segments: groups separated by ';', each a comma-separated list (checked as one)
  const std::string text = options.get_string("segments", "");
  for (size_t at = 0; !text.empty() && at <= text.size();) {
    const size_t end = std::min(text.find(';', at), text.size());
    Attributes one;
    one.set("segments", text.substr(at, end - at));
    o.segments.push_back(LMS_TRY(parse_name_list(one, "segments", false)));
    if (o.segments.back().empty()) return fail_at("option 'segments'", "has an empty segment in '{}'", text);
    at = end + 1;
  }
  LMS_TRY(insert_recompute(g, o));
  return {};
}

}  // namespace lms
