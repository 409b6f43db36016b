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

// A chosen value, checked, with its trigger and hold (invalid: none), and those of its forward swap.
struct Checked {
  ValueId value;
  NodeId trigger;
  NodeId hold;
  bool backward = true;  // swapped in for its late readers (named in `swaps`)
  bool forward = false;  // swapped across a forward gap (named in `forward`)
  NodeId fwd_trigger;
  NodeId fwd_hold;
};

// Late readers: the consumers that read the swap_in instead of the value (sorted by id, as consumers are).
std::vector<NodeId> late_readers(const Graph& g, ValueId v) {
  std::vector<NodeId> readers;
  for (NodeId c : g.value(v).consumers)
    if (is_late_reader(g, c)) readers.push_back(c);
  return readers;
}


// Checks one choice on the graph as it is (names, the value, the trigger's kind); positions come later.
Result<Checked> check_choice(const Graph& g, const SwapChoice& c, bool forward) {
  auto v = g.find_value(c.value);
  const std::string option = forward ? "option 'forward'" : "option 'values'";
  if (!v) return fail_at(option, "unknown value %{}", c.value);
  const std::string where = fmt::format("%{}", c.value);
  const NodeId p = g.value(*v).producer;
  const OpDef& d = g.def(p);
  if (g.is_persistent(*v)) return fail_at(where, "swap: cannot swap it: it is persistent");
  if (g.value(*v).placement == Placement::host) return fail_at(where, "swap: cannot swap it: it is on the host");
  // A graph input (fed before the step) may go to the host and come back; a source that can be made again may not.
  if (d.traits.source && d.traits.recomputable)
    return fail_at(where, "swap: cannot swap it: its producer {} is a source that is made again more cheaply", d.name);
  if (d.traits.is_copy) return fail_at(where, "swap: cannot swap it: its producer {} is a copy", d.name);
  if (!forward && late_readers(g, *v).empty())
    return fail_at(where, "swap: no backward op or recompute clone reads it (nothing to swap it in for)");
  if (forward && c.trigger.empty()) return fail_at(where, "swap: its forward swap has no trigger");
  // A trigger or hold: the node making the named value, not a copy.
  auto node_named = [&](const std::string& name, std::string_view role) -> Result<NodeId> {
    if (name.empty()) return NodeId{};
    auto t = g.find_value(name);
    if (!t) return fail_at(option, "unknown {} %{} for %{}", role, name, c.value);
    const NodeId n = g.value(*t).producer;
    if (g.def(n).traits.is_copy) return fail_at(where, "swap: its {} %{} is a copy ({})", role, name, g.def(n).name);
    return n;
  };
  const NodeId trigger = LMS_TRY(node_named(c.trigger, forward ? "forward trigger" : "trigger"));
  const NodeId hold = LMS_TRY(node_named(c.hold, forward ? "forward hold" : "hold"));
  if (forward) return Checked{*v, {}, {}, false, true, trigger, hold};
  return Checked{*v, trigger, hold, true, false, {}, {}};
}

}  // namespace

std::vector<AttrSpec> swap_options() {
  return {{"values", AttrKind::String, Attribute{std::string()},
           "values to swap out and back in for their late readers, comma-separated `name`, `name:trigger`, "
           "`name@hold` or `name@hold:trigger` (the swap-in waits for the node making %trigger; the value's space "
           "stays allocated up to the node making %hold)"},
          {"forward", AttrKind::String, Attribute{std::string()},
           "values to swap out across a gap in the forward pass and back in for their readers after the trigger, "
           "comma-separated `name:trigger` or `name@hold:trigger` (also named in `values`: one copy out, and a "
           "second swap-in for the late readers)"}};
}

Result<SwapStats> insert_swaps(Graph& g, const SwapOptions& opts) {
  std::vector<Checked> chosen;
  std::vector<const SwapChoice*> named, named_forward;  // by chosen entry: its choices (null: none)
  for (const SwapChoice& c : opts.swaps) {
    Checked k = LMS_TRY(check_choice(g, c, false));
    for (const Checked& other : chosen)
      if (other.value == k.value) return fail_at("option 'values'", "%{} is named twice", c.value);
    chosen.push_back(k);
    named.push_back(&c);
    named_forward.push_back(nullptr);
  }
  for (const SwapChoice& c : opts.forward) {
    const Checked f = LMS_TRY(check_choice(g, c, true));
    const auto same = std::find_if(chosen.begin(), chosen.end(), [&](const Checked& k) { return k.value == f.value; });
    if (same == chosen.end()) {
      chosen.push_back(f);
      named.push_back(nullptr);
      named_forward.push_back(&c);
      continue;
    }
    const size_t i = static_cast<size_t>(same - chosen.begin());
    if (named_forward[i]) return fail_at("option 'forward'", "%{} is named twice", c.value);
    if (same->hold.valid())
      return fail_at(fmt::format("%{}", c.value), "swap: it is swapped both ways, so it takes the forward hold; its "
                                                  "backward hold %{} must be empty", named[i]->hold);
    same->forward = true, same->fwd_trigger = f.fwd_trigger, same->fwd_hold = f.fwd_hold;
    named_forward[i] = &c;
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
    const std::string where = fmt::format("%{}", g.value(k.value).name);
    auto before_producer = [&](NodeId n, std::string_view role, const std::string& name) -> Result<void> {
      if (n.valid() && pos[n.v] < pos[p.v])
        return fail_at(where, "swap: its {} %{} comes before its producer {} in node order", role, name,
                       node_label(g, p));
      return {};
    };
    const std::vector<NodeId> late = late_readers(g, k.value);
    const NodeId first = late.empty() ? NodeId{} : *std::min_element(late.begin(), late.end(), [&](NodeId a, NodeId b) {
      return pos[a.v] < pos[b.v];
    });
    auto not_before_first = [&](NodeId n, std::string_view role, const std::string& name) -> Result<void> {
      if (n.valid() && first.valid() && pos[n.v] >= pos[first.v])
        return fail_at(where, "swap: its {} %{} does not come before its first late reader {} in node order", role,
                       name, node_label(g, first));
      return {};
    };
    auto after_trigger = [&](NodeId hold, NodeId trigger, const SwapChoice& c, std::string_view kind) -> Result<void> {
      if (hold.valid() && trigger.valid() && pos[hold.v] > pos[trigger.v])
        return fail_at(where, "swap: its {}hold %{} comes after its {}trigger %{} in node order", kind, c.hold, kind,
                       c.trigger);
      return {};
    };
    if (k.backward) {
      const SwapChoice& c = *named[i];
      LMS_TRY_VOID(before_producer(k.trigger, "trigger", c.trigger));
      LMS_TRY_VOID(not_before_first(k.trigger, "trigger", c.trigger));
      LMS_TRY_VOID(before_producer(k.hold, "hold", c.hold));
      LMS_TRY_VOID(not_before_first(k.hold, "hold", c.hold));
      LMS_TRY_VOID(after_trigger(k.hold, k.trigger, c, ""));
    }
    if (k.forward) {
      const SwapChoice& c = *named_forward[i];
      LMS_TRY_VOID(before_producer(k.fwd_trigger, "forward trigger", c.trigger));
      if (k.backward) LMS_TRY_VOID(not_before_first(k.fwd_trigger, "forward trigger", c.trigger));
      const auto& readers = g.value(k.value).consumers;
      if (std::none_of(readers.begin(), readers.end(),
                       [&](NodeId r) { return !is_late_reader(g, r) && pos[r.v] > pos[k.fwd_trigger.v]; }))
        return fail_at(where, "swap: no forward reader of it comes after its forward trigger %{} in node order",
                       c.trigger);
      LMS_TRY_VOID(before_producer(k.fwd_hold, "forward hold", c.hold));
      LMS_TRY_VOID(after_trigger(k.fwd_hold, k.fwd_trigger, c, "forward "));
    }
    const NodeId hold = k.forward ? k.fwd_hold : k.hold;
    if (!hold.valid()) continue;
    const ValueId storage = g.storage_root(k.value);
    for (auto [root, writer] : overwritten_before)
      if (root == storage && pos[writer.v] > pos[p.v] && pos[writer.v] <= pos[hold.v])
        return fail_at(where, "swap: its {}hold %{} is not before {}, which overwrites its storage in place",
                       k.forward ? "forward " : "", (k.forward ? named_forward[i] : named[i])->hold,
                       node_label(g, writer));
  }
  if (!ordered) {
    g.reorder(order);
    auto producer_of = [&](const std::string& name) { return g.value(*g.find_value(name)).producer; };
    for (size_t i = 0; i < chosen.size(); ++i) {  // renumbered: found again by name
      Checked& k = chosen[i];
      k.value = *g.find_value((named[i] ? named[i] : named_forward[i])->value);
      if (const SwapChoice* c = named[i]) {
        if (!c->trigger.empty()) k.trigger = producer_of(c->trigger);
        if (!c->hold.empty()) k.hold = producer_of(c->hold);
      }
      if (const SwapChoice* c = named_forward[i]) {
        k.fwd_trigger = producer_of(c->trigger);
        if (!c->hold.empty()) k.fwd_hold = producer_of(c->hold);
      }
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
    // The readers each swap_in serves (copies: rewiring edits the consumer list): the backward one the late
    // readers; the forward one the other readers after its trigger, and the late ones when there is no backward one.
    std::vector<NodeId> late, after_gap;
    for (NodeId c : g.value(v).consumers) {
      if (k.backward && is_late_reader(g, c)) late.push_back(c);
      else if (k.forward && c > k.fwd_trigger) after_gap.push_back(c);
    }
    NodeId out = g.add_node(Op::swap_out, {}, std::span(&type, 1),
                            std::vector<std::string>{free_name(g, name, "out")}, Category::swap);
    g.set_inputs(out, {v});
    auto swap_in = [&](const std::vector<NodeId>& readers, NodeId trigger) {
      NodeId in = g.add_node(Op::swap_in, {}, std::span(&type, 1),
                             std::vector<std::string>{free_name(g, name, "in")}, Category::swap);
      g.set_inputs(in, {g.first_output(out)});
      const ValueId in_value = g.first_output(in);
      for (NodeId c : readers)
        for (size_t j = 0; j < g.node(c).inputs.size(); ++j)
          if (g.node(c).inputs[j] == v) g.replace_input(c, j, in_value);
      if (trigger.valid()) {
        g.add_control_input(in, trigger);
        ins_after[trigger.v].push_back(in);
        stats.triggered += 1;
      } else {
        ins_before[readers.front().v].push_back(in);
      }
      stats.redirected += static_cast<int>(readers.size());
    };
    if (k.backward) swap_in(late, k.trigger);
    if (k.forward) swap_in(after_gap, k.fwd_trigger);
    const ValueId storage = g.storage_root(v);
    for (auto [root, writer] : overwritten)
      if (root == storage && writer > p) g.add_control_input(writer, out);
    const NodeId hold = k.forward ? k.fwd_hold : k.hold;
    outs_after[hold.valid() ? hold.v : p.v].push_back(out);
    stats.swapped += 1;
    stats.forward += k.forward ? 1 : 0;
    stats.bytes_each_way += type.bytes();
  }

  for (size_t i = 0; i < original; ++i)  // after a node: its swap_outs, then the swap_ins it triggers
    outs_after[i].insert(outs_after[i].end(), ins_after[i].begin(), ins_after[i].end());
  LMS_TRY_VOID(place_new_nodes(g, original, ins_before, outs_after, "swap"));
  return stats;
}

namespace {

// The choices of one option: `name`, `name:trigger`, `name@hold` or `name@hold:trigger` each.
Result<std::vector<SwapChoice>> parse_choices(const Attributes& options, const std::string& option) {
  std::vector<SwapChoice> out;
  const std::string where = fmt::format("option '{}'", option);
  for (std::string entry : LMS_TRY(parse_name_list(options, option, false))) {
    SwapChoice c;
    auto strip = [](std::string name) { return !name.empty() && name.front() == '%' ? name.substr(1) : name; };
    const size_t colon = entry.find(':'), at = entry.find('@');
    const bool has_trigger = colon != std::string::npos, has_hold = at != std::string::npos;
    if (has_hold && has_trigger && at > colon)
      return fail_at(where, "has '@hold' after ':trigger' in '{}' (write name@hold:trigger)", entry);
    c.value = entry.substr(0, std::min(colon, at));
    if (has_hold) c.hold = strip(entry.substr(at + 1, has_trigger ? colon - at - 1 : std::string::npos));
    if (has_trigger) c.trigger = strip(entry.substr(colon + 1));
    if (c.value.empty() || (has_trigger && c.trigger.empty()) || (has_hold && c.hold.empty()))
      return fail_at(where, "has an empty value, hold or trigger name in '{}'", entry);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<void> run_swap_pass(Graph& g, const Attributes& options) {
  SwapOptions o;
  o.swaps = LMS_TRY(parse_choices(options, "values"));
  o.forward = LMS_TRY(parse_choices(options, "forward"));
  LMS_TRY(insert_swaps(g, o));
  return {};
}

}  // namespace lms
