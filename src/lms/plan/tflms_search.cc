// The auto-tuning search of tflms_search.h: levels, reachability and the simulator's graph index are built
// once; each trial is decide_tflms_swaps + MemorySimulator::run. The current best (the last accepted setting,
// which fit) keeps its decisions and simulation so nothing is recomputed at the end.
#include "lms/plan/tflms_search.h"

#include <algorithm>

#include "lms/ir/verifier.h"
#include "lms/support/size.h"

namespace lms {

std::string_view tflms_stage_name(TflmsStage s) {
  switch (s) {
    case TflmsStage::no_swap: return "no-swap";
    case TflmsStage::threshold: return "T";
    case TflmsStage::ahead: return "A";
    case TflmsStage::groupby: return "G";
  }
  return "?";
}

namespace {

constexpr SyncMode kSyncModes[] = {SyncMode::async, SyncMode::sync_out, SyncMode::sync_in, SyncMode::sync_both};

bool uses_ahead_and_groupby(SyncMode m) { return m == SyncMode::async || m == SyncMode::sync_out; }

class Search {
 public:
  Search(const Graph& g, const Levels& levels, const Reachability& reach, const MemorySimulator& sim,
         const TflmsSearchOptions& opts)
      : g_(g), levels_(levels), reach_(reach), sim_(sim), opts_(opts) {}

  // Simulates `p`; on fit it becomes the current best. Returns whether it fit.
  Result<bool> trial(TflmsStage stage, const TflmsParams& p) {
    SwapDecisions d = LMS_TRY(decide_tflms_swaps(g_, levels_, reach_, p));
    MemorySimResult r = LMS_TRY(sim_.run(d, opts_.sim));
    record(stage, p, d, r);
    if (!r.fits) return false;
    best_params_ = p;
    best_decisions_ = std::move(d);
    best_sim_ = std::move(r);
    return true;
  }

  // The no-swap walk: empty decisions, so it does not depend on decide_tflms_swaps' range checks.
  Result<bool> no_swap_trial(const TflmsParams& p) {
    SwapDecisions d;
    d.params = p;
    MemorySimResult r = LMS_TRY(sim_.run(d, opts_.sim));
    record(TflmsStage::no_swap, p, d, r);
    no_swap_sim_ = r;
    if (!r.fits) return false;
    best_params_ = p;
    best_decisions_ = std::move(d);
    best_sim_ = std::move(r);
    return true;
  }

  // The largest x in [lo, hi] for which `with(x)` fits, given that `lo` fits (Note [TFLMS search
  // monotonicity]: assumes fitting is monotone in x). Leaves the best at the answer.
  template <class With>
  Result<int> largest_fitting(TflmsStage stage, int lo, int hi, With with) {
    while (lo < hi) {
      int mid = lo + (hi - lo + 1) / 2;
      if (LMS_TRY(trial(stage, with(mid)))) lo = mid;
      else hi = mid - 1;
    }
    // The best is `lo`'s simulation: every fitting mid became the new lo, and when none fit, lo's own trial
    // (made by the caller) was the last to fit.
    return lo;
  }

  std::vector<TflmsTrial> trials;
  TflmsParams best_params_;
  SwapDecisions best_decisions_;
  MemorySimResult best_sim_;
  MemorySimResult no_swap_sim_;  // for the error's numbers

 private:
  void record(TflmsStage stage, const TflmsParams& p, const SwapDecisions& d, const MemorySimResult& r) {
    TflmsTrial t;
    t.stage = stage;
    t.params = p;
    t.fits = r.fits;
    t.peak_device_bytes = r.peak_device_bytes;
    t.peak_host_bytes = r.peak_host_bytes;
    t.host_exceeded = r.peak_host_bytes > r.host_budget_bytes;
    t.swapped_tensors = static_cast<int64_t>(d.swaps.size());
    for (const TensorSwap& s : d.swaps) t.swap_ins += static_cast<int64_t>(s.groups.size());
    t.swap_out_bytes = d.swap_out_bytes;
    if (opts_.on_trial) opts_.on_trial(t);
    trials.push_back(std::move(t));
  }

  const Graph& g_;
  const Levels& levels_;
  const Reachability& reach_;
  const MemorySimulator& sim_;
  const TflmsSearchOptions& opts_;
};

// The error when no sync mode has a T that fits: the budget, the smallest peak seen and the hard minimum.
Error nothing_fits(const Graph& g, const TflmsSearchOptions& opts, const std::vector<TflmsTrial>& trials,
                   const MemorySimResult& any) {
  // The smallest peak; ties go to the earliest trial (deterministic).
  const TflmsTrial* least = &trials.front();
  for (const TflmsTrial& t : trials)
    if (t.peak_device_bytes < least->peak_device_bytes) least = &t;
  std::string budget =
      opts.sim.device_bytes == kUnlimitedBytes
          ? std::string("unlimited device memory")
          : fmt::format("{} of device memory ({} for activations after {} of parameters and state, ratio {})",
                        format_size(opts.sim.device_bytes),
                        format_size(std::max<int64_t>(0, any.transient_budget_bytes)),
                        format_size(any.persistent_bytes), opts.sim.ratio);
  std::string host;
  if (opts.sim.host_bytes != kUnlimitedBytes)
    host = fmt::format(" and {} of host memory (that trial's host peak {}{})", format_size(opts.sim.host_bytes),
                       format_size(least->peak_host_bytes), least->host_exceeded ? ", too much" : "");
  return Error{fmt::format("TFLMS cannot fit {}{}: the smallest simulated peak was {} (T={}, sync_mode={}, "
                           "{} tensors swapped); its simulation's hard minimum is {} ({} of parameters and state "
                           "plus the inputs and outputs of {}, counted without buffer reuse as the original does), "
                           "below which no swapping of its kind can fit (--strategy auto also reuses buffers and "
                           "recomputes)",
                           budget, host, format_size(least->peak_device_bytes), least->params.swapout_threshold,
                           static_cast<int>(least->params.sync_mode), least->swapped_tensors,
                           format_size(any.min_device_bytes), format_size(any.persistent_bytes),
                           any.min_node.valid() ? node_label(g, any.min_node) : std::string("no op")),
               {}};
}

}  // namespace

Result<TflmsSearchResult> search_tflms(const Graph& g, const Levels& levels, const Reachability& reach,
                                       const TflmsSearchOptions& opts) {
  MemorySimulator sim = LMS_TRY(MemorySimulator::create(g, levels, opts.sim.workspace_bytes));
  Search s(g, levels, reach, sim, opts);
  const int n = levels.count();
  TflmsSearchResult out;
  out.levels = n;

  // 1. No swapping. T = n makes every consumer near (distances are at most n - 1), which is what it means.
  TflmsParams none = opts.base;
  none.swapout_threshold = std::max(n, 1);
  if (LMS_TRY(s.no_swap_trial(none))) {
    out.lms_needed = false;
    out.params = opts.base;
    out.decisions = std::move(s.best_decisions_);
    out.sim = std::move(s.best_sim_);
    out.trials = std::move(s.trials);
    return out;
  }

  // 2. T, trying the sync modes in turn; A = 1 and G = 0 (the original's defaults) meanwhile.
  bool found = false;
  TflmsParams p = opts.base;
  p.swapin_ahead = 1;
  p.swapin_groupby = 0;
  for (SyncMode mode : kSyncModes) {
    p.sync_mode = mode;
    p.swapout_threshold = 1;
    if (!LMS_TRY(s.trial(TflmsStage::threshold, p))) continue;
    p.swapout_threshold = LMS_TRY(s.largest_fitting(TflmsStage::threshold, 1, n, [&](int t) {
      TflmsParams q = p;
      q.swapout_threshold = t;
      return q;
    }));
    found = true;
    break;
  }
  if (!found) {
    out.fits = false;
    out.why = nothing_fits(g, opts, s.trials, s.no_swap_sim_);
    out.trials = std::move(s.trials);
    return out;
  }

  // 3-5. A and G, only where they mean something.
  if (uses_ahead_and_groupby(p.sync_mode)) {
    p.swapin_ahead = LMS_TRY(s.largest_fitting(TflmsStage::ahead, 1, n, [&](int a) {
      TflmsParams q = p;
      q.swapin_ahead = a;
      return q;
    }));
    TflmsParams all = p;
    all.swapin_groupby = n;
    if (LMS_TRY(s.trial(TflmsStage::groupby, all))) {
      p = all;
    } else {
      p.swapin_groupby = LMS_TRY(s.largest_fitting(TflmsStage::groupby, 0, n - 1, [&](int gb) {
        TflmsParams q = p;
        q.swapin_groupby = gb;
        return q;
      }));
    }
  }
  // The best is the last accepted setting, which is p (every accepted value became the new lower bound).
  out.lms_needed = true;
  out.params = s.best_params_;
  out.decisions = std::move(s.best_decisions_);
  out.sim = std::move(s.best_sim_);
  out.trials = std::move(s.trials);
  return out;
}

Result<TflmsSearchResult> search_tflms(const Graph& g, const TflmsSearchOptions& opts) {
  Levels levels = LMS_TRY(compute_levels(g));
  Reachability reach = LMS_TRY(compute_reachability(g, levels));
  return search_tflms(g, levels, reach, opts);
}

}  // namespace lms
