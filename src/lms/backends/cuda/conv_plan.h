// The cuda backend's convolutions as cuDNN sees them (cudnn_conv.cc), as a plain function of the call, so that
// the host tests check the mapping against the reference without a GPU. Every convolution op is one pass of one
// plain convolution x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out] (cross-correlation, symmetric padding):
//   conv1d/2d/3d          (x, w) -> y      forward
//   conv_backward_data    (dy, w) -> dx    backward_data: dy is y's gradient, dx x's
//   conv_backward_filter  (x, dy) -> dw    backward_filter
//   conv_transpose*d      (x, w) -> out    backward_data of the convolution out -> x with weight w (the
//                                          reference's definition; w[Ci_t, Co_t/g, *k] is that convolution's
//                                          [Co, Ci/g, *k]), so its input plays dy and its output dx.
// cuDNN's legacy descriptors take at least 4-D tensors: a 1-D convolution gets a trailing size-1 dimension
// (kernel 1, stride 1, pad 0, dilation 1). The geometry is checked with the reference's conditions, because the
// descriptors are built from it. Refused: a conv_transpose whose output_pad >= stride (allowed by the shape rule
// when output_pad < dilation) needs asymmetric padding, which the legacy descriptors cannot express.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lms/backends/cuda/conv_gemm_fns.h"
#include "lms/backends/reference/kernel_util.h"
#include "lms/runtime/backend.h"
#include "lms/runtime/kernel.h"

namespace lms::cuda {

enum class ConvPass { forward, backward_data, backward_filter };

struct ConvPlan {
  ConvPass pass = ConvPass::forward;
  Shape x, w, y;                           // the plain convolution's operands (4-D or 5-D after init_plan)
  std::vector<int64_t> stride, pad, dil;   // per spatial dimension of x
  int64_t groups = 1;
};

// Checks x[N,Ci,*in] * w[Co,Ci/g,*k] -> y[N,Co,*out] as the reference does (same conditions): every size must
// agree with the convolution formula, since the descriptors are built from them.
inline Result<ConvPlan> conv_shapes(const KernelCall& call, const Shape& x, const Shape& w, const Shape& y) {
  const std::string_view name = op_name(call.op);
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > 3 || w.size() != x.size() || y.size() != x.size())
    return fail("cuda backend: {} needs x, w and y of one rank 3..5, got {}, {} and {}", name, to_string(x),
                to_string(w), to_string(y));
  ConvPlan s{ConvPass::forward, x, w, y, {}, {}, {}, call.attrs->get_int("groups", 1)};
  if (s.groups < 1) return fail("cuda backend: {} attribute 'groups' = {} must be at least 1", name, s.groups);
  const reference::Args args(call);
  s.stride = LMS_TRY(reference::spatial_attr(args, "stride", rank, 1));
  s.pad = LMS_TRY(reference::spatial_attr(args, "pad", rank, 0));
  s.dil = LMS_TRY(reference::spatial_attr(args, "dilation", rank, 1));
  if (y[0] != x[0] || x[1] % s.groups != 0 || y[1] % s.groups != 0 || w[0] != y[1] || w[1] * s.groups != x[1])
    return fail("cuda backend: {} channels do not agree: x {}, w {}, y {}, groups {}", name, to_string(x),
                to_string(w), to_string(y), s.groups);
  for (int i = 0; i < rank; ++i) {
    const size_t d = static_cast<size_t>(2 + i), a = static_cast<size_t>(i);
    if (s.stride[a] < 1 || s.dil[a] < 1 || s.pad[a] < 0 || w[d] < 1)
      return fail("cuda backend: {} stride {}, dilation {}, pad {}, kernel {} out of range along spatial dimension {}",
                  name, s.stride[a], s.dil[a], s.pad[a], w[d], i);
    const int64_t span = x[d] + 2 * s.pad[a] - s.dil[a] * (w[d] - 1) - 1;
    if (span < 0 || span / s.stride[a] + 1 != y[d])
      return fail("cuda backend: {} spatial dimension {}: input {} with kernel {}, stride {}, pad {}, dilation {} "
                  "does not give output {} (x {}, y {})",
                  name, i, x[d], w[d], s.stride[a], s.pad[a], s.dil[a], y[d], to_string(x), to_string(y));
  }
  return s;
}

// conv_transpose(x, w) -> out is the backward-data of the convolution out -> x. The reference checks that
// convolution on `out` without its output_pad trailing positions; cuDNN checks it on the whole `out` with the
// same floor division, which agrees while output_pad < stride. The positions output_pad adds are then computed by
// cuDNN exactly as by the reference (the last windows reach into them when pad > 0; elsewhere they are zero).
inline Result<ConvPlan> transpose_shapes(const KernelCall& call) {
  const Shape &x = call.inputs[0].type->shape, &w = call.inputs[1].type->shape, &out = call.outputs[0].type->shape;
  const int rank = static_cast<int>(x.size()) - 2;
  if (rank < 1 || rank > 3 || out.size() != x.size())
    return fail("cuda backend: {} needs input and output of one rank 3..5, got {} and {}", op_name(call.op),
                to_string(x), to_string(out));
  const std::vector<int64_t> output_pad =
      LMS_TRY(reference::spatial_attr(reference::Args(call), "output_pad", rank, 0));
  Shape conv_in = out;
  for (int i = 0; i < rank; ++i) conv_in[static_cast<size_t>(2 + i)] -= output_pad[static_cast<size_t>(i)];
  ConvPlan s = LMS_TRY(conv_shapes(call, conv_in, w, x));
  for (int i = 0; i < rank; ++i) {
    const size_t d = static_cast<size_t>(2 + i), a = static_cast<size_t>(i);
    const int64_t span = out[d] + 2 * s.pad[a] - s.dil[a] * (w[d] - 1) - 1;
    if (span / s.stride[a] + 1 != x[d])
      return fail("cuda backend: {} output_pad {} >= stride {} along spatial dimension {} needs asymmetric padding, "
                  "which cuDNN's convolution descriptors cannot express (x {}, w {}, out {})",
                  op_name(call.op), output_pad[a], s.stride[a], i, to_string(x), to_string(w), to_string(out));
  }
  s.x = out;
  return s;
}

// A convolution pass as cuBLAS strided-batched gemms, one per sample (conv_gemm.cc), for the ungrouped
// convolutions with at most 3 spatial dimensions that DnnOptions::conv_gemm takes: every 1x1 unpadded one
// (ConvGemm::one_by_one), and also every strided one (stride > 1 along some spatial dimension; ConvGemm::strided).
// With P the output's spatial size, R = Ci * the kernel's volume, and in cuBLAS's column-major terms (our
// row-major [R, C] is its [C, R]), each sample s is:
//   forward          y^T = X^T w^T:  A = X [P, R], B = w [R, Co] (shared: batch stride 0), C = y [P, Co]
//   backward_data    dX^T = dy^T w:  A = dy [P, Co], op(B) = B^T with B = w [R, Co] (shared), C = dX [P, R]
//   backward_filter  dw^T = X dy^T:  op(A) = A^T with A = X [P, R], B = dy [P, Co], C = partial [R, Co]
// where X is x itself for a 1x1 stride-1 convolution and otherwise its column matrix [R, P] (Im2Col, in the
// workspace; backward-data computes dX there and Col2Im sums it into dx). A is always the call's first input
// (or its columns) and B its second; the calls take `group` samples at a time (the last call the rest). The
// backward-filter's samples write partials, which SumPartials adds into dw in sample order; unless one sample's
// partial would be larger than its X and dy together (large weights over small images: resnet50's last stage),
// when backward-filter `regroup`s instead: the group's X and dy side by side in the workspace as [R, group * P]
// and [Co, group * P] (Im2Col with the samples inner), one gemm dw^T = X dy^T over K = group * P per call, each
// call after the first adding into dw (beta = 1). That needs no partials and runs one large gemm instead of
// many with K = P. Forward and backward-data of a 1x1 stride-1 convolution write their output in one call over
// the whole batch. The weight is shared with a batch stride of 0, which cuBLAS accepts (NVIDIA's MatX relies on
// it, MatX PR 473; gemm_plan.h's matmul avoids it); CudaConvGemm checks it on a GPU.
struct GemmConvPlan {
  bool transpose_a = false, transpose_b = false;    // op(A) = A^T, op(B) = B^T
  int64_t m = 0, n = 0, k = 0;                       // C is m x n, the sum over k
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between samples (0: shared by every sample)
  int64_t batch = 0;                                 // samples in all
  int64_t group = 1;                                 // samples per call (the last call takes the rest)
  bool columns = false;     // the gemms run on column matrices in the workspace (Im2Col, Col2Im over `windows`)
  bool regroup = false;     // backward-filter: each call's samples regrouped, one gemm over K = samples * P
  ConvColumns windows{};    // columns or regroup: the geometry of one sample's column matrix
  ConvColumns dy_windows{};  // regroup: dy's, as the column matrix of a 1x1 convolution over dy
  int64_t x_sample = 0;     // columns or regroup: elements of one sample of x (or dx)
  int64_t cols_sample = 0;  // columns or regroup: elements of one sample's column matrix (R * P)
  int64_t dy_sample = 0;    // regroup: elements of one sample of dy (Co * P)
  int64_t spatial = 0;      // P
};

// The windows of a convolution plan over up to 3 spatial dimensions (trailing ones trivial); `narrow` when every
// offset of `samples` samples of x and of their column matrices fits 32 bits.
inline ConvColumns conv_columns(const ConvPlan& p, int64_t samples) {
  ConvColumns w{};
  const size_t spatial = p.stride.size();
  w.channels = p.x[1];
  for (size_t d = 0; d < 3; ++d) {
    const bool here = d < spatial;
    w.in[d] = here ? p.x[2 + d] : 1;
    w.out[d] = here ? p.y[2 + d] : 1;
    w.k[d] = here ? p.w[2 + d] : 1;
    w.stride[d] = here ? p.stride[d] : 1;
    w.pad[d] = here ? p.pad[d] : 0;
    w.dil[d] = here ? p.dil[d] : 1;
  }
  const int64_t most = samples * std::max(w.rows() * w.out_plane(), w.channels * w.in_plane());
  w.narrow = most + std::max({w.pad[0], w.pad[1], w.pad[2]}) <= int64_t{UINT32_MAX};
  return w;
}

// The plan of `p` with at most `max_elements` elements of partials (backward-filter) and at most `max_elements`
// of column matrices at once; or nothing when `which` does not take it (grouped, a stride-1 convolution with a
// larger kernel or padding, more than 3 spatial dimensions) or it has an empty dimension.
inline std::optional<GemmConvPlan> gemm_conv_plan(const ConvPlan& p, int64_t max_elements, ConvGemm which) {
  const size_t spatial = p.stride.size();
  if (which == ConvGemm::off || p.groups != 1 || spatial > 3) return std::nullopt;
  bool one_by_one = true, strided = false;
  for (size_t i = 0; i < spatial; ++i) {
    one_by_one = one_by_one && p.w[2 + i] == 1 && p.pad[i] == 0;
    strided = strided || p.stride[i] != 1;
  }
  if (!one_by_one && !(strided && which == ConvGemm::strided)) return std::nullopt;
  const int64_t volume = reference::product(p.w, 2, p.w.size());
  const int64_t r = p.x[1] * volume, co = p.y[1], P = reference::product(p.y, 2, p.y.size());
  GemmConvPlan g;
  g.batch = p.x[0];
  if (r < 1 || co < 1 || P < 1 || g.batch < 1) return std::nullopt;
  g.group = g.batch;
  switch (p.pass) {
    case ConvPass::forward:
      g.m = P, g.n = co, g.k = r;
      g.lda = P, g.ldb = r, g.ldc = P;
      g.stride_a = r * P, g.stride_b = 0, g.stride_c = co * P;
      break;
    case ConvPass::backward_data:
      g.transpose_b = true;
      g.m = P, g.n = r, g.k = co;
      g.lda = P, g.ldb = r, g.ldc = P;
      g.stride_a = co * P, g.stride_b = 0, g.stride_c = r * P;
      break;
    case ConvPass::backward_filter:
      g.transpose_a = true;
      g.m = r, g.n = co, g.k = P;
      g.lda = P, g.ldb = P, g.ldc = r;
      g.stride_a = r * P, g.stride_b = co * P, g.stride_c = r * co;
      g.group = std::clamp<int64_t>(max_elements / g.stride_c, 1, g.batch);
      break;
  }
  g.spatial = P;
  g.x_sample = reference::product(p.x, 1, p.x.size());
  g.cols_sample = r * P;
  // backward-filter: a sample's partial larger than its X and dy together regroups instead
  if (p.pass == ConvPass::backward_filter && r * co > (r + co) * P) {
    g.regroup = true;
    g.dy_sample = co * P;
    g.group = std::clamp<int64_t>(max_elements / (g.cols_sample + g.dy_sample), 1, g.batch);
    g.windows = conv_columns(p, g.group);
    ConvPlan over_dy = p;  // dy as the input of a 1x1 unstrided convolution: its own column matrix
    over_dy.x = p.y;
    std::fill(over_dy.w.begin() + 2, over_dy.w.end(), 1);
    std::fill(over_dy.stride.begin(), over_dy.stride.end(), 1);
    std::fill(over_dy.pad.begin(), over_dy.pad.end(), 0);
    std::fill(over_dy.dil.begin(), over_dy.dil.end(), 1);
    g.dy_windows = conv_columns(over_dy, g.group);
    return g;
  }
  if (!strided) return g;  // 1x1, stride 1: x is its own column matrix
  g.columns = true;
  g.group = std::min(g.group, std::clamp<int64_t>(max_elements / g.cols_sample, 1, g.batch));
  g.windows = conv_columns(p, g.group);
  return g;
}

// The plan of a convolution-family call (see the file comment). Errors: an op outside the family, shapes or
// attributes the reference would refuse, or a transposed convolution cuDNN cannot express.
inline Result<ConvPlan> conv_plan(const KernelCall& call) {
  auto in = [&](size_t i) -> const Shape& { return call.inputs[i].type->shape; };
  const Shape& out = call.outputs[0].type->shape;
  ConvPlan p;
  switch (call.op) {
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d: p = LMS_TRY(conv_shapes(call, in(0), in(1), out)); break;
    case Op::conv_backward_data:  // (dy, w) -> dx
      p = LMS_TRY(conv_shapes(call, out, in(1), in(0)));
      p.pass = ConvPass::backward_data;
      break;
    case Op::conv_backward_filter:  // (x, dy) -> dw
      p = LMS_TRY(conv_shapes(call, in(0), out, in(1)));
      p.pass = ConvPass::backward_filter;
      break;
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::conv_transpose3d:
      p = LMS_TRY(transpose_shapes(call));
      p.pass = ConvPass::backward_data;
      break;
    default: return fail("cuda backend: {} is not a convolution", op_name(call.op));
  }
  if (p.x.size() == 3) {  // NCW -> NCW1 with a trivial second spatial dimension
    for (Shape* s : {&p.x, &p.w, &p.y}) s->push_back(1);
    p.stride.push_back(1);
    p.pad.push_back(0);
    p.dil.push_back(1);
  }
  return p;
}

}  // namespace lms::cuda
