// Prefetch advance and delay (see prefetch_advance.h).
//
// Note [Prefetch advance]
// The auto greedy (Note [Auto estimate]) times each prefetch by its own copy on the compute timeline before the
// rewrite, and delays triggers wherever its estimate of memory is over the target. The rewritten graph runs
// longer (clones, waits), its exact liveness differs from the estimate, and the host-to-device stream copies one
// prefetch at a time in node order: resnet50 at 4x its unconstrained batch on h200-pcie5 left the link idle from
// 176 to 327 ms while 110 ms of prefetches queued after it, and the compute stream waited 23 ms for them. So, on
// the exact plan and simulation of a plan that fits:
//   1. each prefetch's deadline is when its first reader could start, less `margin` of its copy time: the end of
//      the compute op before it, not its predicted start, which is late by the wait for this very copy (taking
//      that, a 2.4 GiB prefetch 40 ms late moved 5 ms earlier). Walking from the latest deadline back, each
//      copy's latest start is its deadline or the next copy's start, whichever is earlier, less its copy time:
//      the latest starts at which one queue meets every deadline;
//   2. in deadline order (the most urgent takes the room first), each trigger moves back to the last scheduled
//      node that ends by that latest start, but no further than the exact live bytes allow: the prefetched
//      value is live from the new trigger on, and live bytes plus its bytes must stay under the budget less the
//      plan's fragmentation (its arena over its liveness bound) at every position it newly covers. Each move
//      adds its bytes to the live bytes the next ones see.
// A trigger counts from the node the prefetch follows in the rewritten graph: the swap pass keeps it before the
// first late reader, which may be a clone earlier than the trigger the greedy chose. Triggers only move earlier:
// a later prefetch costs less memory and never meets a deadline the current one misses. The caller judges the
// result by an exact plan and a simulation, and may run it again on the result (the simulation then shows the
// waits the moves left). The auto planner runs it last, on each plan after the refinement (Note [Auto
// refinement]): the refinement picks its pins by the waits it sees, and on advanced plans, with fewer prefetches
// waited for, it missed pins that helped (resnet50 at 5x on a 40 TFLOP/s stand-in: 1.098 s against 1.063 s);
// last, it only ever makes a plan faster.
//
// Note [Prefetch delay]
// The greedy triggers each prefetch by its copy duration, with memory as its estimate sees it; at the edge of
// capacity the exact plan of its choices can be over the budget at positions where a prefetched value is already
// on the device but not yet read (unet3d at 336^3 and 16 GiB: the decoder's 9 GiB concatenation came back while
// the batch norm's backward before its weight gradient held dy and x, 18.7 GiB). The greedy's retries lower the
// target for the whole plan, which swaps more everywhere; delaying those prefetches is the local repair. So, on
// the exact plan of a round that does not fit: at each position in order whose live bytes exceed the budget less
// the plan's fragmentation, the prefetches live there and unread move, the least urgent first (the latest first
// reader; ties: the later slot), each to follow the first scheduled node at or after that position, until the
// position is under; a prefetch never moves to or past its first reader (whose own working set no delay
// changes). Later triggers never add live bytes anywhere. A delayed prefetch may make its reader wait: the caller
// keeps the delayed plan as one more candidate, judged by the simulation, and goes on with its retries.
#include "lms/plan/auto/prefetch_advance.h"

#include <algorithm>
#include <cmath>

#include "lms/runtime/program.h"

namespace lms {

namespace {

// Each scheduled node's position in the rewritten graph `g` (by its first output's name; -1: gone).
std::vector<int> positions_in(const Graph& scheduled, const Graph& g) {
  std::vector<int> in_g(scheduled.num_nodes(), -1);
  for (NodeId n : scheduled.node_ids())
    if (const auto v = g.find_value(scheduled.value(scheduled.first_output(n)).name))
      in_g[n.v] = static_cast<int>(g.value(*v).producer.v);
  return in_g;
}

// Exact device bytes live at each position of `g` by its plan (workspaces included).
std::vector<int64_t> exact_live(const Graph& g, const MemoryPlan& memory) {
  std::vector<int64_t> live(g.num_nodes() + 1, 0);
  for (const PlannedBuffer& b : memory.buffers) {
    if (b.life.placement != Placement::device) continue;
    live[static_cast<size_t>(b.life.first)] += b.life.bytes;
    live[static_cast<size_t>(b.life.last) + 1] -= b.life.bytes;
  }
  for (size_t q = 1; q < live.size(); ++q) live[q] += live[q - 1];
  return live;
}

// The index in `slots` of the value swap_in `n` of `g` fetches; -1: none, or a forward swap's (read by forward ops).
int slot_of(const Graph& scheduled, const Graph& g, NodeId n, const std::vector<PrefetchSlot>& slots) {
  const auto& readers = g.value(g.first_output(n)).consumers;
  if (!readers.empty() && g.node(readers.front()).category == Category::fwd) return -1;
  const ValueId swapped = g.node(g.value(g.node(n).inputs[0]).producer).inputs[0];
  const auto v = scheduled.find_value(g.value(swapped).name);
  if (!v) return -1;
  const auto slot = std::find_if(slots.begin(), slots.end(), [&](const PrefetchSlot& s) { return s.value == *v; });
  return slot == slots.end() ? -1 : static_cast<int>(slot - slots.begin());
}

// The plan's fragmentation: its arena over its liveness bound (what live bytes must stay under the budget by).
int64_t fragmentation_bytes(const MemoryPlan& memory) {
  return std::max<int64_t>(0, memory.device_arena_bytes - memory.lower_bound_bytes);
}

}  // namespace

bool advance_prefetches(const Graph& scheduled, const Graph& rewritten, const MemoryPlan& memory,
                        const TimeSimResult& sim, const PrefetchAdvanceOptions& opts,
                        std::vector<PrefetchSlot>& slots) {
  const Graph& g = rewritten;
  const std::vector<int> in_g = positions_in(scheduled, g);
  std::vector<int64_t> live = exact_live(g, memory);
  const int64_t limit = opts.budget_bytes - fragmentation_bytes(memory);

  // When each compute node could start were it not waiting for a copy: the end of the compute node before it.
  std::vector<double> ready(g.num_nodes(), 0);
  double free_at = 0;
  for (NodeId n : g.node_ids()) {
    ready[n.v] = sim.start[n.v];
    if (stream_for(g, n) != StreamId::compute) continue;
    ready[n.v] = std::min(ready[n.v], free_at);
    free_at = sim.end[n.v];
  }
  // The swap_in of each slot's value: its deadline (when its first reader could start) and copy time.
  struct Prefetch {
    size_t slot;
    double deadline, seconds, latest_start;
    int trigger;  // the node it follows in `rewritten` (the swap pass keeps it before the first late reader)
  };
  std::vector<Prefetch> prefetches;
  for (NodeId n : g.node_ids()) {
    if (g.node(n).op != Op::swap_in) continue;
    const int slot = slot_of(scheduled, g, n, slots);
    if (slot < 0) continue;
    double deadline = sim.step_seconds;
    for (NodeId c : g.value(g.node(n).outputs[0]).consumers) deadline = std::min(deadline, ready[c.v]);
    const double seconds = sim.end[n.v] - sim.start[n.v];
    int trigger = static_cast<int>(n.v) - 1;
    while (trigger > 0 && g.def(NodeId{static_cast<uint32_t>(trigger)}).traits.is_copy) --trigger;
    prefetches.push_back(
        {static_cast<size_t>(slot), deadline - seconds * opts.margin, seconds, 0, trigger});
  }
  // Step 1, latest deadline first (ties: the later slot first, so that the order reverses exactly).
  std::sort(prefetches.begin(), prefetches.end(), [](const Prefetch& a, const Prefetch& b) {
    return std::pair{a.deadline, a.slot} > std::pair{b.deadline, b.slot};
  });
  double next_start = INFINITY;
  for (Prefetch& p : prefetches) next_start = p.latest_start = std::min(p.deadline, next_start) - p.seconds;

  // Step 2, earliest deadline first.
  bool moved = false;
  for (auto p = prefetches.rbegin(); p != prefetches.rend(); ++p) {
    PrefetchSlot& s = slots[p->slot];
    const int old_g = p->trigger;
    if (sim.end[static_cast<size_t>(old_g)] <= p->latest_start) continue;  // early enough
    int best = s.trigger, lo = old_g;  // positions (lo, old_g] are newly covered at `best`
    int64_t most = 0;                  // the most bytes live over them
    int q = s.trigger - 1;  // the scheduled nodes up to the one it follows (a trigger past its first late
    while (q >= s.earliest && in_g[static_cast<size_t>(q)] >= old_g) --q;  // reader runs before that reader)
    for (; q >= s.earliest; --q) {
      const int at = in_g[static_cast<size_t>(q)];
      if (at < 0) continue;
      if (at >= lo) break;  // not in schedule order: stop where the ranges are known
      for (int x = at + 1; x <= lo; ++x) most = std::max(most, live[static_cast<size_t>(x)]);
      if (most + s.bytes > limit) break;
      best = q, lo = at;
      if (sim.end[static_cast<size_t>(at)] <= p->latest_start) break;
    }
    if (best == s.trigger) continue;
    for (int x = lo + 1; x <= old_g; ++x) live[static_cast<size_t>(x)] += s.bytes;
    s.trigger = best;
    moved = true;
  }
  return moved;
}

bool delay_prefetches(const Graph& scheduled, const Graph& rewritten, const MemoryPlan& memory,
                      const PrefetchAdvanceOptions& opts, std::vector<PrefetchSlot>& slots) {
  const Graph& g = rewritten;
  const std::vector<int> in_g = positions_in(scheduled, g);
  std::vector<int64_t> live = exact_live(g, memory);
  const int64_t limit = opts.budget_bytes - fragmentation_bytes(memory);
  // Each prefetch: where its swap_in is and where its first reader is.
  struct Prefetch {
    size_t slot;
    int at, first;
  };
  std::vector<Prefetch> prefetches;
  for (NodeId n : g.node_ids()) {
    if (g.node(n).op != Op::swap_in) continue;
    const int slot = slot_of(scheduled, g, n, slots);
    if (slot < 0) continue;
    int first = static_cast<int>(g.num_nodes());
    for (NodeId c : g.value(g.node(n).outputs[0]).consumers) first = std::min(first, static_cast<int>(c.v));
    prefetches.push_back({static_cast<size_t>(slot), static_cast<int>(n.v), first});
  }
  // Least urgent first: the latest first reader (ties: the later slot).
  std::sort(prefetches.begin(), prefetches.end(), [](const Prefetch& a, const Prefetch& b) {
    return std::pair{a.first, a.slot} > std::pair{b.first, b.slot};
  });
  bool moved = false;
  for (int q = 0; q < static_cast<int>(g.num_nodes()); ++q) {
    for (Prefetch& p : prefetches) {
      if (live[static_cast<size_t>(q)] <= limit) break;
      if (p.at > q || p.first <= q) continue;  // not live and unread at q
      // The first scheduled node at or after q (and before the first reader): the prefetch follows it.
      PrefetchSlot& s = slots[p.slot];
      int t = std::max(s.trigger, 0);
      while (t < static_cast<int>(in_g.size()) && in_g[static_cast<size_t>(t)] < q) ++t;
      if (t >= static_cast<int>(in_g.size()) || in_g[static_cast<size_t>(t)] >= p.first) continue;
      const int to = in_g[static_cast<size_t>(t)] + 1;
      if (to <= p.at) continue;
      for (int x = p.at; x < to; ++x) live[static_cast<size_t>(x)] -= s.bytes;
      p.at = to;
      s.trigger = t;
      moved = true;
    }
  }
  return moved;
}

}  // namespace lms
