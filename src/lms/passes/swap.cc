// swap: checks the choices against the schedule order (before touching the graph), puts the graph into schedule
// order if needed, builds each swap pair in value-id order, rewires the late readers and places the new nodes
// (see swap.h).
#include "lms/passes/swap.h"

#include <algorithm>

#include "lms/ir/verifier.h"
#include "lms/passes/rewrite.h"
#include "lms/passes/tflms_swap.h"
#include "lms/plan/schedule.h"

namespace lms {

bool is_late_reader(const Graph& g, NodeId n) {
  return g.node(n).category == Category::bwd || g.node(n).category == Category::recompute;
}

namespace {

// A chosen value, checked, with its trigger and hold (invalid: none).
struct Checked {
  ValueId value;
  NodeId trigger;
  NodeId hold;
};

// Late readers: the consumers that read the swap_in instead of the value (sorted by id, as consumers are).
std::vector<NodeId> late_readers(const Graph& g, ValueId v) {
  std::vector<NodeId> readers;
  for (NodeId c : g.value(v).consumers)
    if (is_late_reader(g, c)) readers.push_back(c);
  return readers;
}


// Checks one choice on the graph as it is (names, the value, the trigger's kind); positions come later.
Result<Checked> check_choice(const Graph& g, const SwapChoice& c) {
  auto v = g.find_value(c.value);
  if (!v) return fail_at("option 'values'", "unknown value %{}", c.value);
  const std::string where = fmt::format("%{}", c.value);
  const NodeId p = g.value(*v).producer;
  const OpDef& d = g.def(p);
  if (g.is_persistent(*v)) return fail_at(where, "swap: cannot swap it: it is persistent");
  if (g.value(*v).placement == Placement::host) return fail_at(where, "swap: cannot swap it: it is on the host");
  if (d.traits.source) return fail_at(where, "swap: cannot swap it: its producer {} is a source", d.name);
  if (d.traits.is_copy) return fail_at(where, "swap: cannot swap it: its producer {} is a copy", d.name);
  if (late_readers(g, *v).empty())
    return fail_at(where, "swap: no backward op or recompute clone reads it (nothing to swap it in for)");
  // A trigger or hold: the node making the named value, not a copy.
  auto node_named = [&](const std::string& name, std::string_view role) -> Result<NodeId> {
    if (name.empty()) return NodeId{};
    auto t = g.find_value(name);
    if (!t) return fail_at("option 'values'", "unknown {} %{} for %{}", role, name, c.value);
    const NodeId n = g.value(*t).producer;
    if (g.def(n).traits.is_copy) return fail_at(where, "swap: its {} %{} is a copy ({})", role, name, g.def(n).name);
    return n;
  };
  return Checked{*v, LMS_TRY(node_named(c.trigger, "trigger")), LMS_TRY(node_named(c.hold, "hold"))};
}

}  // namespace

std::vector<AttrSpec> swap_options() {
  return {{"values", AttrKind::String, Attribute{std::string()},
           "values to swap out and back in for their late readers, comma-separated `name`, `name:trigger`, "
           "`name@hold` or `name@hold:trigger` (the swap-in waits for the node making %trigger; the value's space "
           "stays allocated up to the node making %hold)"}};
}

Result<SwapStats> insert_swaps(Graph& g, const SwapOptions& opts) {
  std::vector<Checked> chosen;
  for (const SwapChoice& c : opts.swaps) {
    Checked k = LMS_TRY(check_choice(g, c));
    for (const Checked& other : chosen)
      if (other.value == k.value) return fail_at("option 'values'", "%{} is named twice", c.value);
    chosen.push_back(k);
  }
  // Positions in the schedule order the rewrite will start from, so that a bad trigger is reported before the
  // graph is reordered.
  std::vector<NodeId> order;
  const bool ordered = check_schedule_order(g).has_value();
  if (!ordered) order = LMS_TRY(schedule_order(g));
  std::vector<uint32_t> pos(g.num_nodes());
  for (uint32_t i = 0; i < pos.size(); ++i) pos[ordered ? i : order[i].v] = i;
  const std::vector<std::pair<ValueId, NodeId>> overwritten_before = in_place_overwrites(g);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Checked& k = chosen[i];
    const NodeId p = g.value(k.value).producer;
    std::vector<NodeId> readers = late_readers(g, k.value);
    const NodeId first = *std::min_element(readers.begin(), readers.end(),
                                           [&](NodeId a, NodeId b) { return pos[a.v] < pos[b.v]; });
    const std::string where = fmt::format("%{}", opts.swaps[i].value);
    auto check_between = [&](NodeId n, std::string_view role, const std::string& name) -> Result<void> {
      if (!n.valid()) return {};
      if (pos[n.v] < pos[p.v])
        return fail_at(where, "swap: its {} %{} comes before its producer {} in node order", role, name,
                       node_label(g, p));
      if (pos[n.v] >= pos[first.v])
        return fail_at(where, "swap: its {} %{} does not come before its first late reader {} in node order", role,
                       name, node_label(g, first));
      return {};
    };
    LMS_TRY_VOID(check_between(k.trigger, "trigger", opts.swaps[i].trigger));
    LMS_TRY_VOID(check_between(k.hold, "hold", opts.swaps[i].hold));
    if (!k.hold.valid()) continue;
    if (k.trigger.valid() && pos[k.hold.v] > pos[k.trigger.v])
      return fail_at(where, "swap: its hold %{} comes after its trigger %{} in node order", opts.swaps[i].hold,
                     opts.swaps[i].trigger);
    const ValueId storage = g.storage_root(k.value);
    for (auto [root, writer] : overwritten_before)
      if (root == storage && pos[writer.v] > pos[p.v] && pos[writer.v] <= pos[k.hold.v])
        return fail_at(where, "swap: its hold %{} is not before {}, which overwrites its storage in place",
                       opts.swaps[i].hold, node_label(g, writer));
  }
  if (!ordered) {
    g.reorder(order);
    for (size_t i = 0; i < chosen.size(); ++i) {  // renumbered: found again by name
      const SwapChoice& c = opts.swaps[i];
      chosen[i].value = *g.find_value(c.value);
      if (!c.trigger.empty()) chosen[i].trigger = g.value(*g.find_value(c.trigger)).producer;
      if (!c.hold.empty()) chosen[i].hold = g.value(*g.find_value(c.hold)).producer;
    }
  }
  std::sort(chosen.begin(), chosen.end(), [](const Checked& a, const Checked& b) { return a.value < b.value; });

  // Storage overwritten in place, by whom: such a writer after the producer must also wait for the swap_out.
  const std::vector<std::pair<ValueId, NodeId>> overwritten = in_place_overwrites(g);

  const size_t original = g.num_nodes();
  // Where the new nodes go in node order: swap_outs right after their producer (or hold), triggered swap_ins right
  // after their trigger (after the swap_outs there, which one of them may read), untriggered ones right before the
  // first late reader. Each list is in value-id order (the creation order).
  std::vector<std::vector<NodeId>> outs_after(original), ins_after(original), ins_before(original);
  SwapStats stats;
  for (const Checked& k : chosen) {
    const ValueId v = k.value;
    const NodeId p = g.value(v).producer;
    const TensorType type = g.value(v).type;
    const std::string name = g.value(v).name;
    const std::vector<NodeId> readers = late_readers(g, v);  // a copy: rewiring edits the consumer list
    NodeId out = g.add_node(Op::swap_out, {}, std::span(&type, 1),
                            std::vector<std::string>{free_name(g, name, "out")}, Category::swap);
    g.set_inputs(out, {v});
    NodeId in = g.add_node(Op::swap_in, {}, std::span(&type, 1),
                           std::vector<std::string>{free_name(g, name, "in")}, Category::swap);
    g.set_inputs(in, {g.first_output(out)});
    const ValueId in_value = g.first_output(in);
    for (NodeId c : readers)
      for (size_t j = 0; j < g.node(c).inputs.size(); ++j)
        if (g.node(c).inputs[j] == v) g.replace_input(c, j, in_value);
    const ValueId storage = g.storage_root(v);
    for (auto [root, writer] : overwritten)
      if (root == storage && writer > p) g.add_control_input(writer, out);
    outs_after[k.hold.valid() ? k.hold.v : p.v].push_back(out);
    if (k.trigger.valid()) {
      g.add_control_input(in, k.trigger);
      ins_after[k.trigger.v].push_back(in);
      stats.triggered += 1;
    } else {
      ins_before[readers.front().v].push_back(in);
    }
    stats.swapped += 1;
    stats.redirected += static_cast<int>(readers.size());
    stats.bytes_each_way += type.bytes();
  }

  for (size_t i = 0; i < original; ++i)  // after a node: its swap_outs, then the swap_ins it triggers
    outs_after[i].insert(outs_after[i].end(), ins_after[i].begin(), ins_after[i].end());
  LMS_TRY_VOID(place_new_nodes(g, original, ins_before, outs_after, "swap"));
  return stats;
}

Result<void> run_swap_pass(Graph& g, const Attributes& options) {
  SwapOptions o;
  for (std::string entry : LMS_TRY(parse_name_list(options, "values", false))) {
    // name[@hold][:trigger]
    SwapChoice c;
    auto strip = [](std::string name) { return !name.empty() && name.front() == '%' ? name.substr(1) : name; };
    const size_t colon = entry.find(':'), at = entry.find('@');
    const bool has_trigger = colon != std::string::npos, has_hold = at != std::string::npos;
    if (has_hold && has_trigger && at > colon)
      return fail_at("option 'values'", "has '@hold' after ':trigger' in '{}' (write name@hold:trigger)", entry);
    c.value = entry.substr(0, std::min(colon, at));
    if (has_hold) c.hold = strip(entry.substr(at + 1, has_trigger ? colon - at - 1 : std::string::npos));
    if (has_trigger) c.trigger = strip(entry.substr(colon + 1));
    if (c.value.empty() || (has_trigger && c.trigger.empty()) || (has_hold && c.hold.empty()))
      return fail_at("option 'values'", "has an empty value, hold or trigger name in '{}'", entry);
    o.swaps.push_back(std::move(c));
  }
  LMS_TRY(insert_swaps(g, o));
  return {};
}

}  // namespace lms
