// The memory planner, with each assignment algorithm: on random DAGs (with inputs, parameters, in-place
// updates, unread outputs and host values) a simulation that tags every byte with its owner shows no buffer
// is overwritten while its contents are still needed; every buffer is aligned and inside its arena; arena >=
// liveness lower bound >= minimum budget; planning is deterministic; the Program built from each plan waits,
// before reusing space, for every node on another stream that touched its previous occupant. On a hand-made
// graph, the exact lower bound, peak op, minimum budget and the budget error's wording.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>

#include "lms/ir/builder.h"
#include "lms/plan/memory_planner.h"
#include "lms/plan/schedule.h"
#include "lms/runtime/program.h"
#include "lms/runtime/program_check.h"

namespace lms {
namespace {

// A random graph in schedule order. Node kinds: inputs, params, relu and reshape (one input), batch_norm_grad
// (five inputs, three outputs, the first of which may be written over the first input), concat (several
// inputs), in-place sgd updates of params (ordered after every other reader by control edges, as autodiff
// does), swap_out to the host and swap_in back. Shapes need not satisfy the shape rules: the planner reads
// only edges, types, placements and traits.
Graph random_graph(std::mt19937& rng, int num_nodes) {
  Graph g("random");
  std::vector<ValueId> device_values, params;
  std::vector<ValueId> host_values;
  auto add = [&](Op op, std::vector<ValueId> ins, int64_t elements, Placement where = Placement::device,
                 Attributes a = {}) {
    TensorType t{DType::f32, {elements}};
    std::vector<TensorType> types = {t};
    std::vector<std::string> names = {""};
    NodeId n = g.add_node(op, std::move(a), types, names);
    g.set_inputs(n, std::move(ins));
    ValueId v = g.node(n).outputs.front();
    g.set_placement(v, where);
    return v;
  };
  std::uniform_int_distribution<int64_t> size(0, 300);  // includes empty tensors and sizes not multiple of 64
  auto pick = [&](const std::vector<ValueId>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  device_values.push_back(add(Op::input, {}, size(rng)));
  for (int i = 1; i < num_nodes; ++i) {
    int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind == 0) {
      device_values.push_back(add(Op::input, {}, size(rng)));
    } else if (kind == 1) {
      ValueId p = add(Op::param, {}, size(rng));
      params.push_back(p);
      device_values.push_back(p);
    } else if (kind == 4 && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      // dx of dy's size half the time (Note [Buffer reuse]: the first output over dy), dgamma and dbeta.
      std::vector<ValueId> ins;
      for (int j = 0; j < 5; ++j) ins.push_back(pick(device_values));
      const bool same = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      std::vector<TensorType> types;
      for (int64_t e : {same ? g.value(ins[0]).type.shape[0] : size(rng), size(rng), size(rng)})
        types.push_back(TensorType{DType::f32, {e}});
      const std::vector<std::string> names(3);
      NodeId n = g.add_node(Op::batch_norm_grad, {}, types, names);
      g.set_inputs(n, std::move(ins));
      for (ValueId v : g.node(n).outputs) device_values.push_back(v);
    } else if (kind <= 4) {
      // Half the time of its input's size: its buffer may be reused (Note [Buffer reuse]); a third of those are
      // reshapes, which may share it while it is still read (Note [Views]).
      // Of the others, a third are slices, which may view their range of the input (Note [Parts]).
      const ValueId in = pick(device_values);
      const bool same = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      const bool third = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
      const int64_t dim = g.value(in).type.shape[0];
      if (!same && third && dim > 0) {
        const int64_t start = std::uniform_int_distribution<int64_t>(0, dim - 1)(rng);
        const int64_t end = std::uniform_int_distribution<int64_t>(start + 1, dim)(rng);
        device_values.push_back(add(Op::slice, {in}, end - start, Placement::device,
                                    attrs({{"axis", int64_t{0}}, {"start", start}, {"end", end}})));
      } else {
        device_values.push_back(add(same && third ? Op::reshape : Op::relu, {in}, same ? dim : size(rng)));
      }
    } else if (kind <= 6) {
      // Half the time of the inputs' total size: inputs that die here may be placed in it (Note [Parts]).
      int k = std::uniform_int_distribution<int>(2, 4)(rng);
      std::vector<ValueId> ins;
      int64_t total = 0;
      for (int j = 0; j < k; ++j) {
        ins.push_back(pick(device_values));
        total += g.value(ins.back()).type.shape[0];
      }
      const bool parts = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
      device_values.push_back(add(Op::concat, ins, parts ? total : size(rng)));
    } else if (kind == 7) {
      host_values.push_back(add(Op::swap_out, {pick(device_values)}, size(rng), Placement::host));
    } else if (kind == 8 && !host_values.empty()) {
      device_values.push_back(add(Op::swap_in, {pick(host_values)}, size(rng)));
    } else if (kind == 9 && !params.empty()) {
      ValueId w = pick(params);
      ValueId grad = pick(device_values);
      ValueId w_new = add(Op::sgd_update, {w, grad}, g.value(w).type.shape[0]);
      NodeId upd = g.value(w_new).producer;
      for (NodeId reader : g.value(w).consumers)
        if (reader != upd) g.add_control_input(upd, reader);
      std::erase(params, w);  // updated once, like a training graph
      std::erase(device_values, w);
    }
  }
  std::vector<ValueId> outs;
  for (int j = 0; j < 2; ++j) outs.push_back(pick(device_values));
  std::sort(outs.begin(), outs.end());
  outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
  g.set_outputs(outs);
  return g;
}

// Replays the schedule on arenas of owner tags (a value's storage root id; a workspace: -2 - its node): at the
// start the inputs and persistent buffers are written; each node first checks that every value it reads still
// carries its own tag over its bytes (a value at an offset in its buffer: Note [Parts]), then writes its fresh
// outputs. After the last node, graph outputs and persistent buffers must be intact. An output written over an
// input's buffer (Note [Buffer reuse]) may overwrite that input alone, and only at its last reader: any later
// read of it finds the output's tag; a concat's output likewise over its inputs placed in it (Note [Parts]); a
// view (Note [Views]; a slice viewing its range, Note [Parts]) writes nothing and reads as its input. Returns
// the first violation.
std::string simulate(const Graph& g, const MemoryPlan& plan) {
  std::vector<int32_t> device(plan.device_arena_bytes, -1), host(plan.host_arena_bytes, -1);
  auto arena = [&](const PlannedBuffer& b) -> std::vector<int32_t>& {
    return b.life.placement == Placement::device ? device : host;
  };
  auto start = [&](ValueId v) { return plan.of(v).offset + plan.offset_of_value[v.v]; };
  auto fill = [&](ValueId v, int32_t tag) {
    for (int64_t i = 0; i < g.value(v).type.bytes(); ++i) arena(plan.of(v))[start(v) + i] = tag;
  };
  auto holds = [&](ValueId v, int32_t tag) {
    for (int64_t i = 0; i < g.value(v).type.bytes(); ++i)
      if (arena(plan.of(v))[start(v) + i] != tag) return false;
    return true;
  };
  // A view in its input's buffer (Note [Views], Note [Parts]) writes nothing: it carries its input's tag.
  auto viewed = [&](ValueId v) -> std::optional<ValueId> {
    const Node& p = g.node(g.value(v).producer);
    const int k = p.op == Op::slice ? 0 : g.def(g.value(v).producer).view_input;
    if (k < 0 || plan.buffer_of_value[p.inputs[static_cast<size_t>(k)].v] != plan.buffer_of_value[v.v]) return {};
    return p.inputs[static_cast<size_t>(k)];
  };
  std::function<int32_t(ValueId)> tag = [&](ValueId v) {
    if (auto in = viewed(v)) return tag(*in);
    return static_cast<int32_t>(g.storage_root(v).v);
  };
  auto intact = [&](ValueId v) { return holds(v, tag(v)); };
  for (const PlannedBuffer& b : plan.buffers)
    if (b.life.persistent || b.life.input) fill(b.life.root, static_cast<int32_t>(b.life.root.v));
  for (NodeId n : g.node_ids()) {
    const std::string at = " node #" + std::to_string(n.v);
    for (ValueId v : g.node(n).inputs)
      if (!intact(v)) return "%" + g.value(v).name + " was overwritten before" + at + " read it";
    // The node's workspace and fresh outputs are written while its inputs must stay intact.
    const PlannedBuffer* ws = plan.workspace(n);
    const auto ws_tag = -2 - static_cast<int32_t>(n.v);
    if (ws)
      for (int64_t i = 0; i < ws->life.bytes; ++i) arena(*ws)[ws->offset + i] = ws_tag;
    for (ValueId v : g.node(n).outputs)
      if (g.storage_root(v) == v && !g.def(n).traits.source && !viewed(v)) fill(v, tag(v));
    if (ws && std::any_of(arena(*ws).begin() + ws->offset, arena(*ws).begin() + ws->offset + ws->life.bytes,
                          [&](int32_t t) { return t != ws_tag; }))
      return "the workspace of" + at + " shares an output's space";
    for (ValueId v : g.node(n).inputs) {
      const bool reused = std::ranges::any_of(g.node(n).outputs, [&](ValueId o) {
        return g.storage_root(o) == o && plan.buffer_of_value[o.v] == plan.buffer_of_value[v.v];
      });
      if (!reused && !intact(v)) return "%" + g.value(v).name + " was overwritten while" + at + " ran";
    }
  }
  for (ValueId v : g.outputs())
    if (!intact(v)) return "output %" + g.value(v).name + " was overwritten";
  for (const PlannedBuffer& b : plan.buffers)
    if (b.life.persistent && !holds(b.life.root, static_cast<int32_t>(b.life.root.v)))
      return "a persistent buffer was overwritten";
  return "";
}

// Random workspace sizes for about a third of the nodes (kernels' scratch space, e.g. oneDNN scratchpads).
std::vector<int64_t> random_workspaces(std::mt19937& rng, const Graph& g) {
  std::vector<int64_t> ws(g.num_nodes(), 0);
  for (int64_t& w : ws)
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) w = std::uniform_int_distribution<int64_t>(1, 500)(rng);
  return ws;
}

TEST(MemoryPlanner, RandomGraphsNeverOverlapLiveBuffers) {
  std::mt19937 rng(12345);
  int reused = 0, views = 0, norm_grads = 0, slices = 0, concat_parts = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Graph g = random_graph(rng, 5 + trial % 60);
    ASSERT_TRUE(check_schedule_order(g).has_value()) << trial;
    // Half the trials give nodes workspaces; a third give every value a buffer of its own.
    const std::vector<int64_t> workspaces = trial % 2 ? random_workspaces(rng, g) : std::vector<int64_t>{};
    const bool reuse = trial % 3 != 0;
    for (Assignment a : kAllAssignments) {
      auto plan = plan_memory(g, PlanOptions{.assignment = a, .workspace_bytes = workspaces, .reuse_buffers = reuse});
      ASSERT_TRUE(plan.has_value()) << plan.error().str();
      EXPECT_EQ(simulate(g, *plan), "") << "trial " << trial << " " << assignment_name(a);
      for (uint32_t v = 0; v < g.num_values(); ++v)
        if (g.storage_root(ValueId{v}) == ValueId{v} && plan->of(ValueId{v}).life.root != ValueId{v}) {
          EXPECT_TRUE(reuse) << "trial " << trial;
          reused += a == Assignment::greedy_by_size;
          const NodeId at = g.value(ValueId{v}).producer;  // a view of an input read after it
          const Node& p = g.node(at);
          views += a == Assignment::greedy_by_size && p.op == Op::reshape &&
                   std::ranges::any_of(g.value(p.inputs[0]).consumers, [&](NodeId c) { return c.v > at.v; });
          norm_grads += a == Assignment::greedy_by_size && p.op == Op::batch_norm_grad;
          slices += a == Assignment::greedy_by_size && p.op == Op::slice;  // Note [Parts]
          // A concat input placed in its output (Note [Parts]), at its offset there.
          for (NodeId c : g.value(ValueId{v}).consumers)
            concat_parts += a == Assignment::greedy_by_size && g.node(c).op == Op::concat &&
                            plan->buffer_of_value[g.node(c).outputs[0].v] == plan->buffer_of_value[v];
        }
      for (uint32_t v = 0; v < g.num_values(); ++v)  // a value at an offset fits in its buffer
        EXPECT_LE(plan->offset_of_value[v] + g.value(ValueId{v}).type.bytes(), plan->of(ValueId{v}).life.bytes);

      int64_t top_device = 0, raw_persistent = 0;
      for (const PlannedBuffer& b : plan->buffers) {
        EXPECT_EQ(b.offset % kArenaAlignment, 0);
        int64_t arena = b.life.placement == Placement::device ? plan->device_arena_bytes : plan->host_arena_bytes;
        EXPECT_LE(b.offset + b.life.bytes, arena);
        if (b.life.placement != Placement::device) continue;
        top_device = std::max(top_device, b.offset + b.life.bytes);
        if (b.life.persistent) {
          raw_persistent += b.life.bytes;
          EXPECT_LE(b.offset + b.life.bytes, plan->persistent_end);
        } else if (b.life.bytes > 0) {
          EXPECT_GE(b.offset, plan->persistent_end);  // validation poisons [persistent_end, arena)
        }
      }
      EXPECT_EQ(plan->device_arena_bytes, top_device);  // the arena is exactly the highest buffer end
      EXPECT_EQ(plan->persistent_bytes, raw_persistent);

      // The lower bound, recomputed by brute force: bytes of buffers whose interval holds each position.
      int64_t brute = 0;
      for (int t = 0; t < plan->num_positions; ++t) {
        int64_t live = 0;
        for (const PlannedBuffer& b : plan->buffers)
          if (b.life.placement == Placement::device && b.life.first <= t && t <= b.life.last) live += b.life.bytes;
        brute = std::max(brute, live);
      }
      EXPECT_EQ(plan->lower_bound_bytes, brute);
      EXPECT_GE(plan->device_arena_bytes, plan->lower_bound_bytes);
      EXPECT_GE(plan->lower_bound_bytes, plan->min_budget_bytes);

      auto again = plan_memory(g, PlanOptions{.assignment = a, .workspace_bytes = workspaces, .reuse_buffers = reuse});
      ASSERT_TRUE(again.has_value());
      for (size_t i = 0; i < plan->buffers.size(); ++i) EXPECT_EQ(plan->buffers[i].offset, again->buffers[i].offset);
    }
  }
  EXPECT_GT(reused, 50) << "the random graphs must exercise buffer reuse";
  EXPECT_GT(views, 10) << "the random graphs must exercise views";
  EXPECT_GT(norm_grads, 5) << "the random graphs must exercise a multi-output op written over an input";
  EXPECT_GT(slices, 10) << "the random graphs must exercise slices viewing their input";
  EXPECT_GT(concat_parts, 10) << "the random graphs must exercise concat inputs placed in their output";
}

// Reuse across streams: whenever a buffer's space held an earlier buffer, every node that touched the earlier
// one must have finished before the later one's producer writes. On the producer's own stream that holds by
// issue order; on another stream the Program must make the producer wait on an event recorded by that node
// or a later node of the same stream (a stream runs its nodes in order). Checked for each algorithm, on the
// random graphs above, whose swaps put nodes on the d2h and h2d streams.
TEST(MemoryPlanner, ReusedSpaceWaitsForEveryReaderOfThePreviousOccupantOnEveryStream) {
  std::mt19937 rng(4242);
  int cross_stream_reuses = 0;
  for (int trial = 0; trial < 100; ++trial) {
    Graph g = random_graph(rng, 10 + trial % 50);
    const std::vector<int64_t> workspaces = random_workspaces(rng, g);
    for (Assignment a : kAllAssignments) {
      auto plan = plan_memory(g, PlanOptions{.assignment = a, .workspace_bytes = workspaces});
      ASSERT_TRUE(plan.has_value()) << plan.error().str();
      auto program = build_program(g, *plan);
      ASSERT_TRUE(program.has_value()) << program.error().str();
      auto races = check_program_races(*program);
      EXPECT_TRUE(races.has_value()) << "trial " << trial << ": " << races.error().str();
      // The nodes touching each buffer (reading it, producing it or writing it in place).
      std::vector<std::vector<NodeId>> touchers(plan->buffers.size());
      for (NodeId n : g.node_ids()) {
        for (ValueId v : g.node(n).inputs) touchers[plan->buffer_of_value[v.v]].push_back(n);
        for (ValueId v : g.node(n).outputs) touchers[plan->buffer_of_value[v.v]].push_back(n);
        if (plan->workspace(n)) touchers[plan->workspace_of_node[n.v]].push_back(n);
      }
      // Which node recorded each event.
      std::vector<NodeId> recorder(program->num_events());
      for (NodeId n : g.node_ids())
        if (auto e = program->recorded(n)) recorder[e->v] = n;
      for (const PlannedBuffer& later : plan->buffers) {
        if (later.life.bytes == 0 || later.life.input || later.life.persistent) continue;
        const NodeId writer = later.life.writer;
        for (size_t i = 0; i < plan->buffers.size(); ++i) {
          const PlannedBuffer& earlier = plan->buffers[i];
          if (earlier.life.bytes == 0 || earlier.life.placement != later.life.placement ||
              earlier.life.last >= later.life.first)
            continue;
          if (earlier.offset >= later.offset + later.life.bytes || later.offset >= earlier.offset + earlier.life.bytes)
            continue;
          for (NodeId t : touchers[i]) {
            ASSERT_LT(t, writer) << "a toucher of a dead buffer comes after the reuse";
            if (program->stream(t) == program->stream(writer)) continue;
            ++cross_stream_reuses;
            bool waited = false;
            for (EventId e : program->waits(writer)) {
              NodeId m = recorder[e.v];
              waited = waited || (program->stream(m) == program->stream(t) && m >= t);
            }
            EXPECT_TRUE(waited) << "trial " << trial << " " << assignment_name(a) << ": node #" << writer.v
                                << " reuses the space of buffer " << i
                                << " without waiting for node #" << t.v << " on another stream";
          }
        }
      }
    }
  }
  EXPECT_GT(cross_stream_reuses, 0) << "the random graphs must exercise reuse across streams";
}

// x -> a -> (p = a*w) ; c = concat(a, a) -> d -> mean ; mean(p) ; add: the numbers are small enough to check.
struct Chain {
  Graph g{"chain"};
  ValueId x, w, a, p, c, d, loss;
  Chain() {
    Builder b(g);
    TensorType t{DType::f32, {1000}};  // 4000 bytes
    x = b.input(t, "x");
    w = b.param(t, "w", "ones");
    a = b.op(Op::relu, {x}, {}, "a");
    p = b.op(Op::mul, {a, w}, {}, "p");
    c = b.op(Op::concat, {a, a}, attrs({{"axis", int64_t{0}}}), "c");  // 8000 bytes
    d = b.op(Op::relu, {c}, {}, "d");                                     // 8000 bytes
    ValueId s1 = b.op(Op::mean, {d}, {}, "s1");
    ValueId s2 = b.op(Op::mean, {p}, {}, "s2");
    loss = b.op(Op::add, {s1, s2}, {}, "loss");
    EXPECT_TRUE(b.ok()) << b.error()->str();
    g.set_outputs({loss});
  }
};

const PlanOptions kOwnBuffers{.reuse_buffers = false};  // every value a buffer of its own

TEST(MemoryPlanner, ChainNumbers) {
  Chain ch;
  auto plan = plan_memory(ch.g, kOwnBuffers);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  // At %d: w (4000) + p (4000, read later by s2) + c (8000) + d (8000); a died at c, x at a.
  EXPECT_EQ(plan->lower_bound_bytes, 24000);
  EXPECT_EQ(plan->peak_position, static_cast<int>(ch.g.value(ch.d).producer.v));
  EXPECT_EQ(plan->peak_transient_bytes, 20000);
  EXPECT_EQ(plan->persistent_bytes, 4000);
  // Hard minimum: w plus the largest op's own buffers, d's c + d.
  EXPECT_EQ(plan->min_budget_bytes, 4000 + 16000);
  EXPECT_EQ(plan->of(ch.x).life.first, 0);
  EXPECT_EQ(plan->of(ch.x).life.last, static_cast<int>(ch.g.value(ch.a).producer.v));
  EXPECT_EQ(plan->of(ch.loss).life.last, plan->num_positions - 1);
  EXPECT_EQ(plan->of(ch.w).offset, 0);
}

// A workspace is a device buffer live only at its node: at %d (c + d live, 16000 bytes) a 5000-byte workspace
// raises the lower bound and the hard minimum by exactly its size; the Program locates it in the arena.
TEST(MemoryPlanner, WorkspacesArePlannedBuffersLiveOnlyAtTheirNode) {
  Chain ch;
  const NodeId d = ch.g.value(ch.d).producer;
  std::vector<int64_t> ws(ch.g.num_nodes(), 0);
  ws[d.v] = 5000;
  auto plan = plan_memory(ch.g, PlanOptions{.workspace_bytes = ws, .reuse_buffers = false});
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  const PlannedBuffer* b = plan->workspace(d);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->life.first, static_cast<int>(d.v));
  EXPECT_EQ(b->life.last, static_cast<int>(d.v));
  EXPECT_TRUE(b->life.workspace);
  EXPECT_EQ(b->life.writer, d);
  EXPECT_EQ(plan->lower_bound_bytes, 24000 + 5000);
  EXPECT_EQ(plan->min_budget_bytes, 4000 + 16000 + 5000);
  EXPECT_EQ(plan->workspace(ch.g.value(ch.c).producer), nullptr);
  EXPECT_EQ(simulate(ch.g, *plan), "");
  auto program = build_program(ch.g, *plan);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  ASSERT_TRUE(program->workspace(d).has_value());
  EXPECT_EQ(program->workspace(d)->offset, b->offset);
  EXPECT_EQ(program->workspace(d)->bytes, 5000);

  ws.pop_back();
  auto wrong = plan_memory(ch.g, PlanOptions{.workspace_bytes = ws, .reuse_buffers = false});
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().str().find("workspace sizes given for a graph of"), std::string::npos);
}

TEST(MemoryPlanner, BudgetBelowPeakFailsNamingPeakBudgetAndOp) {
  Chain ch;
  auto fits = plan_memory(ch.g, kOwnBuffers);
  ASSERT_TRUE(fits.has_value());
  const int64_t peak = fits->device_arena_bytes;
  EXPECT_TRUE(plan_memory(ch.g, PlanOptions{.budget_bytes = peak, .reuse_buffers = false}).has_value())
      << "a budget equal to the peak fits";
  auto r = plan_memory(ch.g, PlanOptions{.budget_bytes = peak - 1, .reuse_buffers = false});
  ASSERT_FALSE(r.has_value());
  const std::string msg = r.error().str();
  EXPECT_EQ(msg.rfind("does not fit: planned peak ", 0), 0u) << msg;
  // The rounded sizes read the same, so the exact byte counts are shown.
  EXPECT_NE(msg.find(fmt::format("({} bytes) > budget", peak)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("({} bytes)", peak - 1)), std::string::npos) << msg;
  EXPECT_NE(msg.find("at the peak %d (relu)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(format_size(20000) + " of activations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("minimum budget " + format_size(20000)), std::string::npos) << msg;
  // The largest tensors live there, biggest first (ties by value id), and how many are live.
  EXPECT_NE(msg.find(fmt::format("; the largest of its 3 live tensors: %c {0}, %d {0}, %p {1} (", format_size(8000),
                                 format_size(4000))),
            std::string::npos)
      << msg;

  auto tiny = plan_memory(ch.g, PlanOptions{.budget_bytes = 1024, .reuse_buffers = false});
  ASSERT_FALSE(tiny.has_value());
  EXPECT_NE(tiny.error().str().find("> budget 1.0 KiB"), std::string::npos) << tiny.error().str();
  EXPECT_FALSE(plan_memory(ch.g, PlanOptions{.budget_bytes = -1, .reuse_buffers = false}).has_value());
}

// Note [Buffer reuse] on the chain: d = relu(c) is c's last reader, so d is written over c's buffer (and the
// scalar loss over s1's); a = relu(x) is not (x is a graph input), nor p = a * w (a is read later by c). And c's
// first input a dies at c, so a is written in its place in c's buffer (Note [Parts]; c copies the second a from
// there), which then lives from %a on. The lower bound falls from 24000 at %d to 16004 at %s1 (w, p, d, s1), the
// hard minimum from c + d to x plus the buffer holding a (at %a; p and that buffer at %p, as much).
TEST(MemoryPlanner, OutputsTakeTheBufferOfAnInputTheyReadLast) {
  Chain ch;
  auto plan = plan_memory(ch.g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  EXPECT_EQ(plan->buffer_of_value[ch.d.v], plan->buffer_of_value[ch.c.v]);
  EXPECT_EQ(plan->of(ch.d).life.root, ch.c);
  EXPECT_EQ(plan->of(ch.d).life.first, static_cast<int>(ch.g.value(ch.a).producer.v));
  EXPECT_EQ(plan->of(ch.d).life.last, static_cast<int>(ch.g.value(ch.d).consumers[0].v));
  EXPECT_NE(plan->buffer_of_value[ch.a.v], plan->buffer_of_value[ch.x.v]);
  EXPECT_NE(plan->buffer_of_value[ch.p.v], plan->buffer_of_value[ch.a.v]);
  EXPECT_EQ(plan->buffer_of_value[ch.a.v], plan->buffer_of_value[ch.c.v]);
  EXPECT_EQ(plan->offset_of_value[ch.a.v], 0);
  EXPECT_EQ(plan->of(ch.loss).life.last, plan->num_positions - 1);
  EXPECT_EQ(plan->lower_bound_bytes, 16004);
  EXPECT_EQ(plan->peak_position, static_cast<int>(ch.g.value(ch.d).consumers[0].v));
  EXPECT_EQ(plan->min_budget_bytes, 4000 + 12000);
  EXPECT_EQ(plan->min_budget_position, static_cast<int>(ch.g.value(ch.a).producer.v));  // x + that buffer
  EXPECT_EQ(simulate(ch.g, *plan), "");
  auto program = build_program(ch.g, *plan);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  EXPECT_TRUE(check_program_races(*program).has_value());
  auto own = plan_memory(ch.g, kOwnBuffers);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->buffers.size(), plan->buffers.size() + 3);  // a, d and loss have their own
}

// Where a buffer is not reused: an input a copy reads (a swap-out may still be reading it on its stream), a
// graph output, one read again later, a parameter, a host value, and an output of other bytes (a reshape
// keeps the bytes, a relu of a slice cannot be written over the whole).
TEST(MemoryPlanner, BuffersAreNotReusedWhereAnotherReaderCouldSeeTheWrite) {
  Graph g;
  Builder b(g);
  const TensorType t{DType::f32, {64}};
  ValueId x = b.input(t, "x");
  ValueId w = b.param(t, "w", "ones");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId a2 = b.op(Op::relu, {a}, {}, "a2");  // a's last reader, but a copy reads a
  ValueId r = b.op(Op::reshape, {a2}, attrs({{"shape", IntList{8, 8}}}), "r");  // reuses a2
  ValueId m = b.op(Op::mul, {w, w}, {}, "m");  // w is a parameter
  ValueId s = b.op(Op::slice, {m}, attrs({{"axis", int64_t{0}}, {"start", int64_t{0}}, {"end", int64_t{32}}}), "s");
  ValueId s2 = b.op(Op::relu, {s}, {}, "s2");  // s views its range of m (Note [Parts]): not over m
  ValueId back = b.op(Op::swap_in, {h}, {}, "back");
  ValueId o = b.op(Op::add, {back, m}, {}, "o");  // reuses back (swap_in's output, read only here)
  ValueId keep = b.op(Op::relu, {o}, {}, "keep");  // o is a graph output
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({o, keep, r, s2});
  auto plan = plan_memory(g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  auto buffer = [&](ValueId v) { return plan->buffer_of_value[v.v]; };
  EXPECT_NE(buffer(a), buffer(x));
  EXPECT_NE(buffer(a2), buffer(a));
  EXPECT_EQ(buffer(r), buffer(a2));
  EXPECT_NE(buffer(m), buffer(w));
  EXPECT_EQ(buffer(s), buffer(m));
  EXPECT_NE(buffer(s2), buffer(s));
  EXPECT_EQ(buffer(o), buffer(back));
  EXPECT_NE(buffer(keep), buffer(o));
  EXPECT_EQ(simulate(g, *plan), "");
  auto program = build_program(g, *plan);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  EXPECT_TRUE(check_program_races(*program).has_value());
}

// Note [Views]: a reshape shares its input's buffer though the input is read after it (b + b); the buffer lives
// to the last reader of either, and only then may an op write over it (d over b and v). A parameter's reshape,
// one of a value a copy reads (whose buffer is never written over: s could not take r's), and every reshape
// without reuse get a buffer of their own.
TEST(MemoryPlanner, ReshapesShareTheBufferOfAnInputStillRead) {
  Graph g;
  Builder b(g);
  const TensorType t{DType::f32, {64}};
  ValueId x = b.input(t, "x");
  ValueId w = b.param(t, "w", "ones");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId r = b.op(Op::reshape, {a}, attrs({{"shape", IntList{8, 8}}}), "r");
  ValueId m = b.op(Op::mul, {a, a}, {}, "m");
  ValueId s = b.op(Op::relu, {r}, {}, "s");  // r's last reader: written over r
  ValueId bb = b.op(Op::relu, {x}, {}, "b");
  ValueId v = b.op(Op::reshape, {bb}, attrs({{"shape", IntList{8, 8}}}), "v");
  ValueId c = b.op(Op::add, {bb, bb}, {}, "c");
  ValueId d = b.op(Op::relu, {v}, {}, "d");  // the last reader of b and v: written over them
  ValueId q = b.op(Op::reshape, {w}, attrs({{"shape", IntList{8, 8}}}), "q");
  ValueId back = b.op(Op::swap_in, {h}, {}, "back");
  ValueId o = b.op(Op::mul, {back, m}, {}, "o");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({s, c, d, q, o});
  auto plan = plan_memory(g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  auto buffer = [&](ValueId val) { return plan->buffer_of_value[val.v]; };
  auto pos = [&](ValueId val) { return static_cast<int>(g.value(val).producer.v); };
  EXPECT_NE(buffer(r), buffer(a));
  EXPECT_EQ(buffer(s), buffer(r));
  EXPECT_EQ(buffer(v), buffer(bb));
  EXPECT_EQ(buffer(d), buffer(bb));
  EXPECT_EQ(plan->of(bb).life.first, pos(bb));
  EXPECT_EQ(plan->of(bb).life.last, plan->num_positions - 1);  // d is a graph output
  EXPECT_NE(buffer(c), buffer(bb));
  EXPECT_NE(buffer(q), buffer(w));
  EXPECT_EQ(simulate(g, *plan), "");
  auto program = build_program(g, *plan);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  EXPECT_TRUE(check_program_races(*program).has_value());
  auto own = plan_memory(g, kOwnBuffers);
  ASSERT_TRUE(own.has_value());
  EXPECT_NE(own->buffer_of_value[r.v], own->buffer_of_value[a.v]);
  EXPECT_NE(own->buffer_of_value[v.v], own->buffer_of_value[bb.v]);
}

// Note [Parts] on a decoder's join at batch 1: u dies at c = concat(s, u), so u is written in its place in c's
// buffer, 128 bytes in (s is read again at the end and keeps its own); g = c * c over c; of g's halves, g1 (read
// once, at once) views its range of g, while g0 (read at the end) would hold all of g to there, above the bytes
// live at its slice: it gets a buffer of its own. At the concat, s and c's buffer are live (384 bytes, where
// s + u + c were 512). With a batch of two the halves are not contiguous: nothing is a part.
TEST(MemoryPlanner, ConcatInputsAndSlicesArePartsOfTheWholesBuffer) {
  for (int64_t batch : {1, 2}) {
    Graph g;
    Builder b(g);
    const TensorType t{DType::f32, {batch, 2, 16}};  // 128 bytes a batch element
    auto half = [](int64_t start) {
      return attrs({{"axis", int64_t{1}}, {"start", start}, {"end", start + 2}});
    };
    ValueId x = b.input(t, "x");
    ValueId sk = b.op(Op::relu, {x}, {}, "s");
    ValueId u = b.op(Op::relu, {sk}, {}, "u");
    ValueId c = b.op(Op::concat, {sk, u}, attrs({{"axis", int64_t{1}}}), "c");
    ValueId gr = b.op(Op::mul, {c, c}, {}, "g");
    ValueId g0 = b.op(Op::slice, {gr}, half(0), "g0");
    ValueId g1 = b.op(Op::slice, {gr}, half(2), "g1");
    ValueId r1 = b.op(Op::relu, {g1}, {}, "r1");
    ValueId late = b.op(Op::add, {g0, sk}, {}, "late");
    ASSERT_TRUE(b.ok()) << b.error()->str();
    g.set_outputs({r1, late});
    auto plan = plan_memory(g);
    ASSERT_TRUE(plan.has_value()) << plan.error().str();
    auto buffer = [&](ValueId v) { return plan->buffer_of_value[v.v]; };
    const int at_c = static_cast<int>(g.value(c).producer.v);
    int64_t live_at_c = 0;
    for (const PlannedBuffer& pb : plan->buffers)
      live_at_c += pb.life.first <= at_c && at_c <= pb.life.last ? pb.life.bytes : 0;
    EXPECT_EQ(buffer(gr), buffer(c));  // Note [Buffer reuse]
    EXPECT_NE(buffer(sk), buffer(c));
    EXPECT_NE(buffer(g0), buffer(c));
    if (batch == 1) {
      EXPECT_EQ(buffer(u), buffer(c));
      EXPECT_EQ(plan->offset_of_value[u.v], 128);
      EXPECT_EQ(plan->of(c).life.first, static_cast<int>(g.value(u).producer.v));
      EXPECT_EQ(plan->of(c).life.writer, g.value(u).producer);
      EXPECT_EQ(buffer(g1), buffer(c));
      EXPECT_EQ(plan->offset_of_value[g1.v], 128);
      EXPECT_EQ(live_at_c, 384);
    } else {
      EXPECT_NE(buffer(u), buffer(c));
      EXPECT_NE(buffer(g1), buffer(c));
      EXPECT_EQ(live_at_c, 1024);
    }
    for (uint32_t v = 0; v < g.num_values(); ++v)
      if (batch == 2 || (ValueId{v} != u && ValueId{v} != g1)) {
        EXPECT_EQ(plan->offset_of_value[v], 0);
      }
    EXPECT_EQ(simulate(g, *plan), "");
    auto program = build_program(g, *plan);
    ASSERT_TRUE(program.has_value()) << program.error().str();
    EXPECT_TRUE(check_program_races(*program).has_value());
    if (batch == 1) {  // where the kernels find them
      EXPECT_EQ(program->location(u).offset, program->location(c).offset + 128);
      EXPECT_EQ(program->location(g1).offset, program->location(gr).offset + 128);
    }
  }
}

TEST(MemoryPlanner, InPlaceUpdatesShareTheirParameterBuffer) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {10}};
  ValueId w = b.param(t, "w", "ones");
  ValueId x = b.input(t, "x");
  ValueId y = b.op(Op::mul, {x, w}, {}, "y");
  ValueId w_new = b.op(Op::sgd_update, {w, y}, attrs({{"lr", 0.1}}), "w_new");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.add_control_input(g.value(w_new).producer, g.value(y).producer);
  g.set_outputs({y});
  auto plan = plan_memory(g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  EXPECT_EQ(plan->buffer_of_value[w.v], plan->buffer_of_value[w_new.v]);
  EXPECT_TRUE(plan->of(w_new).life.persistent);
  EXPECT_EQ(plan->buffers.size(), 3u);  // w, x, y
}

TEST(MemoryPlanner, RejectsAGraphNotInScheduleOrder) {
  Graph g;
  Builder b(g);
  TensorType t{DType::f32, {4}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId c = b.op(Op::relu, {x}, {}, "c");
  ASSERT_TRUE(b.ok());
  g.add_control_input(g.value(a).producer, g.value(c).producer);  // a must now run after c
  auto plan = plan_memory(g);
  ASSERT_FALSE(plan.has_value());
  EXPECT_NE(plan.error().str().find("not in schedule order"), std::string::npos) << plan.error().str();
  auto s = schedule(g);
  ASSERT_TRUE(s.has_value()) << s.error().str();
  EXPECT_TRUE(plan_memory(*s).has_value());
}

TEST(MemoryPlanner, EmptyGraph) {
  Graph g;
  auto plan = plan_memory(g, PlanOptions{.budget_bytes = 0});
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->device_arena_bytes, 0);
  EXPECT_EQ(plan->lower_bound_bytes, 0);
}

}  // namespace
}  // namespace lms
