// The auto planner's candidates (plan/auto/auto_planner.h; docs/planner.md "The auto strategy", step 1): the
// forward activations a backward op reads, the backward values read again after a gap (a U-Net's
// skip-connection gradient; swap only) and the values read again in the forward pass after a gap (its skip
// connection; swap only), each with its gap on the predicted compute timeline, its copy times,
// the trigger its prefetch would have by copy duration, and the chain (and segment) of ops that would recompute
// it. Shared by the greedy and its refinement in auto_planner.cc; nothing here decides. Internal to the auto
// planner.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "lms/ir/graph.h"
#include "lms/plan/auto/auto_planner.h"
#include "lms/support/error.h"

namespace lms::autoplan {

enum class State : uint8_t { keep, swap, recompute };

// A forward activation a backward op reads, or a backward value a later backward op reads, and what the greedy
// chose for it.
struct Candidate {
  ValueId value;
  NodeId producer;
  int64_t bytes = 0;
  int fwd_end = 0;    // e: the producer's or the last non-backward reader's position
  int bwd_first = 0;  // f: the first backward reader's position
  double copy_out = 0, copy_in = 0;  // seconds
  double gap = 0;                    // start(f) - end(e), seconds
  int trigger = 0;                   // k in [e, f): the prefetch's trigger by its copy duration
  int hold = 0;                      // swap: h in [e, k], the last position that keeps its space (place_holds)
  int freed_lo = 0, freed_hi = -1;   // positions where the estimate counts it freed (empty: lo > hi)
  bool recomputable = false;
  std::vector<ValueId> chain;        // values cloned for it, earliest first, ending with `value`
  double recompute_seconds = 0;
  // Its segment (nested recomputation; empty: none, or no more than its chain): the fewest forward ops ending
  // with its producer that read, besides parameters and sources, one other activation a backward op reads
  // (`remade_from`, resident at bwd_first), by one value of each, earliest first, ending with `value` (a
  // residual block's output remade from the block's input; the values inside are cloned for it alone, whatever
  // is chosen for them).
  std::vector<ValueId> segment;
  ValueId remade_from;
  double segment_seconds = 0;
  int64_t segment_transient = 0;     // the most bytes of the segment's other clones live at once
  bool segmented = false;            // recomputed by its segment rather than its chain (Mix::both_segment)
  // A forward gap (swap only; Note [Forward gaps] in candidates.cc): the value swapped across the widest gap between
  // two of its forward readers, fwd_end and bwd_first being the readers before and after it. The same value may
  // also be a candidate for its backward gap; the two free disjoint ranges.
  bool forward = false;
  State state = State::keep;
  double seconds = 0;                // the added time estimated when chosen

  // The values whose producers its recomputation clones under the recompute pass's one-output-per-producer
  // rule: its chain, or by a segment its value alone (the segment's other clones are its own).
  std::span<const ValueId> exclusive() const { return segmented ? std::span(&value, 1) : std::span(chain); }
};

// Each node's predicted time, start and end on the compute stream, and the step's length.
struct Timeline {
  std::vector<double> seconds, start, end;
  double step = 0;
};

// The predicted compute timeline of `g` before any rewrite (op times from the roofline or measured times).
Result<Timeline> timeline(const Graph& g, const AutoOptions& o);

// The gap of `v`: e, its producer's or last non-late reader's position, and f, its first late reader's
// (INT32_MAX: none).
std::pair<int, int> gap_of(const Graph& g, ValueId v);

// The largest position k in [lo, hi) whose start is < t (starts are non-decreasing), or lo.
int latest_starting_before(const std::vector<double>& start, int lo, int hi, double t);

// The forward activations a backward op reads, with their gaps, copy times, triggers, recompute chains and
// segments; the backward values a backward op reads after a gap (not recomputable); then the forward gaps
// (Candidate::forward), after all the others.
std::vector<Candidate> find_candidates(const Graph& g, const Timeline& tl, const AutoOptions& o);

}  // namespace lms::autoplan
