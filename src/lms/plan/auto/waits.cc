// The swap waited for longest (see waits.h).
#include "lms/plan/auto/waits.h"

#include "lms/runtime/program.h"

namespace lms::autoplan {

int most_waited_for_swap(const Graph& scheduled, const std::vector<Candidate>& cands, const AutoResult& r,
                         const std::vector<bool>& tried, bool copies_out) {
  const Graph& g = r.graph;
  std::vector<double> waited(cands.size(), 0);
  std::vector<int> candidate_of(scheduled.num_values(), -1);  // the backward candidates only
  for (size_t i = 0; i < cands.size(); ++i)
    if (!cands[i].forward) candidate_of[cands[i].value.v] = static_cast<int>(i);
  std::vector<std::vector<NodeId>> reuse(g.num_nodes());
  if (copies_out) reuse = cross_stream_waits(g, r.memory);
  double free_at = 0;
  for (NodeId n : g.node_ids()) {
    if (stream_for(g, n) != StreamId::compute) continue;
    const double wait = r.sim.start[n.v] - free_at;
    free_at = r.sim.end[n.v];
    if (wait <= 0) continue;
    NodeId last;
    auto consider = [&](NodeId d) {
      if (!last.valid() || r.sim.end[d.v] > r.sim.end[last.v]) last = d;
    };
    for (ValueId v : g.node(n).inputs) consider(g.value(v).producer);
    for (NodeId d : g.node(n).control_inputs) consider(d);
    for (NodeId d : reuse[n.v]) consider(d);  // the copy out of an earlier occupant of its space
    if (!last.valid()) continue;
    ValueId swapped;
    // A forward op waiting for a swap_in waits for a forward swap (Candidate::forward), not recomputable.
    if (g.node(last).op == Op::swap_in && g.node(n).category == Category::fwd) continue;
    if (g.node(last).op == Op::swap_in) swapped = g.node(g.value(g.node(last).inputs[0]).producer).inputs[0];
    else if (g.node(last).op == Op::swap_out) swapped = g.node(last).inputs[0];
    else continue;  // swap_in <- swap_out <- v
    const auto v = scheduled.find_value(g.value(swapped).name);
    if (v && candidate_of[v->v] >= 0) waited[candidate_of[v->v]] += wait;
  }
  std::vector<int> cloned(scheduled.num_nodes(), 0);  // producers recomputed already
  for (const Candidate& c : cands)
    if (c.state == State::recompute)
      for (ValueId v : c.exclusive()) cloned[scheduled.value(v).producer.v] = 1;
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& c = cands[i];
    if (tried[i] || c.state != State::swap || !c.recomputable || waited[i] <= 0) continue;
    bool free = true;
    for (ValueId v : c.exclusive()) free = free && !cloned[scheduled.value(v).producer.v];
    if (free && (best < 0 || waited[i] > waited[static_cast<size_t>(best)])) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace lms::autoplan
