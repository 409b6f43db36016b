// The cpu backend against the reference backend, op by op: one table of cases (op, inputs, attributes), each
// run as a one-node Program through the Executor on both backends with the same random inputs, and again as a
// direct kernel call with a planned workspace of exactly dnnl_workspace_bytes (computed from types alone).
// Forward cases expand into their gradients (gradient_cases): a convolution into conv_backward_data and
// conv_backward_filter, a plain matmul into its two transposed matmuls, a pooling into max_pool_grad or
// avg_pool_grad, a norm into its grad, relu/gelu/softmax into theirs. Outputs are compared by the norm-wise
// relative error max|cpu - ref| / max|ref|: the reference accumulates in double and rounds once, oneDNN and the
// own loops compute in f32 in their own order, so bit-identity is not expected; 1e-5 is about a hundred f32
// ulps at the largest output. A row with tolerance 0 must be bit-identical (pure data movement, the
// double-accumulating reductions, and the documented fallbacks that run the reference kernel).
// `fast_nodes` is how many nodes must NOT run the reference kernel (oneDNN or an own loop): a case whose op
// silently falls back fails. Adding a case is one line in kCases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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
using ref_test::F;
using ref_test::I;
using ref_test::L;

constexpr double kDefaultTolerance = 1e-5;
constexpr double kTol = kDefaultTolerance;

// One input: its type and the range its random values are drawn from (ids and labels: [0, bound)).
struct In {
  Shape shape;
  DType dtype = DType::f32;
  double lo = -1, hi = 1;
  In(std::initializer_list<int64_t> s) : shape(s) {}
  In(Shape s, DType t = DType::f32, double l = -1, double h = 1) : shape(std::move(s)), dtype(t), lo(l), hi(h) {}
};
// Positive values (an invstd, a second moment, a variance).
In Pos(Shape s) { return In(std::move(s), DType::f32, 0.5, 1.5); }
// Ids or labels in [0, bound).
In Ids(Shape s, int64_t bound, DType t = DType::i32) { return In(std::move(s), t, 0, static_cast<double>(bound)); }

struct OpCase {
  std::string name;
  Op op;
  std::vector<In> inputs;
  Attributes attrs;
  double tolerance = kDefaultTolerance;  // norm-wise relative error allowed (0: bit-identical)
  int64_t fast_nodes = 1;                // nodes the cpu backend must run on oneDNN or an own loop
};

// One row per case; see the file comment for what each row expands into.
const std::vector<OpCase> kCases = {
    // Convolutions (each also checked as conv_backward_data and conv_backward_filter).
    {"conv1d", Op::conv1d, {{2, 3, 11}, {4, 3, 3}}, A({{"stride", L({2})}, {"pad", L({1})}})},
    {"conv2d", Op::conv2d, {{2, 3, 8, 8}, {5, 3, 3, 3}}, A({{"pad", L({1, 1})}})},
    {"conv2d_stride", Op::conv2d, {{2, 4, 9, 7}, {6, 4, 3, 2}}, A({{"stride", L({2, 2})}, {"pad", L({1, 0})}})},
    {"conv2d_dilated", Op::conv2d, {{1, 2, 9, 9}, {3, 2, 3, 3}}, A({{"dilation", L({2, 2})}, {"pad", L({2, 2})}})},
    {"conv2d_groups", Op::conv2d, {{2, 6, 6, 6}, {4, 3, 3, 3}}, A({{"groups", I(2)}, {"pad", L({1, 1})}})},
    {"conv2d_depthwise", Op::conv2d, {{2, 4, 7, 7}, {4, 1, 3, 3}}, A({{"groups", I(4)}, {"stride", L({2, 2})}})},
    {"conv2d_1x1", Op::conv2d, {{2, 8, 5, 5}, {16, 8, 1, 1}}, {}},
    {"conv3d", Op::conv3d, {{1, 2, 5, 6, 5}, {3, 2, 3, 3, 3}}, A({{"pad", L({1, 1, 1})}})},
    {"conv_transpose1d", Op::conv_transpose1d, {{2, 4, 7}, {4, 3, 3}}, A({{"stride", L({2})}, {"pad", L({1})}})},
    {"conv_transpose2d", Op::conv_transpose2d, {{2, 4, 5, 6}, {4, 3, 3, 3}},
     A({{"stride", L({2, 2})}, {"pad", L({1, 1})}, {"output_pad", L({1, 0})}})},
    {"conv_transpose2d_groups", Op::conv_transpose2d, {{1, 4, 5, 5}, {4, 2, 3, 3}}, A({{"groups", I(2)}})},
    {"conv_transpose3d", Op::conv_transpose3d, {{1, 2, 3, 4, 3}, {2, 3, 2, 2, 2}}, A({{"stride", L({2, 2, 2})}})},
    // Matmul (plain 2-D rows also checked as both gradients).
    {"matmul", Op::matmul, {{7, 13}, {13, 5}}, {}},
    {"matmul_ta", Op::matmul, {{13, 7}, {13, 5}}, A({{"transpose_a", B(true)}})},
    {"matmul_tb", Op::matmul, {{7, 13}, {5, 13}}, A({{"transpose_b", B(true)}})},
    {"matmul_batched", Op::matmul, {{3, 4, 6, 9}, {3, 4, 9, 5}}, {}},
    {"matmul_shared_b", Op::matmul, {{3, 6, 9}, {9, 5}}, A({{"transpose_a", B(false)}})},
    {"matmul_batched_tt", Op::matmul, {{2, 9, 6}, {2, 5, 9}}, A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})},
    // Normalization (each also checked as its grad, with a positive invstd).
    {"batch_norm", Op::batch_norm, {{4, 3, 5, 5}, {3}, {3}}, {}},
    {"batch_norm_2d_input", Op::batch_norm, {{8, 6}, {6}, {6}}, A({{"eps", F(1e-3)}})},
    {"batch_norm_odd", Op::batch_norm, {{3, 7, 9}, {7}, {7}}, {}},
    {"batch_norm_3d", Op::batch_norm, {{2, 3, 3, 4, 5}, {3}, {3}}, {}},
    {"layer_norm", Op::layer_norm, {{6, 33}, {33}, {33}}, {}},
    {"layer_norm_3d", Op::layer_norm, {{2, 3, 17}, {17}, {17}}, A({{"eps", F(1e-3)}})},
    {"layer_norm_rank1", Op::layer_norm, {{9}, {9}, {9}}, {}},
    // Elementwise (relu and gelu also checked as their grads).
    {"relu", Op::relu, {{4, 33}}, {}},
    {"gelu", Op::gelu, {In({4, 33}, DType::f32, -4, 4)}, {}},
    {"add_same", Op::add, {{3, 7, 5}, {3, 7, 5}}, {}},
    {"add_broadcast", Op::add, {{4, 5, 6}, {6}}, {}},
    {"add_broadcast_first", Op::add, {{5, 1}, {4, 5, 6}}, {}},
    // Both operands broadcast: oneDNN's binary cannot, so this documented case runs the reference kernel.
    {"add_both_broadcast", Op::add, {{4, 1, 6}, {5, 1}}, {}, 0, 0},
    {"mul_broadcast", Op::mul, {{3, 4, 5}, {3, 1, 5}}, {}},
    {"bias_add", Op::bias_add, {{2, 3, 4, 4}, {3}}, {}},
    {"bias_add_last", Op::bias_add, {{5, 7}, {7}}, A({{"axis", I(-1)}})},
    {"scale", Op::scale, {{4, 33}}, A({{"factor", F(0.37)}})},
    // Softmax (non-causal rows also checked as softmax_grad).
    {"softmax", Op::softmax, {{3, 17}}, {}},
    {"softmax_axis1", Op::softmax, {{2, 6, 3}}, A({{"axis", I(1)}})},
    {"softmax_causal", Op::softmax, {{2, 5, 5}}, A({{"causal", B(true)}})},
    // Pooling (each also checked as its grad).
    {"max_pool1d", Op::max_pool1d, {{2, 3, 11}}, A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
    {"max_pool2d", Op::max_pool2d, {{2, 3, 9, 9}}, A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})},
    {"max_pool2d_default_stride", Op::max_pool2d, {{1, 2, 8, 7}}, A({{"kernel", L({2, 2})}})},
    {"max_pool3d", Op::max_pool3d, {{1, 2, 5, 6, 7}}, A({{"kernel", L({2, 3, 2})}, {"stride", L({1, 2, 2})}})},
    {"avg_pool1d", Op::avg_pool1d, {{2, 3, 10}}, A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
    {"avg_pool2d", Op::avg_pool2d, {{2, 3, 9, 9}}, A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})},
    {"avg_pool2d_exclude_pad", Op::avg_pool2d, {{2, 3, 9, 9}},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"count_include_pad", B(false)}})},
    {"avg_pool3d", Op::avg_pool3d, {{1, 2, 5, 6, 7}}, A({{"kernel", L({2, 2, 3})}, {"pad", L({1, 1, 1})}})},
    // Reductions: the reference's double-accumulating loop, bit-identical.
    {"global_avg_pool", Op::global_avg_pool, {{2, 3, 5, 7}}, {}, 0},
    {"global_avg_pool3d", Op::global_avg_pool, {{2, 4, 3, 3, 3}}, {}, 0},
    {"mean_all", Op::mean, {{7, 9}}, {}, 0},
    {"mean_axis1", Op::mean, {{3, 4, 5}}, A({{"axes", L({1})}}), 0},
    {"mean_keepdims", Op::mean, {{3, 4, 5}}, A({{"axes", L({0, 2})}, {"keepdims", B(true)}}), 0},
    {"reduce_sum_last", Op::reduce_sum, {{6, 13}}, A({{"axes", L({-1})}}), 0},
    {"sum_to_row", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({6})}}), 0},
    {"sum_to_keep", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({4, 1, 6})}}), 0},
    {"sum_to_col", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({5, 1})}}), 0},
    // Data movement: exact copies.
    {"broadcast_to", Op::broadcast_to, {{6}}, A({{"shape", L({4, 5, 6})}}), 0},
    {"broadcast_to_middle", Op::broadcast_to, {{4, 1, 6}}, A({{"shape", L({4, 5, 6})}}), 0},
    {"transpose", Op::transpose, {{2, 3, 4}}, A({{"perm", L({2, 0, 1})}}), 0},
    {"transpose_2d", Op::transpose, {{5, 7}}, A({{"perm", L({1, 0})}}), 0},
    {"concat", Op::concat, {{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, A({{"axis", I(1)}}), 0},
    {"slice", Op::slice, {{4, 10, 3}}, A({{"axis", I(1)}, {"start", I(2)}, {"end", I(7)}}), 0},
    {"slice_grad", Op::slice_grad, {{4, 5, 3}}, A({{"axis", I(1)}, {"start", I(2)}, {"end", I(7)}, {"dim", I(10)}}), 0},
    {"reshape", Op::reshape, {{4, 6}}, A({{"shape", L({3, 8})}}), 0},
    {"embedding", Op::embedding, {{10, 7}, Ids({3, 4}, 10)}, {}, 0},
    {"embedding_i64", Op::embedding, {{10, 7}, Ids({5}, 10, DType::i64)}, {}, 0},
    {"embedding_grad", Op::embedding_grad, {{3, 4, 7}, Ids({3, 4}, 5)}, A({{"vocab", I(5)}})},
    // Losses.
    {"cross_entropy", Op::cross_entropy, {{8, 10}, Ids({8}, 10)}, {}},
    {"cross_entropy_spatial", Op::cross_entropy, {{2, 5, 3, 3}, Ids({2, 3, 3}, 5, DType::i64)}, {}},
    {"cross_entropy_grad", Op::cross_entropy_grad, {{}, {8, 10}, Ids({8}, 10)}, {}},
    {"cross_entropy_grad_spatial", Op::cross_entropy_grad, {{}, {2, 5, 3, 3}, Ids({2, 3, 3}, 5)}, {}},
    // Optimizer updates (in place) and batch-norm running statistics.
    {"sgd_update", Op::sgd_update, {{5, 7}, {5, 7}}, A({{"lr", F(0.1)}, {"weight_decay", F(0.01)}})},
    {"momentum_update", Op::momentum_update, {{5, 7}, {5, 7}, {5, 7}}, A({{"lr", F(0.1)}, {"weight_decay", F(0.01)}})},
    {"momentum_nesterov", Op::momentum_update, {{33}, {33}, {33}}, A({{"lr", F(0.1)}, {"nesterov", B(true)}})},
    // t in [3, 4): the fourth or fifth step.
    {"adam_update", Op::adam_update, {{5, 7}, {5, 7}, Pos({5, 7}), In({}, DType::f32, 3, 4), {5, 7}},
     A({{"lr", F(0.01)}, {"weight_decay", F(0.01)}})},
    {"bn_running_update", Op::bn_running_update, {{6}, Pos({6}), {6}, Pos({6})}, A({{"count", I(20)}})},
};

// The forward's output types.
std::vector<TensorType> forward_types(const OpCase& c) {
  auto attrs = normalize_attrs(op_def(c.op), c.attrs);
  if (!attrs) return {};  // a broken row: EveryGradientCaseIsBuilt names it
  std::vector<TensorType> in;
  for (const In& i : c.inputs) in.push_back(TensorType{i.dtype, i.shape});
  auto out = infer_types(c.op, in, *attrs);
  return out ? *out : std::vector<TensorType>{};
}

bool is_conv(Op op) { return op == Op::conv1d || op == Op::conv2d || op == Op::conv3d; }
bool is_max_pool(Op op) { return op == Op::max_pool1d || op == Op::max_pool2d || op == Op::max_pool3d; }
bool is_avg_pool(Op op) { return op == Op::avg_pool1d || op == Op::avg_pool2d || op == Op::avg_pool3d; }

// The gradient cases of a forward case (see the file comment). Shapes come from the forward's shape rule.
std::vector<OpCase> gradient_cases(const OpCase& c) {
  std::vector<TensorType> out = forward_types(c);
  if (out.empty()) return {};
  const Shape y = out.front().shape;
  const Shape x = c.inputs[0].shape;
  const std::string n = c.name;
  const double tol = c.tolerance;
  std::vector<OpCase> g;
  if (c.op == Op::matmul) {
    const bool ta = c.attrs.get_bool("transpose_a", false), tb = c.attrs.get_bool("transpose_b", false);
    if (ta || tb || c.inputs[1].shape.size() != 2 || x.size() != 2) return {};  // the plain 2-D form only
    g.push_back({n + ".grad_a", Op::matmul, {In(y), c.inputs[1]}, A({{"transpose_b", B(true)}}), tol});
    g.push_back({n + ".grad_b", Op::matmul, {c.inputs[0], In(y)}, A({{"transpose_a", B(true)}}), tol});
  } else if (is_conv(c.op)) {
    Attributes grad = c.attrs;
    const int rank = static_cast<int>(x.size()) - 2;
    // The gradient ops take every geometry attribute explicitly; the forward's defaults are the same values.
    if (!grad.has("stride")) grad.set("stride", L(IntList(rank, 1)));
    if (!grad.has("pad")) grad.set("pad", L(IntList(rank, 0)));
    if (!grad.has("dilation")) grad.set("dilation", L(IntList(rank, 1)));
    if (!grad.has("groups")) grad.set("groups", I(1));
    Attributes data = grad, filter = grad;
    data.set("x_shape", L(x));
    filter.set("w_shape", L(c.inputs[1].shape));
    g.push_back({n + ".backward_data", Op::conv_backward_data, {In(y), c.inputs[1]}, data, tol});
    g.push_back({n + ".backward_filter", Op::conv_backward_filter, {c.inputs[0], In(y)}, filter, tol});
  } else if (is_max_pool(c.op) || is_avg_pool(c.op)) {
    const int rank = static_cast<int>(x.size()) - 2;
    Attributes grad;
    const IntList kernel = c.attrs.get_ints("kernel", {});
    grad.set("kernel", L(kernel));
    grad.set("stride", L(c.attrs.get_ints("stride", kernel)));
    grad.set("pad", L(c.attrs.get_ints("pad", IntList(rank, 0))));
    if (is_max_pool(c.op)) {
      g.push_back({n + ".grad", Op::max_pool_grad, {In(y), c.inputs[0]}, grad, tol});
    } else {
      grad.set("count_include_pad", B(c.attrs.get_bool("count_include_pad", true)));
      grad.set("x_shape", L(x));
      g.push_back({n + ".grad", Op::avg_pool_grad, {In(y)}, grad, tol});
    }
  } else if (c.op == Op::batch_norm || c.op == Op::layer_norm) {
    const Shape stats = out[1].shape;
    const Op op = c.op == Op::batch_norm ? Op::batch_norm_grad : Op::layer_norm_grad;
    g.push_back({n + ".grad", op, {In(x), In(x), c.inputs[1], In(stats), Pos(stats)}, {}, tol});
  } else if (c.op == Op::relu || c.op == Op::gelu) {
    const Op op = c.op == Op::relu ? Op::relu_grad : Op::gelu_grad;
    g.push_back({n + ".grad", op, {In(x), c.inputs[0]}, {}, tol});
  } else if (c.op == Op::softmax && !c.attrs.get_bool("causal", false)) {
    // y is a softmax output in the real op; any values exercise the same formula.
    g.push_back({n + ".grad", Op::softmax_grad, {In(x), Pos(x)}, A({{"axis", I(c.attrs.get_int("axis", -1))}}), tol});
  }
  return g;
}

bool has_gradients(const OpCase& c) {
  return c.op == Op::matmul || is_conv(c.op) || is_max_pool(c.op) || is_avg_pool(c.op) || c.op == Op::batch_norm ||
         c.op == Op::layer_norm || c.op == Op::relu || c.op == Op::gelu ||
         (c.op == Op::softmax && !c.attrs.get_bool("causal", false));
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (const OpCase& c : kCases) {
    all.push_back(c);
    if (has_gradients(c))
      for (OpCase& g : gradient_cases(c)) all.push_back(std::move(g));
  }
  return all;
}

// The case's inputs drawn from `seed` (input i from seed + i).
std::vector<HostTensor> inputs_of(const OpCase& c, uint64_t seed) {
  std::vector<HostTensor> data;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    data.push_back(ref_test::random(c.inputs[i].dtype, c.inputs[i].shape, seed + i, c.inputs[i].lo, c.inputs[i].hi));
  return data;
}

// Runs one case as a one-node Program on `backend` with inputs drawn from `seed`; returns the outputs.
// (Unused, like the other runners, in a build without the cpu backend, where the tests only skip.)
[[maybe_unused]] std::vector<HostTensor> run_case(const OpCase& c, Backend& backend, uint64_t seed,
                                                  [[maybe_unused]] int64_t* fast_nodes = nullptr) {
  Graph g(c.name);
  Builder b(g);
  std::vector<ValueId> inputs;
  std::vector<HostTensor> data = inputs_of(c, seed);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    inputs.push_back(b.input(TensorType{c.inputs[i].dtype, c.inputs[i].shape}, "in" + std::to_string(i)));
  std::vector<ValueId> outs = b.add(c.op, inputs, c.attrs, "out");
  EXPECT_TRUE(b.ok()) << c.name << ": " << b.error()->str();
  if (!b.ok()) return {};
  g.set_outputs(outs);
  auto program = compile(g, {}, &backend);  // with the backend's kernel workspaces
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
  if (fast_nodes)
    if (auto* cpu = dynamic_cast<CpuBackend*>(&backend)) *fast_nodes = cpu->dnnl_nodes();
#endif
  return std::move(r->outputs);
}

#ifdef LMS_HAVE_CPU_BACKEND
// A case as one direct kernel call.
struct DirectRun {
  std::vector<HostTensor> outputs;
  bool fast = false;          // the cpu backend's own kernel ran (not the reference)
  int64_t workspace = 0;      // dnnl_workspace_bytes of the call
};

// Byte the workspace is filled with before the kernel runs: a kernel that read scratch it had not written
// would see garbage, not zeros.
constexpr std::byte kPoison{0xA5};

// Runs `c` as one kernel call on inputs from `seed`: the reference kernel, or (cpu) the cpu backend's kernel
// given a workspace of dnnl_workspace_bytes - `shrink` bytes, 64-byte aligned like a planned buffer. In-place
// outputs share their aliased input's buffer, as in an arena.
Result<DirectRun> run_direct(const OpCase& c, bool cpu, uint64_t seed, int64_t shrink = 0) {
  const OpDef& def = op_def(c.op);
  Attributes attrs = LMS_TRY(normalize_attrs(def, c.attrs));
  std::vector<HostTensor> ins = inputs_of(c, seed);
  std::vector<TensorType> in_types;
  for (const HostTensor& t : ins) in_types.push_back(t.type);
  std::vector<TensorType> out_types = LMS_TRY(infer_types(c.op, in_types, attrs));
  std::vector<HostTensor> outs;
  for (const TensorType& t : out_types) outs.emplace_back(t);
  std::vector<TensorRef> in_refs, out_refs, in_types_only, out_types_only;
  for (HostTensor& t : ins) in_refs.push_back({&t.type, t.data.data()});
  for (size_t o = 0; o < outs.size(); ++o) {
    void* p = o < def.aliases.size() ? in_refs[static_cast<size_t>(def.aliases[o])].data : outs[o].data.data();
    out_refs.push_back({&outs[o].type, p});
  }
  for (const TensorRef& r : in_refs) in_types_only.push_back({r.type, nullptr});
  for (const TensorRef& r : out_refs) out_types_only.push_back({r.type, nullptr});
  DirectRun run;
  if (!cpu) {
    LMS_TRY_VOID(run_reference_kernel(KernelCall{c.op, &attrs, in_refs, out_refs, nullptr, 0}));
  } else {
    cpu::DnnlContextPtr ctx = LMS_TRY(cpu::make_dnnl_context());
    // The size comes from types alone, as the planner asks for it.
    run.workspace = LMS_TRY(cpu::dnnl_workspace_bytes(*ctx, KernelCall{c.op, &attrs, in_types_only, out_types_only,
                                                                       nullptr, 0}));
    const int64_t given = run.workspace - shrink;
    constexpr size_t kAlign = 64;
    std::vector<std::byte> storage(static_cast<size_t>(std::max<int64_t>(given, 0)) + kAlign, kPoison);
    std::byte* ws = storage.data() + (kAlign - reinterpret_cast<uintptr_t>(storage.data()) % kAlign) % kAlign;
    KernelCall call{c.op, &attrs, in_refs, out_refs, given > 0 ? ws : nullptr, given};
    // A planned workspace pointer even when nothing is needed, so no private allocation can hide a size error.
    if (given == 0) call.workspace = ws;
    auto kernel = LMS_TRY(cpu::prepare_dnnl_kernel(*ctx, call));
    run.fast = kernel != nullptr;
    if (kernel) LMS_TRY_VOID(kernel->run());
    else LMS_TRY_VOID(run_reference_kernel(call));
  }
  for (size_t o = 0; o < outs.size(); ++o)
    if (o < def.aliases.size()) outs[o].data = ins[static_cast<size_t>(def.aliases[o])].data;
  run.outputs = std::move(outs);
  return run;
}
#endif

// max|a - b| / max|b| (0 when b is all zeros and a equals it); infinite where exactly one of a pair is not
// finite, so a NaN never hides inside max().
[[maybe_unused]] double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.type.num_elements(); ++i) {
    if (std::isfinite(a.get(i)) != std::isfinite(b.get(i))) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
    scale = std::max(scale, std::abs(b.get(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

// Expects `got` to match `want` output by output within the case's tolerance.
[[maybe_unused]] void expect_match(const OpCase& c, std::string_view how, const std::vector<HostTensor>& got,
                                   const std::vector<HostTensor>& want) {
  ASSERT_EQ(got.size(), want.size()) << c.name << " " << how;
  ASSERT_FALSE(want.empty()) << c.name << " " << how;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].type, want[i].type);
    double err = relative_error(got[i], want[i]);
    if (c.tolerance == 0)
      EXPECT_EQ(got[i].data, want[i].data) << c.name << " " << how << " output " << i << " (relative error " << err
                                           << ")";
    else
      EXPECT_LT(err, c.tolerance) << c.name << " " << how << " output " << i;
  }
}

// The table is expanded while tests are registered, where no assertion can run: check here that no row lost
// its gradients to a shape error (only batched or transposed matmuls skip them, by design).
TEST(CpuOpsTable, EveryGradientCaseIsBuilt) {
  for (const OpCase& c : kCases) {
    EXPECT_FALSE(forward_types(c).empty()) << c.name << ": the row does not pass its op's shape rule";
    if (!has_gradients(c)) continue;
    const bool plain_matmul =
        c.op == Op::matmul && c.attrs.empty() && c.inputs[0].shape.size() == 2 && c.inputs[1].shape.size() == 2;
    if (c.op == Op::matmul && !plain_matmul) continue;
    EXPECT_EQ(gradient_cases(c).size(), is_conv(c.op) || c.op == Op::matmul ? 2u : 1u) << c.name;
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
  int64_t fast_nodes = -1;
  std::vector<HostTensor> got = run_case(c, cpu, kSeed, &fast_nodes);
  EXPECT_EQ(fast_nodes, c.fast_nodes) << c.name << ": nodes not run by the reference kernel";
  expect_match(c, "(executor)", got, want);
  // The same case again on a fresh cpu backend: bit-identical (LMS requires repeatable runs).
  CpuBackend again;
  std::vector<HostTensor> repeat = run_case(c, again, kSeed);
  ASSERT_EQ(repeat.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(repeat[i].data, got[i].data) << c.name << ": repeat run";
  // As one direct kernel call with a poisoned workspace of exactly the bytes asked for.
  auto direct = run_direct(c, true, kSeed);
  auto direct_want = run_direct(c, false, kSeed);
  ASSERT_TRUE(direct.has_value()) << c.name << ": " << direct.error().str();
  ASSERT_TRUE(direct_want.has_value()) << c.name << ": " << direct_want.error().str();
  EXPECT_EQ(direct->fast, c.fast_nodes > 0) << c.name << ": direct call";
  expect_match(c, "(direct call)", direct->outputs, direct_want->outputs);
#endif
}

INSTANTIATE_TEST_SUITE_P(Table, CpuOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

// A workspace smaller than dnnl_workspace_bytes is refused at prepare time, naming the op and both sizes
// (batch_norm_grad always needs scratch: the variances it recovers from invstd).
TEST(CpuKernels, TooSmallWorkspaceIsAnError) {
#ifndef LMS_HAVE_CPU_BACKEND
  GTEST_SKIP() << "the cpu backend is not in this build (oneDNN was not found at configure time)";
#else
  const OpCase c{"bn_grad", Op::batch_norm_grad, {{4, 3, 5}, {4, 3, 5}, {3}, {3}, Pos({3})}, {}};
  auto exact = run_direct(c, true, 1);
  ASSERT_TRUE(exact.has_value()) << exact.error().str();
  ASSERT_GT(exact->workspace, 0);
  auto shrunk = run_direct(c, true, 1, 1);
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
    auto a = run_direct(c, true, 3), b = run_direct(c, true, 3);
    ASSERT_TRUE(a.has_value() && b.has_value()) << c.name;
    EXPECT_EQ(a->workspace, b->workspace) << c.name;
    EXPECT_EQ(a->workspace % 64, 0) << c.name;
    if (c.op == Op::relu) {
      EXPECT_EQ(a->workspace, 0) << c.name;
    }
  }
#endif
}

}  // namespace
}  // namespace lms
