// The TFLMS memory simulator (sim/memory_sim.h): tiny graphs whose walks are worked out by hand below
// (Note [TFLMS memory walk] gives the rules), hand-built swap decisions for every case the rules name, the
// budget arithmetic, and properties on a real training graph with decide_tflms_swaps' decisions.
#include <gtest/gtest.h>

#include <random>

#include "lms/analysis/levels.h"
#include "lms/analysis/reachability.h"
#include "lms/analysis/tflms_swaps.h"
#include "lms/autodiff/optimizer.h"
#include "lms/ir/builder.h"
#include "lms/models/models.h"
#include "lms/sim/memory_sim.h"

namespace lms {
namespace {

// Every tensor of the tiny graphs is f32[2,2]: 16 bytes, so the curves below count in steps of 16.
const TensorType kT{DType::f32, {2, 2}};
constexpr int64_t kB = 16;

NodeId node_of(const Graph& g, ValueId v) { return g.value(v).producer; }

// The skip graph: a chain with two long edges (a -> h over 5 levels, b -> f over 3).
//   %x = input            level 0
//   %a = relu(%x)         1
//   %b = relu(%a)         2
//   %c = relu(%b)         3
//   %e = relu(%c)         4
//   %f = add(%e, %b)      5
//   %h = add(%f, %a)      6   (the graph output)
struct Skip {
  Graph g{"skip"};
  ValueId x, a, b, c, e, f, h;
  Levels levels;
  Skip() {
    Builder bld(g);
    x = bld.input(kT, "x");
    a = bld.op(Op::relu, {x}, {}, "a");
    b = bld.op(Op::relu, {a}, {}, "b");
    c = bld.op(Op::relu, {b}, {}, "c");
    e = bld.op(Op::relu, {c}, {}, "e");
    f = bld.op(Op::add, {e, b}, {}, "f");
    h = bld.op(Op::add, {f, a}, {}, "h");
    EXPECT_TRUE(bld.ok());
    g.set_outputs({h});
    levels = *compute_levels(g);
  }
  NodeId n(ValueId v) const { return node_of(g, v); }
};

// One swapped tensor with one group per listed consumer set.
TensorSwap swap_of(const Graph& g, ValueId v, std::vector<NodeId> near,
                   std::vector<std::pair<std::vector<NodeId>, std::optional<NodeId>>> groups) {
  TensorSwap s;
  s.value = v;
  s.source = node_of(g, v);
  s.near_consumers = std::move(near);
  s.bytes = g.value(v).type.bytes();
  for (auto& [consumers, trigger] : groups) s.groups.push_back(SwapInGroup{consumers, consumers.front(), trigger});
  return s;
}

SwapDecisions decisions(SyncMode mode, std::vector<TensorSwap> swaps) {
  SwapDecisions d;
  d.params.sync_mode = mode;
  d.swaps = std::move(swaps);
  for (const TensorSwap& s : d.swaps) {
    d.swap_out_bytes += s.bytes;
    d.swap_in_bytes += s.bytes * static_cast<int64_t>(s.groups.size());
  }
  return d;
}

std::vector<int64_t> units(std::initializer_list<int64_t> us) {
  std::vector<int64_t> out;
  for (int64_t u : us) out.push_back(u * kB);
  return out;
}

TEST(MemorySim, NoSwapWalkByHand) {
  // Holds: x by a; a by b and h; b by c and f; c by e; e by f; f by h; h is a graph output (never freed).
  //   L0 x +x                       16
  //   L1 a +a, x freed              32 -> 16
  //   L2 b +b (a still held by h)   32
  //   L3 c +c (b still held by f)   48
  //   L4 e +e, c freed              64 -> 48   <- the peak, first reached here
  //   L5 f +f, e and b freed        64 -> 32
  //   L6 h +h, f and a freed        48 -> 16
  Skip s;
  RecordingEvents rec(s.g);
  auto r = simulate_tflms_memory(s.g, s.levels, SwapDecisions{}, MemorySimOptions{}, &rec);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_TRUE(r->fits);
  EXPECT_EQ(r->level_bytes, units({1, 2, 2, 3, 4, 4, 3}));
  EXPECT_EQ(r->peak_transient_bytes, 4 * kB);
  EXPECT_EQ(r->peak_device_bytes, 4 * kB);
  EXPECT_EQ(r->peak_level, 4);
  EXPECT_EQ(r->peak_node, s.n(s.e));
  EXPECT_EQ(r->peak_host_bytes, 0);
  EXPECT_EQ(r->persistent_bytes, 0);
  // Hard minimum: the largest step working set is f's or h's (3 tensors); f comes first.
  EXPECT_EQ(r->min_device_bytes, 3 * kB);
  EXPECT_EQ(r->min_node, s.n(s.f));
  const std::vector<std::string> expected = {
      "L0 %x", "+dev %x 16 = 16",
      "L1 %a", "+dev %a 16 = 32", "-dev %x 16 = 16",
      "L2 %b", "+dev %b 16 = 32",
      "L3 %c", "+dev %c 16 = 48",
      "L4 %e", "+dev %e 16 = 64", "-dev %c 16 = 48",
      "L5 %f", "+dev %f 16 = 64", "-dev %e 16 = 48", "-dev %b 16 = 32",
      "L6 %h", "+dev %h 16 = 48", "-dev %f 16 = 32", "-dev %a 16 = 16"};
  EXPECT_EQ(rec.lines(), expected) << rec.text();
}

TEST(MemorySim, SyncSwapInWalkByHand) {
  // %a swapped: near consumer b, far consumer h (its own group, no trigger: a synchronous swap-in).
  // a's holds: b (near) + the swap-out; h holds the swap-in copy instead.
  //   L1 a: +a, x freed, then the swap-out starts: +host a@host           dev 32 -> 16, host 16
  //   L2 b: +b, b releases a; at the end of level 2 = level(a) + 1 the copy is done and a is freed
  //   L3 c: +c (b held by f)                                              32
  //   L4 e: +e, c freed                                                   48 -> 32  <- peak 48 (was 64)
  //   L5 f: +f, e and b freed                                             48 -> 16
  //   L6 h: a@in0 allocated and copied before h runs, the host copy freed, then +h, f and a@in0 freed
  Skip s;
  auto d = decisions(SyncMode::sync_in, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, std::nullopt}})});
  RecordingEvents rec(s.g);
  auto r = simulate_tflms_memory(s.g, s.levels, d, MemorySimOptions{}, &rec);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->level_bytes, units({1, 2, 2, 2, 3, 3, 3}));
  EXPECT_EQ(r->peak_transient_bytes, 3 * kB);
  EXPECT_EQ(r->peak_level, 4);
  EXPECT_EQ(r->peak_host_bytes, kB);
  const std::vector<std::string> expected = {
      "L0 %x", "+dev %x 16 = 16",
      "L1 %a", "+dev %a 16 = 32", "-dev %x 16 = 16", "+host %a@host 16 = 16", "copy %a@host",
      "L2 %b", "+dev %b 16 = 32", "done %a@host", "-dev %a 16 = 16",
      "L3 %c", "+dev %c 16 = 32",
      "L4 %e", "+dev %e 16 = 48", "-dev %c 16 = 32",
      "L5 %f", "+dev %f 16 = 48", "-dev %e 16 = 32", "-dev %b 16 = 16",
      "+dev %a@in0 16 = 32", "copy %a@in0", "done %a@in0", "-host %a@host 16 = 0",
      "L6 %h", "+dev %h 16 = 48", "-dev %f 16 = 32", "-dev %a@in0 16 = 16"};
  EXPECT_EQ(rec.lines(), expected) << rec.text();
}

TEST(MemorySim, TriggeredSwapInAllocatesAtTheTrigger) {
  // The same swap with trigger %e (level 4, an ancestor of h): a@in0 is allocated right after e runs and
  // stays through level 5, where f's step now holds b, e, f and a@in0:
  //   L4 e: +e 48, c freed 32, +a@in0 48
  //   L5 f: +f 64, e freed 48, b freed 32      <- the early prefetch costs what swapping saved
  //   L6 h: +h 48, f and a@in0 freed 16
  Skip s;
  auto d = decisions(SyncMode::async, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, s.n(s.e)}})});
  RecordingEvents rec(s.g);
  auto r = simulate_tflms_memory(s.g, s.levels, d, MemorySimOptions{}, &rec);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->level_bytes, units({1, 2, 2, 2, 3, 4, 3}));
  EXPECT_EQ(r->peak_transient_bytes, 4 * kB);
  EXPECT_EQ(r->peak_level, 5);
  EXPECT_EQ(r->peak_node, s.n(s.f));
  // The prefetch starts right after e and ends just before h.
  const auto& l = rec.lines();
  auto at = [&](const std::string& line) { return std::find(l.begin(), l.end(), line) - l.begin(); };
  EXPECT_EQ(at("+dev %a@in0 16 = 48"), at("-dev %c 16 = 32") + 1) << rec.text();
  EXPECT_EQ(at("copy %a@in0"), at("+dev %a@in0 16 = 48") + 1);
  EXPECT_EQ(at("done %a@in0"), at("L6 %h") - 2);  // then the host copy is freed, then h
}

// Two branches from x: %a (level 1) is read only by %h at level 4, so once swapped it has no near consumer.
//   %x = input; %a = relu(%x) L1; %p = relu(%x) L1; %b = relu(%p) L2; %c = relu(%b) L3; %h = add(%c, %a) L4
struct Branch {
  Graph g{"branch"};
  ValueId x, a, p, b, c, h;
  Levels levels;
  Branch() {
    Builder bld(g);
    x = bld.input(kT, "x");
    a = bld.op(Op::relu, {x}, {}, "a");
    p = bld.op(Op::relu, {x}, {}, "p");
    b = bld.op(Op::relu, {p}, {}, "b");
    c = bld.op(Op::relu, {b}, {}, "c");
    h = bld.op(Op::add, {c, a}, {}, "h");
    EXPECT_TRUE(bld.ok());
    g.set_outputs({h});
    levels = *compute_levels(g);
  }
};

TEST(MemorySim, SyncSwapOutFreesTheSourceOneLevelEarlier) {
  // Async swap-out (mode 2: sync swap-in only): the swap-out holds a to the end of level 2.
  //   L0 +x 16 | L1 +a 32, +p 48, x freed 32 | L2 +b 48, p freed 32, end: a freed 16
  //   L3 +c 32, b freed 16 | L4 +a@in0 32, +h 48, ...          curve 16 48 48 32 48
  // Sync swap-out (mode 3): the ops after a wait for its copy, so a is freed at the start of level 2:
  //   L2 starts at 16 (p), +b 32, p freed 16                    curve 16 48 32 32 48
  Branch s;
  for (SyncMode mode : {SyncMode::sync_in, SyncMode::sync_both}) {
    auto d = decisions(mode, {swap_of(s.g, s.a, {}, {{{node_of(s.g, s.h)}, std::nullopt}})});
    auto r = simulate_tflms_memory(s.g, s.levels, d, MemorySimOptions{});
    ASSERT_TRUE(r.has_value()) << r.error().str();
    EXPECT_EQ(r->level_bytes, mode == SyncMode::sync_in ? units({1, 3, 3, 2, 3}) : units({1, 3, 2, 2, 3}))
        << static_cast<int>(mode);
    EXPECT_EQ(r->peak_transient_bytes, 3 * kB);
  }
}

// %a read far away twice, two levels apart:
//   %x L0; %a = relu(%x) L1; %b = relu(%a) L2; %c = relu(%b) L3; %e = relu(%c) L4; %f = add(%e, %a) L5;
//   %k = relu(%f) L6; %h = add(%k, %a) L7
struct TwoFar {
  Graph g{"twofar"};
  ValueId x, a, b, c, e, f, k, h;
  Levels levels;
  TwoFar() {
    Builder bld(g);
    x = bld.input(kT, "x");
    a = bld.op(Op::relu, {x}, {}, "a");
    b = bld.op(Op::relu, {a}, {}, "b");
    c = bld.op(Op::relu, {b}, {}, "c");
    e = bld.op(Op::relu, {c}, {}, "e");
    f = bld.op(Op::add, {e, a}, {}, "f");
    k = bld.op(Op::relu, {f}, {}, "k");
    h = bld.op(Op::add, {k, a}, {}, "h");
    EXPECT_TRUE(bld.ok());
    g.set_outputs({h});
    levels = *compute_levels(g);
  }
  NodeId n(ValueId v) const { return node_of(g, v); }
};

TEST(MemorySim, GroupedSwapInsShareOneCopy) {
  // Separate swap-ins for f and h (G <= 1): each copy lives only through its consumer's step.
  //   L2 +b 32, end: a freed 16 | L3 +c 32, b freed 16 | L4 +e 32, c freed 16
  //   L5 +a@in0 32, +f 48, e and a@in0 freed 16 | L6 +k 32, f freed 16 | L7 +a@in1 32, +h 48, ...
  //   curve 16 32 32 32 32 48 32 48; the host copy is freed before h (the last group's target).
  // One group {f, h} (G >= 2): a@in0 is held by h too, through level 6: L6 +k 48; curve ... 48 48 48; the
  // host copy is freed before f.
  TwoFar s;
  auto split = decisions(SyncMode::sync_in, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.f)}, std::nullopt},
                                                                             {{s.n(s.h)}, std::nullopt}})});
  auto fused = decisions(SyncMode::sync_in, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.f), s.n(s.h)}, std::nullopt}})});
  RecordingEvents rs(s.g), rf(s.g);
  auto r1 = simulate_tflms_memory(s.g, s.levels, split, MemorySimOptions{}, &rs);
  auto r2 = simulate_tflms_memory(s.g, s.levels, fused, MemorySimOptions{}, &rf);
  ASSERT_TRUE(r1.has_value()) << r1.error().str();
  ASSERT_TRUE(r2.has_value()) << r2.error().str();
  EXPECT_EQ(r1->level_bytes, units({1, 2, 2, 2, 2, 3, 2, 3}));
  EXPECT_EQ(r2->level_bytes, units({1, 2, 2, 2, 2, 3, 3, 3}));
  auto index = [](const RecordingEvents& rec, const std::string& line) {
    const auto& l = rec.lines();
    return std::find(l.begin(), l.end(), line) - l.begin();
  };
  EXPECT_EQ(index(rs, "-host %a@host 16 = 0") + 1, index(rs, "L7 %h")) << rs.text();
  EXPECT_EQ(index(rf, "-host %a@host 16 = 0") + 1, index(rf, "L5 %f")) << rf.text();
  EXPECT_LT(index(rs, "+dev %a@in1 16 = 32"), static_cast<long>(rs.lines().size()));
  EXPECT_EQ(index(rf, "+dev %a@in1 16 = 32"), static_cast<long>(rf.lines().size()));  // no second copy
}

TEST(MemorySim, HostBudgetExceededIsTheFirstFailingAllocation) {
  // Swapping a (far: h) and b (far: f) keeps two host copies at once from level 2 to level 5: a@host from
  // level 1, b@host after b runs at level 2. A 16-byte host budget fails at b's swap-out with 0 bytes free.
  Skip s;
  auto d = decisions(SyncMode::sync_in, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, std::nullopt}}),
                                         swap_of(s.g, s.b, {s.n(s.c)}, {{{s.n(s.f)}, std::nullopt}})});
  MemorySimOptions o;
  o.host_bytes = kB;
  auto r = simulate_tflms_memory(s.g, s.levels, d, o);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_FALSE(r->fits);
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->placement, Placement::host);
  EXPECT_EQ(r->oom->kind, SimBufferKind::host_copy);
  EXPECT_EQ(r->oom->level, 2);
  EXPECT_EQ(r->oom->node, s.n(s.b));
  EXPECT_EQ(r->oom->value, s.b);
  EXPECT_EQ(r->oom->bytes, kB);
  EXPECT_EQ(r->oom->free, 0);
  EXPECT_EQ(r->peak_host_bytes, 2 * kB);  // the walk goes on past the failure
  std::string msg = sim_out_of_memory(s.g, *r).str();
  EXPECT_NE(msg.find("out of host memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host copy of %b"), std::string::npos) << msg;
  o.host_bytes = 2 * kB;
  r = simulate_tflms_memory(s.g, s.levels, d, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->fits);
}

TEST(MemorySim, DeviceOutOfMemoryNamesTheAllocation) {
  // No swap under 56 bytes: the first allocation past it is e's at level 4 (48 in use, 8 free).
  Skip s;
  MemorySimOptions o;
  o.device_bytes = 56;
  auto r = simulate_tflms_memory(s.g, s.levels, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->fits);
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->placement, Placement::device);
  EXPECT_EQ(r->oom->node, s.n(s.e));
  EXPECT_EQ(r->oom->value, s.e);
  EXPECT_EQ(r->oom->level, 4);
  EXPECT_EQ(r->oom->bytes, kB);
  EXPECT_EQ(r->oom->free, 8);
  EXPECT_EQ(r->peak_transient_bytes, 4 * kB);
  std::string msg = sim_out_of_memory(s.g, *r).str();
  EXPECT_EQ(msg.rfind("%e: out of device memory at level 4 (relu): allocating 16 B for %e with 8 B free of a "
                      "56 B budget", 0),
            0u)
      << msg;
  EXPECT_NE(msg.find("hard minimum is 48 B"), std::string::npos) << msg;
  o.device_bytes = 64;  // exactly the peak fits
  r = simulate_tflms_memory(s.g, s.levels, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->fits);
}

TEST(MemorySim, RatioAndPersistentBytes) {
  // %x input L0, %w param (persistent, 16 B) L0, %y = matmul(%x, %w) L1, %z = relu(%y) L2.
  // Transient walk: L0 +x 16 | L1 +y 32, x freed 16 | L2 +z 32, y freed 16: peak 32, with w 48.
  Graph g;
  Builder bld(g);
  ValueId x = bld.input(kT, "x");
  ValueId w = bld.param(kT, "w", "zeros");
  ValueId y = bld.op(Op::matmul, {x, w}, {}, "y");
  ValueId z = bld.op(Op::relu, {y}, {}, "z");
  ASSERT_TRUE(bld.ok()) << bld.error()->str();
  g.set_outputs({z});
  Levels lv = *compute_levels(g);
  MemorySimOptions o;
  o.device_bytes = 80;
  o.ratio = 0.5;  // TFLMS: 0.5 x (80 - 16) = 32 for the transients: fits exactly
  auto r = simulate_tflms_memory(g, lv, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->persistent_bytes, kB);
  EXPECT_EQ(r->budget_bytes, 32);
  EXPECT_EQ(r->transient_budget_bytes, 32);
  EXPECT_EQ(r->peak_transient_bytes, 32);
  EXPECT_EQ(r->peak_device_bytes, 48);
  EXPECT_TRUE(r->fits);
  o.ratio = 0.4;  // floor(0.4 x 64) = 25: y's allocation (16 in use) finds 9 free
  r = simulate_tflms_memory(g, lv, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->budget_bytes, 25);
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->value, y);
  EXPECT_EQ(r->oom->free, 9);
  o.ratio = 0.5;
  o.subtract_persistent = false;  // 0.5 x 80 = 40 for everything: 24 for the transients, y finds 8 free
  r = simulate_tflms_memory(g, lv, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->budget_bytes, 40);
  EXPECT_EQ(r->transient_budget_bytes, 24);
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->value, y);
  EXPECT_EQ(r->oom->free, 8);
  o.subtract_persistent = true;
  o.ratio = 1.0;
  o.device_bytes = 8;  // less than the parameters: nothing at all fits
  r = simulate_tflms_memory(g, lv, SwapDecisions{}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->fits);
  EXPECT_NE(sim_out_of_memory(g, *r).str().find("parameters and state (16 B) leave no device memory"),
            std::string::npos)
      << sim_out_of_memory(g, *r).str();
  for (double bad : {0.0, -0.5, 1.5}) {
    o.ratio = bad;
    EXPECT_FALSE(simulate_tflms_memory(g, lv, SwapDecisions{}, o).has_value()) << bad;
  }
}

TEST(MemorySim, WorkspaceCountsDuringItsStep) {
  // 32 workspace bytes for e: level 4 peaks at 64 + 32 = 96, and e's working set (c, e, workspace: 64)
  // becomes the hard minimum.
  Skip s;
  std::vector<int64_t> ws(s.g.num_nodes(), 0);
  ws[s.n(s.e).v] = 32;
  MemorySimOptions o;
  o.workspace_bytes = ws;
  RecordingEvents rec(s.g);
  auto r = simulate_tflms_memory(s.g, s.levels, SwapDecisions{}, o, &rec);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->level_bytes, (std::vector<int64_t>{16, 32, 32, 48, 96, 64, 48}));
  EXPECT_EQ(r->min_device_bytes, 64);
  EXPECT_EQ(r->min_node, s.n(s.e));
  const auto& l = rec.lines();
  auto e_step = std::find(l.begin(), l.end(), "L4 %e");
  ASSERT_NE(e_step, l.end());
  EXPECT_EQ(std::vector<std::string>(e_step, e_step + 5),
            (std::vector<std::string>{"L4 %e", "+dev %e 16 = 64", "+dev ws(%e) 32 = 96", "-dev %c 16 = 80",
                                      "-dev ws(%e) 32 = 48"}));
  o.workspace_bytes.pop_back();
  EXPECT_FALSE(simulate_tflms_memory(s.g, s.levels, SwapDecisions{}, o).has_value());
}

TEST(MemorySim, DecisionsNotForThisGraphAreErrors) {
  Skip s;
  auto run = [&](SwapDecisions d) { return simulate_tflms_memory(s.g, s.levels, d, MemorySimOptions{}); };
  // A trigger at the target's own level, and one at the source's.
  auto late = run(decisions(SyncMode::async, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, s.n(s.h)}})}));
  ASSERT_FALSE(late.has_value());
  EXPECT_NE(late.error().str().find("trigger is at level 6, not strictly between"), std::string::npos)
      << late.error().str();
  EXPECT_FALSE(run(decisions(SyncMode::async, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, s.n(s.a)}})})));
  // A consumer that does not read the tensor.
  auto stranger = run(decisions(SyncMode::sync_in, {swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.f)}, std::nullopt}})}));
  ASSERT_FALSE(stranger.has_value());
  EXPECT_NE(stranger.error().str().find("%f does not read it"), std::string::npos) << stranger.error().str();
  // A source that is not the producer; no groups.
  TensorSwap wrong = swap_of(s.g, s.a, {s.n(s.b)}, {{{s.n(s.h)}, std::nullopt}});
  wrong.source = s.n(s.b);
  EXPECT_FALSE(run(decisions(SyncMode::sync_in, {wrong})));
  TensorSwap empty = swap_of(s.g, s.a, {s.n(s.b)}, {});
  EXPECT_FALSE(run(decisions(SyncMode::sync_in, {empty})));
  // Levels of another graph.
  TwoFar other;
  EXPECT_FALSE(simulate_tflms_memory(s.g, other.levels, SwapDecisions{}, MemorySimOptions{}).has_value());
}

// Property: on a real training graph (resnet18, small stem, 32x32, batch 8, momentum), for random TFLMS
// parameters with synchronous swap-ins (modes 2, 3) every swapped tensor is resident on the device only while
// it would be without swapping (a swap-in copy only from its target to its last consumer, the device tensor
// only to its last near consumer or the end of level(source) + 1, before any far consumer), so the swapped
// curve is at most the no-swap curve at every level. Async modes prefetch early and may exceed it; there the
// property checked is the one the search relies on: fitting a budget means the peak is within it, and the
// walk's bookkeeping returns every transient byte (the last level ends with only the graph outputs).
class MemorySimProperty : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ModelOptions mo;
    mo.batch = 8;
    mo.image = {32};
    mo.small_stem = true;
    auto fwd = build_model("resnet18", mo);
    ASSERT_TRUE(fwd.has_value()) << fwd.error().str();
    auto tr = build_training_graph(*fwd, TrainingOptions{});
    ASSERT_TRUE(tr.has_value()) << tr.error().str();
    graph_ = new Graph(std::move(*tr));
    levels_ = new Levels(*compute_levels(*graph_));
    auto reach = compute_reachability(*graph_, *levels_);
    ASSERT_TRUE(reach.has_value()) << reach.error().str();
    reach_ = new Reachability(std::move(*reach));
  }
  static void TearDownTestSuite() {
    delete reach_;
    delete levels_;
    delete graph_;
  }
  static Graph* graph_;
  static Levels* levels_;
  static Reachability* reach_;
};
Graph* MemorySimProperty::graph_ = nullptr;
Levels* MemorySimProperty::levels_ = nullptr;
Reachability* MemorySimProperty::reach_ = nullptr;

TEST_F(MemorySimProperty, SwappingNeverRaisesTheCurveWithSyncSwapIns) {
  auto sim = MemorySimulator::create(*graph_, *levels_);
  ASSERT_TRUE(sim.has_value()) << sim.error().str();
  auto none = sim->run(SwapDecisions{}, MemorySimOptions{});
  ASSERT_TRUE(none.has_value());
  const int n = levels_->count();
  std::mt19937 rng(20240607);  // fixed seed: the same parameter sets every run
  int swapped_runs = 0;
  for (int i = 0; i < 40; ++i) {
    TflmsParams p;
    p.swapout_threshold = std::uniform_int_distribution<int>(1, n)(rng);
    p.swapin_ahead = std::uniform_int_distribution<int>(1, n)(rng);
    p.swapin_groupby = std::uniform_int_distribution<int>(0, n)(rng);
    p.sync_mode = static_cast<SyncMode>(std::uniform_int_distribution<int>(0, 3)(rng));
    auto d = decide_tflms_swaps(*graph_, *levels_, *reach_, p);
    ASSERT_TRUE(d.has_value()) << d.error().str();
    auto r = sim->run(*d, MemorySimOptions{});
    ASSERT_TRUE(r.has_value()) << r.error().str();
    if (!d->swaps.empty()) ++swapped_runs;
    const bool sync_in = p.sync_mode == SyncMode::sync_in || p.sync_mode == SyncMode::sync_both;
    if (sync_in) {
      for (int l = 0; l < n; ++l)
        ASSERT_LE(r->level_bytes[l], none->level_bytes[l])
            << "level " << l << " T=" << p.swapout_threshold << " sync=" << static_cast<int>(p.sync_mode);
      EXPECT_LE(r->peak_device_bytes, none->peak_device_bytes);
    }
    // Fitting exactly the simulated peak works, one byte less does not (the search's decisions rest on it).
    MemorySimOptions tight;
    tight.device_bytes = r->peak_device_bytes;
    auto fit = sim->run(*d, tight);
    ASSERT_TRUE(fit.has_value());
    EXPECT_TRUE(fit->fits);
    tight.device_bytes = r->peak_device_bytes - 1;
    auto miss = sim->run(*d, tight);
    ASSERT_TRUE(miss.has_value());
    EXPECT_FALSE(miss->fits);
    EXPECT_EQ(miss->peak_device_bytes, r->peak_device_bytes);
  }
  EXPECT_GT(swapped_runs, 10);  // the random parameters did swap something most of the time
}

TEST_F(MemorySimProperty, EveryByteIsReturned) {
  // With every tensor swapped as far as possible (T = 1) in each mode, the events balance: each allocation is
  // freed exactly once except the graph outputs, and the host ends empty.
  struct Balance : SimEvents {
    int64_t dev = 0, host = 0;
    void allocate(const SimBuffer& b, int64_t) override { (b.placement == Placement::device ? dev : host) += b.bytes; }
    void free(const SimBuffer& b, int64_t) override { (b.placement == Placement::device ? dev : host) -= b.bytes; }
  };
  int64_t outputs = 0;
  for (ValueId v : graph_->outputs()) outputs += graph_->is_persistent(v) ? 0 : graph_->value(v).type.bytes();
  for (int mode = 0; mode < 4; ++mode) {
    TflmsParams p;
    p.sync_mode = static_cast<SyncMode>(mode);
    auto d = decide_tflms_swaps(*graph_, *levels_, *reach_, p);
    ASSERT_TRUE(d.has_value()) << d.error().str();
    ASSERT_FALSE(d->swaps.empty());
    Balance bal;
    auto r = simulate_tflms_memory(*graph_, *levels_, *d, MemorySimOptions{}, &bal);
    ASSERT_TRUE(r.has_value()) << r.error().str();
    EXPECT_EQ(bal.dev, outputs) << mode;
    EXPECT_EQ(bal.host, 0) << mode;
    EXPECT_GT(r->peak_host_bytes, 0);
  }
}

}  // namespace
}  // namespace lms
