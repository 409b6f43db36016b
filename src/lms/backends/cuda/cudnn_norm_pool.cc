// cuDNN batch normalization and pooling for the cuda backend (cuda_dnn_util.h):
//   batch_norm       (x, gamma, beta) -> (y, mean, invstd): cudnnBatchNormalizationForwardTraining in
//                    CUDNN_BATCHNORM_SPATIAL mode (not SPATIAL_PERSISTENT, whose fast kernels may compute the
//                    statistics with less accuracy), writing cuDNN's saved mean and saved inverse standard deviation
//                    1/sqrt(var + eps) (biased variance) straight into mean and invstd. No running statistics: they
//                    are the separate bn_running_update op, and cuDNN takes NULL for both running pointers.
//   batch_norm_grad is an own kernel (cuda_ops.h), not cuDNN: the memory planner may give dx dy's buffer (Note
//                    [Buffer reuse], plan/liveness.h), which cudnnBatchNormalizationBackward does not document.
//   max_pool1d/2d/3d, avg_pool1d/2d/3d: cudnnPoolingForward (CUDNN_POOLING_MAX_DETERMINISTIC, NaN propagating;
//                    CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING or _EXCLUDE_PADDING per count_include_pad);
//                    with ceil_mode they are own kernels instead (cuDNN's padding is symmetric).
//   max_pool_grad and avg_pool_grad are own kernels (cuda_ops.h), not cuDNN: the reference sends dy to the FIRST
//                    maximum of a window, and which of tied maxima cuDNN's backward picks is undocumented (ties
//                    are common after a relu: zeros); cuDNN's average backward wants y and x pointers whose use it
//                    does not document, and the own kernel is bit-identical to the reference.
// x[N, C, *sp] is cuDNN's 4-D or 5-D tensor: 1-D pooling and [N,C] / [N,C,L] batch norm get trailing size-1
// dimensions (window 1, stride 1, pad 0), batch norm above rank 5 folds its spatial dimensions into one. Geometry
// follows the reference (PyTorch, ceil_mode off here): stride defaults to the kernel, pad to zeros, pad <=
// kernel/2.
// Precondition: the call passed the op's shape rule; the shapes the descriptors are built from are rechecked.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "lms/backends/cuda/cuda_dnn_util.h"

namespace lms::cuda {

namespace {

// ---- batch normalization ----

// x[N, C, *sp] as cuDNN sees it: [N, C] and [N, C, L] get trailing 1s, NCHW and NCDHW stay, higher ranks become
// [N, C, S, 1] (the same bytes and the same per-channel element sets, which is all spatial mode looks at).
std::vector<int64_t> bn_dims(const Shape& x) {
  if (x.size() == 4 || x.size() == 5) return x;
  return {x[0], x[1], product(x, 2, x.size()), 1};
}

Result<void> expect_type(const KernelCall& call, std::string_view what, const TensorType& got, const TensorType& want) {
  if (got != want)
    return fail("cuda backend: {} {} must be {}, got {}", op_name(call.op), what, to_string(want), to_string(got));
  return {};
}

class BatchNormKernel final : public PreparedKernel {
 public:
  BatchNormKernel(DnnContext& ctx, const KernelCall& call, cudnnDataType_t t, double eps)
      : ctx_(ctx), op_(call.op), dtype_(t), eps_(eps) {
    for (const TensorRef& r : call.inputs) in_.push_back(r.data);
    for (const TensorRef& r : call.outputs) out_.push_back(r.data);
  }

  Result<void> init(const Shape& x) {
    x_ = LMS_TRY(packed_tensor(bn_dims(x), dtype_, op_));
    stats_ = LMS_TRY(TensorDesc::make("cudnnCreateTensorDescriptor", op_));
    // 1 x C x 1 x 1 (x 1), of x's type for f32 and f64 data.
    return cudnn_ok(cudnnDeriveBNTensorDescriptor(stats_.get(), x_.get(), CUDNN_BATCHNORM_SPATIAL),
                    "cudnnDeriveBNTensorDescriptor", op_);
  }

  std::string describe() const override { return "cuDNN batch normalization (spatial)"; }

  // (x, gamma, beta) -> (y, mean, invstd); exponentialAverageFactor is unused without running statistics.
  Result<void> run() override {
    const Scaling s = scaling_for(dtype_);
    constexpr double kNoRunningAverage = 0.0;
    return cudnn_ok(cudnnBatchNormalizationForwardTraining(ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, s.one, s.zero, x_.get(),
                                                           in_[0], x_.get(), out_[0], stats_.get(), in_[1], in_[2],
                                                           kNoRunningAverage, nullptr, nullptr, eps_, out_[1], out_[2]),
                    "cudnnBatchNormalizationForwardTraining", op_);
  }

 private:
  DnnContext& ctx_;
  Op op_;
  cudnnDataType_t dtype_;
  double eps_;
  std::vector<void*> in_, out_;  // the call's buffers in op order
  TensorDesc x_;                 // x and y share it
  TensorDesc stats_;             // gamma, beta, mean and invstd share it
};

// ---- pooling ----

struct PoolGeometry {
  std::vector<int64_t> kernel, stride, pad;  // one entry per spatial dimension
};

// The window of pooling x -> y, checked by the reference's pool_geometry (the descriptors are built from it).
Result<PoolGeometry> pool_geometry(const KernelCall& call, const Shape& x, const Shape& y) {
  const reference::Windows w = LMS_TRY(reference::pool_geometry(reference::Args(call), x, y));
  PoolGeometry g;
  for (size_t d = reference::kMaxSpatial - (x.size() - 2); d < reference::kMaxSpatial; ++d) {
    g.kernel.push_back(w[d].k);
    g.stride.push_back(w[d].stride);
    g.pad.push_back(w[d].pad);
  }
  return g;
}

class PoolKernel final : public PreparedKernel {
 public:
  PoolKernel(DnnContext& ctx, const KernelCall& call, cudnnDataType_t t)
      : ctx_(ctx), op_(call.op), dtype_(t), in_(call.inputs[0].data), out_(call.outputs[0].data) {}

  // x: the pooled input's shape, y: the pooled output's.
  Result<void> init(const Shape& x, const Shape& y, const PoolGeometry& g, cudnnPoolingMode_t mode) {
    std::vector<int64_t> xd = x, yd = y, kernel = g.kernel, stride = g.stride, pad = g.pad;
    if (x.size() == 3) {  // NCW -> NCW1 with a trivial second window dimension
      xd.push_back(1);
      yd.push_back(1);
      kernel.push_back(1);
      stride.push_back(1);
      pad.push_back(0);
    }
    x_ = LMS_TRY(packed_tensor(xd, dtype_, op_));
    y_ = LMS_TRY(packed_tensor(yd, dtype_, op_));
    const size_t spatial = kernel.size();
    std::vector<int> k(spatial), st(spatial), pd(spatial);
    for (size_t i = 0; i < spatial; ++i) {
      k[i] = LMS_TRY(to_int(kernel[i], "a window size", op_));
      st[i] = LMS_TRY(to_int(stride[i], "a stride", op_));
      pd[i] = LMS_TRY(to_int(pad[i], "a padding", op_));
    }
    pool_ = LMS_TRY(PoolingDesc::make("cudnnCreatePoolingDescriptor", op_));
    // NaN propagation: a window holding a NaN pools to NaN, as in the reference (and PyTorch).
    LMS_TRY_VOID(cudnn_ok(cudnnSetPoolingNdDescriptor(pool_.get(), mode, CUDNN_PROPAGATE_NAN, static_cast<int>(spatial),
                                                      k.data(), pd.data(), st.data()),
                          "cudnnSetPoolingNdDescriptor", op_));
    return {};
  }

  std::string describe() const override { return "cuDNN pooling"; }

  Result<void> run() override {
    const Scaling s = scaling_for(dtype_);
    return cudnn_ok(cudnnPoolingForward(ctx_.cudnn, pool_.get(), s.one, x_.get(), in_, s.zero, y_.get(), out_),
                    "cudnnPoolingForward", op_);
  }

 private:
  DnnContext& ctx_;
  Op op_;
  cudnnDataType_t dtype_;
  const void* in_;  // x
  void* out_;       // y
  TensorDesc x_, y_;
  PoolingDesc pool_;
};

cudnnPoolingMode_t pooling_mode(const KernelCall& call, bool average) {
  if (!average) return CUDNN_POOLING_MAX_DETERMINISTIC;
  return call.attrs->get_bool("count_include_pad", true) ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                         : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

// Empty operands: nothing to do when the output is empty too; otherwise some window holds no input element, which
// the reference does not define either.
Result<std::optional<PreparedPtr>> empty_pool(DnnContext& ctx, const KernelCall& call) {
  if (!any_empty(call)) return std::optional<PreparedPtr>();
  if (call.outputs[0].type->num_elements() == 0) return std::optional<PreparedPtr>(zero_fill_kernel(ctx, call));
  return fail("cuda backend: {} of {} -> {} has windows without input elements", op_name(call.op),
              to_string(*call.inputs[0].type), to_string(*call.outputs[0].type));
}

}  // namespace

Result<PreparedPtr> build_norm(DnnContext& ctx, const KernelCall& call) {
  const cudnnDataType_t t = LMS_TRY(common_dnn_dtype(call));
  if (call.op != Op::batch_norm) return fail("cuda backend: {} is not cuDNN's batch norm", op_name(call.op));
  const TensorType& xt = *call.inputs[0].type;
  const Shape& xs = xt.shape;
  if (xs.size() < 2)
    return fail("cuda backend: {} input x must have rank >= 2 (N, C, ...), got {}", op_name(call.op), to_string(xt));
  const TensorType per_channel{xt.dtype, {xs[1]}};
  const OpDef& def = op_def(call.op);
  for (size_t i : {1u, 2u}) LMS_TRY_VOID(expect_type(call, def.inputs[i], *call.inputs[i].type, per_channel));
  LMS_TRY_VOID(expect_type(call, def.outputs[0], *call.outputs[0].type, xt));
  for (size_t i : {1u, 2u}) LMS_TRY_VOID(expect_type(call, def.outputs[i], *call.outputs[i].type, per_channel));
  if (xs[0] * product(xs, 2, xs.size()) == 0)
    return fail("cuda backend: {} of {} has no elements per channel", op_name(call.op), to_string(xt));
  if (xs[1] == 0) return zero_fill_kernel(ctx, call);  // no channels: every output is empty
  const double eps = number_attr(def, *call.attrs, "eps");
  if (!(eps >= CUDNN_BN_MIN_EPSILON) || !std::isfinite(eps))
    return fail("cuda backend: {} eps {} is below cuDNN's minimum CUDNN_BN_MIN_EPSILON = {} (or not finite)",
                op_name(call.op), eps, CUDNN_BN_MIN_EPSILON);
  auto k = std::make_unique<BatchNormKernel>(ctx, call, t, eps);
  LMS_TRY_VOID(k->init(xs));
  return PreparedPtr(std::move(k));
}

Result<PreparedPtr> build_pool(DnnContext& ctx, const KernelCall& call) {
  const cudnnDataType_t t = LMS_TRY(common_dnn_dtype(call));
  switch (call.op) {
    case Op::max_pool1d:
    case Op::max_pool2d:
    case Op::max_pool3d:
    case Op::avg_pool1d:
    case Op::avg_pool2d:
    case Op::avg_pool3d: {
      const bool average = call.op == Op::avg_pool1d || call.op == Op::avg_pool2d || call.op == Op::avg_pool3d;
      const Shape &x = in_shape(call, 0), &y = out_shape(call, 0);
      const PoolGeometry g = LMS_TRY(pool_geometry(call, x, y));
      if (auto e = LMS_TRY(empty_pool(ctx, call))) return std::move(*e);
      auto k = std::make_unique<PoolKernel>(ctx, call, t);
      LMS_TRY_VOID(k->init(x, y, g, pooling_mode(call, average)));
      return PreparedPtr(std::move(k));
    }
    default: return fail("cuda backend: {} is not a pooling op", op_name(call.op));
  }
}

}  // namespace lms::cuda
