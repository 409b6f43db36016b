// The auto planner (DESIGN.md "Strategies"; the algorithm and why it is this one: docs/planner.md "The auto strategy").
// Given a scheduled training graph that does not fit its budget, it decides for every forward activation a backward op
// reads whether it stays on the device, is swapped out after its last forward reader and prefetched back for its
// backward readers, or is recomputed right before them from values that are still resident (and for every backward
// value read again after a gap whether it stays or is swapped), so that the exact planned peak fits the budget and the
// predicted step time (sim/time_sim on the device model, measured node times where given) is as small as it can make
// it. Each prefetch is triggered by the compute op after which it will, by its predicted copy duration and the
// host-to-device queue ahead of it, arrive just before its first reader. It builds the decisions with the recompute and
// swap passes, plans the result exactly, and when the exact plan disagrees with its estimate, lowers its target by the
// excess and tries again. Precondition: `scheduled` is a training graph (categories fwd/bwd/upd) in schedule order,
// without swap or recompute ops. Deterministic: every sort and tie-break is by position or id.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/memory_planner.h"
#include "lms/sim/cost_model.h"
#include "lms/sim/device_model.h"
#include "lms/sim/time_sim.h"
#include "lms/support/error.h"
#include "lms/support/size.h"

namespace lms {

// Note [Auto portfolio]
// A greedy at the peak can paint itself into a corner: recomputations chosen early make clones that are live
// together late in the backward pass, where nothing is left to free. Rather than a search with undo, plan_auto
// runs four deterministic greedies -- both moves, both moves with the cascading estimate, swaps only,
// recomputations only -- each with its retries, and keeps the fastest exact plan that fits by the time
// simulation. The cascading estimate (Mix::both_cascade): a recomputation whose clones move earlier, because a
// later-chosen clone reads what they make, moves what they read earlier too, recursively. The plain greedy moves
// only the first level, so its estimate can miss the end of the backward pass, where a block's whole forward is
// recomputed at once (resnet50 at 4x its unconstrained batch on h200-pcie5: the plain estimate put 9.0 GiB where
// the exact liveness had 16.4, and its retries lowered the target everywhere for an excess at one place; on a
// 40 TFLOP/s device the plain greedy misses 16 GiB, the cascading one fits at 0.85 s where swapping alone takes
// 2.2 s). The cascading one is more often stuck below its target elsewhere (no undo) and the plain one's plans are
// sometimes faster (resnet50 at 3x: 0.328 s against 0.367 s), so both run. When none fits, one more runs with
// both moves under stricter rules (Mix::both_strict), which at the edge of capacity leave fewer clones live at
// once. Each costs one estimate and a few exact plans (docs/results.md has the planning times). They run at once
// on AutoOptions::threads threads, taken in this order (plan/auto/parallel.h), as do the refinements below and
// the graph's and the level order's searches.

// Note [Auto refinement]
// The greedy prices a swap by the copy queues at one peak; the simulation of the plan it built shows where the
// compute stream actually waits for copies: for prefetches (at the end of the backward pass, queued behind each
// other, when memory there made their triggers late) and, in the forward pass, for copies out (an op reusing the
// space of a swapped value waits for its copy to the host: the Program's buffer-reuse waits). So for each plan of
// the portfolio that fits, mixes swaps and recomputations, and whose compute stream waits more than
// `refine_min_wait` of its step, up to `refine_steps` times: pin the swapped value the compute stream waits for
// longest as a recomputation, run that greedy again around the pins (it frees elsewhere what the recomputation
// costs in memory), and keep the pin when that plan fits and is predicted faster. Then up to `refine_steps`
// times more, counting the waits for copies out too (the prefetches first: pins kept early change what later
// pins achieve, and the copy-out pins chosen first led resnet152 on v100-pcie3 to a slower plan, 1.23 s against
// 1.15 s). Each plan is refined, not only the fastest: resnet50 at 4x on h200-pcie5, the cascading greedy's plan in
// TFLMS's level order was the slowest that fit (0.722 s) and became the fastest refined (0.505 s).

// Note [Auto slack]
// The estimate gives every value a buffer of its own, though the exact plans write outputs over the buffers of
// inputs they read last (Note [Buffer reuse] in plan/liveness.h): which buffers an op may reuse depends on the
// rewrite (a swapped value is read by a copy and is never reused; a clone changes who reads last), and an
// estimate counting the original graph's reuse let the greedy free too little in the wrong places (vit_b_16,
// swin_t and deeplabv3 at 16 GiB came out 3-16% slower, docs/results.md). Without reuse the estimate is an upper
// bound of the liveness of the same choices. And the greedy stops at the first move that brings the estimate
// under the target, its moves freeing whole tensors. So an exact plan that fits often leaves room: a round that
// fits with more than `retry_step` of the budget left raises the target by what is left and goes again (fewer
// moves: faster, or over the budget), until a round does not fit, repeats the last decisions, or rounds run out;
// the fastest that fitted is the mix's plan. Not when only fitting is asked (AutoOptions::fits_only).

// Note [Auto reuse estimate]
// The estimate without reuse (Note [Auto slack]) is an upper bound, and at the edge of capacity the bound is what
// stops the greedy: an op that may write its output over an input it reads last, a GELU's backward, counts three
// tensors of the layer's size where the exact plan needs two, and nothing the greedy may move frees the third.
// swin_t and convnext_tiny at batch 1127 and 16 GiB: every greedy was stuck at an estimate of 17.4 GiB at their
// first stage's GELU backward (5.1 GiB a tensor), and so was tflms's simulator, which counts no reuse either (as
// TFLMS did not): both stopped at the same batch. So when no plan of the portfolio fits, its greedies run once
// more with an estimate counting the unrewritten graph's reuse. That one is optimistic where the rewrite takes a
// reuse away (a swapped value is read by a copy and is never written over), which the exact plan and the retries
// correct; it is not used when a plan fits, since there it made plans slower (Note [Auto slack]).

// Note [Past a stuck peak]
// A greedy stops when nothing it may move frees bytes at the estimate's peak. The estimate is an upper bound there
// (Note [Auto slack]), and at the edge of capacity it can be stuck at one op while the exact plans are over the
// budget elsewhere: vit_b_16 at 16 GiB, every greedy stuck at an attention backward whose exact working set fits,
// its plans over at other ops it never got to. So as a last stage, when no plan fits otherwise (the strategy's
// relu-output fallback included, plan/strategy.cc), the portfolio runs once more (on the estimate without reuse,
// whose upper bound is what gets greedies stuck) with greedies that set a stuck peak aside and go on at the
// highest other position over the target, until every position not set aside is under it; the exact plan
// judges, and its excess lowers the target as usual, down to zero. Not earlier: freeing bytes at positions that
// were never the problem costs time, and where the ordinary stages fit they are faster.

// One round of one greedy of the search (Note [Auto portfolio]): what the estimate aimed at and reached, and what
// the exact plan of its choices came to. For progress output: why a model does or does not fit.
struct AutoRound {
  std::string_view greedy;      // its moves: both, cascade, segment, swap-only, recompute-only, strict
  bool reuse_estimate = false;  // its estimate counted buffer reuse (when nothing fitted without; Note [Auto
                                // reuse estimate])
  bool past_stuck = false;      // its greedy went on past peaks it could not lower (Note [Past a stuck peak])
  int set_aside = 0;            // ... the peaks it set aside
  int pinned = 0;               // swaps it recomputes before it starts (Note [Auto refinement]); 0: none
  int round = 0;                // its retry, from 1; each lowers the target by the last exact plan's excess
  int64_t target_bytes = 0;     // the estimate's target
  int64_t estimate_bytes = 0;   // the estimate's peak when the greedy stopped
  std::string estimate_at;      // the node at that peak (of the graph being planned)
  bool reached = false;         // the estimate got down to the target, but at peaks set aside (else nothing
                                // it may move frees bytes at the estimate's peak)
  int64_t planned_bytes = 0;    // the exact plan's peak
  std::string planned_at;       // the node at that peak (of the rewritten graph), when it does not fit; else empty
  bool fits = false;            // the exact plan fits the budgets
  double step_seconds = 0;      // its predicted step (when it fits)
  int swaps = 0, recomputations = 0;  // its choices
  int64_t delayed_bytes = 0;    // when it does not fit: the exact plan's peak with its prefetches delayed (Note
                                // [Prefetch delay]); 0: no delay lowered it
};

struct AutoOptions {
  DeviceModel device;               // op times (roofline) and copy times (link rates, latency)
  MeasuredTimes measured;           // measured node times (lms profile) overriding the roofline; empty: none
  int64_t budget_bytes = kUnlimitedBytes;       // device bytes; the exact planned peak must not exceed it
  int64_t host_budget_bytes = kUnlimitedBytes;  // host bytes for swapped tensors
  double prefetch_margin = 0.1;     // a prefetch is timed to end this fraction of its copy time before its
                                    // first reader (slack for the estimate's errors)
  int max_rounds = 8;               // exact plans tried; each retry lowers the estimate's target
  double retry_step = 0.005;        // each retry lowers the target by the exact plan's excess plus this
                                    // fraction of the budget, so rounds make progress on tiny excesses
  int refine_steps = 4;             // swaps the simulation shows compute waiting for that are tried as
                                    // recomputations instead, once a plan fits (Note [Auto refinement]): this
                                    // many for prefetches, then this many more counting copies out too
  double refine_min_wait = 0.02;    // ... when compute waits for copies more than this fraction of the step
  int max_chain = 4;                // most ops recomputed together for one value (through values no backward
                                    // op reads, e.g. batch_norm before relu)
  int max_segment = 16;             // most ops of a segment (a block's output remade from the block's input,
                                    // its insides cloned again for it alone; Mix::both_segment); 0: none
  int advance_rounds = 3;           // prefetch advances per plan (Note [Prefetch advance]), each from the last
                                    // one's simulation, while they make it faster
  int delay_rounds = 4;             // prefetch delays per exact plan over the budget (Note [Prefetch delay]),
                                    // each from the last one's plan, while they lower its peak
  bool fits_only = false;           // stop at the first plan that fits: no more mixes, no refinement, no
                                    // prefetch advance (capacity probes ask whether it fits, not how fast)
  bool past_stuck = false;          // the last stage: the portfolio's greedies go on past peaks they cannot
                                    // lower (Note [Past a stuck peak]); plan/strategy.cc asks for it when no
                                    // plan fits otherwise
  std::function<void(const AutoRound&)> on_round = {};  // after each greedy round's exact plan, in order
                                                       // (progress output; --verbose); empty: none
  std::function<void()> on_plan = {};  // after each greedy round's exact plan, at once, from the thread that made
                                       // it (a live progress line; must be thread-safe); empty: none
  int threads = 0;                  // greedies, refinements and advances run at once (plan/auto/parallel.h;
                                    // 0: one per hardware thread); the plan is the same for any number
};

// One decision of the plan, for reports.
struct AutoChoice {
  enum class Kind : uint8_t { swap, recompute };
  Kind kind = Kind::swap;
  std::string value;                 // the activation (name, without '%')
  int64_t bytes = 0;                 // its bytes
  double seconds = 0;                // the estimate's added time when chosen: the copy time not hidden
                                     // (swap) or the ops run again (recompute)
  double gap_seconds = 0;            // predicted time between its last forward reader and first backward one
                                     // (forward: between the forward readers before and after its gap)
  bool forward = false;              // swap: across a gap in the forward pass (docs/swap.md, forward swaps)
  std::string trigger;               // swap: the op whose end starts the prefetch (empty: just in time)
  std::string hold;                  // swap: the op through which its space stays allocated while it is copied
                                     // out (empty: none, the ops after its last forward reader may wait)
  std::vector<std::string> chain;    // recompute: values recomputed with it because it reads them and they
                                     // are not resident then (earliest first)
  std::string remade_from;           // recompute by a segment: the activation it is remade from (`chain` then
                                     // lists the segment's other values, cloned for it alone); empty: none
};

struct AutoResult {
  bool fits = false;                 // exact planned peak <= budget and host arena <= host budget
  Graph graph;                       // the rewritten graph, scheduled (node-id order is the execution order)
  MemoryPlan memory;                 // its exact plan
  TimeSimResult sim;                 // its predicted step (with the buffer-reuse waits of `memory`)
  std::vector<AutoChoice> choices;   // swaps and recomputations, in order of the value's position
  double recompute_flops = 0;        // FLOPs of every op run again, per step
  int rounds = 0;                    // exact plans made
  std::optional<Error> why;          // when !fits: why, with the numbers
};

// Whether `a` is a better plan than `b`: one that fits over one that does not; of two that fit, the faster; of two
// that do not, the one with the smaller planned peak (the closest to fitting: its reason is the one to report).
inline bool better_plan(const AutoResult& a, const AutoResult& b) {
  if (a.fits != b.fits) return a.fits;
  return a.fits ? a.sim.step_seconds < b.sim.step_seconds : a.memory.device_arena_bytes < b.memory.device_arena_bytes;
}

// Plans a graph exactly (the strategy's memory planner with the backend's workspaces); with `search` false it
// may skip costly searches for a tighter packing.
using ExactPlanner = std::function<Result<MemoryPlan>(const Graph&, bool search)>;

// Plans `scheduled` (see above). `exact` plans a graph exactly; `workspaces` are the scratch bytes of `scheduled`'s
// nodes (empty: none). A plan that does not fit comes back with fits = false and `why`. Errors: the passes' and the
// planner's own.
Result<AutoResult> plan_auto(const Graph& scheduled, std::span<const int64_t> workspaces,
                             const ExactPlanner& exact,
                             const AutoOptions& opts);

}  // namespace lms
