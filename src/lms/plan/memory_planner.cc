// Static offsets: persistent buffers at the bottom, then the chosen assignment algorithm for the rest (see
// memory_planner.h, assignment.h and docs/planner.md).
#include "lms/plan/memory_planner.h"

#include <algorithm>

#include "lms/ir/verifier.h"

namespace lms {

namespace {

// Sizes in an error: "1.2 GiB", with the exact byte counts when the rounded forms would read the same.
std::pair<std::string, std::string> two_sizes(int64_t a, int64_t b) {
  std::string sa = format_size(a), sb = format_size(b);
  if (sa == sb) return {fmt::format("{} ({} bytes)", sa, a), fmt::format("{} ({} bytes)", sb, b)};
  return {sa, sb};
}

}  // namespace

Result<MemoryPlan> plan_memory_unchecked(const Graph& g, const PlanOptions& opts) {
  Liveness lv = LMS_TRY(compute_liveness(g, opts.workspace_bytes, opts.reuse_buffers));
  const Assignment assignment = opts.assignment;
  MemoryPlan plan;
  plan.num_positions = lv.num_positions;
  plan.assignment = assignment;
  plan.buffer_of_value = lv.buffer_of_value;
  plan.offset_of_value = lv.offset_of_value;
  plan.workspace_of_node = lv.workspace_of_node;
  plan.reused_buffers = lv.reused;
  plan.buffers.reserve(lv.buffers.size());
  for (const BufferLife& b : lv.buffers) plan.buffers.push_back(PlannedBuffer{b, 0});

  for (Placement where : {Placement::device, Placement::host}) {
    // Persistent buffers are live everywhere, so each needs space of its own whatever the algorithm; packing
    // them at the bottom leaves one contiguous region above for everything else (and lets validation poison
    // that region without touching parameters).
    int64_t end = 0, raw_end = 0;
    std::vector<size_t> transient;
    for (size_t i = 0; i < plan.buffers.size(); ++i) {
      PlannedBuffer& b = plan.buffers[i];
      if (b.life.placement != where) continue;
      if (!b.life.persistent) {
        transient.push_back(i);
        continue;
      }
      b.offset = end;
      raw_end = std::max(raw_end, end + b.life.bytes);
      end += align_up(b.life.bytes);
      if (where == Placement::device) plan.persistent_bytes += b.life.bytes;
    }
    int64_t arena = std::max(raw_end, assign_offsets(plan.buffers, std::move(transient), end, assignment, opts.perturbation));
    if (where == Placement::device) {
      plan.persistent_end = end;
      plan.device_arena_bytes = arena;
    } else {
      plan.host_arena_bytes = arena;
    }
  }

  // The liveness lower bound and where it is reached.
  std::vector<int64_t> live = live_bytes(lv, Placement::device);
  for (int t = 0; t < static_cast<int>(live.size()); ++t) {
    if (live[t] > plan.lower_bound_bytes || plan.peak_position < 0) {
      plan.lower_bound_bytes = live[t];
      plan.peak_position = t;
    }
  }
  if (plan.peak_position >= 0) plan.peak_transient_bytes = plan.lower_bound_bytes - plan.persistent_bytes;

  // The hard minimum: persistent bytes plus the largest set of other buffers one op needs at once.
  int64_t largest_working_set = 0;
  std::vector<int32_t> seen;
  for (NodeId n : g.node_ids()) {
    seen.clear();
    int64_t working = 0;
    auto add = [&](ValueId v) {
      int32_t idx = plan.buffer_of_value[v.v];
      const BufferLife& b = plan.buffers[idx].life;
      if (b.placement != Placement::device || b.persistent) return;
      if (std::find(seen.begin(), seen.end(), idx) != seen.end()) return;
      seen.push_back(idx);
      working += b.bytes;
    };
    for (ValueId v : g.node(n).inputs) add(v);
    for (ValueId v : g.node(n).outputs) add(v);
    if (const PlannedBuffer* ws = plan.workspace(n)) working += ws->life.bytes;
    if (working > largest_working_set) {
      largest_working_set = working;
      plan.min_budget_position = static_cast<int>(n.v);
    }
  }
  plan.min_budget_bytes = plan.persistent_bytes + largest_working_set;
  return plan;
}

Error does_not_fit(const Graph& g, const MemoryPlan& plan, int64_t budget_bytes) {
  auto [peak, budget] = two_sizes(plan.device_arena_bytes, budget_bytes);
  std::string what = fmt::format("does not fit: planned peak {} > budget {}", peak, budget);
  if (plan.peak_position >= 0) {
    NodeId at{static_cast<uint32_t>(plan.peak_position)};
    what += fmt::format("; at the peak {} ({}) runs with {} of activations and gradients live and {} of "
                        "parameters and state",
                        node_label(g, at), g.def(at).name, format_size(plan.peak_transient_bytes),
                        format_size(plan.persistent_bytes));
    // The largest of them, so that the line says what to look at.
    std::vector<const PlannedBuffer*> live;
    for (const PlannedBuffer& b : plan.buffers)
      if (b.life.placement == Placement::device && !b.life.persistent && !b.life.workspace &&
          b.life.first <= plan.peak_position && plan.peak_position <= b.life.last)
        live.push_back(&b);
    const size_t shown = std::min<size_t>(live.size(), 3);
    std::partial_sort(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(shown), live.end(),
                      [](const PlannedBuffer* a, const PlannedBuffer* b) {
                        return a->life.bytes != b->life.bytes ? a->life.bytes > b->life.bytes
                                                              : a->life.root.v < b->life.root.v;
                      });
    if (shown > 0) what += fmt::format("; the largest of its {} live tensors:", live.size());
    for (size_t i = 0; i < shown; ++i)
      what += fmt::format("{} %{} {}", i == 0 ? "" : ",", g.value(live[i]->life.root).name,
                          format_size(live[i]->life.bytes));
  }
  what += fmt::format(" (liveness lower bound {}; minimum budget {}: parameters and state plus the largest op)",
                      format_size(plan.lower_bound_bytes), format_size(plan.min_budget_bytes));
  return Error{std::move(what), {}};
}

Result<MemoryPlan> plan_memory(const Graph& g, const PlanOptions& opts) {
  if (opts.budget_bytes < 0) return fail("budget {} is negative", opts.budget_bytes);
  MemoryPlan plan = LMS_TRY(plan_memory_unchecked(g, opts));
  plan.budget_bytes = opts.budget_bytes;
  if (plan.device_arena_bytes > opts.budget_bytes)
    return std::unexpected(does_not_fit(g, plan, opts.budget_bytes));
  return plan;
}

}  // namespace lms
