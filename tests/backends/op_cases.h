// The cross-backend op table: one row per case (op, inputs, attributes, tolerance), and what runs a case on a backend.
// Each backend's op test (cpu_ops_test.cc, cuda_ops_test.cc) runs every case as a one-node Program through the Executor
// and as a direct kernel call, against the reference backend with the same random inputs. Forward cases expand into
// their gradients (gradient_cases): a convolution into conv_backward_data and conv_backward_filter, a plain matmul into
// its two transposed matmuls, a max pooling into max_pool_grad, max_pool_argmax and max_pool_grad_by_argmax, an average
// pooling into avg_pool_grad, a norm into its grad,
// relu/gelu/silu/hardswish/sigmoid/tanh/clamp/sqrt/reciprocal/log/softplus/softmax into theirs (exp's is a mul).
// Outputs are compared by the norm-wise relative error max|got - ref| / max|ref|: the reference accumulates in double
// and rounds once; a library computing in f32 in its own order is not expected to match bit for bit; 1e-5 is about a
// hundred f32 ulps at the largest output. `tolerance` is the cpu backend's; each backend's test states its own where
// they differ. A row with tolerance 0 must be bit-identical (pure data movement, the double-accumulating reductions,
// and the cpu backend's documented fallbacks that run the reference kernel). `fast_nodes` is how many nodes the cpu
// backend must NOT run on the reference kernel. Adding a case is one line in kCases.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/reference_test_util.h"
#include "lms/backends/reference/kernels.h"
#include "lms/ir/builder.h"
#include "lms/ops/pool_window.h"
#include "lms/runtime/executor.h"
#include "lms/runtime/program.h"

namespace lms::op_cases {

using ref_test::A;
using ref_test::B;
using ref_test::F;
using ref_test::I;
using ref_test::L;
using ref_test::S;

inline constexpr double kDefaultTolerance = 1e-5;

// One input: its type and the range its random values are drawn from (ids and labels: [0, bound)).
struct In {
  Shape shape;
  DType dtype = DType::f32;
  double lo = -1, hi = 1;
  In(std::initializer_list<int64_t> s) : shape(s) {}
  In(Shape s, DType t = DType::f32, double l = -1, double h = 1) : shape(std::move(s)), dtype(t), lo(l), hi(h) {}
};
// Positive values (an invstd, a second moment, a variance).
inline In Pos(Shape s, DType t = DType::f32) { return In(std::move(s), t, 0.5, 1.5); }
// An f64 operand.
inline In F64(Shape s) { return In(std::move(s), DType::f64); }
// Ids or labels in [0, bound).
inline In Ids(Shape s, int64_t bound, DType t = DType::i32) { return In(std::move(s), t, 0, static_cast<double>(bound)); }

struct OpCase {
  std::string name;
  Op op;
  std::vector<In> inputs;
  Attributes attrs;
  double tolerance = kDefaultTolerance;  // norm-wise relative error allowed (0: bit-identical)
  int64_t fast_nodes = 1;                // nodes the cpu backend must run on oneDNN or an own loop
};

// One row per case; see the file comment for what each row expands into.
inline const std::vector<OpCase> kCases = {
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
    // f64 (the cpu backend runs these on the reference kernels; cuDNN's f64 algorithms differ from its f32 ones).
    {"conv2d_dilated_f64", Op::conv2d, {F64({1, 2, 9, 9}), F64({3, 2, 3, 3})},
     A({{"dilation", L({2, 2})}, {"pad", L({2, 2})}}), 0, 0},
    {"conv3d_groups_f64", Op::conv3d, {F64({1, 4, 4, 5, 4}), F64({6, 2, 3, 3, 3})},
     A({{"groups", I(2)}, {"pad", L({1, 1, 1})}}), 0, 0},
    {"conv_transpose2d_f64", Op::conv_transpose2d, {F64({2, 4, 5, 6}), F64({4, 3, 3, 3})},
     A({{"stride", L({2, 2})}, {"pad", L({1, 1})}}), 0, 0},
    // Matmul (plain 2-D rows also checked as both gradients).
    {"matmul", Op::matmul, {{7, 13}, {13, 5}}, {}},
    {"matmul_ta", Op::matmul, {{13, 7}, {13, 5}}, A({{"transpose_a", B(true)}})},
    {"matmul_tb", Op::matmul, {{7, 13}, {5, 13}}, A({{"transpose_b", B(true)}})},
    {"matmul_batched", Op::matmul, {{3, 4, 6, 9}, {3, 4, 9, 5}}, {}},
    {"matmul_shared_b", Op::matmul, {{3, 6, 9}, {9, 5}}, A({{"transpose_a", B(false)}})},
    {"matmul_batched_tt", Op::matmul, {{2, 9, 6}, {2, 5, 9}}, A({{"transpose_a", B(true)}, {"transpose_b", B(true)}})},
    {"matmul_shared_b_ta", Op::matmul, {{3, 9, 6}, {9, 5}}, A({{"transpose_a", B(true)}})},
    {"matmul_f64", Op::matmul, {F64({7, 13}), F64({13, 5})}, {}, 0, 0},
    // Normalization (each also checked as its grad, with a positive invstd).
    {"batch_norm", Op::batch_norm, {{4, 3, 5, 5}, {3}, {3}}, {}},
    {"batch_norm_2d_input", Op::batch_norm, {{8, 6}, {6}, {6}}, A({{"eps", F(1e-3)}})},
    {"batch_norm_odd", Op::batch_norm, {{3, 7, 9}, {7}, {7}}, {}},
    {"batch_norm_3d", Op::batch_norm, {{2, 3, 3, 4, 5}, {3}, {3}}, {}},
    {"batch_norm_f64", Op::batch_norm, {F64({4, 3, 5, 5}), F64({3}), F64({3})}, {}, 0, 0},
    {"layer_norm", Op::layer_norm, {{6, 33}, {33}, {33}}, {}},
    {"layer_norm_3d", Op::layer_norm, {{2, 3, 17}, {17}, {17}}, A({{"eps", F(1e-3)}})},
    {"layer_norm_rank1", Op::layer_norm, {{9}, {9}, {9}}, {}},
    // Elementwise (relu and gelu also checked as their grads).
    {"relu", Op::relu, {{4, 33}}, {}},
    // The cuda backend runs f32 relu, relu_grad and same-shape add and mul four elements at a time when the count
    // is a multiple of 4 (relu, add_same_by4, mul_same_by4), one at a time otherwise (relu_odd, add_same).
    {"relu_odd", Op::relu, {{3, 7}}, {}},
    {"add_same_by4", Op::add, {{2, 8, 6}, {2, 8, 6}}, {}},
    {"mul_same_by4", Op::mul, {{4, 10}, {4, 10}}, {}},
    {"gelu", Op::gelu, {In({4, 33}, DType::f32, -4, 4)}, {}},
    {"gelu_tanh", Op::gelu, {In({4, 33}, DType::f32, -4, 4)}, A({{"approximate", S("tanh")}})},
    {"silu", Op::silu, {In({4, 33}, DType::f32, -6, 6)}, {}},
    // The cpu backend's own loop (oneDNN's backward differs from PyTorch's at -3 and 3): the reference's bits.
    {"hardswish", Op::hardswish, {In({4, 33}, DType::f32, -5, 5)}, {}, 0},
    {"sigmoid", Op::sigmoid, {In({4, 33}, DType::f32, -6, 6)}, {}},
    {"tanh", Op::tanh, {In({4, 33}, DType::f32, -3, 3)}, {}},
    {"clamp", Op::clamp, {{4, 33}}, A({{"min", F(-0.5)}, {"max", F(0.25)}})},
    {"clamp_relu6", Op::clamp, {In({4, 33}, DType::f32, -8, 8)}, A({{"min", F(0)}, {"max", F(6)}})},
    {"clamp_max_only", Op::clamp, {{3, 7}}, A({{"max", F(0.1)}})},
    // Dropout is its own gradient (dropout of dy); the key is an i64[] state in graphs, any i64 scalar here.
    {"dropout", Op::dropout, {{4, 33}, Ids({}, int64_t{1} << 40, DType::i64)}, A({{"p", F(0.3)}, {"seed", I(7)}}), 0},
    {"rng_advance", Op::rng_advance, {Ids({}, int64_t{1} << 40, DType::i64)}, {}, 0},
    {"sqrt", Op::sqrt, {In({4, 33}, DType::f32, 0.1, 4)}, {}},
    // reciprocal is the reference kernel on the cpu backend (documented in dnnl_eltwise.cc).
    {"reciprocal", Op::reciprocal, {In({4, 33}, DType::f32, 0.5, 2)}, {}, 0, 0},
    {"exp", Op::exp, {In({4, 33}, DType::f32, -6, 6)}, {}},
    {"log", Op::log, {In({4, 33}, DType::f32, 0.05, 8)}, {}},
    // softplus is the reference kernel on the cpu backend (documented in dnnl_eltwise.cc); inputs past 20.
    {"softplus", Op::softplus, {In({4, 33}, DType::f32, -30, 30)}, {}, 0, 0},
    {"add_same", Op::add, {{3, 7, 5}, {3, 7, 5}}, {}},
    {"add_broadcast", Op::add, {{4, 5, 6}, {6}}, {}},
    {"add_broadcast_first", Op::add, {{5, 1}, {4, 5, 6}}, {}},
    // Both operands broadcast: oneDNN's binary cannot, so this documented case runs the reference kernel.
    {"add_both_broadcast", Op::add, {{4, 1, 6}, {5, 1}}, {}, 0, 0},
    {"mul_broadcast", Op::mul, {{3, 4, 5}, {3, 1, 5}}, {}},
    // Shapes whose index spaces the cuda dispatcher simplifies: a per-channel operand with size-1 dimensions,
    // and one broadcast along inner dimensions that merge.
    {"mul_channel", Op::mul, {{2, 3, 4, 5}, {1, 3, 1, 1}}, {}},
    {"add_inner_broadcast", Op::add, {{2, 3, 4, 5}, {2, 3, 1, 1}}, {}},
    {"bias_add", Op::bias_add, {{2, 3, 4, 4}, {3}}, {}},
    {"bias_add_last", Op::bias_add, {{5, 7}, {7}}, A({{"axis", I(-1)}})},
    {"scale", Op::scale, {{4, 33}}, A({{"factor", F(0.37)}})},
    // Softmax (non-causal rows also checked as softmax_grad).
    {"softmax", Op::softmax, {{3, 17}}, {}},
    {"softmax_axis1", Op::softmax, {{2, 6, 3}}, A({{"axis", I(1)}})},
    {"softmax_causal", Op::softmax, {{2, 5, 5}}, A({{"causal", B(true)}})},
    // Rows [2, 5) of a causal 5-column matrix (the chunk-attention pass's blocks of query rows).
    {"softmax_causal_offset", Op::softmax, {{2, 3, 5}}, A({{"causal", B(true)}, {"causal_offset", I(2)}})},
    // Pooling (each also checked as its grad).
    {"max_pool1d", Op::max_pool1d, {{2, 3, 11}}, A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
    {"max_pool2d", Op::max_pool2d, {{2, 3, 9, 9}}, A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})},
    {"max_pool2d_default_stride", Op::max_pool2d, {{1, 2, 8, 7}}, A({{"kernel", L({2, 2})}})},
    {"max_pool2d_wide", Op::max_pool2d, {{2, 17, 64, 64}}, A({{"kernel", L({2, 2})}})},  // see "_wide" below
    {"max_pool3d", Op::max_pool3d, {{1, 2, 5, 6, 7}}, A({{"kernel", L({2, 3, 2})}, {"stride", L({1, 2, 2})}})},
    // A window of 343 positions: the cuda backend's max_pool_grad finds its maximum per input element instead.
    {"max_pool3d_large_window", Op::max_pool3d, {{1, 2, 9, 9, 8}},
     A({{"kernel", L({7, 7, 7})}, {"stride", L({2, 2, 1})}})},
    // Every window tied (all zeros, as after a relu): dy goes to each window's first element.
    {"max_pool_grad_ties", Op::max_pool_grad, {{2, 3, 5, 5}, In({2, 3, 9, 9}, DType::f32, 0, 0)},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})},
    {"avg_pool1d", Op::avg_pool1d, {{2, 3, 10}}, A({{"kernel", L({3})}, {"stride", L({2})}, {"pad", L({1})}})},
    {"avg_pool2d", Op::avg_pool2d, {{2, 3, 9, 9}}, A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}})},
    {"avg_pool2d_exclude_pad", Op::avg_pool2d, {{2, 3, 9, 9}},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"count_include_pad", B(false)}})},
    {"avg_pool3d", Op::avg_pool3d, {{1, 2, 5, 6, 7}}, A({{"kernel", L({2, 2, 3})}, {"pad", L({1, 1, 1})}})},
    // ceil_mode: the last windows reach past the right padding. An average counting padding divides by the
    // positions inside the padded input there, which oneDNN's would not: the cpu backend runs the reference.
    {"max_pool1d_ceil", Op::max_pool1d, {{2, 3, 10}},
     A({{"kernel", L({3})}, {"stride", L({2})}, {"ceil_mode", B(true)}})},
    {"max_pool2d_ceil", Op::max_pool2d, {{2, 3, 10, 10}},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"ceil_mode", B(true)}})},
    {"avg_pool2d_ceil", Op::avg_pool2d, {{2, 3, 10, 10}},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"ceil_mode", B(true)}}), 0, 0},
    {"avg_pool2d_ceil_exclude_pad", Op::avg_pool2d, {{2, 3, 10, 10}},
     A({{"kernel", L({3, 3})}, {"stride", L({2, 2})}, {"pad", L({1, 1})}, {"ceil_mode", B(true)},
        {"count_include_pad", B(false)}})},
    {"avg_pool3d_ceil", Op::avg_pool3d, {{1, 2, 5, 6, 7}},
     A({{"kernel", L({2, 2, 2})}, {"ceil_mode", B(true)}}), 0, 0},
    // Reductions: the reference's double-accumulating loop, bit-identical.
    {"global_avg_pool", Op::global_avg_pool, {{2, 3, 5, 7}}, {}, 0},
    {"global_avg_pool3d", Op::global_avg_pool, {{2, 4, 3, 3, 3}}, {}, 0},
    {"mean_all", Op::mean, {{7, 9}}, {}, 0},
    {"mean_axis1", Op::mean, {{3, 4, 5}}, A({{"axes", L({1})}}), 0},
    {"mean_keepdims", Op::mean, {{3, 4, 5}}, A({{"axes", L({0, 2})}, {"keepdims", B(true)}}), 0},
    {"mean_middle_axes", Op::mean, {{3, 4, 5, 2}}, A({{"axes", L({1, 2})}}), 0},
    {"reduce_sum_last", Op::reduce_sum, {{6, 13}}, A({{"axes", L({-1})}}), 0},
    {"sum_to_row", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({6})}}), 0},
    {"sum_to_keep", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({4, 1, 6})}}), 0},
    {"sum_to_col", Op::sum_to, {{4, 5, 6}}, A({{"shape", L({5, 1})}}), 0},
    // Data movement: exact copies.
    {"broadcast_to", Op::broadcast_to, {{6}}, A({{"shape", L({4, 5, 6})}}), 0},
    {"broadcast_to_middle", Op::broadcast_to, {{4, 1, 6}}, A({{"shape", L({4, 5, 6})}}), 0},
    {"transpose", Op::transpose, {{2, 3, 4}}, A({{"perm", L({2, 0, 1})}}), 0},
    {"transpose_2d", Op::transpose, {{5, 7}}, A({{"perm", L({1, 0})}}), 0},
    {"transpose_last_two", Op::transpose, {{2, 3, 4, 5}}, A({{"perm", L({0, 1, 3, 2})}}), 0},
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
    // Rows named *_wide are above the cpu backend's OpenMP grain (32768 elements), so its own loops run on
    // threads (cpu_ops_test.cc checks them for the same bits on one thread and two).
    {"cross_entropy_wide", Op::cross_entropy, {{64, 1000}, Ids({64}, 1000)}, {}},
    {"cross_entropy_spatial_wide", Op::cross_entropy, {{2, 3, 80, 80}, Ids({2, 80, 80}, 3, DType::i64)}, {}},
    {"cross_entropy_grad_wide", Op::cross_entropy_grad, {{}, {64, 1000}, Ids({64}, 1000)}, {}},
    {"cross_entropy_grad_spatial_wide", Op::cross_entropy_grad, {{}, {2, 3, 80, 80}, Ids({2, 80, 80}, 3)}, {}},
    // Optimizer updates (in place) and batch-norm running statistics.
    {"sgd_update", Op::sgd_update, {{5, 7}, {5, 7}}, A({{"lr", F(0.1)}, {"weight_decay", F(0.01)}})},
    {"momentum_update", Op::momentum_update, {{5, 7}, {5, 7}, {5, 7}}, A({{"lr", F(0.1)}, {"weight_decay", F(0.01)}})},
    {"momentum_nesterov", Op::momentum_update, {{33}, {33}, {33}}, A({{"lr", F(0.1)}, {"nesterov", B(true)}})},
    {"momentum_update_wide", Op::momentum_update, {{256, 160}, {256, 160}, {256, 160}}, A({{"lr", F(0.1)}})},
    // t in [3, 4): the fourth or fifth step.
    {"adam_update", Op::adam_update, {{5, 7}, {5, 7}, Pos({5, 7}), In({}, DType::f32, 3, 4), {5, 7}},
     A({{"lr", F(0.01)}, {"weight_decay", F(0.01)}})},
    {"adamw_update", Op::adam_update, {{5, 7}, {5, 7}, Pos({5, 7}), In({}, DType::f32, 3, 4), {5, 7}},
     A({{"lr", F(0.01)}, {"weight_decay", F(0.1)}, {"decoupled_weight_decay", B(true)}})},
    // With a learning-rate scale (an input read at run time): lr x lr_scale.
    {"sgd_update_scaled", Op::sgd_update, {{5, 7}, {5, 7}, In({}, DType::f32, 0.2, 0.9)}, A({{"lr", F(0.1)}})},
    {"momentum_nesterov_scaled", Op::momentum_update, {{33}, {33}, {33}, In({}, DType::f32, 0.2, 0.9)},
     A({{"lr", F(0.1)}, {"nesterov", B(true)}})},
    {"adam_update_scaled", Op::adam_update,
     {{5, 7}, {5, 7}, Pos({5, 7}), In({}, DType::f32, 3, 4), {5, 7}, In({}, DType::f32, 0.2, 0.9)},
     A({{"lr", F(0.01)}, {"weight_decay", F(0.01)}})},
    {"adamw_update_scaled", Op::adam_update,
     {{5, 7}, {5, 7}, Pos({5, 7}), In({}, DType::f32, 3, 4), {5, 7}, In({}, DType::f32, 0.2, 0.9)},
     A({{"lr", F(0.01)}, {"weight_decay", F(0.1)}, {"decoupled_weight_decay", B(true)}})},
    {"bn_running_update", Op::bn_running_update, {{6}, Pos({6}), {6}, Pos({6})}, A({{"count", I(20)}})},
};

// The forward's output types.
inline std::vector<TensorType> forward_types(const OpCase& c) {
  auto attrs = normalize_attrs(op_def(c.op), c.attrs);
  if (!attrs) return {};  // a broken row: EveryGradientCaseIsBuilt names it
  std::vector<TensorType> in;
  for (const In& i : c.inputs) in.push_back(TensorType{i.dtype, i.shape});
  auto out = infer_types(c.op, in, *attrs);
  return out ? *out : std::vector<TensorType>{};
}

inline bool is_conv(Op op) { return op == Op::conv1d || op == Op::conv2d || op == Op::conv3d; }
inline bool is_conv_transpose(Op op) {
  return op == Op::conv_transpose1d || op == Op::conv_transpose2d || op == Op::conv_transpose3d;
}

// The gradient cases of a forward case (see the file comment). Shapes come from the forward's shape rule.
inline std::vector<OpCase> gradient_cases(const OpCase& c) {
  std::vector<TensorType> out = forward_types(c);
  if (out.empty()) return {};
  const Shape y = out.front().shape;
  const Shape x = c.inputs[0].shape;
  const DType t = c.inputs[0].dtype;  // every operand's (the forward ops take one float type)
  const std::string n = c.name;
  const double tol = c.tolerance;
  std::vector<OpCase> g;
  if (c.op == Op::matmul) {
    const bool ta = c.attrs.get_bool("transpose_a", false), tb = c.attrs.get_bool("transpose_b", false);
    if (ta || tb || c.inputs[1].shape.size() != 2 || x.size() != 2) return {};  // the plain 2-D form only
    g.push_back({n + ".grad_a", Op::matmul, {In(y, t), c.inputs[1]}, A({{"transpose_b", B(true)}}), tol});
    g.push_back({n + ".grad_b", Op::matmul, {c.inputs[0], In(y, t)}, A({{"transpose_a", B(true)}}), tol});
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
    g.push_back({n + ".backward_data", Op::conv_backward_data, {In(y, t), c.inputs[1]}, data, tol});
    g.push_back({n + ".backward_filter", Op::conv_backward_filter, {c.inputs[0], In(y, t)}, filter, tol});
  } else if (is_max_pool(c.op) || is_avg_pool(c.op)) {
    const int rank = static_cast<int>(x.size()) - 2;
    Attributes grad;
    const IntList kernel = c.attrs.get_ints("kernel", {});
    grad.set("kernel", L(kernel));
    grad.set("stride", L(c.attrs.get_ints("stride", kernel)));
    grad.set("pad", L(c.attrs.get_ints("pad", IntList(rank, 0))));
    if (c.attrs.get_bool("ceil_mode", false)) grad.set("ceil_mode", B(true));
    if (is_max_pool(c.op)) {
      g.push_back({n + ".grad", Op::max_pool_grad, {In(y), c.inputs[0]}, grad, tol});
      // The argmax-pool pair: positions are exact; random positions (padding ones included: dropped) to scatter.
      g.push_back({n + ".argmax", Op::max_pool_argmax, {c.inputs[0]}, grad, 0});
      int64_t volume = 1;
      for (int64_t k : kernel) volume *= k;
      Attributes by_argmax = grad;
      by_argmax.set("x_shape", L(x));
      g.push_back({n + ".grad_by_argmax", Op::max_pool_grad_by_argmax, {In(y), Ids(y, volume)}, by_argmax, tol});
    } else {
      grad.set("count_include_pad", B(c.attrs.get_bool("count_include_pad", true)));
      grad.set("x_shape", L(x));
      g.push_back({n + ".grad", Op::avg_pool_grad, {In(y)}, grad, tol});
    }
  } else if (c.op == Op::batch_norm || c.op == Op::layer_norm) {
    const Shape stats = out[1].shape;
    const Op op = c.op == Op::batch_norm ? Op::batch_norm_grad : Op::layer_norm_grad;
    g.push_back({n + ".grad", op, {In(x, t), In(x, t), c.inputs[1], In(stats, t), Pos(stats, t)}, {}, tol});
  } else if (c.op == Op::relu || c.op == Op::gelu || c.op == Op::silu || c.op == Op::hardswish || c.op == Op::clamp ||
             c.op == Op::log || c.op == Op::softplus) {
    const Op op = c.op == Op::relu        ? Op::relu_grad
                  : c.op == Op::gelu      ? Op::gelu_grad
                  : c.op == Op::silu      ? Op::silu_grad
                  : c.op == Op::hardswish ? Op::hardswish_grad
                  : c.op == Op::log       ? Op::log_grad
                  : c.op == Op::softplus  ? Op::softplus_grad
                                          : Op::clamp_grad;
    g.push_back({n + ".grad", op, {In(x), c.inputs[0]}, c.attrs, tol});
  } else if (c.op == Op::sigmoid || c.op == Op::tanh || c.op == Op::sqrt || c.op == Op::reciprocal) {
    // The grads read y: sigmoid's lies in (0, 1), tanh's in (-1, 1); sqrt's and reciprocal's kept from 0.
    const Op op = c.op == Op::sigmoid ? Op::sigmoid_grad
                  : c.op == Op::tanh  ? Op::tanh_grad
                  : c.op == Op::sqrt  ? Op::sqrt_grad
                                      : Op::reciprocal_grad;
    const double lo = c.op == Op::tanh ? -1 : c.op == Op::sigmoid ? 0 : 0.5;
    g.push_back({n + ".grad", op, {In(x), In(x, DType::f32, lo, c.op == Op::sqrt ? 2 : 1)}, {}, tol});
  } else if (c.op == Op::softmax && !c.attrs.get_bool("causal", false)) {
    // y is a softmax output in the real op; any values exercise the same formula.
    g.push_back({n + ".grad", Op::softmax_grad, {In(x), Pos(x)}, A({{"axis", I(c.attrs.get_int("axis", -1))}}), tol});
  }
  for (OpCase& e : g) e.fast_nodes = c.fast_nodes;  // a forward the cpu backend leaves to the reference: its grads too
  return g;
}

inline bool has_gradients(const OpCase& c) {
  return c.op == Op::matmul || is_conv(c.op) || is_max_pool(c.op) || is_avg_pool(c.op) || c.op == Op::batch_norm ||
         c.op == Op::layer_norm || c.op == Op::relu || c.op == Op::gelu || c.op == Op::silu || c.op == Op::hardswish ||
         c.op == Op::sigmoid || c.op == Op::tanh ||
         c.op == Op::clamp || c.op == Op::sqrt || c.op == Op::reciprocal || c.op == Op::log || c.op == Op::softplus ||
         (c.op == Op::softmax && !c.attrs.get_bool("causal", false));
}

inline std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (const OpCase& c : kCases) {
    all.push_back(c);
    if (has_gradients(c))
      for (OpCase& g : gradient_cases(c)) all.push_back(std::move(g));
  }
  return all;
}

// The case's inputs drawn from `seed` (input i from seed + i).
inline std::vector<HostTensor> inputs_of(const OpCase& c, uint64_t seed) {
  std::vector<HostTensor> data;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    data.push_back(ref_test::random(c.inputs[i].dtype, c.inputs[i].shape, seed + i, c.inputs[i].lo, c.inputs[i].hi));
  return data;
}

// Whether the memory planner may write the case's (first) output over one of its inputs (OpDef::reusable_input).
inline bool reuses_input(const OpCase& c) {
  const int k = op_def(c.op).reusable_input;
  if (k < 0) return false;
  std::vector<TensorType> types;
  for (const In& in : c.inputs) types.push_back(TensorType{in.dtype, in.shape});
  auto out = infer_types(c.op, types, c.attrs);
  return out && !out->empty() && (*out)[0].bytes() == types[static_cast<size_t>(k)].bytes() &&
         (*out)[0].dtype == types[static_cast<size_t>(k)].dtype;
}

// Runs one case as a one-node Program on `backend` (compiled with its workspaces) with inputs drawn from
// `seed`; returns the outputs (empty after a failure, which it reports). `kernel`, when given, receives the
// backend's kernel_description of the case's node. `over_input` (for reuses_input cases): the op's reusable
// input is first copied to the host and back (a reshape would be a view of the graph input, Note [Views]), the
// op reads the copy last, so the planner writes the output over the copy's buffer (Note [Buffer reuse];
// checked): the kernel runs with output = input.
inline std::vector<HostTensor> run_case(const OpCase& c, Backend& backend, uint64_t seed,
                                        std::string* kernel = nullptr, bool over_input = false) {
  Graph g(c.name);
  Builder b(g);
  std::vector<ValueId> inputs;
  std::vector<HostTensor> data = inputs_of(c, seed);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    inputs.push_back(b.input(TensorType{c.inputs[i].dtype, c.inputs[i].shape}, "in" + std::to_string(i)));
  std::vector<ValueId> args = inputs;
  const int k = op_def(c.op).reusable_input;
  if (over_input) {
    EXPECT_TRUE(reuses_input(c)) << c.name;
    if (!reuses_input(c)) return {};
    const ValueId host = b.op(Op::swap_out, {inputs[static_cast<size_t>(k)]}, {}, "host");
    args[static_cast<size_t>(k)] = b.op(Op::swap_in, {host}, {}, "copy");
  }
  std::vector<ValueId> outs = b.add(c.op, args, c.attrs, "out");
  EXPECT_TRUE(b.ok()) << c.name << ": " << b.error()->str();
  if (!b.ok()) return {};
  g.set_outputs(outs);
  auto program = compile(g, {}, &backend);  // with the backend's kernel workspaces
  EXPECT_TRUE(program.has_value()) << c.name << ": " << program.error().str();
  if (!program) return {};
  if (over_input) {
    const MemoryPlan& m = program->memory();
    const Graph& pg = program->graph();
    const std::optional<ValueId> copy = pg.find_value("copy");
    EXPECT_TRUE(copy && m.buffer_of_value[copy->v] == m.buffer_of_value[pg.outputs()[0].v])
        << c.name << ": the output does not reuse the input's buffer";
  }
  auto ex = Executor::create(*program, backend);
  EXPECT_TRUE(ex.has_value()) << c.name << ": " << ex.error().str();
  if (!ex) return {};
  EXPECT_TRUE(ex->initialize(seed).has_value());
  std::vector<Feed> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.push_back(Feed{inputs[i], &data[i]});
  auto r = ex->step(feeds);
  EXPECT_TRUE(r.has_value()) << c.name << ": " << r.error().str();
  if (!r) return {};
  if (kernel) {
    const Graph& pg = program->graph();
    for (NodeId n : pg.node_ids())
      if (pg.node(n).op == c.op) *kernel = backend.kernel_description(n);
  }
  return std::move(r->outputs);
}

// max|a - b| / max|b| (0 when b is all zeros and a equals it); infinite where exactly one of a pair is not
// finite, so a NaN never hides inside max().
inline double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.type.num_elements(); ++i) {
    if (std::isfinite(a.get(i)) != std::isfinite(b.get(i))) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
    scale = std::max(scale, std::abs(b.get(i)));
  }
  return scale > 0 ? diff / scale : diff;
}

// Expects `got` to match `want` output by output within `tolerance` (0: bit-identical).
inline void expect_match(const OpCase& c, std::string_view how, const std::vector<HostTensor>& got,
                         const std::vector<HostTensor>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size()) << c.name << " " << how;
  ASSERT_FALSE(want.empty()) << c.name << " " << how;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].type, want[i].type);
    double err = relative_error(got[i], want[i]);
    if (tolerance == 0)
      EXPECT_EQ(got[i].data, want[i].data) << c.name << " " << how << " output " << i << " (relative error " << err
                                           << ")";
    else
      EXPECT_LT(err, tolerance) << c.name << " " << how << " output " << i;
  }
}

// One direct kernel call of a case: inputs drawn from `seed`, outputs allocated (an in-place output shares its aliased
// input's buffer, as in an arena), and a workspace of `workspace` bytes, 64-byte aligned like a planned buffer and
// filled with kPoison first (a kernel that read scratch it had not written would see garbage, not zeros).
// `workspace_of` sees the call with types only (null data), as the planner asks; `run` the real call. `over_input` (for
// reuses_input cases): the first output is written over the op's reusable input, as a planner that reuses that input's
// buffer has it (Note [Buffer reuse]).
inline constexpr std::byte kPoison{0xA5};
struct DirectCall {
  std::vector<HostTensor> outputs;
  int64_t workspace = 0;  // the bytes workspace_of asked for
};
inline Result<DirectCall> run_direct_call(const OpCase& c, uint64_t seed,
                                          const std::function<Result<int64_t>(const KernelCall&)>& workspace_of,
                                          const std::function<Result<void>(const KernelCall&)>& run,
                                          int64_t shrink = 0, bool over_input = false) {
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
  if (over_input && !reuses_input(c)) return fail("{} does not write over an input", c.name);
  const auto reused = static_cast<size_t>(def.reusable_input);
  for (size_t o = 0; o < outs.size(); ++o) {
    void* p = o < def.aliases.size() ? in_refs[static_cast<size_t>(def.aliases[o])].data : outs[o].data.data();
    out_refs.push_back({&outs[o].type, over_input && o == 0 ? in_refs[reused].data : p});
  }
  for (const TensorRef& r : in_refs) in_types_only.push_back({r.type, nullptr});
  for (const TensorRef& r : out_refs) out_types_only.push_back({r.type, nullptr});
  DirectCall result;
  result.workspace = LMS_TRY(workspace_of(KernelCall{c.op, &attrs, in_types_only, out_types_only, nullptr, 0}));
  const int64_t given = result.workspace - shrink;
  constexpr size_t kAlign = 64;
  std::vector<std::byte> storage(static_cast<size_t>(std::max<int64_t>(given, 0)) + kAlign, kPoison);
  std::byte* ws = storage.data() + (kAlign - reinterpret_cast<uintptr_t>(storage.data()) % kAlign) % kAlign;
  // A planned workspace pointer even when nothing is needed, so no private allocation can hide a size error.
  LMS_TRY_VOID(run(KernelCall{c.op, &attrs, in_refs, out_refs, ws, given}));
  for (size_t o = 0; o < outs.size(); ++o)
    if (o < def.aliases.size()) outs[o].data = ins[static_cast<size_t>(def.aliases[o])].data;
  if (over_input) outs[0].data = ins[reused].data;
  result.outputs = std::move(outs);
  return result;
}

// The reference kernel as a direct call (no workspace).
inline Result<DirectCall> run_reference_call(const OpCase& c, uint64_t seed) {
  return run_direct_call(
      c, seed, [](const KernelCall&) -> Result<int64_t> { return 0; }, run_reference_kernel);
}

// How gtest prints a case (its name, not its bytes).
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// The test name of a case (gtest allows no dots).
inline std::string test_name(const ::testing::TestParamInfo<OpCase>& info) {
  std::string n = info.param.name;
  std::replace(n.begin(), n.end(), '.', '_');
  return n;
}

}  // namespace lms::op_cases
