// The reference-counting walk of Note [TFLMS memory walk] (memory_sim.h). `create` indexes the graph once
// (storage roots, the distinct buffers each node reads and produces, the hard minimum); `run` turns one set of
// SwapDecisions into a sorted list of extra actions keyed by walk position and merges it with the walk, so a
// trial costs O(nodes + edges + swaps log swaps).
#include "lms/sim/memory_sim.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "lms/ir/verifier.h"

namespace lms {

namespace {

// When an extra action runs relative to the step of the node at its walk position (Note [TFLMS memory walk]).
enum Phase : uint8_t {
  kLevelStartRelease = 0,  // sync swap-out done: the swap-out's hold on the device tensor ends
  kSyncSwapIn = 1,         // a synchronous swap-in allocates its device copy and copies (blocking)
  kSwapInDone = 2,         // a swap-in's copy is complete before its target runs
  kHostFree = 3,           // the last swap-in of a tensor is complete: its host copy is freed
  // (the node's own step runs here)
  kSwapOutStart = 4,       // the source ran: its host copy is allocated and the device-to-host copy starts
  kTriggerSwapIn = 5,      // the trigger ran: a swap-in allocates its device copy and starts copying
  kLevelEndRelease = 6,    // async swap-out done at the end of level(source) + 1
};
constexpr uint8_t kFirstPostStepPhase = kSwapOutStart;

struct Action {
  uint32_t pos;     // walk position of the node the action is attached to
  uint8_t phase;
  uint32_t swap;    // index into SwapDecisions::swaps (tie-break)
  int32_t group;    // group index, -1 for tensor-level actions (tie-break)
  uint32_t buffer;  // the buffer acted on
  uint32_t aux;     // swap-out release: the host copy the copy went to (for the event); otherwise unused
  // A total order, so the walk is deterministic whatever std::sort does with equal keys.
  auto key() const { return std::tuple(pos, phase, swap, group); }
};

int64_t scaled(double ratio, int64_t bytes) {
  return static_cast<int64_t>(std::floor(static_cast<long double>(ratio) * static_cast<long double>(bytes)));
}

}  // namespace

Result<MemorySimulator> MemorySimulator::create(const Graph& g, const Levels& levels,
                                                std::span<const int64_t> workspace_bytes) {
  const size_t n = g.num_nodes(), nv = g.num_values();
  if (levels.of_node.size() != n)
    return fail("memory simulator: levels were computed for a graph of {} nodes, this one has {}",
                levels.of_node.size(), n);
  if (!workspace_bytes.empty() && workspace_bytes.size() != n)
    return fail("memory simulator: {} workspace sizes given for {} nodes", workspace_bytes.size(), n);
  MemorySimulator s;
  s.g_ = &g;
  s.levels_ = &levels;
  s.workspace_.assign(workspace_bytes.begin(), workspace_bytes.end());
  s.root_.resize(nv);
  s.walked_.assign(nv, 0);
  s.base_holds_.assign(nv, 0);
  for (uint32_t v = 0; v < nv; ++v) {
    ValueId root = g.storage_root(ValueId{v});
    s.root_[v] = root.v;
    if (root.v != v) continue;
    if (op_def(g.node(g.value(root).producer).op).traits.persistent) {
      if (g.value(root).placement == Placement::device) s.persistent_bytes_ += g.value(root).type.bytes();
    } else {
      s.walked_[v] = 1;
    }
  }
  std::vector<uint32_t> seen_by(nv, UINT32_MAX);  // the last node that counted a root (dedupes repeated reads)
  s.reads_begin_.reserve(n + 1);
  s.fresh_begin_.reserve(n + 1);
  for (uint32_t id = 0; id < n; ++id) {
    const Node& node = g.node(NodeId{id});
    s.reads_begin_.push_back(static_cast<uint32_t>(s.reads_.size()));
    s.fresh_begin_.push_back(static_cast<uint32_t>(s.fresh_.size()));
    int64_t working = s.workspace_.empty() ? 0 : s.workspace_[id];
    for (ValueId in : node.inputs) {
      uint32_t r = s.root_[in.v];
      if (!s.walked_[r] || seen_by[r] == id) continue;
      seen_by[r] = id;
      s.reads_.push_back(r);
      ++s.base_holds_[r];
      if (g.value(ValueId{r}).placement == Placement::device) working += g.value(ValueId{r}).type.bytes();
    }
    for (ValueId out : node.outputs) {
      if (!s.walked_[out.v]) continue;  // persistent, or an alias of an input (allocated with the input)
      s.fresh_.push_back(out.v);
      if (g.value(out).placement == Placement::device) working += g.value(out).type.bytes();
    }
    if (working > s.min_working_set_ || !s.min_node_.valid()) {
      s.min_working_set_ = working;
      s.min_node_ = NodeId{id};
    }
  }
  s.reads_begin_.push_back(static_cast<uint32_t>(s.reads_.size()));
  s.fresh_begin_.push_back(static_cast<uint32_t>(s.fresh_.size()));
  s.order_.reserve(n);
  s.pos_.assign(n, 0);
  for (const std::vector<NodeId>& level : levels.nodes)
    for (NodeId id : level) {
      s.pos_[id.v] = static_cast<uint32_t>(s.order_.size());
      s.order_.push_back(id);
    }
  if (s.order_.size() != n) return fail("memory simulator: the levels do not list every node once");
  // Graph outputs are read after the step: one hold that is never released.
  for (ValueId out : g.outputs())
    if (s.walked_[s.root_[out.v]]) ++s.base_holds_[s.root_[out.v]];
  return s;
}

Result<MemorySimResult> MemorySimulator::run(const SwapDecisions& d, const MemorySimOptions& opts,
                                             SimEvents* events) const {
  const Graph& g = *g_;
  const Levels& lv = *levels_;
  const uint32_t nv = static_cast<uint32_t>(g.num_values());
  if (!(opts.ratio > 0.0 && opts.ratio <= 1.0)) return fail("memory simulator: ratio {} is not in (0, 1]", opts.ratio);
  if (opts.device_bytes < 0 || opts.host_bytes < 0)
    return fail("memory simulator: negative memory size (device {}, host {})", opts.device_bytes, opts.host_bytes);

  MemorySimResult r;
  r.persistent_bytes = persistent_bytes_;
  r.min_device_bytes = persistent_bytes_ + min_working_set_;
  r.min_node = min_node_;
  r.host_budget_bytes = opts.host_bytes;
  if (opts.device_bytes == kUnlimitedBytes) {
    r.budget_bytes = r.transient_budget_bytes = kUnlimitedBytes;
  } else if (opts.subtract_persistent) {
    r.budget_bytes = r.transient_budget_bytes = scaled(opts.ratio, opts.device_bytes - persistent_bytes_);
  } else {
    r.budget_bytes = scaled(opts.ratio, opts.device_bytes);
    r.transient_budget_bytes = r.budget_bytes - persistent_bytes_;
  }

  // Buffers: [0, nv) are the graph's storage roots (by value id); swap-in copies and host copies follow.
  std::vector<SimBuffer> extra;
  std::vector<int32_t> holds(base_holds_.begin(), base_holds_.end());
  std::vector<uint32_t> read_buf(reads_);  // what each (node, read) releases: the root or a swap-in copy
  std::vector<Action> actions;
  auto pos_of = [&](NodeId node) { return pos_[node.v]; };
  auto level_first = [&](int level) { return pos_[lv.nodes[level].front().v]; };
  auto level_last = [&](int level) { return pos_[lv.nodes[level].back().v]; };
  const bool sync_out = d.params.sync_mode == SyncMode::sync_out || d.params.sync_mode == SyncMode::sync_both;

  for (uint32_t si = 0; si < d.swaps.size(); ++si) {
    const TensorSwap& sw = d.swaps[si];
    if (sw.value.v >= nv || sw.source.v >= g.num_nodes())
      return fail("memory simulator: swap #{} names value {} / node {} outside the graph", si, sw.value.v,
                  sw.source.v);
    const Value& val = g.value(sw.value);
    const std::string where = "%" + val.name;
    if (val.producer != sw.source) return fail_at(where, "memory simulator: swap source is not its producer");
    if (root_[sw.value.v] != sw.value.v || !walked_[sw.value.v])
      return fail_at(where, "memory simulator: an in-place alias or persistent value cannot be swapped");
    if (sw.groups.empty()) return fail_at(where, "memory simulator: swapped tensor without a swap-in group");
    const int src_level = lv[sw.source];
    const int64_t bytes = val.type.bytes();
    const uint32_t host_buf = nv + static_cast<uint32_t>(extra.size());
    extra.push_back(SimBuffer{SimBufferKind::host_copy, sw.value, NodeId{}, -1, Placement::host, bytes});
    holds.push_back(1);  // released when the last swap-in is done
    actions.push_back({pos_of(sw.source), kSwapOutStart, si, -1, host_buf, 0});
    // The swap-out's hold on the device tensor (added here, released when the copy is done).
    ++holds[sw.value.v];
    if (sync_out)
      actions.push_back({level_first(src_level + 1), kLevelStartRelease, si, -1, sw.value.v, host_buf});
    else
      actions.push_back({level_last(src_level + 1), kLevelEndRelease, si, -1, sw.value.v, host_buf});

    for (int gi = 0; gi < static_cast<int>(sw.groups.size()); ++gi) {
      const SwapInGroup& grp = sw.groups[gi];
      if (grp.consumers.empty() || grp.target.v >= g.num_nodes())
        return fail_at(where, "memory simulator: swap-in group {} has no consumers or a bad target", gi);
      const int target_level = lv[grp.target];
      if (target_level <= src_level)
        return fail_at(where, "memory simulator: swap-in group {} targets {} at level {}, not past the source's {}",
                       gi, node_label(g, grp.target), target_level, src_level);
      const uint32_t in_buf = nv + static_cast<uint32_t>(extra.size());
      extra.push_back(SimBuffer{SimBufferKind::swap_in, sw.value, NodeId{}, gi, Placement::device, bytes});
      holds.push_back(0);
      for (NodeId c : grp.consumers) {
        if (c.v >= g.num_nodes()) return fail_at(where, "memory simulator: group {} names node {}", gi, c.v);
        uint32_t* b = read_buf.data() + reads_begin_[c.v];
        uint32_t* e = read_buf.data() + reads_begin_[c.v + 1];
        uint32_t* hit = std::find(b, e, sw.value.v);
        if (hit == e)
          return fail_at(where, "memory simulator: swap-in group {} consumer {} does not read it (or is listed "
                         "twice)", gi, node_label(g, c));
        *hit = in_buf;  // the far consumer holds its group's copy, not the device tensor
        --holds[sw.value.v];
        ++holds[in_buf];
      }
      if (grp.trigger) {
        const int tl = grp.trigger->v < g.num_nodes() ? lv[*grp.trigger] : -1;
        if (tl <= src_level || tl >= target_level)
          return fail_at(where, "memory simulator: swap-in group {} trigger is at level {}, not strictly between "
                         "the source's {} and the target's {}", gi, tl, src_level, target_level);
        actions.push_back({pos_of(*grp.trigger), kTriggerSwapIn, si, gi, in_buf, 0});
      } else {
        actions.push_back({pos_of(grp.target), kSyncSwapIn, si, gi, in_buf, 0});
      }
      actions.push_back({pos_of(grp.target), kSwapInDone, si, gi, in_buf, 0});
    }
    actions.push_back({pos_of(sw.groups.back().target), kHostFree, si, -1, host_buf, 0});
  }
  std::sort(actions.begin(), actions.end(), [](const Action& a, const Action& b) { return a.key() < b.key(); });

  // The walk.
  int64_t used[2] = {0, 0};
  const int64_t cap[2] = {r.transient_budget_bytes, opts.host_bytes};
  int cur_level = 0;
  NodeId cur_node;
  if (r.transient_budget_bytes < 0) r.oom = SimOutOfMemory{Placement::device, SimBufferKind::tensor, -1, {}, {},
                                                           0, 0};  // persistent bytes alone exceed the budget
  auto buffer = [&](uint32_t b) -> SimBuffer {
    if (b >= nv) return extra[b - nv];
    const Value& val = g.value(ValueId{b});
    return SimBuffer{SimBufferKind::tensor, ValueId{b}, NodeId{}, -1, val.placement, val.type.bytes()};
  };
  auto allocate = [&](const SimBuffer& b) {
    int p = b.placement == Placement::device ? 0 : 1;
    int64_t before = used[p];
    used[p] += b.bytes;
    if (used[p] > cap[p] && !r.oom)
      r.oom = SimOutOfMemory{b.placement, b.kind, cur_level, cur_node, b.value, b.bytes,
                             std::max<int64_t>(0, cap[p] - before)};
    if (p == 0) {
      if (used[0] > r.peak_transient_bytes || r.peak_level < 0) {
        r.peak_transient_bytes = used[0];
        r.peak_level = cur_level;
        r.peak_node = cur_node;
      }
      r.level_bytes[cur_level] = std::max(r.level_bytes[cur_level], used[0]);
    } else {
      r.peak_host_bytes = std::max(r.peak_host_bytes, used[1]);
    }
    if (events) events->allocate(b, used[p]);
  };
  auto free_buf = [&](const SimBuffer& b) {
    int p = b.placement == Placement::device ? 0 : 1;
    used[p] -= b.bytes;
    if (events) events->free(b, used[p]);
  };
  auto release = [&](uint32_t b) {
    if (--holds[b] == 0) free_buf(buffer(b));
  };
  r.level_bytes.assign(lv.count(), 0);
  size_t next = 0;
  const size_t total = order_.size();
  for (size_t pos = 0; pos < total; ++pos) {
    cur_node = order_[pos];
    const uint32_t id = cur_node.v;
    const int level = lv[cur_node];
    // Runs the actions attached to this position with a phase below `upto`.
    auto run_actions = [&](uint8_t upto) {
      for (; next < actions.size() && actions[next].pos == pos && actions[next].phase < upto; ++next) {
        const Action& a = actions[next];
        switch (a.phase) {
          case kLevelStartRelease:
          case kLevelEndRelease:
            // The swap-out's copy into the host copy is done; it no longer holds the device tensor.
            if (events) events->copy_end(buffer(a.aux));
            release(a.buffer);
            break;
          case kSyncSwapIn:
          case kTriggerSwapIn: {
            SimBuffer b = buffer(a.buffer);
            allocate(b);
            if (events) events->copy_start(b);
            break;
          }
          case kSwapInDone:
            if (events) events->copy_end(buffer(a.buffer));
            break;
          case kHostFree:
            release(a.buffer);
            break;
          case kSwapOutStart: {
            SimBuffer b = buffer(a.buffer);
            allocate(b);
            if (events) events->copy_start(b);
            break;
          }
        }
      }
    };
    cur_level = level;
    run_actions(kLevelStartRelease + 1);
    // A level's curve starts from the bytes in use once the copies finished before it are released.
    if (pos == 0 || lv[order_[pos - 1]] != level) r.level_bytes[level] = used[0];
    run_actions(kFirstPostStepPhase);
    if (events) events->op_start(cur_node, level);
    for (uint32_t i = fresh_begin_[id]; i < fresh_begin_[id + 1]; ++i) allocate(buffer(fresh_[i]));
    const int64_t ws = workspace_.empty() ? 0 : workspace_[id];
    const SimBuffer ws_buf{SimBufferKind::workspace, ValueId{}, cur_node, -1, Placement::device, ws};
    if (ws > 0) allocate(ws_buf);
    for (uint32_t i = reads_begin_[id]; i < reads_begin_[id + 1]; ++i) release(read_buf[i]);
    if (ws > 0) free_buf(ws_buf);
    for (uint32_t i = fresh_begin_[id]; i < fresh_begin_[id + 1]; ++i)
      if (holds[fresh_[i]] == 0) free_buf(buffer(fresh_[i]));
    if (events) events->op_end(cur_node, level);
    run_actions(UINT8_MAX);
  }
  r.peak_device_bytes = r.peak_transient_bytes + persistent_bytes_;
  r.fits = !r.oom.has_value();
  return r;
}

Result<MemorySimResult> simulate_tflms_memory(const Graph& g, const Levels& levels, const SwapDecisions& decisions,
                                              const MemorySimOptions& opts, SimEvents* events) {
  MemorySimulator sim = LMS_TRY(MemorySimulator::create(g, levels, opts.workspace_bytes));
  return sim.run(decisions, opts, events);
}

Error sim_out_of_memory(const Graph& g, const MemorySimResult& r) {
  const std::string minimum =
      fmt::format("the hard minimum is {}: {} of parameters and state plus the {} working set of {}",
                  format_size(r.min_device_bytes), format_size(r.persistent_bytes),
                  format_size(r.min_device_bytes - r.persistent_bytes),
                  r.min_node.valid() ? node_label(g, r.min_node) : std::string("no op"));
  if (!r.oom) return Error{"fits: no out-of-memory to report", {}};
  const SimOutOfMemory& o = *r.oom;
  if (!o.node.valid())
    return Error{fmt::format("parameters and state ({}) leave no device memory: the budget for everything else "
                             "is {} ({})",
                             format_size(r.persistent_bytes), r.transient_budget_bytes, minimum),
                 {}};
  std::string what;
  switch (o.kind) {
    case SimBufferKind::tensor: what = "%" + g.value(o.value).name; break;
    case SimBufferKind::swap_in: what = fmt::format("the swap-in of %{}", g.value(o.value).name); break;
    case SimBufferKind::host_copy: what = fmt::format("the host copy of %{}", g.value(o.value).name); break;
    case SimBufferKind::workspace: what = "its workspace"; break;
  }
  if (o.placement == Placement::host)
    return fail_at(node_label(g, o.node),
                   "out of host memory at level {}: allocating {} for {} with {} free of a {} host budget "
                   "(peak host bytes {})",
                   o.level, format_size(o.bytes), what, format_size(o.free), format_size(r.host_budget_bytes),
                   format_size(r.peak_host_bytes))
        .error();
  return fail_at(node_label(g, o.node),
                 "out of device memory at level {} ({}): allocating {} for {} with {} free of a {} budget for "
                 "activations (simulated peak {} with {} of parameters and state; {})",
                 o.level, g.def(o.node).name, format_size(o.bytes), what, format_size(o.free),
                 format_size(r.transient_budget_bytes), format_size(r.peak_device_bytes),
                 format_size(r.persistent_bytes), minimum)
      .error();
}

}  // namespace lms
