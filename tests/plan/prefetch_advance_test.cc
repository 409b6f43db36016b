// The auto planner's prefetch advance (plan/auto/prefetch_advance.h) on hand-made graphs whose timelines and
// liveness are worked out below: a late prefetch moves back to the last node ending by its latest start, no
// further than the exact live bytes allow, never before its earliest position, and one that is early enough
// stays; prefetches on one queue get latest starts that meet every deadline; deadlines are when the readers could
// start, and a trigger past the first late reader (a clone) counts from where the prefetch is. The prefetch delay:
// prefetches live and unread where a plan is over its budget move after those positions, the least urgent first,
// never past their first reader.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lms/ir/parser.h"
#include "lms/passes/recompute.h"
#include "lms/passes/swap.h"
#include "lms/plan/auto/prefetch_advance.h"
#include "lms/plan/memory_planner.h"
#include "lms/sim/time_sim.h"

namespace lms {
namespace {

// Every tensor is f32[16]: 64 bytes, one arena alignment unit, so live bytes are counts of tensors times 64.
constexpr int64_t kT = 64;

// %a is read by the forward %b and by the backward %f. Scheduled positions: x0 a1 b2 c3 d4 e5 f6.
constexpr std::string_view kChain = R"(graph g {
  %x = input() : f32[16]
  %a = relu(%x) : f32[16] #fwd
  %b = relu(%a) : f32[16] #fwd
  %c = relu(%b) : f32[16] #bwd
  %d = relu(%c) : f32[16] #bwd
  %e = relu(%d) : f32[16] #bwd
  %f = add(%e, %a) : f32[16] #bwd
}
)";

struct Planned {
  Graph scheduled, rewritten;
  MemoryPlan memory;
  TimeSimResult sim;
};

// `text` with `recomputed` and then `swaps` applied, planned, and simulated with 1 s per node (0 for inputs).
Planned plan(std::string_view text, const std::vector<SwapChoice>& swaps,
             const std::vector<std::string>& recomputed = {}) {
  Planned p;
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.error().str();
  p.scheduled = *g;
  p.rewritten = *g;
  auto rc = insert_recompute(p.rewritten, RecomputeOptions{recomputed});
  EXPECT_TRUE(rc.has_value()) << rc.error().str();
  auto s = insert_swaps(p.rewritten, SwapOptions{swaps});
  EXPECT_TRUE(s.has_value()) << s.error().str();
  auto m = plan_memory(p.rewritten, PlanOptions{.reuse_buffers = false});  // the relus stand for any op
  EXPECT_TRUE(m.has_value()) << m.error().str();
  p.memory = *m;
  std::vector<double> seconds;
  for (NodeId n : p.rewritten.node_ids()) seconds.push_back(p.rewritten.node(n).op == Op::input ? 0.0 : 1.0);
  auto r = simulate_time(p.rewritten, seconds, &p.memory);
  EXPECT_TRUE(r.has_value()) << r.error().str();
  p.sim = *r;
  return p;
}

PrefetchSlot slot(const Planned& p, const std::string& value, int earliest, int trigger) {
  return {*p.scheduled.find_value(value), kT, earliest, trigger};
}

// Rewritten: x0 a1 a.out2 b3 c4 d5 e6 a.in7 f8 (the prefetch triggered by %e). Compute: a [0,1], b [1,2],
// c [2,3], d [3,4], e [4,5]; the copy out [1,2]; the prefetch [5,6]; f waits for it: [6,7]. f could start at 5
// (when %e ends; its predicted start, 6, is late by the wait for this copy), so the deadline is 5 less 0.1 of the
// 1 s copy and the copy's latest start 3.9: %c (ends at 3) is the last node ending by then. Live tensors: x and a
// at 1, a at 2, a and b at 3, b and c at 4, c and d at 5, d and e at 6, e and a.in at 7, e, a.in and f at 8: the
// arena is 3 tensors, and the prefetch newly covers positions 5 and 6 (2 tensors each) when %c triggers it.
TEST(PrefetchAdvance, MovesALatePrefetchBackToTheLastNodeEndingByItsLatestStart) {
  const Planned p = plan(kChain, {{"a", "e"}});
  ASSERT_EQ(p.memory.device_arena_bytes, 3 * kT);
  ASSERT_EQ(p.sim.step_seconds, 7.0);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 5)};
  EXPECT_TRUE(advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {3 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 3);  // %c

  // Moved there, the prefetch ends with the margin before f could start: no wait, one second less.
  const Planned q = plan(kChain, {{"a", "c"}});
  EXPECT_EQ(q.sim.step_seconds, 6.0);
}

TEST(PrefetchAdvance, StopsWhereTheLiveBytesLeaveNoRoom) {
  const Planned p = plan(kChain, {{"a", "e"}});
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 5)};
  // Position 6 holds 2 tensors: with room for less than 3, the prefetch cannot start before it.
  EXPECT_FALSE(advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {3 * kT - 1, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 5);
}

TEST(PrefetchAdvance, NeverBeforeItsEarliestPositionNorWhenEarlyEnough) {
  const Planned p = plan(kChain, {{"a", "e"}});
  std::vector<PrefetchSlot> slots{slot(p, "a", 5, 5)};  // held through %e
  EXPECT_FALSE(advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {3 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 5);

  const Planned early = plan(kChain, {{"a", "c"}});  // the copy runs [3,4], f starts at 5
  std::vector<PrefetchSlot> s2{slot(early, "a", 2, 3)};
  EXPECT_FALSE(advance_prefetches(early.scheduled, early.rewritten, early.memory, early.sim, {8 * kT, 0.1}, s2));
  EXPECT_EQ(s2[0].trigger, 3);
}

// %a and %b both swapped, read late by %f and %g (`reads`: their two lines): scheduled x0 a1 b2 h3 c4 d5 e6 f7 g8.
std::string two_swapped(std::string_view reads) {
  return std::string(R"(graph g {
  %x = input() : f32[16]
  %a = relu(%x) : f32[16] #fwd
  %b = relu(%a) : f32[16] #fwd
  %h = relu(%b) : f32[16] #fwd
  %c = relu(%h) : f32[16] #bwd
  %d = relu(%c) : f32[16] #bwd
  %e = relu(%d) : f32[16] #bwd
)") + std::string(reads) + "}\n";
}

// %f reads %b, %g reads %a.
const std::string kTwo = two_swapped("  %f = add(%e, %b) : f32[16] #bwd\n  %g = add(%f, %a) : f32[16] #bwd\n");

// %b recomputed for %f (its clone reads %a), %a swapped: the clone is %a's first late reader, and a trigger the
// greedy placed after it counts from where the swap pass put the prefetch, right before the clone.
TEST(PrefetchAdvance, ATriggerPastTheFirstLateReaderCountsFromWhereThePrefetchIs) {
  const std::string text = two_swapped("  %f = add(%e, %b) : f32[16] #bwd\n");
  // Scheduled x0 a1 b2 h3 c4 d5 e6 f7; rewritten x0 a1 a.out2 b3 h4 c5 d6 e7 a.in8 b.re9 f10: a [0,1], b [1,2],
  // h [2,3], c [3,4], d [4,5], e [5,6], a.in [6,7], b.re waits, [7,8], f [8,9]. The greedy's trigger is %f
  // (scheduled position 7), past the clone; the prefetch follows %e.
  const Planned p = plan(text, {{"a", "e"}}, {"b"});
  ASSERT_EQ(p.sim.step_seconds, 9.0);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 7)};
  EXPECT_TRUE(
      advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {p.memory.device_arena_bytes, 0.1}, slots));
  // b.re could start at 6: latest start 4.9, %c (ends at 4). Counted from %f, the positions from %e to %f would
  // count %a twice (it is back from a.in on) and leave no room under the arena.
  EXPECT_EQ(slots[0].trigger, 4);
  EXPECT_EQ(plan(text, {{"a", "c"}}, {"b"}).sim.step_seconds, 8.0);
}

TEST(PrefetchAdvance, TwoPrefetchesOnOneQueueMeetBothDeadlines) {
  // Prefetch %b after %e and %a after %f: x0 a1 a.out2 b3 b.out4 h5 c6 d7 e8 b.in9 f10 a.in11 g12. Compute a [0,1],
  // b [1,2], h [2,3], c [3,4], d [4,5], e [5,6]; b.in [6,7]; f waits for it, [7,8]; a.in [8,9]; g waits, [9,10].
  const Planned p = plan(kTwo, {{"a", "f"}, {"b", "e"}});
  ASSERT_EQ(p.sim.step_seconds, 10.0);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 7), slot(p, "b", 3, 6)};
  EXPECT_TRUE(advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {8 * kT, 0.1}, slots));
  // Deadlines (when the readers could start, less 0.1 s): g's 8 (f's end) less 0.1 for a, f's 6 (e's end) less
  // 0.1 for b. Latest starts, the later first: a 7.9 - 1 = 6.9, b min(5.9, 6.9) - 1 = 4.9. The last nodes ending
  // by them: %e (6) for a, %c (4) for b.
  EXPECT_EQ(slots[0].trigger, 6);  // a: %e
  EXPECT_EQ(slots[1].trigger, 4);  // b: %c
  // Then: b.in after %c [4,5], d [4,5], e [5,6], a.in after %e [6,7], f [6,7], g [7,8].
  const Planned q = plan(kTwo, {{"a", "e"}, {"b", "c"}});
  EXPECT_EQ(q.sim.step_seconds, 8.0);
}

// Both read by %f: the copies queue, so the one copied first must start a copy time earlier than its deadline
// alone asks.
TEST(PrefetchAdvance, CopiesQueuedForOneDeadlineStartOneAfterTheOther) {
  const std::string kBoth = two_swapped("  %f = add(%a, %b) : f32[16] #bwd\n  %g = add(%f, %e) : f32[16] #bwd\n");
  // Both after %e: x0 a1 a.out2 b3 b.out4 h5 c6 d7 e8 a.in9 b.in10 f11 g12. e [5,6], a.in [6,7], b.in [7,8],
  // f [8,9], g [9,10].
  const Planned p = plan(kBoth, {{"a", "e"}, {"b", "e"}});
  ASSERT_EQ(p.sim.step_seconds, 10.0);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 6), slot(p, "b", 3, 6)};
  EXPECT_TRUE(advance_prefetches(p.scheduled, p.rewritten, p.memory, p.sim, {8 * kT, 0.1}, slots));
  // f could start at 6 (e's end): deadline 5.9 for both (ties: the later slot is copied last): b's latest start
  // 4.9, a's 3.9. b moves to %c (ends at 4), a to %h (ends at 3).
  EXPECT_EQ(slots[0].trigger, 3);
  EXPECT_EQ(slots[1].trigger, 4);
  // Then: a.in after %h [3,4], c [3,4], b.in after %c [4,5], d [4,5], e [5,6], f [6,7], g [7,8].
  EXPECT_EQ(plan(kBoth, {{"a", "h"}, {"b", "c"}}).sim.step_seconds, 8.0);
}

// %b is read again by %d, the widest op of the backward pass. Scheduled x0 a1 b2 c3 d4 e5 f6.
constexpr std::string_view kWide = R"(graph g {
  %x = input() : f32[16]
  %a = relu(%x) : f32[16] #fwd
  %b = relu(%a) : f32[16] #fwd
  %c = relu(%b) : f32[16] #bwd
  %d = add(%c, %b) : f32[16] #bwd
  %e = relu(%d) : f32[16] #bwd
  %f = add(%e, %a) : f32[16] #bwd
}
)";

// Prefetched after %b: x0 a1 a.out2 b3 a.in4 c5 d6 e7 f8. Live: b, a.in, c at 5; b, a.in, c, d at 6 (4 tensors);
// a.in, d, e at 7; a.in, e, f at 8. Under 3 tensors, position 6 is over and a.in unread there: it moves after %d
// (rewritten position 6, scheduled 4), and the plan is 3 tensors.
TEST(PrefetchDelay, MovesAPrefetchUnreadWhereThePlanIsOverItsBudgetAfterThatPosition) {
  const Planned p = plan(kWide, {{"a", "b"}});
  ASSERT_EQ(p.memory.device_arena_bytes, 4 * kT);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 2)};
  EXPECT_TRUE(delay_prefetches(p.scheduled, p.rewritten, p.memory, {3 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 4);  // %d
  EXPECT_EQ(plan(kWide, {{"a", "d"}}).memory.device_arena_bytes, 3 * kT);
}

// Under 2 tensors every position from 5 on is over: the prefetch moves as late as its reader allows (after %e,
// right before %f), and no further: %f's own working set is 3 tensors, which no delay changes.
TEST(PrefetchDelay, NeverPastTheFirstReader) {
  const Planned p = plan(kWide, {{"a", "b"}});
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 2)};
  EXPECT_TRUE(delay_prefetches(p.scheduled, p.rewritten, p.memory, {2 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 5);  // %e
  slots = {slot(p, "a", 2, 5)};
  const Planned late = plan(kWide, {{"a", "e"}});
  EXPECT_FALSE(delay_prefetches(late.scheduled, late.rewritten, late.memory, {2 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 5);
}

// A plan within its budget moves nothing.
TEST(PrefetchDelay, NothingWhereThePlanFits) {
  const Planned p = plan(kWide, {{"a", "b"}});
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 2)};
  EXPECT_FALSE(delay_prefetches(p.scheduled, p.rewritten, p.memory, {4 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 2);
}

// Both prefetched after %h: x0 a1 a.out2 b3 b.out4 h5 a.in6 b.in7 c8 d9 e10 f11 g12; 4 tensors live at 8 to 11.
// Under 3, one delay suffices at each: %a's, read last (by %g, at 12), moves there position by position, to
// follow %f; %b's, needed first, stays.
TEST(PrefetchDelay, TheLeastUrgentMovesFirst) {
  const Planned p = plan(kTwo, {{"a", "h"}, {"b", "h"}});
  ASSERT_EQ(p.memory.device_arena_bytes, 4 * kT);
  std::vector<PrefetchSlot> slots{slot(p, "a", 2, 3), slot(p, "b", 3, 3)};
  EXPECT_TRUE(delay_prefetches(p.scheduled, p.rewritten, p.memory, {3 * kT, 0.1}, slots));
  EXPECT_EQ(slots[0].trigger, 7);  // a: %f
  EXPECT_EQ(slots[1].trigger, 3);  // b: %h
  EXPECT_EQ(plan(kTwo, {{"a", "f"}, {"b", "h"}}).memory.device_arena_bytes, 3 * kT);
}

}  // namespace
}  // namespace lms
