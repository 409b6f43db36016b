// Liveness intervals of storage roots over node-id order (see liveness.h).
#include "lms/plan/liveness.h"

#include <algorithm>

#include "lms/plan/schedule.h"

namespace lms {

Result<Liveness> compute_liveness(const Graph& g, std::span<const int64_t> workspace_bytes) {
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
