// The rewrite of the auto planner's choices and its exact plan (plan/auto/realize.h).
#include "lms/plan/auto/realize.h"

#include <algorithm>
#include <string>

#include "lms/passes/recompute.h"
#include "lms/passes/swap.h"
#include "lms/plan/auto/prefetch_advance.h"

namespace lms::autoplan {

namespace {

// The recompute pass for the chosen recomputations, then the swap pass for the chosen swaps, each prefetch
// triggered by the op the greedy chose (by copy duration, or delayed), kept between the value's last
// non-backward reader and its first backward reader in the rewritten graph (a clone reading a swapped value
// is a backward reader too). Returns the rewritten graph; fills the choices' triggers and the clones' FLOPs.
Result<Graph> build(const Graph& scheduled, const std::vector<Candidate>& cands, std::vector<AutoChoice>& choices,
                    std::vector<bool>& dropped, double& flops) {
  dropped.assign(cands.size(), false);
  Graph g = scheduled;
  RecomputeOptions ro;
  for (const Candidate& c : cands) {
    if (c.state != State::recompute) continue;
    std::vector<std::string> names;
    for (ValueId v : c.chain) names.push_back(scheduled.value(v).name);
    if (c.segmented) ro.segments.push_back(std::move(names));
    else ro.values.insert(ro.values.end(), names.begin(), names.end());
  }
  if (!ro.values.empty() || !ro.segments.empty()) flops = LMS_TRY(insert_recompute(g, ro)).flops;

  SwapOptions so;
  auto position_in_g = [&](int scheduled_position) {
    const NodeId n{static_cast<uint32_t>(scheduled_position)};
    return static_cast<int>(g.value(*g.find_value(scheduled.value(scheduled.first_output(n)).name)).producer.v);
  };
  auto name_at = [&](int position) { return g.value(g.first_output(NodeId{static_cast<uint32_t>(position)})).name; };
  // Forward swaps: the gap between the same two forward readers (recompute clones only come later), trigger and
  // hold kept inside it.
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& c = cands[i];
    if (c.state != State::swap || !c.forward) continue;
    const int e = position_in_g(c.fwd_end), f = position_in_g(c.bwd_first);
    const int k = std::max(e, std::min(f - 1, position_in_g(c.trigger)));
    const int h = c.hold > c.fwd_end ? std::min(k, position_in_g(c.hold)) : e;
    so.forward.push_back({scheduled.value(c.value).name, name_at(k), h > e ? name_at(h) : ""});
    choices[i].trigger = so.forward.back().trigger;
    choices[i].hold = so.forward.back().hold;
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& c = cands[i];
    if (c.state != State::swap || c.forward) continue;
    const ValueId v = *g.find_value(scheduled.value(c.value).name);
    const auto [e, f] = gap_of(g, v);
    // A clone placed before the value's last forward reader (possible from TFLMS's level order) leaves no
    // gap: the value stays (the exact plan counts it).
    if (f <= e + 1) {
      dropped[i] = true;
      continue;
    }
    // The trigger and hold, found by name in the rewritten graph, kept in [e, f), the hold (if any) after e and
    // not after the trigger; none with a forward swap of the value, whose hold places the one copy out.
    const bool forward = std::any_of(so.forward.begin(), so.forward.end(),
                                     [&](const SwapChoice& s) { return s.value == g.value(v).name; });
    const int k = std::max(e, std::min(f - 1, position_in_g(c.trigger)));
    const int h = c.hold > c.fwd_end && !forward ? std::min(k, position_in_g(c.hold)) : e;
    so.swaps.push_back({g.value(v).name, name_at(k), h > e ? name_at(h) : ""});
    choices[i].trigger = so.swaps.back().trigger;
    choices[i].hold = so.swaps.back().hold;
  }
  if (!so.swaps.empty() || !so.forward.empty()) LMS_TRY(insert_swaps(g, so));
  g.set_scheduled(true);
  return g;
}

// The chosen swaps' prefetch slots (PrefetchSlot), with the index in `cands` of each.
std::vector<PrefetchSlot> prefetch_slots(const std::vector<Candidate>& cands, std::vector<size_t>& of_slot) {
  std::vector<PrefetchSlot> slots;
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].state == State::swap && !cands[i].forward) {  // the forward swaps' prefetches stay
      const Candidate& c = cands[i];
      slots.push_back({c.value, c.bytes, std::max(c.hold, c.fwd_end), c.trigger});
      of_slot.push_back(i);
    }
  return slots;
}

// `cands` with the triggers of `slots` (prefetch_slots' `of_slot` maps them back).
std::vector<Candidate> with_triggers(std::vector<Candidate> cands, const std::vector<size_t>& of_slot,
                                     const std::vector<PrefetchSlot>& slots) {
  for (size_t k = 0; k < slots.size(); ++k) cands[of_slot[k]].trigger = slots[k].trigger;
  return cands;
}

}  // namespace

Result<AutoResult> realize(const Graph& scheduled, const std::vector<Candidate>& cands, const ExactPlanner& exact,
                           const AutoOptions& o, bool search) {
  AutoResult r;
  for (const Candidate& c : cands) {
    AutoChoice ch;
    ch.kind = c.state == State::recompute ? AutoChoice::Kind::recompute : AutoChoice::Kind::swap;
    ch.value = scheduled.value(c.value).name;
    ch.bytes = c.bytes;
    ch.seconds = c.seconds;
    ch.gap_seconds = c.gap;
    ch.forward = c.forward;
    if (c.state == State::recompute)
      for (ValueId v : c.chain)
        if (v != c.value) ch.chain.push_back(scheduled.value(v).name);
    if (c.state == State::recompute && c.segmented) ch.remade_from = scheduled.value(c.remade_from).name;
    r.choices.push_back(std::move(ch));
  }
  std::vector<bool> dropped;  // swaps the rewrite left out
  r.graph = LMS_TRY(build(scheduled, cands, r.choices, dropped, r.recompute_flops));
  std::vector<AutoChoice> chosen;  // only the values chosen, in position order
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].state != State::keep && !dropped[i]) chosen.push_back(std::move(r.choices[i]));
  r.choices = std::move(chosen);
  r.memory = LMS_TRY(exact(r.graph, search));
  r.sim = LMS_TRY(simulate_time(r.graph, o.device, o.measured.empty() ? nullptr : &o.measured, &r.memory));
  r.fits = r.memory.device_arena_bytes <= o.budget_bytes && r.memory.host_arena_bytes <= o.host_budget_bytes;
  return r;
}

Result<bool> realize_advanced(const Graph& scheduled, std::vector<Candidate>& cands, AutoResult& r,
                              const ExactPlanner& exact, const AutoOptions& o) {
  std::vector<size_t> of_slot;  // index into cands
  std::vector<PrefetchSlot> slots = prefetch_slots(cands, of_slot);
  if (!advance_prefetches(scheduled, r.graph, r.memory, r.sim, {o.budget_bytes, o.prefetch_margin}, slots))
    return false;
  std::vector<Candidate> moved = with_triggers(cands, of_slot, slots);
  AutoResult advanced = LMS_TRY(realize(scheduled, moved, exact, o, /*search=*/false));
  if (advanced.fits && advanced.sim.step_seconds < r.sim.step_seconds) {
    advanced.rounds = r.rounds;
    r = std::move(advanced);
    cands = std::move(moved);
    return true;
  }
  return false;
}

Result<std::optional<AutoResult>> realize_delayed(const Graph& scheduled, std::vector<Candidate>& cands,
                                                  const AutoResult& r, const ExactPlanner& exact,
                                                  const AutoOptions& o) {
  std::optional<AutoResult> out;
  for (int k = 0; k < o.delay_rounds; ++k) {
    const AutoResult& from = out ? *out : r;
    if (from.fits) break;
    std::vector<size_t> of_slot;  // index into cands
    std::vector<PrefetchSlot> slots = prefetch_slots(cands, of_slot);
    if (!delay_prefetches(scheduled, from.graph, from.memory, {o.budget_bytes, o.prefetch_margin}, slots)) break;
    std::vector<Candidate> moved = with_triggers(cands, of_slot, slots);
    AutoResult later = LMS_TRY(realize(scheduled, moved, exact, o));
    if (later.memory.device_arena_bytes >= from.memory.device_arena_bytes) break;
    out = std::move(later);
    cands = std::move(moved);
  }
  return out;
}

}  // namespace lms::autoplan
