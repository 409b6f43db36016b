// The cuda backend against the reference backend over the cross-backend table (op_cases.h), in two ways.
// On the host, in every build: the own-kernel dispatcher (cuda_ops.h) runs its element functions in host loops
// (kernel_fns.h, the code the GPU runs), as direct kernel calls with a poisoned workspace of exactly
// own_workspace_bytes: bit-identical to the reference on every own op, since both compute in double in the same
// order. On the GPU, when one is present (else skipped, saying why): every case as a one-node Program through the
// Executor on the cuda backend, within cuda_tolerance, and bit-identical when run again; and the convolutions at
// batch 5 in forced batch chunks.
#include <algorithm>
#include <functional>
#include <numeric>

#include "backends/gpu_presence.h"
#include "backends/op_cases.h"

#ifdef LMS_HAVE_CUDA_BACKEND
#include "lms/backends/cuda/cuda_dnn.h"
#endif
#include "lms/backends/cuda/cuda_ops.h"
#include "lms/backends/cuda/kernel_fns.h"
#include "lms/backends/cuda/pool_fns.h"
#include "lms/backends/reference/reference_backend.h"
#include "lms/runtime/backend_registry.h"

namespace lms {
namespace {

using namespace op_cases;

// The cases the own kernels run: own ops, and pooling with ceil_mode (cuda::is_own_call).
bool is_own_case(const OpCase& c) {
  return cuda::is_own_op(c.op) || ((is_max_pool(c.op) || is_avg_pool(c.op)) && c.attrs.get_bool("ceil_mode", false));
}

// The cuda backend's tolerance for a case (TF32 off). cuDNN and cuBLAS compute in the data type in their own order:
// convolutions and batch norm (forward; its gradient is an own kernel) 1e-4 (their algorithms split and reorder long
// sums), max pooling 0 (a selection), matmul and average pooling the table's. The own kernels compute in double in the
// reference's order with no FMA contraction (--fmad=false), so they give the reference's bits, except where CUDA's exp,
// log, erf, tanh or pow may differ from glibc's in the last double bit, which can flip a rounding: 1e-6 there. f64 rows
// on cuDNN and cuBLAS: 1e-12 (double sums in another order; the table's 0 there is the cpu backend's reference
// fallback).
double cuda_tolerance(const OpCase& c) {
  if (c.inputs[0].dtype == DType::f64 && !is_own_case(c)) return 1e-12;
  switch (c.op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
    case Op::conv_backward_data:
    case Op::conv_backward_filter:
    case Op::batch_norm: return 1e-4;
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d:
    case Op::max_pool_grad: return 0;
    case Op::gelu:
    case Op::gelu_grad:
    case Op::silu:
    case Op::silu_grad:
    case Op::sigmoid:
    case Op::tanh:
    case Op::sqrt:
    case Op::exp:  // the device's exp and log in double may differ from the host's libm by an ulp
    case Op::log:
    case Op::softplus:
    case Op::softplus_grad:
    case Op::softmax:
    case Op::softmax_grad:
    case Op::cross_entropy:
    case Op::cross_entropy_grad:
    case Op::adam_update: return 1e-6;
    default: return is_own_case(c) ? 0 : c.tolerance;
  }
}

std::vector<OpCase> own_cases() {
  std::vector<OpCase> own;
  for (OpCase& c : all_cases())
    if (is_own_case(c)) own.push_back(std::move(c));
  return own;
}

// A case as one direct call of the own kernel in host mode; `status` receives the kernels' status word.
Result<DirectCall> run_own_call(const OpCase& c, uint64_t seed, int32_t& status, int64_t shrink = 0,
                                bool over_input = false) {
  status = cuda::kStatusOk;
  const cuda::Launcher host{true, nullptr, &status};
  return run_direct_call(
      c, seed, cuda::own_workspace_bytes,
      [&](const KernelCall& call) -> Result<void> {
        std::optional<cuda::OwnKernel> k = LMS_TRY(cuda::prepare_own_kernel(call, host));
        if (!k) return fail("{} is not an own kernel", op_def(c.op).name);
        return (*k)();
      },
      shrink, over_input);
}

class CudaOwnKernelsOnHost : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOwnKernelsOnHost, MatchReferenceBitForBit) {
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 17;
  int32_t status = -1;
  auto got = run_own_call(c, kSeed, status);
  auto want = run_reference_call(c, kSeed);
  ASSERT_TRUE(got.has_value()) << c.name << ": " << got.error().str();
  ASSERT_TRUE(want.has_value()) << c.name << ": " << want.error().str();
  EXPECT_EQ(status, cuda::kStatusOk) << c.name;
  expect_match(c, "(own kernel on the host)", got->outputs, want->outputs, 0);
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOwnKernelsOnHost, ::testing::ValuesIn(own_cases()), test_name);

// The element functions written over their input (Note [Buffer reuse]: the planner gives such an output its
// input's buffer) give the bits of a fresh output. On the GPU, buffer_reuse_test.cc runs them through Programs.
class CudaOwnKernelsOverTheirInput : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOwnKernelsOverTheirInput, GiveTheBitsOfAFreshOutput) {
  const OpCase& c = GetParam();
  int32_t status = -1;
  auto got = run_own_call(c, 29, status, 0, /*over_input=*/true);
  auto want = run_own_call(c, 29, status);
  ASSERT_TRUE(got.has_value()) << c.name << ": " << got.error().str();
  ASSERT_TRUE(want.has_value()) << c.name << ": " << want.error().str();
  expect_match(c, "(own kernel over its input)", got->outputs, want->outputs, 0);
}

std::vector<OpCase> own_reusing_cases() {
  std::vector<OpCase> cases;
  for (OpCase& c : own_cases())
    if (reuses_input(c)) cases.push_back(std::move(c));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOwnKernelsOverTheirInput, ::testing::ValuesIn(own_reusing_cases()), test_name);

// Note [Parts] (plan/liveness.h): a concat whose second input already lies in its place in the output (which the
// kernels do not copy), and a slice whose output is its range of the input (a view: nothing to copy), give the bits
// of separate buffers, with the own kernels on the host and with the reference kernels.
TEST(CudaOwnKernelsOnHost, ConcatAndSlicePartsInPlace) {
  const TensorType half{DType::f32, {1, 2, 3}}, whole{DType::f32, {1, 4, 3}};
  std::vector<float> a(6), out(12, -1.0f), want(12);
  std::iota(a.begin(), a.end(), 1.0f);
  std::iota(want.begin(), want.end(), 1.0f);
  const Attributes concat_attrs = *normalize_attrs(op_def(Op::concat), attrs({{"axis", int64_t{1}}}));
  const Attributes slice_attrs =
      *normalize_attrs(op_def(Op::slice), attrs({{"axis", int64_t{1}}, {"start", int64_t{2}}, {"end", int64_t{4}}}));
  int32_t status = cuda::kStatusOk;
  const cuda::Launcher host{true, nullptr, &status};
  using Run = std::function<Result<void>(const KernelCall&)>;
  const Run own = [&](const KernelCall& call) -> Result<void> {
    std::optional<cuda::OwnKernel> k = LMS_TRY(cuda::prepare_own_kernel(call, host));
    if (!k) return fail("not an own kernel");
    return (*k)();
  };
  for (const auto& [name, run] : {std::pair<const char*, Run>{"own", own}, {"reference", run_reference_kernel}}) {
    std::fill(out.begin(), out.end(), -1.0f);
    std::copy(want.begin() + 6, want.end(), out.begin() + 6);  // the producer wrote it in its place
    const std::vector<TensorRef> ins = {{&half, a.data()}, {&half, out.data() + 6}};
    const std::vector<TensorRef> outs = {{&whole, out.data()}};
    ASSERT_TRUE(run(KernelCall{Op::concat, &concat_attrs, ins, outs, nullptr, 0}).has_value()) << name;
    EXPECT_EQ(out, want) << name;
    const std::vector<TensorRef> viewed = {{&half, out.data() + 6}};
    const std::vector<TensorRef> from = {{&whole, out.data()}};
    ASSERT_TRUE(run(KernelCall{Op::slice, &slice_attrs, from, viewed, nullptr, 0}).has_value()) << name;
    EXPECT_EQ(out, want) << name;
  }
  EXPECT_EQ(status, cuda::kStatusOk);
}

// cuBLAS is loaded at run time, not linked (cublas_api.h): on a machine that built the cuda backend the library
// is found and every entry point the backend calls resolves, GPU or not.
TEST(CudaCublas, LoadsAtRunTimeWithEveryEntryPoint) {
#ifndef LMS_HAVE_CUDA_BACKEND
  GTEST_SKIP() << "the cuda backend is not in this build";
#else
  auto path = cuda::load_cublas();
  ASSERT_TRUE(path.has_value()) << path.error().str();
  EXPECT_NE(path->find("libcublas"), std::string::npos) << *path;
  auto again = cuda::load_cublas();  // once per process: the same library
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *path);
#endif
}

// constant has no inputs to infer its type from, so it is not a table row: every dtype's fill, against the
// reference's.
TEST(CudaOwnKernelsOnHost, ConstantFillsLikeTheReference) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    const TensorType type{t, {3, 5}};
    Attributes attrs;
    attrs.set("value", F(-2.75));
    HostTensor got(type), want(type);
    std::vector<TensorRef> out_got = {{&type, got.data.data()}}, out_want = {{&type, want.data.data()}};
    int32_t status = 0;
    auto k = cuda::prepare_own_kernel(KernelCall{Op::constant, &attrs, {}, out_got, nullptr, 0},
                                      cuda::Launcher{true, nullptr, &status});
    ASSERT_TRUE(k.has_value() && *k) << dtype_name(t);
    ASSERT_TRUE((**k)().has_value()) << dtype_name(t);
    ASSERT_TRUE(run_reference_kernel(KernelCall{Op::constant, &attrs, {}, out_want, nullptr, 0}).has_value());
    EXPECT_EQ(got.data, want.data) << dtype_name(t);
  }
}

// batch_norm_grad's sums in lanes (kernel_fns.h BnGradLanes): the table's channels have fewer elements than the
// dispatcher's lanes, one element a lane, and few enough lanes to add directly, so this runs the element functions
// with fewer lanes than a channel's 3 * 7 elements, stepping across samples (lanes 8 and 20 pass the 7 spatial
// elements), and with as many (the reference's order: bit-identical), each with the lanes added directly and in
// groups of 4 (BnGradGroups; the last group short where 4 does not divide the lanes). Other orders than the
// reference's: within 1e-6 of it. dx is written over dy each time, as the planner may place it.
TEST(CudaOwnKernelsOnHost, BatchNormGradSumsInLanes) {
  const OpCase c{"bn_grad_lanes", Op::batch_norm_grad, {{3, 4, 7}, {3, 4, 7}, {4}, {4}, Pos({4})}, {}};
  auto want = run_reference_call(c, 5);
  ASSERT_TRUE(want.has_value()) << want.error().str();
  constexpr int64_t kChannels = 4, kSpatial = 7, kCount = 21, kGroup = 4;
  for (int64_t lanes : {1, 2, 5, 7, 8, 20, 21})
    for (bool grouped : {false, true}) {
      std::vector<HostTensor> in = op_cases::inputs_of(c, 5);
      HostTensor dgamma(TensorType{DType::f32, {kChannels}}), dbeta(TensorType{DType::f32, {kChannels}});
      const int64_t groups = (lanes + kGroup - 1) / kGroup;
      std::vector<double> lane_sums(2 * kChannels * lanes, -1.0), group_sums(2 * kChannels * groups, -1.0),
          sums(2 * kChannels, -1.0);
      const float *dy = in[0].as<float>().data(), *x = in[1].as<float>().data(), *gamma = in[2].as<float>().data(),
                  *mean = in[3].as<float>().data(), *invstd = in[4].as<float>().data();
      float* dx = in[0].as<float>().data();  // over dy
      const cuda::BnGradLanes<float> lane{dy, x, mean, invstd, lane_sums.data(), kChannels, kSpatial, kCount, lanes};
      for (int64_t i = 0; i < kChannels * lanes; ++i) lane(i);
      if (grouped) {
        const cuda::BnGradGroups group{lane_sums.data(), group_sums.data(), lanes, kGroup, groups};
        for (int64_t j = 0; j < kChannels * groups; ++j) group(j);
      }
      const cuda::BnGradChannels<float> channel{grouped ? group_sums.data() : lane_sums.data(), sums.data(),
                                                dgamma.as<float>().data(), dbeta.as<float>().data(),
                                                grouped ? groups : lanes};
      for (int64_t ch = 0; ch < kChannels; ++ch) channel(ch);
      const cuda::BnGradData<float> data{dy,   x,        gamma,    mean,   invstd, sums.data(),
                                         dx,   kChannels, kSpatial, kCount, true};
      for (int64_t i = 0; i < in[0].type.num_elements(); ++i) data(i);
      const std::vector<HostTensor> got = {in[0], dgamma, dbeta};
      const bool reference_order = lanes == kCount && (!grouped || groups == 1);
      expect_match(c, fmt::format("(lanes {}, {})", lanes, grouped ? "grouped" : "direct"), got, want->outputs,
                   reference_order ? 0 : 1e-6);
    }
}

// The dispatcher's grouped path (cuda_ops_nn.cc): 400 elements a channel are 400 lanes, past the few hundred a
// channel adds directly, so the lanes go through BnGradGroups; within 1e-6 of the reference, and bit-identical
// when dx is written over dy.
TEST(CudaOwnKernelsOnHost, BatchNormGradGroupsManyLanes) {
  const OpCase c{"bn_grad_grouped", Op::batch_norm_grad, {{2, 3, 200}, {2, 3, 200}, {3}, {3}, Pos({3})}, {}};
  int32_t status = -1;
  auto got = run_own_call(c, 7, status);
  auto over = run_own_call(c, 7, status, 0, /*over_input=*/true);
  auto want = run_reference_call(c, 7);
  ASSERT_TRUE(got.has_value() && over.has_value() && want.has_value());
  EXPECT_GT(got->workspace, static_cast<int64_t>(sizeof(double)) * 2 * 3 * (400 + 1)) << "no group sums";
  expect_match(c, "(grouped, own kernel on the host)", got->outputs, want->outputs, 1e-6);
  expect_match(c, "(grouped, over dy)", over->outputs, got->outputs, 0);
}

// Every own op is covered by some case (a new own op without a row would go untested); constant by its own test.
TEST(CudaOwnKernelsOnHost, EveryOwnOpHasACase) {
  std::vector<bool> seen(kNumOps, false);
  seen[static_cast<size_t>(Op::constant)] = true;
  for (const OpCase& c : own_cases()) seen[static_cast<size_t>(c.op)] = true;
  for (int op = 0; op < kNumOps; ++op) {
    if (cuda::is_own_op(static_cast<Op>(op))) {
      EXPECT_TRUE(seen[static_cast<size_t>(op)]) << op_def(static_cast<Op>(op)).name;
    }
  }
}

// A label outside [0, classes) cannot be returned from a GPU kernel: it is flagged in the status word (which
// the backend turns into an error at synchronize) and never read out of bounds.
TEST(CudaOwnKernelsOnHost, BadLabelsAndIdsAreFlagged) {
  // Labels drawn from [0, 12) for 10 classes, and ids from [0, 9) for a 5-row table: some are out of range.
  const OpCase ce{"ce", Op::cross_entropy, {{16, 10}, Ids({16}, 12)}, {}};
  const OpCase emb{"emb", Op::embedding, {{5, 3}, Ids({16}, 9)}, {}};
  const OpCase emb_grad{"emb_grad", Op::embedding_grad, {{16, 3}, Ids({16}, 9)}, A({{"vocab", I(5)}})};
  int32_t status = 0;
  ASSERT_TRUE(run_own_call(ce, 1, status).has_value());
  EXPECT_EQ(status, cuda::kStatusBadLabel);
  ASSERT_TRUE(run_own_call(emb, 1, status).has_value());
  EXPECT_EQ(status, cuda::kStatusBadId);
  ASSERT_TRUE(run_own_call(emb_grad, 1, status).has_value());
  EXPECT_EQ(status, cuda::kStatusBadId);
}

// A workspace one byte short is refused before anything runs, naming the op and both sizes.
// The strided kernels' index walk: on uint32 (every index fits 32 bits, the dispatcher's `narrow`) and on
// int64 the same offsets, and those of a plain row-major decomposition. The op table's tensors are all narrow,
// so this is where the int64 walk is checked.
TEST(CudaOwnKernelsOnHost, NarrowAndWideIndexWalksAgree) {
  cuda::Strided g;
  g.rank = 3;
  const int64_t shape[3] = {5, 7, 3}, sa[3] = {1, 15, 5}, sb[3] = {0, 3, 1};  // a transposed, b broadcast
  for (int d = 0; d < 3; ++d) g.shape[d] = shape[d], g.a[d] = sa[d], g.b[d] = sb[d];
  for (int64_t i = 0; i < 5 * 7 * 3; ++i) {
    const int64_t i0 = i / 21, i1 = (i / 3) % 7, i2 = i % 3;
    int64_t wide_a, wide_b, narrow_a, narrow_b;
    g.narrow = false;
    g.offsets(i, wide_a, wide_b);
    g.narrow = true;
    g.offsets(i, narrow_a, narrow_b);
    EXPECT_EQ(wide_a, i0 * 1 + i1 * 15 + i2 * 5) << i;
    EXPECT_EQ(wide_b, i1 * 3 + i2) << i;
    EXPECT_EQ(narrow_a, wide_a) << i;
    EXPECT_EQ(narrow_b, wide_b) << i;
  }
}

// The pooling windows' divisions likewise: on uint32 and on int64, the same coordinates and the same covering
// outputs for every input element of a padded, strided 3-D window geometry over two planes.
TEST(CudaOwnKernelsOnHost, NarrowAndWidePoolWindowsAgree) {
  cuda::PoolWindows w{{5, 6, 7}, {3, 3, 4}, {3, 2, 3}, {2, 2, 2}, {1, 0, 1}};
  auto walk = [&](bool narrow) {
    w.narrow = narrow;
    std::vector<int64_t> seen;
    for (int64_t i = 0; i < 2 * w.in_plane(); ++i) {
      int64_t c0, c1, c2;
      w.coords(w.rem(i, w.in_plane()), w.in, c0, c1, c2);
      seen.insert(seen.end(), {w.quot(i, w.in_plane()), c0, c1, c2});
      w.for_covering(i, [&](int64_t in_base, int64_t out_base, int64_t o, int64_t o0, int64_t o1, int64_t o2) {
        seen.insert(seen.end(), {in_base, out_base, o, o0, o1, o2});
      });
    }
    return seen;
  };
  const std::vector<int64_t> wide = walk(false), narrow = walk(true);
  EXPECT_GT(wide.size(), static_cast<size_t>(8 * w.in_plane()));  // some elements lie in several windows
  EXPECT_EQ(narrow, wide);
  int64_t c0, c1, c2;
  w.coords(4 * 42 + 3 * 7 + 5, w.in, c0, c1, c2);
  EXPECT_EQ(std::vector<int64_t>({c0, c1, c2}), std::vector<int64_t>({4, 3, 5}));
}

TEST(CudaOwnKernelsOnHost, TooSmallWorkspaceIsAnError) {
  const OpCase c{"ce_grad", Op::cross_entropy_grad, {{}, {8, 10}, Ids({8}, 10)}, {}};
  int32_t status = 0;
  auto exact = run_own_call(c, 1, status);
  ASSERT_TRUE(exact.has_value()) << exact.error().str();
  ASSERT_EQ(exact->workspace, 8 * int64_t{sizeof(double)});
  auto shrunk = run_own_call(c, 1, status, 1);
  ASSERT_FALSE(shrunk.has_value());
  EXPECT_NE(shrunk.error().str().find("cross_entropy_grad"), std::string::npos) << shrunk.error().str();
  EXPECT_NE(shrunk.error().str().find(std::to_string(exact->workspace)), std::string::npos) << shrunk.error().str();
}

// `c` on a cuda backend made with `o`, against `want` (the reference's) within cuda_tolerance, then again on a
// fresh backend with `o`: bit-identical (deterministic algorithms only). `kernel`, when given, receives the
// node's kernel_description.
void expect_cuda_matches(const OpCase& c, const BackendOptions& o, const std::vector<HostTensor>& want,
                         const std::string& how, uint64_t seed, std::string* kernel = nullptr) {
  auto first = make_backend("cuda", o), again = make_backend("cuda", o);
  ASSERT_TRUE(first.has_value()) << first.error().str();
  ASSERT_TRUE(again.has_value()) << again.error().str();
  std::vector<HostTensor> got = run_case(c, **first, seed, kernel);
  expect_match(c, how, got, want, cuda_tolerance(c));
  std::vector<HostTensor> repeat = run_case(c, **again, seed);
  ASSERT_EQ(repeat.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(repeat[i].data, got[i].data) << c.name << " " << how << ": repeat run";
}

class CudaOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOps, MatchesReference) {
  LMS_CUDA_BACKEND_OR_SKIP(cuda);
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 17;
  ReferenceBackend reference;
  std::string kernel;
  expect_cuda_matches(c, BackendOptions{}, run_case(c, reference, kSeed), "(cuda executor)", kSeed, &kernel);
  EXPECT_FALSE(kernel.empty()) << c.name << ": every node says how it runs (lms profile's \"kernel\")";
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOps, ::testing::ValuesIn(all_cases()), test_name);

// The table's convolutions (forward, transposed, and the gradients of the forward ones) at batch 5, for
// CudaConvChunks.
std::vector<OpCase> batch5_conv_cases() {
  std::vector<OpCase> out;
  for (OpCase c : kCases) {
    if (!is_conv(c.op) && !is_conv_transpose(c.op)) continue;
    c.name += "_b5";
    c.inputs[0].shape[0] = 5;
    out.push_back(c);
    if (is_conv(c.op))
      for (OpCase& g : gradient_cases(c)) out.push_back(std::move(g));
  }
  return out;
}

// Convolutions in batch chunks on cuDNN (cudnn_conv.cc, Note [Convolutions in batch chunks]), forced by
// BackendOptions::max_conv_batch: 1 sample per call (5 calls), and 2 (two calls of 2 and a last call of 1 with
// its own descriptors), each against the reference within the table's tolerance; backward-filter sums the
// chunks' gradients into dw. The node's kernel_description counts the calls.
class CudaConvChunks : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaConvChunks, MatchReference) {
  LMS_CUDA_BACKEND_OR_SKIP(cuda);
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 17;
  ReferenceBackend reference;
  std::vector<HostTensor> want = run_case(c, reference, kSeed);
  for (int64_t most : {1, 2}) {
    BackendOptions o;
    o.max_conv_batch = most;
    o.conv_gemm = ConvGemm::off;  // every convolution on cuDNN (its 1x1 ones would otherwise run on cuBLAS)
    auto chunked = make_backend("cuda", o);
    ASSERT_TRUE(chunked.has_value()) << chunked.error().str();
    std::string kernel;
    expect_match(c, "(cuda, at most " + std::to_string(most) + " samples per call)",
                 run_case(c, **chunked, kSeed, &kernel), want, cuda_tolerance(c));
    const std::string calls = most == 1 ? "5 calls of 1 sample: cuDNN " : "2 calls of 2 samples and one of 1: cuDNN ";
    EXPECT_TRUE(kernel.starts_with(calls)) << c.name << ": " << kernel;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudaConvChunks, ::testing::ValuesIn(batch5_conv_cases()), test_name);

// A convolution-family case BackendOptions::conv_gemm runs on cuBLAS: one group, at most 3 spatial dimensions,
// and 1x1 kernels without padding or a stride above 1.
bool on_gemm(const OpCase& c) {
  if (!is_conv(c.op) && !is_conv_transpose(c.op) && c.op != Op::conv_backward_data &&
      c.op != Op::conv_backward_filter)
    return false;
  const IntList w = c.op == Op::conv_backward_filter ? c.attrs.get_ints("w_shape", {})
                                                     : IntList(c.inputs[1].shape.begin(), c.inputs[1].shape.end());
  auto all = [](const IntList& v, int64_t want) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == want; });
  };
  const bool one_by_one = all(IntList(w.begin() + 2, w.end()), 1) && all(c.attrs.get_ints("pad", {}), 0);
  return w.size() > 2 && w.size() <= 5 && c.attrs.get_int("groups", 1) == 1 &&
         (one_by_one || !all(c.attrs.get_ints("stride", {}), 1));
}

// The cases for CudaConvGemm: the table's 1x1 and strided rows at batch 2 and 5, 1-D and 3-D ones, strided 1x1
// and larger ones (a stem-like 7x7, padding, dilation), strided transposed ones, and ones whose backward-filter
// regroups, every pass.
std::vector<OpCase> gemm_cases() {
  std::vector<OpCase> cases = all_cases(), b5 = batch5_conv_cases(), out;
  cases.insert(cases.end(), b5.begin(), b5.end());
  cases.push_back({"conv_transpose2d_1x1_stride2", Op::conv_transpose2d, {{3, 6, 4, 5}, {6, 5, 1, 1}},
                   A({{"stride", L({2, 2})}, {"output_pad", L({1, 0})}})});
  cases.push_back({"conv_transpose2d_3x3_stride2", Op::conv_transpose2d, {{2, 6, 4, 5}, {6, 3, 3, 3}},
                   A({{"stride", L({2, 2})}, {"pad", L({1, 1})}, {"output_pad", L({1, 1})}})});
  for (const OpCase& f :
       {OpCase{"conv1d_1x1", Op::conv1d, {{3, 4, 9}, {6, 4, 1}}, {}},
        OpCase{"conv3d_1x1", Op::conv3d, {{3, 2, 3, 4, 5}, {7, 2, 1, 1, 1}}, {}},
        OpCase{"conv2d_1x1_stride2", Op::conv2d, {{5, 8, 7, 6}, {16, 8, 1, 1}}, A({{"stride", L({2, 2})}})},
        OpCase{"conv3d_1x1_stride2", Op::conv3d, {{2, 2, 3, 4, 5}, {3, 2, 1, 1, 1}}, A({{"stride", L({2, 2, 2})}})},
        OpCase{"conv2d_7x7_stride2", Op::conv2d, {{3, 3, 23, 21}, {8, 3, 7, 7}},
               A({{"stride", L({2, 2})}, {"pad", L({3, 3})}})},
        OpCase{"conv2d_3x3_stride2_dilated", Op::conv2d, {{3, 5, 12, 11}, {6, 5, 3, 3}},
               A({{"stride", L({2, 2})}, {"pad", L({2, 2})}, {"dilation", L({2, 2})}})},
        OpCase{"conv3d_3x3x3_stride2", Op::conv3d, {{2, 2, 5, 6, 5}, {3, 2, 3, 3, 3}},
               A({{"stride", L({2, 2, 2})}, {"pad", L({1, 1, 1})}})},
        // weights larger than a sample's data: backward-filter regroups
        OpCase{"conv2d_1x1_wide", Op::conv2d, {{5, 16, 2, 3}, {32, 16, 1, 1}}, {}},
        OpCase{"conv2d_1x1_stride2_wide", Op::conv2d, {{3, 16, 3, 4}, {32, 16, 1, 1}}, A({{"stride", L({2, 2})}})},
        OpCase{"conv2d_3x3_stride2_wide", Op::conv2d, {{3, 8, 5, 4}, {16, 8, 3, 3}},
               A({{"stride", L({2, 2})}, {"pad", L({1, 1})}})}}) {
    cases.push_back(f);
    for (OpCase& g : gradient_cases(f)) cases.push_back(std::move(g));
  }
  for (OpCase& c : cases)
    if (on_gemm(c)) out.push_back(std::move(c));
  return out;
}

TEST(CudaConvGemmCases, CoverEveryPassOfTenConvolutions) {
  EXPECT_GE(gemm_cases().size(), 30u) << "forward, backward-data and backward-filter of ten convolutions";
}

// Convolutions on cuBLAS (BackendOptions::conv_gemm, conv_gemm.cc; the layout is checked on the host by
// conv_gemm_test.cc): each case with the partials and the column matrices for the whole batch at once and for a
// few samples at a time (the workspace limit sets the group), against the reference and bit-identical on a fresh
// backend; and on cuDNN (conv_gemm off).
class CudaConvGemm : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaConvGemm, MatchesTheReference) {
  LMS_CUDA_BACKEND_OR_SKIP(cuda);
  const OpCase& c = GetParam();
  constexpr uint64_t kSeed = 17;
  ReferenceBackend reference;
  std::vector<HostTensor> want = run_case(c, reference, kSeed);
  const Shape w = c.op == Op::conv_backward_filter ? forward_types(c).front().shape : c.inputs[1].shape;
  const int64_t element = c.inputs[0].dtype == DType::f64 ? 8 : 4;
  const int64_t small = 2 * std::accumulate(w.begin(), w.end(), int64_t{1}, std::multiplies<>()) * element;
  for (int64_t limit : {int64_t{256} << 20, small}) {
    BackendOptions o;
    o.conv_gemm = ConvGemm::strided;
    o.max_workspace_bytes = limit;
    std::string kernel;
    expect_cuda_matches(c, o, want, "(cuBLAS gemms, workspace limit " + std::to_string(limit) + ")", kSeed,
                        &kernel);
    EXPECT_TRUE(kernel.starts_with("cuBLAS ")) << c.name << ": " << kernel;
  }
  BackendOptions on_cudnn;  // the same convolution with conv_gemm off: cuDNN's
  on_cudnn.conv_gemm = ConvGemm::off;
  auto cudnn = make_backend("cuda", on_cudnn);
  ASSERT_TRUE(cudnn.has_value()) << cudnn.error().str();
  std::string kernel;
  expect_match(c, "(cuDNN)", run_case(c, **cudnn, kSeed, &kernel), want, cuda_tolerance(c));
  EXPECT_TRUE(kernel.starts_with("cuDNN ")) << c.name << ": " << kernel;
}

INSTANTIATE_TEST_SUITE_P(Table, CudaConvGemm, ::testing::ValuesIn(gemm_cases()), test_name);

}  // namespace
}  // namespace lms
