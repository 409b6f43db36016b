// The auto planner's candidates (see candidates.h).
#include "lms/plan/auto/candidates.h"

#include <algorithm>
#include <tuple>

#include "lms/passes/recompute.h"
#include "lms/passes/swap.h"
#include "lms/sim/cost_model.h"
#include "lms/sim/time_sim.h"

namespace lms::autoplan {

namespace {

bool cloneable(const Graph& g, NodeId n) { return not_recomputable(g.def(n)).empty(); }

// The largest position k in [lo, hi) whose end is <= t (ends are non-decreasing on the compute stream), or lo.
int latest_ending_by(const std::vector<double>& end, int lo, int hi, double t) {
  auto first = end.begin() + lo, last = end.begin() + hi;
  auto it = std::upper_bound(first, last, t);  // first end > t
  return it == first ? lo : static_cast<int>(it - end.begin()) - 1;
}

double copy_seconds(int64_t bytes, double rate, const DeviceModel& d) {
  return d.copy_latency_s + static_cast<double>(bytes) / rate;
}

// The copy times of `c`, its gap (fwd_end, bwd_first) on the timeline, and the trigger its prefetch would have by
// its copy's duration; its hold at the start of the gap.
void time_gap(const Timeline& tl, const AutoOptions& o, Candidate& c) {
  c.copy_out = copy_seconds(c.bytes, o.device.d2h_bytes_per_s, o.device);
  c.copy_in = copy_seconds(c.bytes, o.device.h2d_bytes_per_s, o.device);
  c.hold = c.fwd_end;
  c.gap = tl.start[c.bwd_first] - tl.end[c.fwd_end];
  c.trigger = latest_ending_by(tl.end, c.fwd_end, c.bwd_first,
                               tl.start[c.bwd_first] - c.copy_in * (1 + o.prefetch_margin));
}

// Last position at which `v` is read (its producer's if nobody reads it); the end for graph outputs.
int last_use(const Graph& g, ValueId v) {
  const auto& outs = g.outputs();
  if (std::find(outs.begin(), outs.end(), v) != outs.end()) return static_cast<int>(g.num_nodes());
  const auto& cs = g.value(v).consumers;
  return static_cast<int>(cs.empty() ? g.value(v).producer.v : cs.back().v);
}

// Whether the swap pass may take the outputs of an op of this kind: not copies, not in-place writers, and among
// sources only graph inputs (data and labels, fed before the step; persistent sources are not candidates either),
// not those made again more cheaply than copied (constants).
bool may_swap_outputs(const OpDef& d) {
  return !(d.traits.source && d.traits.recomputable) && !d.traits.is_copy && !d.traits.in_place;
}

// A value the swap pass may take (besides its producer's kind): on the device, not persistent, sharing its storage
// with no other value, not empty, and not a graph output (which stays).
bool may_swap(const Graph& g, ValueId v, const std::vector<int>& aliased) {
  const Value& val = g.value(v);
  return !aliased[v.v] && val.placement == Placement::device && !g.is_persistent(v) && val.type.bytes() > 0 &&
         last_use(g, v) != static_cast<int>(g.num_nodes());
}

// The segment of `c` (Candidate::segment): from its producer, the latest producer among the inputs from outside
// joins, until those inputs are one candidate (besides parameters and sources); every op a cloneable, unaliased
// forward op, at most max_segment of them. Kept when longer than its chain and that candidate is resident at c's
// first backward reader.
void find_segment(const Graph& g, const Timeline& tl, const AutoOptions& o, const std::vector<int>& aliased,
                  const std::vector<int>& candidate_of, Candidate& c) {
  std::vector<NodeId> nodes{c.producer};
  auto inside = [&](NodeId n) { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); };
  auto usable = [&](NodeId n) {
    if (g.node(n).category != Category::fwd || !cloneable(g, n)) return false;
    for (ValueId v : g.node(n).outputs)
      if (aliased[v.v]) return false;
    return true;
  };
  if (!usable(c.producer)) return;
  std::vector<ValueId> from;  // the inputs from outside, besides parameters and sources
  while (true) {
    from.clear();
    for (NodeId n : nodes)
      for (ValueId in : g.node(n).inputs) {
        const NodeId p = g.value(in).producer;
        if (g.is_persistent(in) || g.def(p).traits.source || inside(p)) continue;
        if (std::find(from.begin(), from.end(), in) == from.end()) from.push_back(in);
      }
    if (from.empty()) return;
    if (from.size() == 1 && candidate_of[from[0].v] >= 0) break;
    const ValueId latest = *std::max_element(from.begin(), from.end(), [&](ValueId a, ValueId b) {
      return g.value(a).producer < g.value(b).producer;
    });
    const NodeId p = g.value(latest).producer;
    if (static_cast<int>(nodes.size()) >= o.max_segment || !usable(p)) return;
    nodes.push_back(p);
  }
  // Its clones read `from` at the candidate's first backward reader: it must still be resident there (or be
  // recomputed by then, which the greedy's cascade sees), as a chain's inputs must.
  if (nodes.size() <= c.chain.size() || last_use(g, from[0]) < c.bwd_first) return;
  std::sort(nodes.begin(), nodes.end());
  // One value of each op: the one a later op of the segment reads (the last op's: the candidate).
  std::vector<int> last_read(nodes.size());  // index of the last op of the segment reading an output of each
  for (size_t i = 0; i < nodes.size(); ++i) {
    last_read[i] = static_cast<int>(i);
    ValueId value = c.value;
    for (size_t j = i + 1; j < nodes.size(); ++j)
      for (ValueId in : g.node(nodes[j]).inputs)
        if (g.value(in).producer == nodes[i]) {
          if (last_read[i] == static_cast<int>(i)) value = in;
          last_read[i] = static_cast<int>(j);
        }
    c.segment.push_back(value);
    c.segment_seconds += tl.seconds[nodes[i].v];
  }
  // The clones' bytes live at once as the segment runs: each op's outputs from its run to their last reader in it.
  for (size_t i = 0; i < nodes.size(); ++i) {
    int64_t live = 0;
    for (size_t j = 0; j <= i; ++j)
      if (last_read[j] >= static_cast<int>(i))
        for (ValueId v : g.node(nodes[j]).outputs)
          if (v != c.value) live += g.value(v).type.bytes();
    c.segment_transient = std::max(c.segment_transient, live);
  }
  c.remade_from = from[0];
}

// Note [Forward gaps]
// A U-Net's skip connection is read by the encoder's pooling at the start of the forward pass, then by the decoder's
// concat at its end, then by the backward pass. Its backward gap starts at the concat, so as a backward candidate it
// is live through every deeper level of the forward pass and, at full resolution, next to the concat's output where
// the forward pass peaks (unet3d at 344^3: 4.9 GiB beside the concat's 9.7 GiB while the upsampling runs). Its
// forward gap, from the pooling to the concat, is a candidate of its own (swap only: the swap pass's forward swaps,
// docs/swap.md), priced and chosen like any swap; both may be chosen, and then one copy goes out and two come back.
// Each value has one forward gap: the widest in predicted time between two of its forward readers (its producer
// counts as one), and only when it spans an op.
void add_forward_gaps(const Graph& g, const Timeline& tl, const AutoOptions& o, const std::vector<int>& aliased,
                      std::vector<Candidate>& out) {
  for (NodeId n : g.node_ids()) {
    if (g.node(n).category != Category::fwd || !may_swap_outputs(g.def(n))) continue;
    for (ValueId v : g.node(n).outputs) {
      if (!may_swap(g, v, aliased)) continue;
      const Value& val = g.value(v);
      std::vector<int> early{static_cast<int>(n.v)};  // the producer and the forward readers, by position
      for (NodeId r : val.consumers)
        if (g.node(r).category == Category::fwd) early.push_back(static_cast<int>(r.v));
      auto gap_after = [&](size_t i) { return tl.start[early[i + 1]] - tl.end[early[i]]; };
      int widest = -1;  // ties: the earliest
      for (size_t i = 0; i + 1 < early.size(); ++i)
        if (early[i + 1] > early[i] + 1 && (widest < 0 || gap_after(i) > gap_after(static_cast<size_t>(widest))))
          widest = static_cast<int>(i);
      if (widest < 0) continue;
      Candidate c;
      c.value = v;
      c.producer = n;
      c.bytes = val.type.bytes();
      c.forward = true;
      c.fwd_end = early[widest], c.bwd_first = early[widest + 1];
      time_gap(tl, o, c);
      out.push_back(std::move(c));
    }
  }
}

}  // namespace

std::pair<int, int> gap_of(const Graph& g, ValueId v) {
  int e = static_cast<int>(g.value(v).producer.v), f = INT32_MAX;
  for (NodeId r : g.value(v).consumers) {
    if (is_late_reader(g, r)) f = std::min(f, static_cast<int>(r.v));
    else e = std::max(e, static_cast<int>(r.v));
  }
  return {e, f};
}

int latest_starting_before(const std::vector<double>& start, int lo, int hi, double t) {
  auto first = start.begin() + lo, last = start.begin() + hi;
  auto it = std::lower_bound(first, last, t);  // first start >= t
  return it == first ? lo : static_cast<int>(it - start.begin()) - 1;
}

Result<Timeline> timeline(const Graph& g, const AutoOptions& o) {
  Timeline t;
  t.seconds = op_times(g, o.device, o.measured.empty() ? nullptr : &o.measured);
  TimeSimResult r = LMS_TRY(simulate_time(g, t.seconds));
  t.start = std::move(r.start);
  t.end = std::move(r.end);
  t.step = r.step_seconds;
  return t;
}

std::vector<Candidate> find_candidates(const Graph& g, const Timeline& tl, const AutoOptions& o) {
  std::vector<int> aliased(g.num_values(), 0);  // values whose storage another value shares
  for (size_t i = 0; i < g.num_values(); ++i) {
    ValueId v{static_cast<uint32_t>(i)};
    if (g.storage_root(v) != v) ++aliased[g.storage_root(v).v], ++aliased[i];
  }
  std::vector<Candidate> out;
  for (NodeId n : g.node_ids()) {
    const Category cat = g.node(n).category;
    if ((cat != Category::fwd && cat != Category::bwd) || !may_swap_outputs(g.def(n))) continue;
    for (ValueId v : g.node(n).outputs) {
      if (!may_swap(g, v, aliased)) continue;
      const Value& val = g.value(v);
      Candidate c;
      c.value = v;
      c.producer = n;
      c.bytes = val.type.bytes();
      std::tie(c.fwd_end, c.bwd_first) = gap_of(g, v);
      if (c.bwd_first == INT32_MAX || c.bwd_first <= c.fwd_end + 1) continue;  // no gap to free
      time_gap(tl, o, c);
      out.push_back(std::move(c));
    }
  }
  // Recompute chains (forward values only: backward ops are not cloned): the value's producer, and (recursively) the
  // producers of its inputs that are no longer resident at its first backward reader, provided they are cloneable, are
  // read by no backward op themselves (not candidates), and the chain stays within max_chain ops.
  std::vector<int> candidate_of(g.num_values(), -1);
  for (size_t i = 0; i < out.size(); ++i) candidate_of[out[i].value.v] = static_cast<int>(i);
  for (Candidate& c : out) {
    if (g.node(c.producer).category != Category::fwd || !cloneable(g, c.producer)) continue;
    std::vector<ValueId> chain{c.value};
    bool ok = true;
    for (size_t i = 0; i < chain.size() && ok; ++i)
      for (ValueId in : g.node(g.value(chain[i]).producer).inputs) {
        const NodeId p = g.value(in).producer;
        if (g.is_persistent(in) || g.def(p).traits.source || last_use(g, in) >= c.bwd_first) continue;  // resident
        if (std::find(chain.begin(), chain.end(), in) != chain.end()) continue;
        if (candidate_of[in.v] >= 0 || !cloneable(g, p) || static_cast<int>(chain.size()) >= o.max_chain) {
          ok = false;
          break;
        }
        chain.push_back(in);
      }
    if (!ok) continue;
    std::sort(chain.begin(), chain.end(), [&](ValueId a, ValueId b) {
      return g.value(a).producer < g.value(b).producer;
    });
    // One output per producer (recompute's rule).
    for (size_t i = 1; i < chain.size(); ++i)
      if (g.value(chain[i]).producer == g.value(chain[i - 1]).producer) ok = false;
    if (!ok) continue;
    c.recomputable = true;
    for (ValueId v : chain) c.recompute_seconds += tl.seconds[g.value(v).producer.v];
    c.chain = std::move(chain);
  }
  if (o.max_segment > 0)
    for (Candidate& c : out) find_segment(g, tl, o, aliased, candidate_of, c);
  add_forward_gaps(g, tl, o, aliased, out);
  return out;
}

}  // namespace lms::autoplan
