// Liveness intervals of storage roots over node-id order (see liveness.h).
#include "lms/plan/liveness.h"

#include <algorithm>

#include "lms/plan/schedule.h"

namespace lms {

namespace {

// Note [Buffer reuse] and Note [Views]: each reusing op's or view's output joins its input's buffer, in
// schedule order (so chains join one buffer); then the buffers left are renumbered in order.
void reuse_buffers(const Graph& g, Liveness& lv) {
  const size_t count = lv.buffers.size();
  std::vector<int32_t> joined(count);  // the buffer each one joined (itself: none)
  std::vector<bool> closed(count, false);  // a copy reads it, or it is a graph output: never reused
  for (size_t b = 0; b < count; ++b) joined[b] = static_cast<int32_t>(b);
  for (NodeId n : g.node_ids())
    if (g.def(n).traits.is_copy)
      for (ValueId v : g.node(n).inputs) closed[lv.buffer_of_value[v.v]] = true;
  for (ValueId v : g.outputs()) closed[lv.buffer_of_value[v.v]] = true;
  auto holder = [&](int32_t b) {
    while (joined[b] != b) b = joined[b];
    return b;
  };
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    const OpDef& d = g.def(n);
    const bool view = d.view_input >= 0;  // Note [Views]
    const int k = view ? d.view_input : d.reusable_input;
    // A view has one output; a reusing op writes its first over input k (batch_norm_grad's dx over dy).
    if (k < 0 || k >= static_cast<int>(node.inputs.size()) || node.outputs.empty() ||
        (view && node.outputs.size() != 1))
      continue;
    const ValueId out = node.outputs[0], in = node.inputs[k];
    if (g.storage_root(out) != out || g.value(out).type.dtype != g.value(in).type.dtype) continue;
    const int32_t from = lv.buffer_of_value[out.v], to = holder(lv.buffer_of_value[in.v]);
    BufferLife& a = lv.buffers[to];
    const BufferLife& o = lv.buffers[from];
    const int pos = static_cast<int>(n.v);
    if (a.placement != Placement::device || o.placement != Placement::device || a.persistent || o.first != pos ||
        a.bytes != o.bytes)
      continue;
    const bool write = d.reusable_input == k && !a.input && a.last == pos;  // the input dies here
    if (closed[to] || !(write || (view && !closed[from]))) continue;
    a.last = std::max(a.last, o.last);
    closed[to] = closed[from];
    joined[from] = to;
    ++lv.reused;
  }
  std::vector<int32_t> index(count, -1);
  std::vector<BufferLife> kept;
  for (size_t b = 0; b < count; ++b) {
    if (joined[b] != static_cast<int32_t>(b)) continue;
    index[b] = static_cast<int32_t>(kept.size());
    kept.push_back(lv.buffers[b]);
  }
  for (int32_t& b : lv.buffer_of_value) b = index[holder(b)];
  lv.buffers = std::move(kept);
}

}  // namespace

Result<Liveness> compute_liveness(const Graph& g, std::span<const int64_t> workspace_bytes, bool reuse) {
  LMS_TRY_VOID(check_schedule_order(g));
  if (!workspace_bytes.empty() && workspace_bytes.size() != g.num_nodes())
    return fail("liveness: {} workspace sizes given for a graph of {} nodes", workspace_bytes.size(), g.num_nodes());
  Liveness lv;
  const int n = static_cast<int>(g.num_nodes());
  lv.num_positions = n;
  const int end = std::max(n - 1, 0);
  lv.buffer_of_value.assign(g.num_values(), -1);

  // One buffer per storage root, in value-id order; aliases are mapped to their root's buffer afterwards.
  for (uint32_t i = 0; i < g.num_values(); ++i) {
    ValueId v{i};
    ValueId root = g.storage_root(v);
    if (root != v) continue;
    const Value& val = g.value(v);
    const OpDef& d = g.def(val.producer);
    BufferLife b;
    b.root = v;
    b.writer = val.producer;
    b.placement = val.placement;
    b.bytes = val.type.bytes();
    b.persistent = d.traits.persistent;
    b.input = g.node(val.producer).op == Op::input;
    b.first = (b.persistent || b.input) ? 0 : static_cast<int>(val.producer.v);
    b.last = b.persistent ? end : static_cast<int>(val.producer.v);
    lv.buffer_of_value[i] = static_cast<int32_t>(lv.buffers.size());
    lv.buffers.push_back(b);
  }
  for (uint32_t i = 0; i < g.num_values(); ++i) {
    ValueId root = g.storage_root(ValueId{i});
    lv.buffer_of_value[i] = lv.buffer_of_value[root.v];
  }

  // Every node touching a buffer (reading it, or producing an alias of it) extends it to that position.
  for (NodeId node : g.node_ids()) {
    const int pos = static_cast<int>(node.v);
    auto touch = [&](ValueId v) {
      BufferLife& b = lv.buffers[lv.buffer_of_value[v.v]];
      b.last = std::max(b.last, pos);
    };
    for (ValueId v : g.node(node).inputs) touch(v);
    for (ValueId v : g.node(node).outputs) touch(v);
  }
  for (ValueId v : g.outputs()) lv.buffers[lv.buffer_of_value[v.v]].last = end;
  if (reuse) reuse_buffers(g, lv);

  lv.workspace_of_node.assign(g.num_nodes(), -1);
  for (size_t i = 0; i < workspace_bytes.size(); ++i) {
    if (workspace_bytes[i] < 0) return fail("liveness: node #{} has a negative workspace ({} bytes)", i, workspace_bytes[i]);
    if (workspace_bytes[i] == 0) continue;
    BufferLife b;
    b.writer = NodeId{static_cast<uint32_t>(i)};
    b.workspace = true;
    b.bytes = workspace_bytes[i];
    b.first = b.last = static_cast<int>(i);
    lv.workspace_of_node[i] = static_cast<int32_t>(lv.buffers.size());
    lv.buffers.push_back(b);
  }
  return lv;
}

std::vector<int64_t> live_bytes(const Liveness& lv, Placement placement) {
  // A difference array over positions: +bytes at first, -bytes after last.
  std::vector<int64_t> delta(static_cast<size_t>(lv.num_positions) + 1, 0);
  for (const BufferLife& b : lv.buffers) {
    if (b.placement != placement || lv.num_positions == 0) continue;
    delta[b.first] += b.bytes;
    delta[b.last + 1] -= b.bytes;
  }
  std::vector<int64_t> live(lv.num_positions, 0);
  int64_t sum = 0;
  for (int t = 0; t < lv.num_positions; ++t) live[t] = sum += delta[t];
  return live;
}

}  // namespace lms
