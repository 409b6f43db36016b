// The cpu backend's streams and events on a Program that uses all three streams: x -> relu -> swap_out (d2h)
// -> swap_in (h2d) -> relu -> mean. The copies run on their own threads, ordered only by the Program's
// events; the result must equal the reference backend's (which runs everything in order) on every step.
#include <gtest/gtest.h>

#include "backends/reference_test_util.h"
#include "lms/backends/reference/reference_backend.h"
#include "lms/ir/builder.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"
#ifdef LMS_HAVE_CPU_BACKEND
#include "lms/backends/cpu/cpu_backend.h"
#endif

namespace lms {
namespace {

TEST(CpuStreams, SwapsThroughTheCopyStreamsMatchReference) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  Graph g("swaps");
  Builder b(g);
  TensorType t{DType::f32, {64, 33}};
  ValueId x = b.input(t, "x");
  ValueId a = b.op(Op::relu, {x}, {}, "a");
  ValueId h = b.op(Op::swap_out, {a}, {}, "h");
  ValueId d = b.op(Op::swap_in, {h}, {}, "d");
  ValueId r = b.op(Op::relu, {d}, {}, "r");
  ValueId s = b.op(Op::mean, {r}, {}, "s");
  ASSERT_TRUE(b.ok()) << b.error()->str();
  g.set_outputs({s, r});
  ReferenceBackend reference;
  CpuBackend cpu;
  // One program per backend: the cpu one plans the workspaces of the cpu kernels.
  auto want_program = compile(g, {}, &reference);
  auto program = compile(g, {}, &cpu);
  ASSERT_TRUE(want_program.has_value()) << want_program.error().str();
  ASSERT_TRUE(program.has_value()) << program.error().str();
  ASSERT_GT(program->num_events(), 0u) << "the copies must be ordered by events";
  ASSERT_FALSE(program->stream_order(StreamId::d2h).empty());
  ASSERT_FALSE(program->stream_order(StreamId::h2d).empty());

  auto want_ex = Executor::create(*want_program, reference);
  auto got_ex = Executor::create(*program, cpu);
  ASSERT_TRUE(want_ex.has_value()) << want_ex.error().str();
  ASSERT_TRUE(got_ex.has_value()) << got_ex.error().str();
  ASSERT_TRUE(want_ex->initialize(0).has_value() && got_ex->initialize(0).has_value());
  constexpr int kSteps = 20;  // several steps: events are re-recorded and re-waited every step
  for (int step = 0; step < kSteps; ++step) {
    HostTensor input = ref_test::random(DType::f32, t.shape, 100 + step);
    Feed feed{x, &input};
    auto want = want_ex->step({&feed, 1});
    auto got = got_ex->step({&feed, 1});
    ASSERT_TRUE(want.has_value()) << want.error().str();
    ASSERT_TRUE(got.has_value()) << got.error().str();
    ASSERT_EQ(got->outputs.size(), want->outputs.size());
    for (size_t i = 0; i < want->outputs.size(); ++i)
      EXPECT_EQ(got->outputs[i].data, want->outputs[i].data) << "step " << step << " output " << i;
  }
#endif
}

}  // namespace
}  // namespace lms
