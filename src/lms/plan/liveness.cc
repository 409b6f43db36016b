// Liveness intervals of storage roots over node-id order (see liveness.h).
#include "lms/plan/liveness.h"

#include <algorithm>

#include "lms/plan/schedule.h"

namespace lms {

namespace {

// Bytes of `placement` buffers live at each position, over the buffers `counted` keeps (by index).
template <class Keep>
std::vector<int64_t> live_of(const Liveness& lv, Placement placement, Keep counted) {
  // A difference array over positions: +bytes at first, -bytes after last.
  std::vector<int64_t> delta(static_cast<size_t>(lv.num_positions) + 1, 0), live(lv.num_positions, 0);
  for (size_t b = 0; b < lv.buffers.size(); ++b) {
    const BufferLife& life = lv.buffers[b];
    if (life.placement != placement || lv.num_positions == 0 || !counted(b)) continue;
    delta[life.first] += life.bytes;
    delta[life.last + 1] -= life.bytes;
  }
  int64_t sum = 0;
  for (int t = 0; t < lv.num_positions; ++t) live[t] = sum += delta[t];
  return live;
}

// Note [Buffer reuse], Note [Views] and Note [Parts]: each reusing op's or view's output, each concat input placed
// in its output, each slice viewing its input joins the other's buffer (at a byte offset for parts), in schedule
// order (so chains join one buffer); then the buffers left are renumbered in order.
void reuse_buffers(const Graph& g, Liveness& lv) {
  const size_t count = lv.buffers.size();
  std::vector<int32_t> joined(count);  // the buffer each one joined (itself: none)
  std::vector<int64_t> shift(count, 0);  // where in that buffer it starts, in bytes (Note [Parts])
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
  auto offset_in_holder = [&](int32_t b) {
    int64_t offset = 0;
    for (; joined[b] != b; b = joined[b]) offset += shift[b];
    return offset;
  };
  // Note [Parts]: whether joining moves no position's live bytes above those at `pos`: `extra` bytes more over
  // positions [from, to].
  auto no_higher = [&](int pos, int from, int to, int64_t extra) {
    if (from > to) return true;
    // The device bytes live now, counting the buffers no other has joined.
    const std::vector<int64_t> live =
        live_of(lv, Placement::device, [&](size_t b) { return joined[b] == static_cast<int32_t>(b); });
    const int64_t most = *std::max_element(live.begin() + from, live.begin() + to + 1);
    return most + extra <= live[pos];
  };
  auto join = [&](int32_t from, int32_t to, int64_t at) {
    joined[from] = to;
    shift[from] = at;
    closed[to] = closed[to] || closed[from];
    ++lv.reused;
  };
  for (NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    const OpDef& d = g.def(n);
    const int pos = static_cast<int>(n.v);
    if (node.op == Op::concat && node.outputs.size() == 1 && g.storage_root(node.outputs[0]) == node.outputs[0]) {
      const int32_t whole = lv.buffer_of_value[node.outputs[0].v];
      BufferLife& o = lv.buffers[whole];
      if (o.placement != Placement::device || o.persistent || o.first != pos) continue;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const int64_t at = part_offset(g, n, k);
        const int32_t part = holder(lv.buffer_of_value[node.inputs[k].v]);
        const BufferLife& p = lv.buffers[part];
        if (at < 0 || part == whole || closed[part] || p.placement != Placement::device || p.persistent ||
            p.input || p.last != pos || p.bytes != g.value(node.inputs[k]).type.bytes() ||
            offset_in_holder(lv.buffer_of_value[node.inputs[k].v]) != 0 || g.def(p.writer).traits.is_copy ||
            !no_higher(pos, p.first, o.first - 1, o.bytes - p.bytes))
          continue;
        if (p.first < o.first) {
          o.first = p.first;
          o.writer = p.writer;
        }
        join(part, whole, at);
      }
      continue;
    }
    if (node.op == Op::slice && node.outputs.size() == 1 && node.inputs.size() == 1 &&
        g.storage_root(node.outputs[0]) == node.outputs[0]) {
      const int64_t at = part_offset(g, n);
      const int32_t from = lv.buffer_of_value[node.outputs[0].v], to = holder(lv.buffer_of_value[node.inputs[0].v]);
      BufferLife& a = lv.buffers[to];
      const BufferLife& o = lv.buffers[from];
      if (at < 0 || closed[to] || closed[from] || a.placement != Placement::device ||
          o.placement != Placement::device || a.persistent || o.first != pos ||
          !no_higher(pos, a.last + 1, o.last, a.bytes - o.bytes))
        continue;
      a.last = std::max(a.last, o.last);
      join(from, to, offset_in_holder(lv.buffer_of_value[node.inputs[0].v]) + at);
      continue;
    }
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
    if (a.placement != Placement::device || o.placement != Placement::device || a.persistent || o.first != pos ||
        a.bytes != o.bytes || offset_in_holder(lv.buffer_of_value[in.v]) != 0)
      continue;
    const bool write = d.reusable_input == k && !a.input && a.last == pos;  // the input dies here
    if (closed[to] || !(write || (view && !closed[from]))) continue;
    a.last = std::max(a.last, o.last);
    join(from, to, 0);
  }
  lv.offset_of_value.assign(lv.buffer_of_value.size(), 0);
  for (size_t v = 0; v < lv.buffer_of_value.size(); ++v)
    lv.offset_of_value[v] = offset_in_holder(lv.buffer_of_value[v]);
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

int64_t part_offset(const Graph& g, NodeId n, size_t k) {
  const Node& node = g.node(n);
  const bool concat = node.op == Op::concat;
  if ((!concat && (node.op != Op::slice || k != 0)) || node.outputs.size() != 1 || k >= node.inputs.size())
    return -1;
  const TensorType& whole = g.value(concat ? node.outputs[0] : node.inputs[0]).type;
  const int64_t rank = whole.rank();
  int64_t axis = node.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return -1;
  int64_t inner = dtype_size(whole.dtype);  // bytes of one step along the axis
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis && whole.shape[static_cast<size_t>(i)] != 1) return -1;
    if (i > axis) inner *= whole.shape[static_cast<size_t>(i)];
  }
  // The part's range along the axis, checked against the shapes (the liveness may see a graph not verified).
  const auto ax = static_cast<size_t>(axis);
  auto fits = [&](const TensorType& part, int64_t from) {
    Shape expect = whole.shape;
    expect[ax] = part.rank() == rank ? part.shape[ax] : -1;
    return part.dtype == whole.dtype && part.shape == expect && from >= 0 && from + expect[ax] <= whole.shape[ax];
  };
  int64_t start = 0;
  if (!concat) {
    start = node.attrs.get_int("start", 0);
    return fits(g.value(node.outputs[0]).type, start) ? start * inner : -1;
  }
  int64_t at = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const TensorType& t = g.value(node.inputs[i]).type;
    if (!fits(t, at)) return -1;
    if (i == k) start = at;
    at += t.shape[ax];
  }
  return at == whole.shape[ax] ? start * inner : -1;
}

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
  else lv.offset_of_value.assign(g.num_values(), 0);

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
  return live_of(lv, placement, [](size_t) { return true; });
}

}  // namespace lms
