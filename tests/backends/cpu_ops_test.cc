// The cpu backend against the reference backend, op by op, over the cross-backend table (op_cases.h): each case
// as a one-node Program through the Executor on both backends with the same random inputs, and again as a
// direct kernel call with a planned workspace of exactly dnnl_workspace_bytes (computed from types alone).
// Tolerances are the table's. A case whose op silently falls back to the reference kernel fails (`fast_nodes`).
#include "backends/op_cases.h"

#include "lms/backends/reference/reference_backend.h"
#ifdef LMS_HAVE_CPU_BACKEND
#include <omp.h>

#include "lms/backends/cpu/cpu_backend.h"
#endif

namespace lms {
namespace {

using namespace op_cases;

#ifdef LMS_HAVE_CPU_BACKEND
// A case as one direct call of the cpu backend's kernel (or the reference kernel it falls back to), given a
// workspace of dnnl_workspace_bytes - `shrink` bytes. `fast`: the cpu backend's own kernel ran.
Result<DirectCall> run_cpu_call(const OpCase& c, uint64_t seed, bool* fast = nullptr, int64_t shrink = 0) {
  cpu::DnnlContextPtr ctx = LMS_TRY(cpu::make_dnnl_context());
  return run_direct_call(
      c, seed, [&](const KernelCall& call) { return cpu::dnnl_workspace_bytes(*ctx, call); },
      [&](const KernelCall& call) -> Result<void> {
        auto kernel = LMS_TRY(cpu::prepare_dnnl_kernel(*ctx, call));
        if (fast) *fast = kernel != nullptr;
        return kernel ? kernel->run() : run_reference_kernel(call);
      },
      shrink);
}
#endif

// The table is expanded while tests are registered, where no assertion can run: check here that no row lost
// its gradients to a shape error (only batched or transposed matmuls skip them, by design).
TEST(OpTable, EveryGradientCaseIsBuilt) {
  for (const OpCase& c : kCases) {
    EXPECT_FALSE(forward_types(c).empty()) << c.name << ": the row does not pass its op's shape rule";
    if (!has_gradients(c)) continue;
    const bool plain_matmul =
        c.op == Op::matmul && c.attrs.empty() && c.inputs[0].shape.size() == 2 && c.inputs[1].shape.size() == 2;
    if (c.op == Op::matmul && !plain_matmul) continue;
    const size_t expected = is_conv(c.op) || c.op == Op::matmul ? 2 : is_max_pool(c.op) ? 3 : 1;
    EXPECT_EQ(gradient_cases(c).size(), expected) << c.name;
  }
}

class CpuOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(CpuOps, MatchesReference) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 17;
  ReferenceBackend reference;
  CpuBackend cpu;
  std::vector<HostTensor> want = run_case(c, reference, kSeed);
  std::string kernel;
  std::vector<HostTensor> got = run_case(c, cpu, kSeed, &kernel);
  EXPECT_EQ(cpu.dnnl_nodes(), c.fast_nodes) << c.name << ": nodes not run by the reference kernel";
  // lms profile's "kernel": oneDNN's primitives and the backend's own loops, or the reference kernel
  if (c.fast_nodes > 0)
    EXPECT_TRUE(!kernel.empty() && kernel != "reference kernel") << c.name << ": " << kernel;
  else
    EXPECT_EQ(kernel, "reference kernel") << c.name;
  expect_match(c, "(executor)", got, want, c.tolerance);
  // The same case again on a fresh cpu backend: bit-identical (LMS requires repeatable runs).
  CpuBackend again;
  std::vector<HostTensor> repeat = run_case(c, again, kSeed);
  ASSERT_EQ(repeat.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(repeat[i].data, got[i].data) << c.name << ": repeat run";
  // As one direct kernel call with a poisoned workspace of exactly the bytes asked for.
  bool fast = false;
  auto direct = run_cpu_call(c, kSeed, &fast);
  auto direct_want = run_reference_call(c, kSeed);
  ASSERT_TRUE(direct.has_value()) << c.name << ": " << direct.error().str();
  ASSERT_TRUE(direct_want.has_value()) << c.name << ": " << direct_want.error().str();
  EXPECT_EQ(fast, c.fast_nodes > 0) << c.name << ": direct call";
  expect_match(c, "(direct call)", direct->outputs, direct_want->outputs, c.tolerance);
#endif
}

INSTANTIATE_TEST_SUITE_P(Table, CpuOps, ::testing::ValuesIn(all_cases()), test_name);

// A workspace smaller than dnnl_workspace_bytes is refused at prepare time, naming the op and both sizes
// (batch_norm_grad always needs scratch: the variances it recovers from invstd).
TEST(CpuKernels, TooSmallWorkspaceIsAnError) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  const OpCase c{"bn_grad", Op::batch_norm_grad, {{4, 3, 5}, {4, 3, 5}, {3}, {3}, Pos({3})}, {}};
  auto exact = run_cpu_call(c, 1);
  ASSERT_TRUE(exact.has_value()) << exact.error().str();
  ASSERT_GT(exact->workspace, 0);
  auto shrunk = run_cpu_call(c, 1, nullptr, 1);
  ASSERT_FALSE(shrunk.has_value());
  const std::string msg = shrunk.error().str();
  EXPECT_NE(msg.find("batch_norm_grad"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(exact->workspace)), std::string::npos) << msg;
#endif
}

// Workspace sizes are a pure function of types and attributes: asking twice gives the same bytes, and an op
// whose kernel needs no scratch (a relu) asks for none.
TEST(CpuKernels, WorkspaceBytesAreDeterministic) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  for (const OpCase& c : all_cases()) {
    auto a = run_cpu_call(c, 3), b = run_cpu_call(c, 3);
    ASSERT_TRUE(a.has_value() && b.has_value()) << c.name;
    EXPECT_EQ(a->workspace, b->workspace) << c.name;
    EXPECT_EQ(a->workspace % 64, 0) << c.name;
    if (c.op == Op::relu) {
      EXPECT_EQ(a->workspace, 0) << c.name;
    }
  }
#endif
}

// The table's *_wide rows (and their gradient cases), above the own loops' threading grain, give the same bits on
// one OpenMP thread and on two: the forward loss sums its per-position terms in position order afterwards, the
// argmax pooling, its gradient and the optimizer updates are element- or position-wise.
TEST(CpuKernels, OwnLoopsGiveTheSameBitsOnAnyThreadCount) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  const int threads = omp_get_max_threads();
  int wide = 0;
  for (const OpCase& c : all_cases()) {
    if (c.name.find("_wide") == std::string::npos) continue;
    ++wide;
    std::vector<std::vector<HostTensor>> outputs;
    for (int n : {1, 2}) {
      omp_set_num_threads(n);
      bool fast = false;
      auto r = run_cpu_call(c, 5, &fast);
      ASSERT_TRUE(r.has_value()) << c.name << ": " << r.error().str();
      EXPECT_TRUE(fast) << c.name << ": ran the reference kernel";
      outputs.push_back(std::move(r->outputs));
    }
    omp_set_num_threads(threads);
    ASSERT_EQ(outputs[0].size(), outputs[1].size()) << c.name;
    for (size_t o = 0; o < outputs[0].size(); ++o)
      EXPECT_TRUE(outputs[0][o].data == outputs[1][o].data) << c.name << ": output " << o << " differs";
  }
  EXPECT_GE(wide, 9);
#endif
}

}  // namespace
}  // namespace lms
