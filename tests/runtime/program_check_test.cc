// The Program race check: every Program build_program makes (random graphs with swaps on the copy streams and
// workspaces) passes it, and removing waits from one is reported as a race naming
// the two nodes (a node's waits all removed, or the one wait guarding a reuse), so a racy Program is caught by a check, not by luck.
#include <gtest/gtest.h>

#include <random>

#include "lms/ir/builder.h"
#include "lms/runtime/program_check.h"

namespace lms {

// Test-only access to a Program's waits (the Program is otherwise immutable).
struct ProgramTestAccess {
  static std::vector<std::vector<EventId>>& waits(Program& p) { return p.waits_; }
};

namespace {

// x -> a = relu(x) -> h = swap_out(a) -> d = swap_in(h) -> r = relu(d) -> s = mean(r), plus a second chain that
// reuses a's space after the swap-out read it: copies on both copy streams, ordered only by events.
Graph swap_graph() {
  Graph g("swaps");
  Builder b(g);
  TensorType t{DType::f32, {64, 33}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId e = b.op(Op::relu, {x}, {}, "e");
  ValueId f = b.op(Op::relu, {e}, {}, "f");
  ValueId d = b.op(Op::swap_in, {h}, {}, "d");
  ValueId r = b.op(Op::add, {d, f}, {}, "r");
  ValueId s = b.op(Op::mean, {r}, {}, "s");
  EXPECT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({s});
  return g;
}

TEST(ProgramRaces, BuiltProgramsAreRaceFreeAndEveryMissingWaitIsCaught) {
  // Every value in a buffer of its own: with r written over d's buffer (Note [Buffer reuse]) the mean lands on
  // the swap-out's space and waits for it, which r's wait for the swap-in already implies.
  auto program = compile(swap_graph(), PlanOptions{.reuse_buffers = false});
  ASSERT_TRUE(program.has_value()) << program.error().str();
  ASSERT_TRUE(check_program_races(*program).has_value()) << check_program_races(*program).error().str();
  auto reused = compile(swap_graph());
  ASSERT_TRUE(reused.has_value()) << reused.error().str();
  EXPECT_TRUE(check_program_races(*reused).has_value()) << check_program_races(*reused).error().str();
  // A node's waits may overlap (waiting for a swap-in implies its swap-out finished), so dropping one of
  // several can be harmless; dropping all of a node's waits never is.
  int waits = 0;
  for (NodeId n : program->graph().node_ids()) {
    if (program->waits(n).empty()) continue;
    Program racy = *program;
    ProgramTestAccess::waits(racy)[n.v].clear();
    auto r = check_program_races(racy);
    ASSERT_FALSE(r.has_value()) << "dropping the waits of node #" << n.v << " went unnoticed";
    EXPECT_EQ(r.error().str().rfind("race: ", 0), 0u) << r.error().str();
    ++waits;
  }
  EXPECT_GE(waits, 3) << "the graph must need waits at every stream boundary";
}

TEST(ProgramRaces, ReuseWithoutWaitingForAnotherStreamsReaderIsCaught) {
  // a's space is reused by e or f (same size, a dead after the swap-out); the swap-out on d2h reads a, so the
  // reusing writer must wait for it. Find that wait and drop it: the error names the reuse.
  auto program = compile(swap_graph());
  ASSERT_TRUE(program.has_value());
  const Graph& g = program->graph();
  const NodeId swap_out = g.value(*g.find_value("h")).producer;
  bool found = false;
  for (NodeId n : g.node_ids()) {
    if (n == g.value(*g.find_value("d")).producer) continue;  // the swap-in waits for the swap-out as its input
    auto& waits = ProgramTestAccess::waits(const_cast<Program&>(*program))[n.v];
    for (size_t i = 0; i < waits.size() && !found; ++i) {
      if (program->recorded(swap_out) != waits[i]) continue;
      Program racy = *program;
      auto& w = ProgramTestAccess::waits(racy)[n.v];
      w.erase(w.begin() + static_cast<std::ptrdiff_t>(i));
      auto r = check_program_races(racy);
      ASSERT_FALSE(r.has_value());
      EXPECT_NE(r.error().str().find("over %a without waiting for %h"), std::string::npos) << r.error().str();
      found = true;
    }
  }
  EXPECT_TRUE(found) << "some compute node must reuse a's space after the swap-out";
}

// The planner never writes an output over a buffer a copy reads (Note [Buffer reuse]): a swap-out may still be
// reading it. A plan forged to do so, b = relu(a) written over a while a is being swapped out, is a race the
// check names.
TEST(ProgramRaces, WritingOverABufferACopyStillReadsIsCaught) {
  Graph g("forged");
  Builder b(g);
  const TensorType t{DType::f32, {64}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId r = b.op(Op::relu, {a}, {}, "b");
  ValueId back = b.op(Op::swap_in, {h}, {}, "back");
  ValueId s = b.op(Op::add, {r, back}, {}, "s");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({s});
  auto plan = plan_memory(g);
  ASSERT_TRUE(plan.has_value()) << plan.error().str();
  ASSERT_NE(plan->buffer_of_value[r.v], plan->buffer_of_value[a.v]) << "the planner must not reuse a";
  MemoryPlan forged = *plan;
  const int32_t into = forged.buffer_of_value[a.v];
  forged.buffers[static_cast<size_t>(into)].life.last = forged.of(r).life.last;
  forged.buffer_of_value[r.v] = into;
  auto program = build_program(g, forged);
  ASSERT_TRUE(program.has_value()) << program.error().str();
  auto races = check_program_races(*program);
  ASSERT_FALSE(races.has_value());
  EXPECT_NE(races.error().str().find("writes %b over %a without waiting for %h"), std::string::npos)
      << races.error().str();
}

}  // namespace
}  // namespace lms
