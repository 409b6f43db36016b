// The own kernels' normalization, loss and optimizer ops (own_ops.h): layer norm and its gradient, batch norm's
// gradient and running statistics, cross-entropy and its gradient, and the SGD, momentum and Adam updates, each
// bound to its element functions (kernel_fns.h) for cuda_ops.cc's dispatch.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "lms/backends/cuda/own_ops.h"

namespace lms::cuda::own {

Result<OwnKernel> layer_norm(const Args& a, const Launcher& l) {
  const Shape& x = a.in(0).shape;
  const int64_t width = x.back(), rows = reference::product(x, 0, x.size() - 1);
  if (width == 0) return fail("{} of {} normalizes over an empty last dimension", a.name(), to_string(a.in(0)));
  const double eps = a.c.f("eps");
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l,
                  LayerNorm<T>{in<T>(a, 0), in<T>(a, 1), in<T>(a, 2), out<T>(a, 0), out<T>(a, 1), out<T>(a, 2), width,
                               eps},
                  rows);
  });
}

Result<OwnKernel> layer_norm_grad(const Args& a, const Launcher& l) {
  const Shape& x = a.in(1).shape;
  const int64_t width = x.back(), rows = reference::product(x, 0, x.size() - 1);
  if (width == 0) return fail("{} of {} normalizes over an empty last dimension", a.name(), to_string(a.in(1)));
  return for_float(a, a.in(1).dtype, [&]<class T>() -> Result<OwnKernel> {
    const T *dy = in<T>(a, 0), *xp = in<T>(a, 1), *gamma = in<T>(a, 2), *mean = in<T>(a, 3), *invstd = in<T>(a, 4);
    // The columns read dy before the rows write dx, which may be dy's buffer (Note [Buffer reuse]).
    return sequence({step(l, LayerNormGradColumns<T>{dy, xp, mean, invstd, out<T>(a, 1), out<T>(a, 2), width, rows},
                          width),
                     step(l, LayerNormGradRows<T>{dy, xp, gamma, mean, invstd, out<T>(a, 0), width}, rows)});
  });
}

namespace {

// batch_norm_grad's partial sums (kernel_fns.h BnGradLanes, BnGradGroups): about kBnGradThreads (channel, lane)
// pairs in all, enough threads to keep a GPU's memory busy, never more lanes than a channel has elements; past
// kBnGradOneLevel lanes a channel's lanes are added in groups of kBnGradGroup, then the groups, so no thread adds
// more than a few hundred partial sums.
constexpr int64_t kBnGradThreads = int64_t{1} << 18;
constexpr int64_t kBnGradOneLevel = 256;
constexpr int64_t kBnGradGroup = 64;

struct BnGradSums {
  int64_t channels = 0, count = 0, lanes = 1, groups = 0;  // groups = 0: the channels add the lanes directly
  explicit BnGradSums(const TensorType& x)
      : channels(x.shape[1]), count(x.shape[0] * reference::product(x.shape, 2, x.shape.size())) {
    lanes = std::clamp<int64_t>(kBnGradThreads / std::max<int64_t>(channels, 1), 1, std::max<int64_t>(count, 1));
    if (lanes > kBnGradOneLevel) groups = (lanes + kBnGradGroup - 1) / kBnGradGroup;
  }
  // Doubles of the workspace: the lane sums, the group sums, then the channel sums, two each.
  int64_t lane_doubles() const { return 2 * channels * lanes; }
  int64_t group_doubles() const { return 2 * channels * groups; }
  int64_t doubles() const { return lane_doubles() + group_doubles() + 2 * channels; }
};

}  // namespace

int64_t bn_grad_workspace(const TensorType& x) {
  return x.rank() < 2 ? 0 : static_cast<int64_t>(sizeof(double)) * BnGradSums(x).doubles();
}

// batch_norm_grad (dy, x, gamma, mean, invstd) -> (dx, dgamma, dbeta): lane sums, (group sums,) channel sums, then
// dx (dx may be dy's buffer: kernel_fns.h).
Result<OwnKernel> batch_norm_grad(const Args& a, const Launcher& l) {
  const TensorType& xt = a.in(1);  // rank >= 2: the shape rule (check_kernel_call)
  const BnGradSums g(xt);
  const int64_t spatial = reference::product(xt.shape, 2, xt.shape.size());
  if (g.count == 0) return fail("{} of {} has no elements per channel", a.name(), to_string(xt));
  auto* lane_sums = static_cast<double*>(a.call.workspace);
  double* group_sums = lane_sums + g.lane_doubles();
  double* sums = group_sums + g.group_doubles();
  return for_float(a, xt.dtype, [&]<class T>() -> Result<OwnKernel> {
    const T *dy = in<T>(a, 0), *x = in<T>(a, 1), *gamma = in<T>(a, 2), *mean = in<T>(a, 3), *invstd = in<T>(a, 4);
    std::vector<Step> steps = {
        step(l, BnGradLanes<T>{dy, x, mean, invstd, lane_sums, g.channels, spatial, g.count, g.lanes},
             g.channels * g.lanes)};
    const bool grouped = g.groups > 0;
    if (grouped)
      steps.push_back(
          step(l, BnGradGroups{lane_sums, group_sums, g.lanes, kBnGradGroup, g.groups}, g.channels * g.groups));
    steps.push_back(step(l,
                         BnGradChannels<T>{grouped ? group_sums : lane_sums, sums, out<T>(a, 1), out<T>(a, 2),
                                           grouped ? g.groups : g.lanes},
                         g.channels));
    steps.push_back(step(l,
                         BnGradData<T>{dy, x, gamma, mean, invstd, sums, out<T>(a, 0), g.channels, spatial,
                                       static_cast<double>(g.count), elements(xt) <= int64_t{UINT32_MAX}},
                         elements(xt)));
    return sequence(std::move(steps));
  });
}

Result<OwnKernel> bn_running_update(const Args& a, const Launcher& l) {
  const double momentum = reference::number_attr(a, "momentum"), eps = reference::number_attr(a, "eps"),
               count = reference::number_attr(a, "count");
  if (!(count >= 2))
    return fail("{} attribute 'count' = {} must be at least 2 (the unbiased variance divides by count - 1)", a.name(),
                count);
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l,
                  BnRunningUpdate<T>{in<T>(a, 0), in<T>(a, 1), in<T>(a, 2), in<T>(a, 3), out<T>(a, 0), out<T>(a, 1),
                                     momentum, eps, count / (count - 1)},
                  elements(a.in(0)));
  });
}

LossShape loss_shape(const TensorType& logits) {
  LossShape s;
  s.classes = logits.shape[1];
  s.spatial = reference::product(logits.shape, 2, logits.shape.size());
  s.positions = logits.shape[0] * s.spatial;
  return s;
}

Result<OwnKernel> cross_entropy(const Args& a, const Launcher& l) {
  const LossShape s = loss_shape(a.in(0));
  auto* lse = static_cast<double*>(a.call.workspace);
  double* term = lse + s.positions;
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    CrossEntropyRows<T> rows{in<T>(a, 0), ids_of(a.call.inputs[1]), lse, term, s.classes, s.spatial, l.status};
    return sequence(
        {step(l, rows, s.positions), step(l, MeanOfTerms{term, s.positions, scalar_of(a.call.outputs[0])}, 1)});
  });
}

Result<OwnKernel> cross_entropy_grad(const Args& a, const Launcher& l) {
  const LossShape s = loss_shape(a.in(1));
  auto* lse = static_cast<double*>(a.call.workspace);
  return for_float(a, a.in(1).dtype, [&]<class T>() -> Result<OwnKernel> {
    const Ids labels = ids_of(a.call.inputs[2]);
    CrossEntropyRows<T> rows{in<T>(a, 1), labels, lse, nullptr, s.classes, s.spatial, l.status};
    CrossEntropyGrad<T> grad{scalar_of(a.call.inputs[0]), in<T>(a, 1), labels, lse, out<T>(a, 0),
                             s.classes, s.spatial, s.positions, l.status};
    return sequence({step(l, rows, s.positions), step(l, grad, elements(a.out(0)))});
  });
}

// The optional last input of an update, lr_scale (ops/update.cc), or a Scalar without data.
Result<Scalar> lr_scale_of(const Args& a) {
  if (a.num_inputs() < a.def.inputs.size()) return Scalar{};
  const TensorType& t = a.in_types.back();
  if (t.num_elements() != 1 || (t.dtype != DType::f32 && t.dtype != DType::f64))
    return fail("{} lr_scale must be an f32 or f64 scalar, got {}", a.name(), to_string(t));
  return scalar_of(a.call.inputs.back());
}

Result<OwnKernel> sgd_update(const Args& a, const Launcher& l) {
  const double lr = a.c.f("lr"), wd = a.c.f("weight_decay");
  const Scalar scale = LMS_TRY(lr_scale_of(a));
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l, SgdUpdate<T>{in<T>(a, 0), in<T>(a, 1), out<T>(a, 0), lr, wd, scale}, elements(a.in(0)));
  });
}

Result<OwnKernel> momentum_update(const Args& a, const Launcher& l) {
  const double lr = a.c.f("lr"), momentum = a.c.f("momentum"), wd = a.c.f("weight_decay");
  const bool nesterov = a.c.b("nesterov");
  const Scalar scale = LMS_TRY(lr_scale_of(a));
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    return single(l,
                  MomentumUpdate<T>{in<T>(a, 0), in<T>(a, 1), in<T>(a, 2), out<T>(a, 0), out<T>(a, 1), lr, momentum, wd,
                                    nesterov, scale},
                  elements(a.in(0)));
  });
}

Result<OwnKernel> adam_update(const Args& a, const Launcher& l) {
  if (a.in(3).num_elements() != 1 || !is_float(a.in(3).dtype) || a.in(3).dtype == DType::f16 ||
      a.in(3).dtype == DType::bf16)
    return fail("{} step counter t must be an f32 or f64 scalar, got {}", a.name(), to_string(a.in(3)));
  const double lr = a.c.f("lr"), b1 = a.c.f("beta1"), b2 = a.c.f("beta2"), eps = a.c.f("eps"),
               wd = a.c.f("weight_decay");
  const Scalar t = scalar_of(a.call.inputs[3]), t_out = scalar_of(a.call.outputs[3]);
  const Scalar scale = LMS_TRY(lr_scale_of(a));
  return for_float(a, a.in(0).dtype, [&]<class T>() -> Result<OwnKernel> {
    AdamUpdate<T> update{in<T>(a, 0), in<T>(a, 1), in<T>(a, 2), in<T>(a, 4), t, out<T>(a, 0), out<T>(a, 1),
                         out<T>(a, 2), lr, b1, b2, eps, wd, scale, a.c.b("decoupled_weight_decay")};
    return sequence({step(l, update, elements(a.in(0))), step(l, AdamStep{t, t_out}, 1)});
  });
}

}  // namespace lms::cuda::own
