// The strategies none and tflms (see strategy.h).
//
// Note [TFLMS schedule]
// The simulator walks levels in order, the nodes of a level by id, and plays each swap-out right after its
// source and each prefetch right after its trigger (sim/memory_sim.h). The exact plan is made for the order the
// program really runs, so the tflms strategy runs the rewritten graph in that same order: every original node
// at its (level, id) position in the graph without swaps (tflms-triggers' bypass_swaps), each swap_out right
// after its source, each triggered swap_in right after the last of its control inputs (its trigger, or in sync
// mode 2/3 the producers of its target's other inputs), and each swap_in without control inputs right before
// its first consumer (synchronous: fetched just in time). Kahn's algorithm with these positions as priorities
// makes the order; it is the intended one whenever that is valid, and a valid order always.
#include "lms/plan/strategy.h"

#include <algorithm>

#include "lms/analysis/levels.h"
#include "lms/analysis/reachability.h"
#include "lms/passes/argmax_pool.h"
#include "lms/passes/tflms_swap.h"
#include "lms/passes/tflms_triggers.h"
#include "lms/ir/verifier.h"
#include "lms/plan/auto/parallel.h"
#include "lms/plan/schedule.h"
#include "lms/sim/time_sim.h"

namespace lms {

namespace {

// Searches after the first, when the exact plan disagrees with the simulator (strategy.h).
constexpr int kMaxTflmsRounds = 6;
// Each retry lowers the simulator's budget below the exact plan's excess by this fraction more, so that rounds
// make progress even when the excess is a few bytes.
constexpr double kRatioMargin = 0.01;

// Priority of a node in the TFLMS order: 4 x position of the anchor node, plus an offset that puts swap-outs and
// triggered swap-ins after their anchor and synchronous swap-ins before theirs (Note [TFLMS schedule]).
Result<Graph> tflms_schedule(const Graph& rewritten) {
  BypassedGraph bypassed = LMS_TRY(bypass_swaps(rewritten));
  Levels levels = LMS_TRY(compute_levels(bypassed.graph));
  std::vector<NodeId> base = bypassed.graph.node_ids();
  std::stable_sort(base.begin(), base.end(), [&](NodeId a, NodeId b) { return levels[a] < levels[b]; });
  const size_t n = rewritten.num_nodes();
  constexpr int64_t kUnset = -1;
  std::vector<int64_t> key(n, kUnset);
  for (size_t i = 0; i < base.size(); ++i) key[bypassed.old_of_new[base[i].v].v] = 4 * static_cast<int64_t>(i);
  for (NodeId m : rewritten.node_ids()) {  // swap-outs: right after their source
    if (rewritten.node(m).op != Op::swap_out) continue;
    key[m.v] = key[rewritten.value(rewritten.node(m).inputs.front()).producer.v] + 1;
  }
  for (NodeId m : rewritten.node_ids()) {
    const Node& node = rewritten.node(m);
    if (node.op != Op::swap_in) continue;
    if (!node.control_inputs.empty()) {
      int64_t last = 0;
      for (NodeId c : node.control_inputs) last = std::max(last, key[c.v]);
      key[m.v] = last - last % 4 + 2;
      continue;
    }
    int64_t first = INT64_MAX;
    for (NodeId c : rewritten.value(node.outputs.front()).consumers) first = std::min(first, key[c.v]);
    key[m.v] = first == INT64_MAX ? key[rewritten.value(node.inputs.front()).producer.v] + 1 : first - 1;
  }
  for (NodeId m : rewritten.node_ids())
    if (key[m.v] == kUnset) return fail("tflms schedule: node #{} has no position (a swap op in an unexpected place)", m.v);

  std::vector<NodeId> order = LMS_TRY(schedule_order_by(rewritten, key));
  Graph out = rewritten;
  out.reorder(order);
  out.set_scheduled(true);
  return out;
}

Result<MemoryPlan> plan_exact(const Graph& scheduled, const StrategyOptions& opts, std::vector<int64_t>* workspaces) {
  PlanOptions po{
      .budget_bytes = opts.budget_bytes, .assignment = opts.assignment, .reuse_buffers = opts.reuse_buffers};
  if (opts.workspace_bytes) po.workspace_bytes = LMS_TRY(opts.workspace_bytes(scheduled));
  if (workspaces) *workspaces = po.workspace_bytes;
  return plan_memory_unchecked(scheduled, po);
}

bool fits(const MemoryPlan& m, const StrategyOptions& opts) {
  return m.device_arena_bytes <= opts.budget_bytes && m.host_arena_bytes <= opts.host_budget_bytes;
}

Error host_does_not_fit(const MemoryPlan& m, int64_t host_budget) {
  return Error{fmt::format("does not fit the host: the plan needs {} of host memory for swapped tensors, the host "
                           "budget is {}",
                           format_size(m.host_arena_bytes), format_size(host_budget)),
               {}};
}

void count_swaps(Plan& p) {
  for (NodeId n : p.graph.node_ids()) {
    const Node& node = p.graph.node(n);
    const int64_t bytes = p.graph.value(node.outputs.front()).type.bytes();
    if (node.op == Op::swap_out) {
      p.swap_out_bytes += bytes;
      ++p.swapped_tensors;
    } else if (node.op == Op::swap_in) {
      p.swap_in_bytes += bytes;
    }
  }
}

Plan not_fitting(Plan p, Error why) {
  p.fits = false;
  p.why = std::move(why);
  return p;
}

// Whether node `n` reads or writes a loss's logits or their gradient (a cross_entropy's first input, a
// cross_entropy_grad's output): what the chunk-loss pass splits into blocks.
bool holds_loss_logits(const Graph& g, NodeId n) {
  auto logits = [&](ValueId v) {
    if (g.node(g.value(v).producer).op == Op::cross_entropy_grad) return true;
    return std::ranges::any_of(g.value(v).consumers, [&](NodeId c) {
      return g.node(c).op == Op::cross_entropy && g.node(c).inputs[0] == v;
    });
  };
  const Node& node = g.node(n);
  return std::ranges::any_of(node.inputs, logits) || std::ranges::any_of(node.outputs, logits);
}

Result<Plan> plan_tflms(Plan p, const Graph& scheduled, const std::vector<int64_t>& workspaces,
                        const StrategyOptions& opts) {
  const MemoryPlan& none = p.memory;
  // Below the hard limit no setting of T, A, G can fit: say so with the number, before searching.
  if (none.min_budget_bytes > opts.budget_bytes) {
    const bool logits = none.min_budget_position >= 0 &&
                        holds_loss_logits(scheduled, NodeId{static_cast<uint32_t>(none.min_budget_position)});
    return not_fitting(std::move(p),
                       Error{fmt::format("budget {} is below the minimum any plan needs, {}: parameters and state ({}) "
                                         "plus the largest single op's inputs, outputs and workspace ({}), which "
                                         "swapping cannot reduce{}",
                                         format_size(opts.budget_bytes), format_size(none.min_budget_bytes),
                                         format_size(none.persistent_bytes), largest_op(scheduled, none),
                                         logits ? "; that op holds the loss's logits, which `--loss-chunks N` "
                                                  "(TrainingOptions::loss_chunks) splits into N blocks"
                                                : ""),
                             {}});
  }
  Levels levels = LMS_TRY(compute_levels(scheduled));
  Reachability reach = LMS_TRY(compute_reachability(scheduled, levels));
  p.levels = levels.count();
  TflmsSearchOptions so;
  so.sim.device_bytes = opts.budget_bytes;
  so.sim.host_bytes = opts.host_budget_bytes;
  so.sim.ratio = opts.tflms_ratio;
  so.sim.workspace_bytes = workspaces;
  so.base = opts.tflms;
  so.on_trial = opts.on_trial;

  for (int round = 1; round <= kMaxTflmsRounds; ++round) {
    p.tflms_rounds = round;
    TflmsParams params;
    if (opts.tflms_fixed) {
      params = *opts.tflms_fixed;
      SwapDecisions d = LMS_TRY(decide_tflms_swaps(scheduled, levels, reach, params));
      MemorySimResult sim = LMS_TRY(simulate_tflms_memory(scheduled, levels, d, so.sim));
      p.sim_peak_bytes = sim.peak_device_bytes;
    } else {
      TflmsSearchResult r = LMS_TRY(search_tflms(scheduled, levels, reach, so));
      p.trials.insert(p.trials.end(), r.trials.begin(), r.trials.end());
      if (!r.fits) return not_fitting(std::move(p), *r.why);
      params = r.params;
      if (!r.lms_needed) params.swapout_threshold = std::max(1, p.levels);  // nothing is far: no swap
      p.sim_peak_bytes = r.sim.peak_device_bytes;
    }
    Graph rewritten = scheduled;
    LMS_TRY(insert_tflms_swaps(rewritten, params));
    // Sync modes 2 and 3 fetch just in time: no triggers (tflms_triggers.h).
    if (params.sync_mode == SyncMode::async || params.sync_mode == SyncMode::sync_out)
      LMS_TRY(add_tflms_triggers(rewritten, params));
    Graph ordered = LMS_TRY(tflms_schedule(rewritten));
    MemoryPlan memory = LMS_TRY(plan_exact(ordered, opts, nullptr));
    p.tflms = params;
    p.graph = std::move(ordered);
    p.memory = std::move(memory);
    p.swap_out_bytes = p.swap_in_bytes = p.swapped_tensors = 0;
    count_swaps(p);
    if (fits(p.memory, opts)) {
      p.fits = true;
      return p;
    }
    if (p.memory.device_arena_bytes <= opts.budget_bytes)
      return not_fitting(std::move(p), host_does_not_fit(p.memory, opts.host_budget_bytes));
    if (opts.tflms_fixed || round == kMaxTflmsRounds) {
      Error why = does_not_fit(p.graph, p.memory, opts.budget_bytes);
      why.where = fmt::format("tflms (T={}, A={}, G={}, sync_mode={}; simulated peak {}; after {} round(s))",
                              params.swapout_threshold, params.swapin_ahead, params.swapin_groupby,
                              static_cast<int>(params.sync_mode), format_size(p.sim_peak_bytes), round);
      return not_fitting(std::move(p), why);
    }
    // The simulator's walk under-counted this schedule: lower its budget by the excess and search again.
    const double room = static_cast<double>(opts.budget_bytes - p.memory.persistent_bytes);
    const double need = static_cast<double>(p.memory.device_arena_bytes - p.memory.persistent_bytes);
    so.sim.ratio = std::max(so.sim.ratio * room / need * (1.0 - kRatioMargin), 1e-6);
  }
  return fail("tflms: unreachable");
}

// Auto's own plan and tflms's, each predicted on the device model; the faster that fits (ties: auto's own). With
// `past_stuck`, the last stage (Note [Past a stuck peak] in plan/auto/auto_planner.h): auto's greedies going past
// the peaks they cannot lower, and no tflms plan (the first stage made it, and it did not fit).
Result<Plan> plan_automatic(Plan p, const Graph& scheduled, const std::vector<int64_t>& workspaces,
                            const StrategyOptions& opts, bool past_stuck) {
  if (p.memory.min_budget_bytes > opts.budget_bytes) {  // below the hard limit: tflms's reason says so
    Plan tf = LMS_TRY(plan_tflms(std::move(p), scheduled, workspaces, opts));
    tf.strategy = Strategy::automatic;
    return tf;
  }
  const DeviceModel& device = *opts.device_model;
  const MeasuredTimes* measured = opts.measured.empty() ? nullptr : &opts.measured;
  AutoOptions ao;
  ao.device = device;
  ao.measured = opts.measured;
  ao.budget_bytes = opts.budget_bytes;
  ao.host_budget_bytes = opts.host_budget_bytes;
  ao.fits_only = opts.fits_only;
  ao.past_stuck = past_stuck;
  ao.on_plan = opts.on_auto_plan;
  // A backend's workspace query (cuDNN's algorithm choice among them) was not written to be called from other
  // threads: with one, the search runs on this thread.
  ao.threads = opts.workspace_bytes ? 1 : opts.threads;
  // Auto's swap-ins and clones make lifetimes that one assignment packs much better than another at times
  // (resnet50 b1000 at 16 GiB: 18.8 vs 15.x GiB); it keeps the smaller arena of every assignment, and when
  // none fits the budget but the liveness bound does, searches perturbed orders (Note [Perturbed orders]) until
  // one fits or packing_tries run out.
  auto exact = [&](const Graph& g, bool search) -> Result<MemoryPlan> {
    PlanOptions po{.budget_bytes = opts.budget_bytes, .reuse_buffers = opts.reuse_buffers};
    if (opts.workspace_bytes) po.workspace_bytes = LMS_TRY(opts.workspace_bytes(g));  // once for every order
    std::optional<MemoryPlan> best;
    auto try_order = [&](Assignment a, uint32_t k) -> Result<void> {
      po.assignment = a;
      po.perturbation = k;
      MemoryPlan m = LMS_TRY(plan_memory_unchecked(g, po));
      if (!best || m.device_arena_bytes < best->device_arena_bytes) best = std::move(m);
      return {};
    };
    for (Assignment a : kAllAssignments) LMS_TRY_VOID(try_order(a, 0));
    for (int k = 0; search && k < opts.packing_tries && best->device_arena_bytes > opts.budget_bytes &&
                    best->lower_bound_bytes <= opts.budget_bytes;
         ++k)
      LMS_TRY_VOID(try_order(Assignment::perturbed_by_area, static_cast<uint32_t>(k)));
    return std::move(*best);
  };
  // Two schedules to start from: the graph's own order and TFLMS's level order, which keeps fewer gradients
  // live at once on deep CNNs at large batch; the better plan (better_plan; ties: the graph's order).
  auto report_from = [&](std::string_view schedule) {
    if (opts.on_auto_round) ao.on_round = [&, schedule](const AutoRound& r) { opts.on_auto_round(schedule, r); };
  };
  // A capacity probe plans the level order only when the graph's order does not fit; a full plan plans both at
  // once (plan/auto/parallel.h: the rounds are reported in this order all the same).
  auto plan_levelled = [&](const AutoOptions& o) -> Result<AutoResult> {
    Graph levelled = LMS_TRY(tflms_schedule(scheduled));
    std::vector<int64_t> ws;
    if (opts.workspace_bytes) ws = LMS_TRY(opts.workspace_bytes(levelled));
    return plan_auto(levelled, ws, exact, o);
  };
  std::optional<AutoResult> levelled;
  AutoResult own;
  if (opts.fits_only) {
    report_from("graph order");
    own = LMS_TRY(plan_auto(scheduled, workspaces, exact, ao));
    report_from("level order");
    if (!own.fits) levelled = LMS_TRY(plan_levelled(ao));
  } else {
    if (opts.on_auto_round) ao.on_round = [](const AutoRound&) {};  // recorded per schedule, reported below
    auto both = run_auto_tasks<Result<AutoResult>>(2, ao, [&](size_t i, const AutoOptions& o) {
      return i == 0 ? plan_auto(scheduled, workspaces, exact, o) : plan_levelled(o);
    });
    for (size_t i = 0; i < both.size(); ++i) {
      if (opts.on_auto_round)
        for (const AutoRound& r : both[i].rounds) opts.on_auto_round(i == 0 ? "graph order" : "level order", r);
      if (!both[i].value) return std::unexpected(std::move(both[i].value.error()));
    }
    own = std::move(*both[0].value);
    levelled = std::move(*both[1].value);
  }
  if (levelled) {
    AutoResult& other = *levelled;
    if (better_plan(other, own)) {
      other.rounds += own.rounds;
      own = std::move(other);
    } else {
      own.rounds += other.rounds;
    }
  }
  // Auto's own plan as the result.
  auto take_own = [&](std::string source) {
    p.auto_source = std::move(source);
    p.auto_rounds = own.rounds;
    p.graph = std::move(own.graph);
    p.memory = std::move(own.memory);
    p.choices = std::move(own.choices);
    p.recompute_flops = own.recompute_flops;
    for (const AutoChoice& c : p.choices) p.recomputed_tensors += c.kind == AutoChoice::Kind::recompute;
    p.predicted_step_seconds = own.sim.step_seconds;
    count_swaps(p);
    p.fits = own.fits;
  };
  if (opts.fits_only && own.fits) {  // StrategyOptions::fits_only: the first plan that fits
    take_own("auto (its first plan that fits: only whether it fits was asked)");
    return p;
  }
  if (past_stuck) {
    take_own("auto (its greedies going past the peaks they could not lower: nothing else fits, tflms's plan "
             "included)");
    return p.fits ? p : not_fitting(std::move(p), *own.why);
  }
  Plan tf = LMS_TRY(plan_tflms(p, scheduled, workspaces, opts));
  std::optional<double> tf_seconds;
  if (tf.fits) tf_seconds = LMS_TRY(simulate_time(tf.graph, device, measured, &tf.memory)).step_seconds;
  const std::string both = fmt::format(
      "auto's own plan {}, tflms's {}", own.fits ? fmt::format("{:.4g} s", own.sim.step_seconds) : "does not fit",
      tf_seconds ? fmt::format("{:.4g} s", *tf_seconds) : "does not fit");
  if (tf_seconds && (!own.fits || *tf_seconds < own.sim.step_seconds)) {
    tf.strategy = Strategy::automatic;
    tf.predicted_step_seconds = tf_seconds;
    tf.auto_source = fmt::format("tflms ({})", both);
    tf.auto_rounds = own.rounds;
    return tf;
  }
  take_own(fmt::format("auto ({})", both));
  if (p.fits) return p;
  // Neither fits: say why with the smaller of the two reasons' plans (auto's own).
  return not_fitting(std::move(p), *own.why);
}

}  // namespace

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::none: return "none";
    case Strategy::tflms: return "tflms";
    case Strategy::automatic: return "auto";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  if (name == "none") return Strategy::none;
  if (name == "tflms") return Strategy::tflms;
  if (name == "auto") return Strategy::automatic;
  return fail("unknown strategy '{}' (strategies: none, tflms, auto)", name);
}

Result<Plan> make_plan(const Graph& training, const StrategyOptions& opts) {
  Plan p = LMS_TRY(try_plan(training, opts));
  if (!p.fits) return std::unexpected(*p.why);
  return p;
}

namespace {

// try_plan of one graph, without auto's fallbacks; `past_stuck`: auto's last stage (plan_automatic).
Result<Plan> plan_graph(const Graph& training, const StrategyOptions& opts, bool past_stuck) {
  Graph scheduled = LMS_TRY(schedule(training));
  std::vector<int64_t> workspaces;
  MemoryPlan none = LMS_TRY(plan_exact(scheduled, opts, &workspaces));
  Plan p;
  p.strategy = opts.strategy;
  p.budget_bytes = opts.budget_bytes;
  p.host_budget_bytes = opts.host_budget_bytes;
  p.peak_bytes_none = none.device_arena_bytes;
  const bool none_fits = fits(none, opts);
  p.graph = scheduled;
  p.memory = std::move(none);
  p.lms_needed = !none_fits;
  // Every strategy declines to swap when everything fits, except tflms told its parameters: it swaps what they
  // say, like the original with user-set parameters.
  const bool forced = opts.strategy == Strategy::tflms && opts.tflms_fixed;
  if (none_fits && !forced) {
    p.fits = true;
    return p;
  }
  if (opts.strategy == Strategy::none) {
    Error why = p.memory.device_arena_bytes > opts.budget_bytes
                    ? does_not_fit(p.graph, p.memory, opts.budget_bytes)
                    : host_does_not_fit(p.memory, opts.host_budget_bytes);
    return not_fitting(std::move(p), std::move(why));
  }
  if (opts.strategy == Strategy::automatic)
    return plan_automatic(std::move(p), scheduled, workspaces, opts, past_stuck);
  return plan_tflms(std::move(p), scheduled, workspaces, opts);
}

}  // namespace

Result<Plan> try_plan(const Graph& training, const StrategyOptions& opts) {
  if (opts.budget_bytes < 0) return fail("budget {} is negative", opts.budget_bytes);
  if (opts.host_budget_bytes < 0) return fail("host budget {} is negative", opts.host_budget_bytes);
  if (opts.strategy == Strategy::automatic && !opts.device_model)
    return fail("strategy auto needs a device model to plan for (--device-model)");
  Plan first = LMS_TRY(plan_graph(training, opts, /*past_stuck=*/false));
  // Below the hard limit (plan_automatic said so with tflms's reason) no later stage can fit either.
  if (opts.strategy != Strategy::automatic || first.fits || first.memory.min_budget_bytes > opts.budget_bytes)
    return first;
  // Auto's later stages, each only when nothing before it fits: at the edge of capacity the argmax-pool rewrite
  // can cost more than it saves (passes/argmax_pool.h), so the graph with the relu output kept; then both graphs
  // with the greedies going past the peaks they cannot lower (Note [Past a stuck peak]). When none fits, the
  // closest plan of all (the smallest planned peak) says why.
  Graph kept = training;
  const bool any_kept = LMS_TRY(keep_pool_input(kept)) > 0;
  Plan closest = std::move(first);
  struct Stage {
    bool keep, past_stuck;
  };
  for (const Stage s : {Stage{true, false}, Stage{false, true}, Stage{true, true}}) {
    if (s.keep && !any_kept) continue;
    Plan p = LMS_TRY(plan_graph(s.keep ? kept : training, opts, s.past_stuck));
    if (s.keep && p.fits)
      p.auto_source += ", keeping the relu output a max pooling reads (with its argmax instead, nothing fits)";
    if (p.fits) return p;
    if (p.memory.device_arena_bytes < closest.memory.device_arena_bytes) closest = std::move(p);
  }
  return closest;
}

std::string largest_op(const Graph& g, const MemoryPlan& m) {
  if (m.min_budget_position < 0) return "no op";
  const NodeId n{static_cast<uint32_t>(m.min_budget_position)};
  return fmt::format("{}, {}", node_label(g, n), g.def(n).name);
}

}  // namespace lms
