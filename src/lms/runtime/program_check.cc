// The Program race check (see program_check.h).
#include "lms/runtime/program_check.h"

#include <array>

#include "lms/ir/verifier.h"

namespace lms {

namespace {

using Clock = std::array<uint32_t, kNumStreams>;  // per stream: how many of its nodes have certainly finished

struct Clocks {
  std::vector<Clock> start;     // by node: what is finished when it starts
  std::vector<uint32_t> index;  // by node: its position in its stream's order
};

Clocks compute_clocks(const Program& p) {
  const Graph& g = p.graph();
  Clocks c;
  c.start.assign(g.num_nodes(), Clock{});
  c.index.assign(g.num_nodes(), 0);
  std::vector<Clock> at_record(p.num_events(), Clock{});  // the recording node's clock after it finishes
  std::array<Clock, kNumStreams> head{};                 // each stream's clock after its last issued node
  std::array<uint32_t, kNumStreams> issued{};
  // Nodes are issued in id order (the executor's order); a wait refers to the latest record issued before it.
  for (NodeId n : g.node_ids()) {
    const int s = static_cast<int>(p.stream(n));
    Clock clock = head[s];
    for (EventId e : p.waits(n))
      for (int k = 0; k < kNumStreams; ++k) clock[k] = std::max(clock[k], at_record[e.v][k]);
    c.start[n.v] = clock;
    c.index[n.v] = issued[s]++;
    clock[s] = issued[s];
    head[s] = clock;
    if (auto e = p.recorded(n)) at_record[e->v] = clock;
  }
  return c;
}

}  // namespace

Result<void> check_program_races(const Program& p) {
  const Graph& g = p.graph();
  const MemoryPlan& plan = p.memory();
  const Clocks c = compute_clocks(p);
  // Has `a` certainly finished when `b` starts?
  auto before = [&](NodeId a, NodeId b) {
    return c.start[b.v][static_cast<int>(p.stream(a))] > c.index[a.v];
  };
  auto where = [&](NodeId n) { return fmt::format("{} on {}", node_label(g, n), stream_name(p.stream(n))); };

  for (NodeId n : g.node_ids()) {
    for (ValueId v : g.node(n).inputs) {
      NodeId d = g.value(v).producer;
      if (!before(d, n))
        return fail("race: {} reads %{} without waiting for its producer {}", where(n), g.value(v).name, where(d));
    }
    for (NodeId d : g.node(n).control_inputs)
      if (!before(d, n)) return fail("race: {} does not wait for its control input {}", where(n), where(d));
  }

  // The nodes touching each buffer.
  std::vector<std::vector<NodeId>> touchers(plan.buffers.size());
  for (NodeId n : g.node_ids()) {
    for (ValueId v : g.node(n).inputs) touchers[plan.buffer_of_value[v.v]].push_back(n);
    for (ValueId v : g.node(n).outputs) touchers[plan.buffer_of_value[v.v]].push_back(n);
    if (!plan.workspace_of_node.empty() && plan.workspace_of_node[n.v] >= 0)
      touchers[plan.workspace_of_node[n.v]].push_back(n);
  }
  auto describe = [&](const PlannedBuffer& b) {
    return b.life.workspace ? fmt::format("the workspace of {}", node_label(g, b.life.writer))
                            : "%" + g.value(b.life.root).name;
  };
  // A value written over the buffer of a dying input (Note [Buffer reuse]): every earlier toucher has finished.
  for (uint32_t i = 0; i < g.num_values(); ++i) {
    const ValueId v{i};
    const int32_t b = plan.buffer_of_value[i];
    if (g.storage_root(v) != v || plan.buffers[b].life.root == v) continue;
    const NodeId w = g.value(v).producer;
    for (NodeId t : touchers[b])
      if (t.v < w.v && !before(t, w))
        return fail("race: {} writes %{} over %{} without waiting for {}, which uses it", where(w), g.value(v).name,
                    g.value(plan.buffers[b].life.root).name, where(t));
  }
  for (const PlannedBuffer& later : plan.buffers) {
    if (later.life.bytes == 0 || later.life.input || later.life.persistent) continue;
    for (size_t a = 0; a < plan.buffers.size(); ++a) {
      const PlannedBuffer& earlier = plan.buffers[a];
      if (earlier.life.bytes == 0 || earlier.life.placement != later.life.placement ||
          earlier.life.last >= later.life.first)
        continue;
      if (earlier.offset >= later.offset + later.life.bytes || later.offset >= earlier.offset + earlier.life.bytes)
        continue;
      for (NodeId t : touchers[a])
        if (t != later.life.writer && !before(t, later.life.writer))
          return fail("race: {} writes {} over {} without waiting for {}, which uses it", where(later.life.writer),
                      describe(later), describe(earlier), where(t));
    }
  }
  return {};
}

}  // namespace lms
