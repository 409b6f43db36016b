// The auto planner (see auto_planner.h; docs/planner.md "The auto strategy").
//
// Note [Auto estimate]
// The greedy works on the graph as scheduled, before any rewrite, with two estimates it keeps up to date:
//   - live[p], the device bytes live at each position (liveness with workspaces). Swapping a value frees it
//     over (e, k]: from after its last forward reader e to its prefetch's trigger k. Recomputing it frees it
//     over (e, f): up to its first backward reader f, right before which the clone runs.
//   - the added time of each choice: a recomputation adds the run time of the ops it clones; a swap adds the
//     growth of the copy queues' lateness, or the part of its prefetch that cannot hide in its gap, whichever
//     is larger. The bytes a swap frees at the peak p* must be on the host by then, and come back after it:
//     each swap-out runs between its producer's end and start(p*), each prefetch between start(p*) and its
//     first reader's start, one copy at a time per direction. Earliest deadline first is the best order for
//     such a queue, and its lateness is the largest excess, over any deadline, of the copy time due by then
//     over the time available: copies that each hide alone still stall once a link is saturated (CopyQueue,
//     plan/auto/copy_queue.h, answers it for each candidate in O(log n), in whole picoseconds).
// Each step takes the highest position p* of live[] and, among the moves that free bytes at p*, the one with
// the most bytes freed per second added: swap or recompute a kept value (whichever adds less time), delay
// a chosen prefetch's trigger to p* (less prefetch, more stall: what lets tight budgets fit), or recompute a
// swapped value whose prefetch is live at p*; and, only when none of these frees anything at p*, swap a kept
// value whose prefetch would have to start before p* to hide with its trigger at p* (both of the first moves
// at once: a value several GB large whose backward readers come within a few ms, mobilenet_v2's expanded
// layers at large batches, has no trigger after its peak from which it would hide). It stops when live[] fits
// the target. The estimate ignores fragmentation and the time the copies and clones shift the schedule; the
// exact plan and the time simulation of the rewritten graph are the judges (plan_auto retries with a lower
// target when the exact plan does not fit, or when the greedy gets stuck before reaching its first target).
//
// Note [Auto holds]
// A swapped value's space is free for reuse once its last forward reader has run, but the op that reuses it must
// wait for the copy to the host (the Program's buffer-reuse waits): a 2.4 GiB activation on PCIe 5 stalls the
// forward pass for ~50 ms. The swap pass's hold keeps the space allocated up to a later op, by which the copy is
// predicted to have ended, and the memory plan places other tensors elsewhere meanwhile. Holds cost memory where
// the forward pass usually has room, so the greedy decides without them; once its choices fit, each swap gets the
// part of its hold that fits under the target, and the same choices are planned exactly again with these holds
// (then with half-length ones: holds change the packing), without the costly search for a tighter packing. The
// first that fits is kept when the time simulation says it is faster; a hold cut short leaves a smaller stall,
// which the simulation counts.
//
// Note [Auto segments]
// A value's recompute chain stops at values a backward op reads, which are resident or recomputed for their own
// readers. So a residual block's output (relu(add(bn3(conv3(..)), input))) can only be recomputed from its
// block's conv3 output, and once that is recomputed too, the cascade pulls the whole block's clones to the first
// reader of its output, live from there to the block's own backward pass: in practice block outputs are kept or
// swapped. Its *segment* (candidates.h) remakes it from the block's input alone, cloning the block's insides
// again for it only (recompute.h, segments): nested recomputation, a few ms of compute for a whole stage's
// outputs. Mix::both_segment is the cascading greedy with each candidate that has a segment recomputed by it
// instead of its chain. A segment's clones need their transient bytes where they run (a block's worth: resnet50's
// first stage at 4x its unconstrained batch, 4.8 GiB); clones at one position run one after another, so this
// greedy counts the largest transient at a position, not their sum, and lets a segment add a peak there as high
// as the current one, not only up to the target (at the target, no segment was ever chosen while the forward
// pass's peak was far above it). At resnet50 4x on h200-pcie5 it remakes the first stage's last two outputs and
// wins: 3767 GFLOP recomputed against 5900, 0.460 s against 0.482 s.
#include "lms/plan/auto/auto_planner.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "lms/ir/verifier.h"
#include "lms/plan/auto/candidates.h"
#include "lms/plan/auto/copy_queue.h"
#include "lms/plan/auto/parallel.h"
#include "lms/plan/auto/realize.h"
#include "lms/plan/auto/waits.h"
#include "lms/plan/liveness.h"
#include "lms/plan/schedule.h"

namespace lms {

namespace {

using autoplan::Candidate;
using autoplan::CopyQueue;
using autoplan::find_candidates;
using autoplan::gap_of;
using autoplan::latest_starting_before;
using autoplan::most_waited_for_swap;
using autoplan::realize;
using autoplan::State;
using autoplan::Timeline;
using autoplan::timeline;
using autoplan::to_picoseconds;
using autoplan::to_seconds;

// Which moves a greedy run may make. Each run is a deterministic greedy; plan_auto runs both, both_cascade,
// swap_only and recompute_only and keeps the fastest plan that fits (Note [Auto portfolio]). `both_strict`, run
// only when none of them fits,
// recomputes only where the estimate at the clone's place stays under the target and never turns a swap into
// a recomputation: slower plans, but at the edge of capacity fewer clones live together late in the backward
// pass. `both_cascade` is `both` with the cascading estimate of clone positions (Note [Auto portfolio]);
// `both_segment` is `both_cascade` with each candidate that has a segment recomputed by it (Note [Auto segments]).
enum class Mix : uint8_t { both, swap_only, recompute_only, both_strict, both_cascade, both_segment };

std::string_view mix_name(Mix m) {
  switch (m) {
    case Mix::both: return "both";
    case Mix::swap_only: return "swap-only";
    case Mix::recompute_only: return "recompute-only";
    case Mix::both_strict: return "strict";
    case Mix::both_cascade: return "cascade";
    case Mix::both_segment: return "segment";
  }
  return "?";
}

struct Greedy {
  Greedy(const Graph& g, const Timeline& tl, const AutoOptions& o, std::vector<Candidate>& cands,
         std::vector<int64_t> live, Mix mix)
      : g(g), tl(tl), o(o), cands(cands), live(std::move(live)), mix(mix),
        producer_recomputed(g.num_nodes(), 0), candidate_of(g.num_values(), -1),
        first_clone(g.num_values(), INT32_MAX) {
    for (size_t i = 0; i < cands.size(); ++i)
      if (!cands[i].forward) candidate_of[cands[i].value.v] = static_cast<int>(i);
    if (mix == Mix::both_segment) transients.resize(this->live.size());
  }

  const Graph& g;
  const Timeline& tl;
  const AutoOptions& o;
  std::vector<Candidate>& cands;
  std::vector<int64_t> live;         // the estimate: device bytes live at each position
  Mix mix;
  int64_t host_bytes = 0;            // bytes of the chosen swaps
  int64_t target = 0;                // of the current run
  int64_t peak_live = 0;             // live[] at the current step's peak
  std::vector<int> swapped;          // chosen swaps (indices into cands)
  std::vector<int> producer_recomputed;  // by NodeId: clones chosen of this producer (recompute: one output)
  std::vector<int> candidate_of;         // by ValueId: index into cands, or -1
  std::vector<int> first_clone;          // by ValueId: the earliest chosen clone reading it (INT32_MAX: none)

  double unhidden(const Candidate& c, int trigger) const {
    return std::max(0.0, c.copy_in * (1 + o.prefetch_margin) - (tl.start[c.bwd_first] - tl.end[trigger]));
  }
  // The copy queues' lateness (picoseconds) with the chosen swaps and `extra` (-1: none), when the bytes they free
  // must be free at time t0 (the peak's): every swap-out, from its producer's end, must be done by t0, and every
  // prefetch, after t0, by its first reader's start. One stream each way, earliest deadline first: the lateness
  // is the largest excess of the copy time due by a deadline over the time available for it (Note [Auto
  // estimate]; plan/auto/copy_queue.h).
  int64_t queue_lateness(int extra, int64_t t0) const {
    if (extra < 0) return queue_in.lateness(t0) + queue_out.lateness(-t0);
    const Candidate& c = cands[extra];
    return queue_in.lateness_with(prefetch_of(c), t0) + queue_out.lateness_with(copy_out_of(c), -t0);
  }
  CopyQueue::Copy prefetch_of(const Candidate& c) const {
    return {to_picoseconds(tl.start[c.bwd_first]), to_picoseconds(c.copy_in * (1 + o.prefetch_margin))};
  }
  CopyQueue::Copy copy_out_of(const Candidate& c) const {
    return {-to_picoseconds(tl.end[c.producer.v]), to_picoseconds(c.copy_out)};
  }
  // The chosen swaps' prefetches and copies out, queued again at a step after the swaps changed (a copy's place
  // in them depends on its reader and producer only, which no other move changes).
  CopyQueue queue_in, queue_out;
  bool queues_stale = true;
  void queue_swaps() {
    std::vector<CopyQueue::Copy> in, out;
    for (int i : swapped) {
      in.push_back(prefetch_of(cands[i]));
      out.push_back(copy_out_of(cands[i]));
    }
    queue_in = CopyQueue(std::move(in));
    queue_out = CopyQueue(std::move(out));
    queues_stale = false;
  }
  // The added time of swapping cands[i] with its prefetch triggered by `trigger`.
  double swap_cost(int i, int trigger, int64_t t0, int64_t now) const {
    return std::max(unhidden(cands[i], trigger), to_seconds(queue_lateness(i, t0) - now));
  }
  void add(int lo, int hi, int64_t bytes) {  // positions [lo, hi]
    for (int p = std::max(lo, 0); p <= hi && p < static_cast<int>(live.size()); ++p) live[p] += bytes;
  }
  // The bytes of clones' other outputs placed at position p, live while they run (Greedy::transient). The
  // clones at one position run one after another: with segments (Mix::both_segment, whose transients are whole
  // blocks) live[p] counts the largest of them; otherwise, as the plain and cascading greedies always have,
  // their sum.
  std::vector<std::vector<int64_t>> transients;  // by position, Mix::both_segment only
  int64_t transient_max(int p) const {
    if (transients.empty() || transients[p].empty()) return 0;
    return *std::max_element(transients[p].begin(), transients[p].end());
  }
  int64_t transient_growth(int p, int64_t bytes) const {  // what placing `bytes` more at p adds to live[p]
    return transients.empty() ? bytes : std::max<int64_t>(0, bytes - transient_max(p));
  }
  void add_transient(int p, int64_t bytes) {
    if (p >= static_cast<int>(live.size())) return;
    if (transients.empty()) return add(p, p, bytes);
    const int64_t before = transient_max(p);
    transients[p].push_back(bytes);
    add(p, p, transient_max(p) - before);
  }
  void remove_transient(int p, int64_t bytes) {
    if (p >= static_cast<int>(live.size())) return;
    if (transients.empty()) return add(p, p, -bytes);
    const int64_t before = transient_max(p);
    const auto it = std::find(transients[p].begin(), transients[p].end(), bytes);
    if (it != transients[p].end()) transients[p].erase(it);
    add(p, p, transient_max(p) - before);
  }
  // Counts `c` freed over positions [lo, hi] instead of where it was counted freed before.
  void free_over(Candidate& c, int lo, int hi) {
    add(c.freed_lo, c.freed_hi, c.bytes);
    add(lo, hi, -c.bytes);
    c.freed_lo = lo, c.freed_hi = hi;
  }
  // A clone reads its chain's leaf inputs (the inputs it does not clone) at its place: a leaf that is swapped
  // must be back by then, one that is recomputed must be recomputed by then (recompute chains it).
  int swap_trigger(const Candidate& c) const {
    return std::max(c.fwd_end, std::min(c.trigger, first_clone[c.value.v] - 1));
  }
  // Bytes of the chain's other clones (and of several-output clones' other outputs), live while the value is
  // recomputed: a recomputation must not make a new peak there.
  int64_t transient(const Candidate& c) const {
    if (c.segmented) return c.segment_transient;
    int64_t bytes = 0;
    for (ValueId v : c.chain)
      for (ValueId out : g.node(g.value(v).producer).outputs)
        if (out != c.value) bytes += g.value(out).type.bytes();
    return bytes;
  }
  int recompute_at(const Candidate& c) const { return std::min(c.bwd_first, first_clone[c.value.v]); }
  void clone_reads(ValueId leaf, int at) {
    first_clone[leaf.v] = std::min(first_clone[leaf.v], at);
    const int j = candidate_of[leaf.v];
    if (j < 0) return;
    Candidate& w = cands[j];
    if (w.state == State::swap && swap_trigger(w) < w.trigger) {
      w.trigger = swap_trigger(w);
      free_over(w, w.fwd_end + 1, w.trigger);
    } else if (w.state == State::recompute && recompute_at(w) < w.bwd_first) {
      // Cascading: its clones move earlier with their other outputs, and so must what they read (recursively: a
      // chain of recomputations all runs before the first of them is read; Note [Auto portfolio]).
      const bool cascade = mix == Mix::both_cascade || mix == Mix::both_segment;
      if (cascade) remove_transient(w.bwd_first, transient(w));
      w.bwd_first = recompute_at(w);
      free_over(w, w.fwd_end + 1, w.bwd_first - 1);
      if (cascade) {
        add_transient(w.bwd_first, transient(w));
        clone_inputs_read(w);
      }
    }
  }
  // The inputs `c`'s clones read that they do not clone themselves are read at c.bwd_first.
  void clone_inputs_read(const Candidate& c) {
    for (ValueId v : c.chain)
      for (ValueId in : g.node(g.value(v).producer).inputs)
        if (std::find(c.chain.begin(), c.chain.end(), in) == c.chain.end()) clone_reads(in, c.bwd_first);
  }

  // The recomputation of `c` may be chosen: its chain is cloneable, none of its producers is cloned already,
  // and its clones' other outputs do not raise live[] above the target where they run.
  bool may_recompute(const Candidate& c) const {
    if (mix == Mix::swap_only || !c.recomputable) return false;
    const bool strict = transient(c) > 0 || mix == Mix::both_strict;
    // A segment's clones (a whole block) may add a peak where they run, but not above the current one.
    const int64_t limit = c.segmented ? std::max(target, peak_live) : target;
    if (strict && live[recompute_at(c)] + transient_growth(recompute_at(c), transient(c)) > limit) return false;
    for (ValueId v : c.exclusive())
      if (producer_recomputed[g.value(v).producer.v]) return false;
    return true;
  }
  void choose_recompute(Candidate& c) {
    c.state = State::recompute;
    c.bwd_first = recompute_at(c);
    free_over(c, c.fwd_end + 1, c.bwd_first - 1);
    add_transient(c.bwd_first, transient(c));
    for (ValueId v : c.exclusive()) producer_recomputed[g.value(v).producer.v] = 1;
    clone_inputs_read(c);
  }

  // After the moves: each swap keeps its value's space up to the op running when its copy out is predicted to
  // end, as far as the estimate has room under the target, so that the ops after its last forward reader do
  // not wait for that copy (Note [Auto holds]). Copies out run one at a time in node order, and the swap pass
  // places each after its hold, so holds never decrease in producer order where room allows.
  // `share`: the part of each hold's wanted length to place. Replaces the holds placed before; false when
  // there is none.
  bool place_holds(double share) {
    for (int i : swapped) {
      cands[i].hold = cands[i].fwd_end;
      free_over(cands[i], cands[i].fwd_end + 1, cands[i].trigger);
    }
    std::vector<int> order = swapped;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return cands[a].producer < cands[b].producer; });
    double d2h_free = 0;
    int previous = 0;
    bool any = false;
    for (int i : order) {
      Candidate& c = cands[i];
      d2h_free = std::max(d2h_free, tl.end[c.producer.v]) + c.copy_out;
      const int wanted = std::max(previous, latest_starting_before(tl.start, c.fwd_end, c.bwd_first,
                                                                   d2h_free + c.copy_out * o.prefetch_margin));
      int h = c.fwd_end;
      const int end = c.fwd_end + static_cast<int>(share * (std::min(wanted, c.trigger) - c.fwd_end));
      while (h < end && live[h + 1] + c.bytes <= target) ++h;
      c.hold = h;
      previous = std::max(previous, h);
      free_over(c, h + 1, c.trigger);
      any = any || h > c.fwd_end;
    }
    return any;
  }

  // After the moves: the host-to-device stream copies in node order, so a prefetch triggered after one that is
  // needed later waits behind that whole copy. Each prefetch whose trigger comes after the trigger of one needed
  // later moves up to the node before that trigger, where the estimate has room for its bytes under the target,
  // and where it has none, the prefetches needed later that are triggered no later than it move to the node after
  // its trigger (where their readers allow); earliest deadline first is the order in which a queue of copies
  // makes its readers wait least (Note [Auto estimate]). True when it moved any.
  bool order_prefetches() {
    std::vector<int> order = swapped;  // latest first reader first
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return std::pair{cands[a].bwd_first, cands[a].producer} > std::pair{cands[b].bwd_first, cands[b].producer};
    });
    int ahead = INT32_MAX;  // the earliest trigger of a prefetch needed later than the current one
    bool moved = false;
    for (size_t k = 0; k < order.size(); ++k) {
      Candidate& c = cands[order[k]];
      const int before = ahead - 1;  // a prefetch triggered by the same node would follow in value order
      if (before < c.trigger && before >= c.hold &&
          *std::max_element(live.begin() + before + 1, live.begin() + c.trigger + 1) + c.bytes <= target) {
        c.trigger = before;
        free_over(c, c.hold + 1, c.trigger);
        moved = true;
      } else if (before < c.trigger) {
        // No room to start it earlier: start those needed later after it instead, where their readers allow
        // (a later trigger frees more, never less, and the queue runs them after it anyway).
        ahead = INT32_MAX;
        for (size_t j = 0; j < k; ++j) {
          Candidate& l = cands[order[j]];
          const int latest = std::min(l.bwd_first, first_clone[l.value.v]) - 1;
          if (l.trigger <= c.trigger && c.trigger + 1 <= latest) {
            l.trigger = c.trigger + 1;
            free_over(l, l.hold + 1, l.trigger);
            moved = true;
          }
          ahead = std::min(ahead, l.trigger);
        }
      }
      ahead = std::min(ahead, c.trigger);
    }
    return moved;
  }

  // Positions set aside: peaks no move frees bytes at, which a greedy past stuck peaks leaves over the target
  // (AutoOptions::past_stuck, Note [Past a stuck peak]); empty: none.
  std::vector<char> aside;
  int set_aside = 0;
  // The highest position of live[] not set aside; -1: none.
  int highest() const {
    if (aside.empty()) return static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin());
    int peak = -1;
    for (int p = 0; p < static_cast<int>(live.size()); ++p)
      if (!aside[p] && (peak < 0 || live[p] > live[peak])) peak = p;
    return peak;
  }

  // Runs until live[] <= target (at the positions not set aside) or no move frees bytes at the peak; true when it
  // reached the target.
  bool run(int64_t target) {
    this->target = target;
    const double eps = 1e-9 + 1e-6 * tl.step;
    // The moves (Note [Auto estimate]): swap or recompute a kept value; delay a chosen swap's prefetch to the
    // peak; or recompute a swapped value instead (its prefetch is live at the peak; a swap that hid at an early
    // peak can cost more than its recomputation once the peak has moved to its prefetch).
    enum class Move : uint8_t { swap, swap_delayed, recompute, delay, swap_to_recompute };
    while (true) {
      const int peak = highest();
      if (peak < 0 || live[peak] <= target) return true;
      peak_live = live[peak];
      const int64_t t0 = to_picoseconds(tl.start[peak]);
      if (queues_stale) queue_swaps();
      const int64_t now = queue_lateness(-1, t0);
      int best = -1;
      Move best_move = Move::swap;
      double best_score = -1, best_cost = 0;
      // Last resort, when no other move frees bytes at the peak: swap a kept value whose prefetch would have to
      // start before the peak to hide, with its prefetch started right after the peak instead (the two moves
      // swap and delay at once; its first reader waits for the copy).
      for (const bool last_resort : {false, true}) {
        if (best >= 0) break;
        for (size_t i = 0; i < cands.size(); ++i) {
          const Candidate& c = cands[i];
          auto consider = [&](Move m, double cost) {
            const double score = static_cast<double>(c.bytes) / (std::max(cost, 0.0) + eps);
            if (score > best_score) best = static_cast<int>(i), best_move = m, best_score = score, best_cost = cost;
          };
          const bool swappable = mix != Mix::recompute_only && host_bytes + c.bytes <= o.host_budget_bytes;
          if (last_resort) {
            if (c.state == State::keep && swappable && peak > c.fwd_end && peak > swap_trigger(c) &&
                peak < c.bwd_first && peak < first_clone[c.value.v])
              consider(Move::swap_delayed, swap_cost(static_cast<int>(i), peak, t0, now));
          } else if (c.state == State::keep) {
            if (peak <= c.fwd_end) continue;
            if (peak <= swap_trigger(c) && swappable)
              consider(Move::swap, swap_cost(static_cast<int>(i), c.trigger, t0, now));
            if (peak < recompute_at(c) && may_recompute(c)) consider(Move::recompute, c.recompute_seconds);
          } else if (c.state == State::swap && peak > c.trigger && peak < c.bwd_first) {
            consider(Move::delay, unhidden(c, peak) - unhidden(c, c.trigger));
            if (mix != Mix::both_strict && peak < recompute_at(c) && may_recompute(c))
              consider(Move::swap_to_recompute, c.recompute_seconds - c.seconds);
          }
        }
      }
      if (best < 0 && o.past_stuck) {
        if (aside.empty()) aside.resize(live.size());
        aside[peak] = 1;
        ++set_aside;
        continue;
      }
      if (best < 0) return false;
      Candidate& c = cands[best];
      switch (best_move) {
        case Move::delay:
          c.seconds += best_cost;
          c.trigger = peak;
          free_over(c, c.fwd_end + 1, c.trigger);
          break;
        case Move::swap:
        case Move::swap_delayed:
          c.state = State::swap;
          c.seconds = best_cost;
          c.trigger = best_move == Move::swap ? swap_trigger(c) : peak;
          free_over(c, c.fwd_end + 1, c.trigger);
          swapped.push_back(best);
          host_bytes += c.bytes;
          queues_stale = true;
          break;
        case Move::swap_to_recompute:
          swapped.erase(std::find(swapped.begin(), swapped.end(), best));
          host_bytes -= c.bytes;
          queues_stale = true;
          [[fallthrough]];
        case Move::recompute:
          c.seconds = c.recompute_seconds;
          choose_recompute(c);
          break;
      }
    }
  }
};

// One greedy mix with retries: the greedy to a target, the rewrite, the exact plan; a plan over the budget
// lowers the target by its excess (and a step) and tries again, until it fits, the greedy cannot reach its
// target, or max_rounds. When no round fits, the closest (better_plan) comes back.
// `pinned`: candidates recomputed before the greedy starts (Note [Auto refinement]); `chosen`, when given,
// receives the choices of a plan that fits.
// `reuse_estimate`: live0 counts buffer reuse (Note [Auto reuse estimate]; for the progress output).
Result<AutoResult> plan_mix(const Graph& scheduled, const Timeline& tl, const std::vector<Candidate>& candidates,
                            const std::vector<int64_t>& live0, bool reuse_estimate, const ExactPlanner& exact,
                            const AutoOptions& o, Mix mix, const std::vector<int>& pinned = {},
                            std::vector<Candidate>* chosen = nullptr) {
  AutoResult best;
  std::optional<AutoResult> best_fit;  // the fastest round that fitted (Note [Auto slack])
  std::optional<AutoResult> delayed_fit;  // the fastest round that fitted with prefetches delayed (Note [Prefetch
  std::vector<Candidate> delayed_chosen;  // delay]), and its choices
  std::vector<std::tuple<State, int, int, int, double>> fit_decisions;
  int64_t target = o.budget_bytes, reached_target = -1;
  int rounds = 0;
  // The last round's decisions and the exact plan they got, which did not fit: a lower target often leaves the
  // greedy with the same decisions, and the same decisions make the same plan.
  std::vector<std::tuple<State, int, int, int, double>> last_decisions;
  AutoResult last;
  auto decisions = [](const std::vector<Candidate>& cs) {
    std::vector<std::tuple<State, int, int, int, double>> d;
    for (const Candidate& c : cs) d.emplace_back(c.state, c.trigger, c.hold, c.bwd_first, c.seconds);
    return d;
  };
  for (int round = 1; round <= o.max_rounds; ++round) {
    rounds = round;
    std::vector<Candidate> cands = candidates;  // the greedy marks its choices on its copy
    Greedy greedy(scheduled, tl, o, cands, live0, mix);
    for (int i : pinned) {
      cands[static_cast<size_t>(i)].seconds = cands[static_cast<size_t>(i)].recompute_seconds;
      greedy.choose_recompute(cands[static_cast<size_t>(i)]);
    }
    const bool reached = greedy.run(target);
    auto now = decisions(cands);
    const bool repeated = now == last_decisions;
    AutoResult r = repeated ? last : LMS_TRY(realize(scheduled, cands, exact, o));
    // Over the budget: the same choices with prefetches delayed, a plan of its own beside the retries (Note
    // [Prefetch delay]).
    int64_t delayed_bytes = 0;
    if (!repeated && !r.fits) {
      std::vector<Candidate> later = cands;
      std::optional<AutoResult> d = LMS_TRY(realize_delayed(scheduled, later, r, exact, o));
      if (d) delayed_bytes = d->memory.device_arena_bytes;
      if (d && d->fits && (!delayed_fit || d->sim.step_seconds < delayed_fit->sim.step_seconds)) {
        delayed_fit = std::move(d);
        delayed_chosen = std::move(later);
      }
    }
    // A plan that fits: the same choices with holds, full length, else half length, when that fits and is
    // faster (Note [Auto holds]). Replaces `plan` and leaves the greedy's state as that plan's.
    auto with_holds = [&](AutoResult& plan) -> Result<void> {
      for (double share : {1.0, 0.5}) {
        const std::vector<Candidate> before = cands;
        const std::vector<int64_t> live = greedy.live;
        if (!greedy.place_holds(share)) break;
        AutoResult held = LMS_TRY(realize(scheduled, cands, exact, o, /*search=*/false));
        if (held.fits && held.sim.step_seconds < plan.sim.step_seconds) {
          plan = std::move(held);
          break;
        }
        cands = before;
        greedy.live = live;
        if (held.fits) break;
      }
      return {};
    };
    if (r.fits) {
      const std::vector<Candidate> unordered = cands;
      const std::vector<int64_t> live = greedy.live;
      LMS_TRY_VOID(with_holds(r));
      // The same choices with the prefetches in deadline order (Greedy::order_prefetches; earlier prefetches
      // cost memory, which at the edge of capacity may not fit), then holds: kept when it fits and is faster.
      const std::vector<Candidate> held = cands;
      const std::vector<int64_t> held_live = greedy.live;
      cands = unordered;
      greedy.live = live;
      bool kept = false;
      if (greedy.order_prefetches()) {
        AutoResult ordered = LMS_TRY(realize(scheduled, cands, exact, o, /*search=*/false));
        if (ordered.fits) {
          LMS_TRY_VOID(with_holds(ordered));
          if (ordered.sim.step_seconds < r.sim.step_seconds) r = std::move(ordered), kept = true;
        }
      }
      if (!kept) cands = held, greedy.live = held_live;
    }
    r.rounds = round;
    const auto swaps = std::count_if(r.choices.begin(), r.choices.end(),
                                     [](const AutoChoice& c) { return c.kind == AutoChoice::Kind::swap; });
    if (o.on_plan) o.on_plan();
    if (o.on_round) {
      const auto peak = std::max_element(greedy.live.begin(), greedy.live.end());
      const auto at = [](const Graph& g, std::ptrdiff_t p) { return node_label(g, NodeId{static_cast<uint32_t>(p)}); };
      o.on_round(AutoRound{
          .greedy = mix_name(mix), .reuse_estimate = reuse_estimate, .past_stuck = o.past_stuck,
          .set_aside = greedy.set_aside, .pinned = static_cast<int>(pinned.size()),
          .round = round, .target_bytes = target, .estimate_bytes = *peak,
          .estimate_at = at(scheduled, peak - greedy.live.begin()), .reached = reached,
          .planned_bytes = r.memory.device_arena_bytes,
          .planned_at = r.fits || r.memory.peak_position < 0 ? "" : at(r.graph, r.memory.peak_position),
          .fits = r.fits, .step_seconds = r.sim.step_seconds, .swaps = static_cast<int>(swaps),
          .recomputations = static_cast<int>(std::ssize(r.choices) - swaps), .delayed_bytes = delayed_bytes});
    }
    if (o.fits_only && delayed_fit) break;
    if (r.fits) {
      // Note [Auto slack]: room left under the budget goes back to the greedy as a higher target, while rounds
      // last and each fits; the fastest is kept.
      const int64_t slack = o.budget_bytes - r.memory.device_arena_bytes;
      const bool repeat = best_fit && now == fit_decisions;
      if (!best_fit || r.sim.step_seconds < best_fit->sim.step_seconds) {
        best_fit = std::move(r);
        if (chosen) *chosen = cands;
      }
      fit_decisions = std::move(now);
      if (o.fits_only || repeat || slack <= static_cast<int64_t>(o.retry_step * static_cast<double>(o.budget_bytes)))
        break;
      target += slack;
      continue;
    }
    if (best_fit) break;  // a raised target that no longer fits: the last fit stands
    last = r;
    last_decisions = std::move(now);
    if (r.memory.device_arena_bytes <= o.budget_bytes) {
      r.why = Error{fmt::format("does not fit the host: the plan needs {} of host memory for swapped tensors, the "
                                "host budget is {}",
                                format_size(r.memory.host_arena_bytes), format_size(o.host_budget_bytes)),
                    {}};
      return r;
    }
    Error why = does_not_fit(r.graph, r.memory, o.budget_bytes);
    why.where = fmt::format("auto ({} swapped, {} recomputed; estimated peak target {}; round {})", swaps,
                            std::ssize(r.choices) - swaps, format_size(target), round);
    r.why = std::move(why);
    const int64_t excess = r.memory.device_arena_bytes - o.budget_bytes;
    if (!best.why || better_plan(r, best)) best = std::move(r);  // the closest to fitting explains why not
    // Too big: lower the target by the excess (and a step). When the greedy could not reach its target,
    // nothing more can be freed at the estimate's peak below it: go halfway back to the last target it reached
    // (the excess is often the assignment's fragmentation, which a smaller drop may already absorb).
    if (reached) {
      reached_target = target;
      target -= excess + static_cast<int64_t>(o.retry_step * static_cast<double>(o.budget_bytes));
      // Past stuck peaks every round reaches its target (Note [Past a stuck peak]): none to reach below zero.
      if (o.past_stuck && target <= 0) break;
    } else if (reached_target < 0 && pinned.empty()) {
      // Stuck before it ever reached a target: which recomputations the greedy refuses depends on the target
      // (may_recompute), and a lower one can steer it out of the corner it painted itself into here. Lower it by
      // the estimate's overshoot (and a step). mobilenet_v2 at batch 830 and 16 GiB: the plain greedy fits at
      // its fifth target, 0.75 of the budget.
      const int64_t overshoot = *std::max_element(greedy.live.begin(), greedy.live.end()) - target;
      target -= overshoot + static_cast<int64_t>(o.retry_step * static_cast<double>(o.budget_bytes));
      if (target <= 0) break;
    } else {
      if (reached_target < 0 || reached_target - target < o.retry_step * static_cast<double>(o.budget_bytes)) break;
      target = reached_target - (reached_target - target) / 2;
    }
  }
  if (delayed_fit && (!best_fit || delayed_fit->sim.step_seconds < best_fit->sim.step_seconds)) {
    best_fit = std::move(delayed_fit);
    if (chosen) *chosen = std::move(delayed_chosen);
  }
  if (best_fit) {
    best_fit->rounds = rounds;
    return std::move(*best_fit);
  }
  return best;
}

}  // namespace

Result<AutoResult> plan_auto(const Graph& scheduled, std::span<const int64_t> workspaces,
                             const ExactPlanner& exact, const AutoOptions& o) {
  if (o.device.h2d_bytes_per_s <= 0 || o.device.d2h_bytes_per_s <= 0)
    return fail("auto: device model '{}' has no host link rates", o.device.name);
  if (o.max_rounds < 1) return fail("auto: max_rounds must be >= 1, got {}", o.max_rounds);
  LMS_TRY_VOID(check_schedule_order(scheduled));
  for (NodeId n : scheduled.node_ids())
    if (scheduled.def(n).traits.is_copy || scheduled.node(n).category == Category::recompute)
      return fail_at(node_label(scheduled, n), "auto: the graph already holds swap or recompute ops");

  const Timeline tl = LMS_TRY(timeline(scheduled, o));
  // The estimate counts every value in a buffer of its own (Note [Auto slack]); when no plan fits so, the
  // greedies run again with the estimate counting reuse (Note [Auto reuse estimate]).
  const std::vector<int64_t> live_own =
      live_bytes(LMS_TRY(compute_liveness(scheduled, workspaces, /*reuse=*/false)), Placement::device);
  std::vector<int64_t> live_reused;
  auto live_of = [&](bool reuse) -> const std::vector<int64_t>& { return reuse ? live_reused : live_own; };
  const std::vector<Candidate> candidates = find_candidates(scheduled, tl, o);
  // The same, each that has a segment recomputed by it (Mix::both_segment; Note [Auto segments]).
  std::vector<Candidate> segmented = candidates;
  bool any_segment = false;
  for (Candidate& c : segmented)
    if (!c.segment.empty()) {
      c.chain = c.segment;
      c.recompute_seconds = c.segment_seconds;
      c.recomputable = c.segmented = any_segment = true;
    }
  auto candidates_of = [&](Mix m) -> const std::vector<Candidate>& {
    return m == Mix::both_segment ? segmented : candidates;
  };
  // Each mix's plan (Note [Auto portfolio]), then the refinement of each that mixes swaps and recomputations
  // and waits for copies (Note [Auto refinement]); the fastest that fits wins, else the closest (better_plan).
  struct Planned {
    AutoResult result;
    std::vector<Candidate> chosen;  // the greedy's choices, when it fits
    Mix mix = Mix::both;
    bool reuse_estimate = false;  // its estimate counted buffer reuse
  };
  std::vector<Planned> plans;
  int rounds = 0;
  auto any_fits = [&] {
    return std::any_of(plans.begin(), plans.end(), [](const Planned& p) { return p.result.fits; });
  };
  // The pieces run at once (plan/auto/parallel.h); their rounds are replayed in order.
  auto replay = [&](const std::vector<AutoRound>& log) {
    if (o.on_round)
      for (const AutoRound& r : log) o.on_round(r);
  };
  // Greedies at once, kept in order as if run one after another: to the first that fits when only fitting is
  // asked (then that plan, in `fitted`).
  std::optional<AutoResult> fitted;
  auto run_mixes = [&](const std::vector<Mix>& mixes, bool reuse) -> Result<void> {
    auto done = run_auto_tasks<Result<Planned>>(mixes.size(), o, [&](size_t i, const AutoOptions& own) {
      Planned p;
      p.mix = mixes[i];
      p.reuse_estimate = reuse;
      auto r = plan_mix(scheduled, tl, candidates_of(p.mix), live_of(reuse), reuse, exact, own, p.mix, {}, &p.chosen);
      if (!r) return Result<Planned>(std::unexpected(std::move(r.error())));
      p.result = std::move(*r);
      return Result<Planned>(std::move(p));
    });
    for (AutoTask<Result<Planned>>& t : done) {
      replay(t.rounds);
      if (!t.value) return std::unexpected(std::move(t.value.error()));
      rounds += t.value->result.rounds;
      plans.push_back(std::move(*t.value));
      if (o.fits_only && plans.back().result.fits) {
        plans.back().result.rounds = rounds;
        fitted = std::move(plans.back().result);
        return {};
      }
    }
    return {};
  };
  for (bool reuse : {false, true}) {
    if (reuse) {
      // Past stuck peaks, the estimate without reuse only: its upper bound is what stops greedies at peaks the
      // exact plan fits, and of the plans past them that fitted (vit_b_16, convnext_tiny, the onnx_swin fixture at
      // their edges), none came from the estimate counting reuse.
      if (any_fits() || o.past_stuck) break;
      live_reused =
          live_bytes(LMS_TRY(compute_liveness(scheduled, workspaces, /*reuse=*/true)), Placement::device);
    }
    std::vector<Mix> mixes = {Mix::both, Mix::both_cascade, Mix::swap_only, Mix::recompute_only};
    if (any_segment) mixes.insert(mixes.begin() + 2, Mix::both_segment);
    LMS_TRY_VOID(run_mixes(mixes, reuse));
    if (!fitted && !any_fits()) LMS_TRY_VOID(run_mixes({Mix::both_strict}, reuse));
    if (fitted) return std::move(*fitted);
  }
  // Each plan's refinement on its own (they are independent): the improved ones join the plans, in order.
  struct Refined {
    std::optional<Planned> improved;
    int rounds = 0;
  };
  auto refined = run_auto_tasks<Result<Refined>>(plans.size(), o, [&](size_t k, const AutoOptions& own)
                                                                        -> Result<Refined> {
    Refined out;
    if (!plans[k].result.fits || plans[k].mix == Mix::swap_only || plans[k].mix == Mix::recompute_only) return out;
    Planned cur = plans[k];
    const double waiting = cur.result.sim.stall_seconds[static_cast<size_t>(StreamId::compute)];
    if (waiting <= own.refine_min_wait * cur.result.sim.step_seconds) return out;
    std::vector<int> pinned;
    std::vector<bool> tried(candidates.size(), false);
    bool improved = false;
    for (bool copies_out : {false, true}) {  // the prefetches first, then the copies out too
      for (int step = 0; step < own.refine_steps; ++step) {
        const int i = most_waited_for_swap(scheduled, cur.chosen, cur.result, tried, copies_out);
        if (i < 0) break;
        tried[static_cast<size_t>(i)] = true;
        pinned.push_back(i);
        std::vector<Candidate> chosen;
        AutoResult t = LMS_TRY(plan_mix(scheduled, tl, candidates_of(cur.mix), live_of(cur.reuse_estimate),
                                        cur.reuse_estimate, exact, own, cur.mix, pinned, &chosen));
        out.rounds += t.rounds;
        if (t.fits && t.sim.step_seconds < cur.result.sim.step_seconds) {
          cur.result = std::move(t);
          cur.chosen = std::move(chosen);
          improved = true;
        } else {
          pinned.pop_back();
        }
      }
    }
    if (improved) out.improved = std::move(cur);
    return out;
  });
  for (AutoTask<Result<Refined>>& t : refined) {
    replay(t.rounds);
    if (!t.value) return std::unexpected(std::move(t.value.error()));
    rounds += t.value->rounds;
    if (t.value->improved) plans.push_back(std::move(*t.value->improved));
  }
  // Each with its prefetches advanced (Note [Prefetch advance]: last, after the refinement; again from each
  // advanced plan's simulation while that helps); the fastest that fits, else the closest (better_plan); ties
  // keep the earlier.
  auto advanced = run_auto_tasks<Result<void>>(plans.size(), o, [&](size_t i, const AutoOptions& own) {
    Planned& p = plans[i];
    for (int k = 0; k < own.advance_rounds && p.result.fits; ++k) {
      auto more = realize_advanced(scheduled, p.chosen, p.result, exact, own);
      if (!more) return Result<void>(std::unexpected(std::move(more.error())));
      if (!*more) break;
    }
    return Result<void>{};
  });
  for (AutoTask<Result<void>>& t : advanced)
    if (!t.value) return std::unexpected(std::move(t.value.error()));
  size_t best = 0;
  for (size_t k = 1; k < plans.size(); ++k)
    if (better_plan(plans[k].result, plans[best].result)) best = k;
  plans[best].result.rounds = rounds;
  return std::move(plans[best].result);
}

}  // namespace lms
