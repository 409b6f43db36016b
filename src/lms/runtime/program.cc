// Building a Program: streams per node, per-stream orders, and the events between streams (see program.h).
#include "lms/runtime/program.h"

#include <algorithm>

#include "lms/plan/schedule.h"

namespace lms {

std::string_view stream_name(StreamId s) {
  switch (s) {
    case StreamId::compute: return "compute";
    case StreamId::d2h: return "d2h";
    case StreamId::h2d: return "h2d";
  }
  return "?";
}

Location Program::location(ValueId v) const {
  const PlannedBuffer& b = memory_.of(v);
  const int64_t within = memory_.offset_of_value.empty() ? 0 : memory_.offset_of_value[v.v];  // Note [Parts]
  return Location{b.life.placement, b.offset + within, graph_.value(v).type.bytes()};
}

std::optional<Location> Program::workspace(NodeId n) const {
  const PlannedBuffer* b = memory_.workspace(n);
  if (!b) return std::nullopt;
  return Location{Placement::device, b->offset, b->life.bytes};
}

StreamId stream_for(const Graph& g, NodeId n) {
  const OpDef& d = g.def(n);
  if (!d.traits.is_copy) return StreamId::compute;
  return d.output_placement == Placement::host ? StreamId::d2h : StreamId::h2d;
}

std::vector<std::vector<NodeId>> cross_stream_waits(const Graph& g, const MemoryPlan& plan) {
  const size_t num_nodes = g.num_nodes();
  std::vector<StreamId> stream(num_nodes);
  for (NodeId n : g.node_ids()) stream[n.v] = stream_for(g, n);
  std::vector<std::vector<NodeId>> waits(num_nodes);
  for (NodeId n : g.node_ids()) {
    auto dep = [&](NodeId d) {
      if (stream[d.v] != stream[n.v]) waits[n.v].push_back(d);
    };
    for (ValueId v : g.node(n).inputs) dep(g.value(v).producer);
    for (NodeId c : g.node(n).control_inputs) dep(c);
  }

  // The last node touching each buffer on each stream.
  std::vector<std::array<std::optional<NodeId>, kNumStreams>> last_touch(plan.buffers.size());
  for (NodeId n : g.node_ids()) {
    auto touch = [&](ValueId v) { last_touch[plan.buffer_of_value[v.v]][static_cast<int>(stream[n.v])] = n; };
    for (ValueId v : g.node(n).inputs) touch(v);
    for (ValueId v : g.node(n).outputs) touch(v);
    if (int32_t ws = plan.workspace_of_node.empty() ? -1 : plan.workspace_of_node[n.v]; ws >= 0)
      last_touch[ws][static_cast<int>(stream[n.v])] = n;
  }
  // A pair (earlier occupant a, later buffer b) adds waits only when a was touched on a stream other than the
  // one b's writer runs on. Writers on the compute stream can only wait for buffers a copy touched, so those
  // are the only candidates for them; copy writers (few) look at every buffer. Same answer as all pairs,
  // without the quadratic cost on graphs with thousands of buffers.
  constexpr int kCompute = static_cast<int>(StreamId::compute);
  std::vector<size_t> copied;  // buffers touched on a copy stream
  for (size_t a = 0; a < plan.buffers.size(); ++a)
    for (int s = 0; s < kNumStreams; ++s)
      if (s != kCompute && last_touch[a][s]) {
        copied.push_back(a);
        break;
      }
  std::vector<size_t> all(plan.buffers.size());
  for (size_t a = 0; a < all.size(); ++a) all[a] = a;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlannedBuffer& later = plan.buffers[b];
    if (later.life.bytes == 0 || later.life.input || later.life.persistent) continue;
    const NodeId writer = later.life.writer;
    const int ws = static_cast<int>(stream[writer.v]);
    for (size_t a : ws == kCompute ? copied : all) {
      const PlannedBuffer& earlier = plan.buffers[a];
      if (a == b || earlier.life.bytes == 0 || earlier.life.placement != later.life.placement) continue;
      if (earlier.life.last >= later.life.first) continue;  // not an earlier occupant
      bool share = earlier.offset < later.offset + later.life.bytes && later.offset < earlier.offset + earlier.life.bytes;
      if (!share) continue;
      for (int s = 0; s < kNumStreams; ++s)
        if (s != ws && last_touch[a][s]) waits[writer.v].push_back(*last_touch[a][s]);
    }
  }
  for (auto& w : waits) {
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
  }
  return waits;
}

Result<Program> build_program(Graph g, MemoryPlan plan) {
  if (plan.buffer_of_value.size() != g.num_values() || plan.num_positions != static_cast<int>(g.num_nodes()))
    return fail("build_program: the memory plan ({} values, {} positions) was not made for this graph ({} values, "
                "{} nodes)",
                plan.buffer_of_value.size(), plan.num_positions, g.num_values(), g.num_nodes());
  if (!plan.offset_of_value.empty() && plan.offset_of_value.size() != g.num_values())
    return fail("build_program: the memory plan places {} values at offsets, the graph has {}",
                plan.offset_of_value.size(), g.num_values());
  LMS_TRY_VOID(check_schedule_order(g));
  g.set_scheduled(true);

  Program p;
  const size_t num_nodes = g.num_nodes();
  p.stream_.resize(num_nodes);
  p.waits_.resize(num_nodes);
  p.recorded_.resize(num_nodes);
  bool several_streams = false;
  for (NodeId n : g.node_ids()) {
    StreamId s = stream_for(g, n);
    p.stream_[n.v] = s;
    p.stream_order_[static_cast<int>(s)].push_back(n);
    several_streams = several_streams || s != StreamId::compute;
    const Node& node = g.node(n);
    if (node.op == Op::input) p.inputs_.push_back(node.outputs.front());
    if (g.def(n).traits.persistent && g.def(n).traits.source) p.persistent_.push_back(node.outputs.front());
  }

  if (several_streams) {
    std::vector<std::vector<NodeId>> waits = cross_stream_waits(g, plan);
    // One event per recording node, numbered in node order.
    std::vector<bool> records(num_nodes, false);
    for (const auto& w : waits)
      for (NodeId d : w) records[d.v] = true;
    for (NodeId n : g.node_ids())
      if (records[n.v]) p.recorded_[n.v] = EventId{p.num_events_++};
    for (NodeId n : g.node_ids())
      for (NodeId d : waits[n.v]) p.waits_[n.v].push_back(*p.recorded_[d.v]);
  }
  p.graph_ = std::move(g);
  p.memory_ = std::move(plan);
  return p;
}

Result<Program> compile(const Graph& graph, const PlanOptions& opts, Backend* backend) {
  Graph scheduled = LMS_TRY(schedule(graph));
  PlanOptions with_workspaces = opts;
  if (backend) with_workspaces.workspace_bytes = LMS_TRY(backend->workspace_bytes(scheduled));
  MemoryPlan plan = LMS_TRY(plan_memory(scheduled, with_workspaces));
  return build_program(std::move(scheduled), std::move(plan));
}

WorkspaceFn workspaces_of(Backend& backend) {
  return [&backend](const Graph& scheduled) { return backend.workspace_bytes(scheduled); };
}

}  // namespace lms
