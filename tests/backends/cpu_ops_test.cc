// The cpu backend against the reference backend, op by op: one table of cases (op, input shapes, attributes),
// each run as a one-node Program through the Executor on both backends with the same random inputs. Every
// convolution case is also run as its two gradients (conv_backward_data, conv_backward_filter) and every
// matmul case as its two gradients (dA = dY B^T, dB = A^T dY, written with the transpose attributes), so a
// forward case checks three oneDNN primitives. Outputs are compared by the norm-wise relative error
// max|cpu - ref| / max|ref|: the reference accumulates in double and rounds once, oneDNN accumulates in f32 in
// its own blocked order, so bit-identity is not expected; 1e-5 is about a hundred f32 ulps at the largest
// output. Ops oneDNN does not cover yet run the reference kernel on the cpu backend and must match exactly.
// Adding a case is one line in kCases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

using ref_test::A;
using ref_test::B;
using ref_test::I;
using ref_test::L;

constexpr double kDefaultTolerance = 1e-5;

struct OpCase {
  std::string name;
  Op op;
  std::vector<Shape> inputs;  // f32 inputs, random in [-1, 1)
  Attributes attrs;
  double tolerance = kDefaultTolerance;  // norm-wise relative error allowed (0: bit-identical)
  int64_t dnnl_nodes = 0;                // how many nodes the cpu backend must run on oneDNN
};

// One row per case. Convolutions and matmuls are checked forward and as both gradients (see the file comment);
// the rest run the reference kernel on the cpu backend, so their tolerance is 0.
const std::vector<OpCase> kCases = {
    {"conv1d", Op::conv1d, {{2, 3, 11}, {4, 3, 3}}, A({{"stride", L({2})}, {"pad", L({1})}}), kDefaultTolerance, 1},
    {"conv2d", Op::conv2d, {{2, 3, 8, 8}, {5, 3, 3, 3}}, A({{"pad", L({1, 1})}}), kDefaultTolerance, 1},
    {"conv2d_stride", Op::conv2d, {{2, 4, 9, 7}, {6, 4, 3, 2}}, A({{"stride", L({2, 2})}, {"pad", L({1, 0})}}),
     kDefaultTolerance, 1},
    {"conv2d_dilated", Op::conv2d, {{1, 2, 9, 9}, {3, 2, 3, 3}}, A({{"dilation", L({2, 2})}, {"pad", L({2, 2})}}),
     kDefaultTolerance, 1},
    {"conv2d_groups", Op::conv2d, {{2, 6, 6, 6}, {4, 3, 3, 3}}, A({{"groups", I(2)}, {"pad", L({1, 1})}}),
     kDefaultTolerance, 1},
    {"conv2d_depthwise", Op::conv2d, {{2, 4, 7, 7}, {4, 1, 3, 3}}, A({{"groups", I(4)}, {"stride", L({2, 2})}}),
     kDefaultTolerance, 1},
    {"conv2d_1x1", Op::conv2d, {{2, 8, 5, 5}, {16, 8, 1, 1}}, {}, kDefaultTolerance, 1},
    {"conv3d", Op::conv3d, {{1, 2, 5, 6, 5}, {3, 2, 3, 3, 3}}, A({{"pad", L({1, 1, 1})}}), kDefaultTolerance, 1},
    {"matmul", Op::matmul, {{7, 13}, {13, 5}}, {}, kDefaultTolerance, 1},
    {"matmul_ta", Op::matmul, {{13, 7}, {13, 5}}, A({{"transpose_a", B(true)}}), kDefaultTolerance, 1},
    {"matmul_tb", Op::matmul, {{7, 13}, {5, 13}}, A({{"transpose_b", B(true)}}), kDefaultTolerance, 1},
    {"matmul_batched", Op::matmul, {{3, 4, 6, 9}, {3, 4, 9, 5}}, {}, kDefaultTolerance, 1},
    {"matmul_shared_b", Op::matmul, {{3, 6, 9}, {9, 5}}, A({{"transpose_a", B(false)}}), kDefaultTolerance, 1},
    {"matmul_batched_tt", Op::matmul, {{2, 9, 6}, {2, 5, 9}}, A({{"transpose_a", B(true)}, {"transpose_b", B(true)}}),
     kDefaultTolerance, 1},
    {"relu", Op::relu, {{4, 33}}, {}, 0, 0},
    {"add_broadcast", Op::add, {{4, 5, 6}, {6}}, {}, 0, 0},
    {"softmax", Op::softmax, {{3, 17}}, {}, 0, 0},
};

// The gradients of a conv or matmul case, as cases of their own: (dy, w) -> dx, (x, dy) -> dw, and for matmul
// dA = dY B^T (or its transposed forms) and dB = A^T dY. Shapes come from the forward's shape rule.
std::vector<OpCase> gradient_cases(const OpCase& c) {
  auto attrs = normalize_attrs(op_def(c.op), c.attrs);
  std::vector<TensorType> in;
  for (const Shape& s : c.inputs) in.push_back(TensorType{DType::f32, s});
  if (!attrs) return {};  // a broken row: EveryGradientCaseIsBuilt names it
  auto out = infer_types(c.op, in, *attrs);
  if (!out) return {};
  const Shape y = out->front().shape;
  std::vector<OpCase> g;
  if (c.op == Op::matmul) {
    const bool ta = c.attrs.get_bool("transpose_a", false), tb = c.attrs.get_bool("transpose_b", false);
    if (ta || tb || c.inputs[1].size() != 2 || c.inputs[0].size() != 2) return {};  // the plain 2-D form only
    g.push_back({c.name + ".grad_a", Op::matmul, {y, c.inputs[1]}, A({{"transpose_b", B(true)}}), c.tolerance, 1});
    g.push_back({c.name + ".grad_b", Op::matmul, {c.inputs[0], y}, A({{"transpose_a", B(true)}}), c.tolerance, 1});
    return g;
  }
  Attributes grad = c.attrs;
  const int rank = static_cast<int>(c.inputs[0].size()) - 2;
  // The gradient ops take every geometry attribute explicitly; the forward's defaults are the same values.
  if (!grad.has("stride")) grad.set("stride", L(IntList(rank, 1)));
  if (!grad.has("pad")) grad.set("pad", L(IntList(rank, 0)));
  if (!grad.has("dilation")) grad.set("dilation", L(IntList(rank, 1)));
  if (!grad.has("groups")) grad.set("groups", I(1));
  Attributes data = grad, filter = grad;
  data.set("x_shape", L(c.inputs[0]));
  filter.set("w_shape", L(c.inputs[1]));
  g.push_back({c.name + ".backward_data", Op::conv_backward_data, {y, c.inputs[1]}, data, c.tolerance, 1});
  g.push_back({c.name + ".backward_filter", Op::conv_backward_filter, {c.inputs[0], y}, filter, c.tolerance, 1});
  return g;
}

bool has_gradients(Op op) { return op == Op::conv1d || op == Op::conv2d || op == Op::conv3d || op == Op::matmul; }

std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (const OpCase& c : kCases) {
    all.push_back(c);
    if (has_gradients(c.op))
      for (OpCase& g : gradient_cases(c)) all.push_back(std::move(g));
  }
  return all;
}

// Runs one case as a one-node Program on `backend` with inputs drawn from `seed`; returns the outputs.
// (Unused, like relative_error, in a build without the cpu backend, where the test only skips.)
[[maybe_unused]] std::vector<HostTensor> run_case(const OpCase& c, Backend& backend, uint64_t seed,
                                                  [[maybe_unused]] int64_t* dnnl_nodes = nullptr) {
  Graph g(c.name);
  Builder b(g);
  std::vector<ValueId> inputs;
  std::vector<HostTensor> data;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(b.input(TensorType{DType::f32, c.inputs[i]}, "in" + std::to_string(i)));
    data.push_back(ref_test::random(DType::f32, c.inputs[i], seed + i));
  }
  std::vector<ValueId> outs = b.add(c.op, inputs, c.attrs, "out");
  EXPECT_TRUE(b.ok()) << c.name << ": " << b.error()->str();
  if (!b.ok()) return {};
  g.set_outputs(outs);
  auto program = compile(g);
  EXPECT_TRUE(program.has_value()) << c.name << ": " << program.error().str();
  if (!program) return {};
  auto ex = Executor::create(*program, backend);
  EXPECT_TRUE(ex.has_value()) << c.name << ": " << ex.error().str();
  if (!ex) return {};
  EXPECT_TRUE(ex->initialize(seed).has_value());
  std::vector<Feed> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.push_back(Feed{inputs[i], &data[i]});
  auto r = ex->step(feeds);
  EXPECT_TRUE(r.has_value()) << c.name << ": " << r.error().str();
  if (!r) return {};
#ifdef LMS_HAVE_CPU_BACKEND
  if (dnnl_nodes)
    if (auto* cpu = dynamic_cast<CpuBackend*>(&backend)) *dnnl_nodes = cpu->dnnl_nodes();
#endif
  return std::move(r->outputs);
}

// max|a - b| / max|b| (0 when b is all zeros and a equals it).
[[maybe_unused]] double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.type.num_elements(); ++i) {
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
    scale = std::max(scale, std::abs(b.get(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

// The table is expanded while tests are registered, where no assertion can run: check here that no row lost
// its gradients to a shape error (only batched or transposed matmuls skip them, by design).
TEST(CpuOpsTable, EveryGradientCaseIsBuilt) {
  for (const OpCase& c : kCases) {
    if (!has_gradients(c.op)) continue;
    bool plain_matmul = c.op == Op::matmul && c.attrs.empty() && c.inputs[0].size() == 2 && c.inputs[1].size() == 2;
    if (c.op != Op::matmul || plain_matmul) {
      EXPECT_EQ(gradient_cases(c).size(), 2u) << c.name;
    }
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
  int64_t dnnl_nodes = -1;
  std::vector<HostTensor> got = run_case(c, cpu, kSeed, &dnnl_nodes);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(dnnl_nodes, c.dnnl_nodes) << c.name << ": nodes run by oneDNN";
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].type, want[i].type);
    double err = relative_error(got[i], want[i]);
    if (c.tolerance == 0)
      EXPECT_EQ(got[i].data, want[i].data) << c.name << " output " << i << " (relative error " << err << ")";
    else
      EXPECT_LT(err, c.tolerance) << c.name << " output " << i;
  }
  // The same case again on a fresh cpu backend: bit-identical (LMS requires repeatable runs).
  CpuBackend again;
  std::vector<HostTensor> repeat = run_case(c, again, kSeed);
  ASSERT_EQ(repeat.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(repeat[i].data, got[i].data) << c.name << ": repeat run";
#endif
}

INSTANTIATE_TEST_SUITE_P(Table, CpuOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

}  // namespace
}  // namespace lms
