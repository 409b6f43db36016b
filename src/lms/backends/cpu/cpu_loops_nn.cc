// Own loops for the cpu backend (dnnl_util.h), the network-level ops oneDNN has no primitive for: cross_entropy and
// cross_entropy_grad (logits f32[N, C, *sp], labels i32/i64), embedding and embedding_grad (ids i32/i64), the
// optimizer updates sgd_update, momentum_update and adam_update (in place: outputs alias inputs, and every loop
// reads element i before writing it), bn_running_update, dropout, hardswish and hardswish_grad (f32, each element in
// double and rounded once: the reference's bits; oneDNN's hardswish backward differs from PyTorch's at -3 and 3,
// ops/hardswish.h) and rng_advance. Semantics are the reference's (backends/reference/loss.cc, movement.cc,
// update.cc, norm.cc); arithmetic is f32 per element, with the few per-call scalars (the loss total, Adam's bias
// corrections, the running-variance factor) in double. Labels and ids are checked at run time and a bad one is an
// error naming it, as in the reference. The losses (over positions; the forward sums its per-position terms
// afterwards, in position order) and the optimizer updates, dropout and hardswish (element-wise) run on OpenMP
// threads, with the same bits on any number of threads; embedding and embedding_grad are single-threaded. Declined
// (reference kernel): any float dtype but f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lms/backends/cpu/dnnl_util.h"
#include "lms/ops/dropout_mask.h"
#include "lms/ops/hardswish.h"
#include "lms/ops/op.h"

namespace lms::cpu {

namespace {

bool is_index(DType t) { return t == DType::i32 || t == DType::i64; }

// Element i of an id or label tensor.
int64_t load_index(const void* p, bool wide, int64_t i) {
  return wide ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

// logits[N, C, *sp] as N x C x S.
struct LossGeometry {
  int64_t batch = 0, classes = 0, spatial = 1;
};

// (logits, labels) types, as the reference checks them; nullopt declines.
std::optional<LossGeometry> loss_geometry(const KernelCall& call, size_t li) {
  const TensorType &logits = *call.inputs[li].type, &labels = *call.inputs[li + 1].type;
  if (logits.dtype != DType::f32 || logits.rank() < 2 || !is_index(labels.dtype)) return std::nullopt;
  Shape expect = logits.shape;
  expect.erase(expect.begin() + 1);
  if (labels.shape != expect || logits.shape[1] < 1) return std::nullopt;
  return LossGeometry{logits.shape[0], logits.shape[1], product(logits.shape, 2, logits.shape.size())};
}

// Every label in [0, C), or an error naming the first bad one.
Result<void> check_labels(std::string_view op, const void* labels, bool wide, int64_t n, int64_t classes) {
  for (int64_t p = 0; p < n; ++p) {
    const int64_t l = load_index(labels, wide, p);
    if (l < 0 || l >= classes)
      return fail("cpu backend: {} label {} at flat position {} is outside [0, {})", op, l, p, classes);
  }
  return {};
}

// log-sum-exp of logits[base + c*S], c < C.
float log_sum_exp(const float* x, int64_t base, int64_t classes, int64_t stride) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < classes; ++c) max = std::max(max, x[base + c * stride]);
  float sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[base + c * stride] - max);
  return max + std::log(sum);
}

Result<KernelPtr> cross_entropy(DnnlContext& ctx, const KernelCall& call, bool grad) {
  const size_t li = grad ? 1 : 0;
  if (call.inputs.size() != li + 2 || call.outputs.size() != 1) return KernelPtr();
  std::optional<LossGeometry> g = loss_geometry(call, li);
  const TensorType& scalar = grad ? *call.inputs[0].type : *call.outputs[0].type;
  if (!g || scalar != TensorType{DType::f32, {}}) return KernelPtr();
  if (grad && *call.outputs[0].type != *call.inputs[1].type) return KernelPtr();
  const float* logits = in_f32(call, li);
  const void* labels = call.inputs[li + 1].data;
  const bool wide = call.inputs[li + 1].type->dtype == DType::i64;
  const std::string_view name = op_def(call.op).name;
  const float* dloss = grad ? in_f32(call, 0) : nullptr;
  float* out = out_f32(call, 0);
  const LossGeometry geo = *g;
  const int64_t positions = geo.batch * geo.spatial;
  // The forward's per-position terms, summed after the parallel loop in position order: the same bits on any
  // number of threads.
  std::vector<double> terms(grad ? 0 : static_cast<size_t>(positions));
  return loop_kernel(ctx, [=]() mutable -> Result<void> {
    LMS_TRY_VOID(check_labels(name, labels, wide, positions, geo.classes));
    const auto scale = grad ? static_cast<float>(static_cast<double>(*dloss) / static_cast<double>(positions)) : 0.f;
#pragma omp parallel for schedule(static) if (positions * geo.classes > kParallelGrain)
    for (int64_t p = 0; p < positions; ++p) {
      const int64_t base = (p / geo.spatial) * geo.classes * geo.spatial + p % geo.spatial;
      const float lse = log_sum_exp(logits, base, geo.classes, geo.spatial);
      const int64_t label = load_index(labels, wide, p);
      if (!grad) {
        terms[static_cast<size_t>(p)] =
            static_cast<double>(lse) - static_cast<double>(logits[base + label * geo.spatial]);
        continue;
      }
      for (int64_t c = 0; c < geo.classes; ++c) {
        const int64_t i = base + c * geo.spatial;
        out[i] = scale * (std::exp(logits[i] - lse) - (c == label ? 1.f : 0.f));
      }
    }
    if (grad) return {};
    double total = 0;
    for (double t : terms) total += t;
    *out = static_cast<float>(total / static_cast<double>(positions));
    return {};
  });
}

// Every id in [0, vocab), or an error naming the first bad one.
Result<void> check_ids(std::string_view op, const void* ids, bool wide, int64_t n, int64_t vocab) {
  for (int64_t p = 0; p < n; ++p) {
    const int64_t id = load_index(ids, wide, p);
    if (id < 0 || id >= vocab)
      return fail("cpu backend: {} id {} at flat position {} is outside [0, {})", op, id, p, vocab);
  }
  return {};
}

// embedding (table, ids) -> out; embedding_grad (dy, ids) -> dtable (rows summed in ascending position order).
Result<KernelPtr> embedding(DnnlContext& ctx, const KernelCall& call, bool grad) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1) return KernelPtr();
  const TensorType &ids = *call.inputs[1].type, &table = grad ? *call.outputs[0].type : *call.inputs[0].type,
                   &rows = grad ? *call.inputs[0].type : *call.outputs[0].type;
  if (!is_index(ids.dtype) || table.dtype != DType::f32 || rows.dtype != DType::f32 || table.rank() != 2)
    return KernelPtr();
  Shape expect = ids.shape;
  expect.push_back(table.shape[1]);
  if (rows.shape != expect) return KernelPtr();
  if (grad && call.attrs->has("vocab") && call.attrs->get_int("vocab", 0) != table.shape[0]) return KernelPtr();
  const int64_t vocab = table.shape[0], width = table.shape[1], n = ids.num_elements();
  const void* pid = call.inputs[1].data;
  const bool wide = ids.dtype == DType::i64;
  const std::string_view name = op_def(call.op).name;
  const float* src = in_f32(call, 0);
  float* dst = out_f32(call, 0);
  return loop_kernel(ctx, [=]() -> Result<void> {
    LMS_TRY_VOID(check_ids(name, pid, wide, n, vocab));
    const auto row_bytes = static_cast<size_t>(width) * sizeof(float);
    if (!grad) {
      for (int64_t p = 0; p < n; ++p) std::memcpy(dst + p * width, src + load_index(pid, wide, p) * width, row_bytes);
      return {};
    }
    std::memset(dst, 0, static_cast<size_t>(vocab) * row_bytes);
    for (int64_t p = 0; p < n; ++p) {
      float* row = dst + load_index(pid, wide, p) * width;
      const float* d = src + p * width;
      for (int64_t c = 0; c < width; ++c) row[c] += d[c];
    }
    return {};
  });
}

// Inputs `same` have w's type (input 0), outputs alias inputs 0.. in order, all f32; `num_inputs` inputs and then
// optionally lr_scale, an f32[].
bool update_types(const KernelCall& call, size_t num_inputs, size_t num_outputs, std::initializer_list<size_t> same) {
  if (call.inputs.size() != num_inputs && call.inputs.size() != num_inputs + 1) return false;
  if (call.outputs.size() != num_outputs) return false;
  if (call.inputs.size() > num_inputs && *call.inputs[num_inputs].type != TensorType{DType::f32, {}}) return false;
  const TensorType& w = *call.inputs[0].type;
  if (w.dtype != DType::f32) return false;
  for (size_t i : same)
    if (*call.inputs[i].type != w) return false;
  for (size_t o = 0; o < num_outputs; ++o)
    if (*call.outputs[o].type != *call.inputs[o].type) return false;
  return true;
}

// The optional lr_scale after an update's `num_inputs` inputs, or null.
const float* lr_scale_of(const KernelCall& call, size_t num_inputs) {
  return call.inputs.size() > num_inputs ? in_f32(call, num_inputs) : nullptr;
}

// The step's learning rate: lr times lr_scale's value at run time (in double, as the reference); and rounded to
// f32 for the loops.
double step_rate(double lr, const float* scale) { return scale ? lr * static_cast<double>(*scale) : lr; }
float step_lr(double lr, const float* scale) { return static_cast<float>(step_rate(lr, scale)); }

Result<KernelPtr> sgd(DnnlContext& ctx, const KernelCall& call) {
  if (!update_types(call, 2, 1, {1})) return KernelPtr();
  const double lr_attr = number(call, "lr");
  const auto wd = static_cast<float>(number(call, "weight_decay"));
  const float *w = in_f32(call, 0), *g = in_f32(call, 1), *scale = lr_scale_of(call, 2);
  float* w_out = out_f32(call, 0);
  const int64_t n = call.inputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
    const float lr = step_lr(lr_attr, scale);
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) w_out[i] = w[i] - lr * (g[i] + wd * w[i]);
    return {};
  });
}

Result<KernelPtr> momentum(DnnlContext& ctx, const KernelCall& call) {
  if (!update_types(call, 3, 2, {1, 2})) return KernelPtr();
  const double lr_attr = number(call, "lr");
  const auto mom = static_cast<float>(number(call, "momentum")), wd = static_cast<float>(number(call, "weight_decay"));
  const bool nesterov = call.attrs->get_bool("nesterov", false);
  const float *w = in_f32(call, 0), *v = in_f32(call, 1), *g = in_f32(call, 2), *scale = lr_scale_of(call, 3);
  float *w_out = out_f32(call, 0), *v_out = out_f32(call, 1);
  const int64_t n = call.inputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
    const float lr = step_lr(lr_attr, scale);
    // torch.optim.SGD: the step uses the stored (f32) buffer.
    if (nesterov) {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        const float d = g[i] + wd * w[i], vi = mom * v[i] + d;
        v_out[i] = vi;
        w_out[i] = w[i] - lr * (d + mom * vi);
      }
    } else {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        const float d = g[i] + wd * w[i], vi = mom * v[i] + d;
        v_out[i] = vi;
        w_out[i] = w[i] - lr * vi;
      }
    }
    return {};
  });
}

Result<KernelPtr> adam(DnnlContext& ctx, const KernelCall& call) {
  if (!update_types(call, 5, 4, {1, 2, 4}) || *call.inputs[3].type != TensorType{DType::f32, {}}) return KernelPtr();
  const double lr = number(call, "lr"), b1 = number(call, "beta1"), b2 = number(call, "beta2");
  const auto eps = static_cast<float>(number(call, "eps")), wd = static_cast<float>(number(call, "weight_decay"));
  const bool decoupled = call.attrs->get_bool("decoupled_weight_decay", false);
  const float *w = in_f32(call, 0), *m = in_f32(call, 1), *v = in_f32(call, 2), *t = in_f32(call, 3),
              *g = in_f32(call, 4), *scale = lr_scale_of(call, 5);
  float *w_out = out_f32(call, 0), *m_out = out_f32(call, 1), *v_out = out_f32(call, 2), *t_out = out_f32(call, 3);
  const int64_t n = call.inputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
    // The step counter is stored as f32 and the bias corrections use the stored value, as in the reference.
    const float step = *t + 1;
    *t_out = step;
    const double c1 = 1 - std::pow(b1, static_cast<double>(step)), c2 = 1 - std::pow(b2, static_cast<double>(step));
    const auto fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    const auto one_b1 = static_cast<float>(1 - b1), one_b2 = static_cast<float>(1 - b2);
    const auto inv_c1 = static_cast<float>(1 / c1), inv_c2 = static_cast<float>(1 / c2);
    const double rate = step_rate(lr, scale);
    const auto flr = static_cast<float>(rate);
    // Adam: wd*w in the gradient; AdamW: the step starts from w*(1 - lr*wd) instead.
    const float l2 = decoupled ? 0.0f : wd, keep = decoupled ? static_cast<float>(1 - rate * wd) : 1.0f;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + l2 * w[i];
      const float mi = fb1 * m[i] + one_b1 * d, vi = fb2 * v[i] + one_b2 * d * d;
      m_out[i] = mi;
      v_out[i] = vi;
      w_out[i] = keep * w[i] - flr * (mi * inv_c1) / (std::sqrt(vi * inv_c2) + eps);
    }
    return {};
  });
}

// rm = (1-m)*rm + m*mean; rv = (1-m)*rv + m*(1/invstd^2 - eps)*count/(count-1) (per channel, tiny: in double).
Result<KernelPtr> bn_running_update(DnnlContext& ctx, const KernelCall& call) {
  if (call.inputs.size() != 4 || call.outputs.size() != 2 || !all_f32(call)) return KernelPtr();
  for (size_t i = 1; i < 4; ++i)
    if (*call.inputs[i].type != *call.inputs[0].type) return KernelPtr();
  for (size_t o = 0; o < 2; ++o)
    if (*call.outputs[o].type != *call.inputs[0].type) return KernelPtr();
  const double mom = number(call, "momentum"), eps = number(call, "eps"), count = number(call, "count");
  if (!(count >= 2)) return KernelPtr();  // the reference reports it
  const double correction = count / (count - 1);
  const float *rm = in_f32(call, 0), *rv = in_f32(call, 1), *mean = in_f32(call, 2), *invstd = in_f32(call, 3);
  float *rm_out = out_f32(call, 0), *rv_out = out_f32(call, 1);
  const int64_t n = call.inputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
    for (int64_t c = 0; c < n; ++c) {
      const double is = invstd[c], var = 1 / (is * is) - eps;
      rm_out[c] = static_cast<float>((1 - mom) * static_cast<double>(rm[c]) + mom * static_cast<double>(mean[c]));
      rv_out[c] = static_cast<float>((1 - mom) * static_cast<double>(rv[c]) + mom * var * correction);
    }
    return {};
  });
}

// The key is read when the kernel runs: rng_advance moves it between steps.
Result<KernelPtr> dropout(DnnlContext& ctx, const KernelCall& call) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1 || call.inputs[0].type->dtype != DType::f32 ||
      *call.outputs[0].type != *call.inputs[0].type || *call.inputs[1].type != TensorType{DType::i64, {}})
    return KernelPtr();
  const double p = number(call, "p");
  if (!(p >= 0 && p < 1)) return KernelPtr();  // the reference reports it
  const DropoutMask mask = dropout_mask(p, call.attrs->get_int("seed", 0));
  const float* x = in_f32(call, 0);
  const auto* key = static_cast<const int64_t*>(call.inputs[1].data);
  float* y = out_f32(call, 0);
  const int64_t n = call.inputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
    const uint64_t stream = mask.stream(static_cast<uint64_t>(*key));
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(mask.apply(stream, i, static_cast<double>(x[i])));
    return {};
  });
}

// hardswish (x) and hardswish_grad (dy, x), f32 and same-shaped.
Result<KernelPtr> hardswish(DnnlContext& ctx, const KernelCall& call) {
  const bool grad = call.op == Op::hardswish_grad;
  if (call.inputs.size() != (grad ? 2u : 1u) || call.outputs.size() != 1) return KernelPtr();
  for (const auto& in : call.inputs)
    if (*in.type != *call.outputs[0].type || in.type->dtype != DType::f32) return KernelPtr();
  const float* a = in_f32(call, 0);
  const float* x = grad ? in_f32(call, 1) : nullptr;
  float* y = out_f32(call, 0);
  const int64_t n = call.outputs[0].type->num_elements();
  return loop_kernel(ctx, [=]() -> Result<void> {
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<float>(grad ? hardswish_derivative(a[i], x[i]) : hardswish_value(a[i]));
    return {};
  });
}

Result<KernelPtr> rng_advance(DnnlContext& ctx, const KernelCall& call) {
  const TensorType key_type{DType::i64, {}};
  if (call.inputs.size() != 1 || call.outputs.size() != 1 || *call.inputs[0].type != key_type ||
      *call.outputs[0].type != key_type)
    return KernelPtr();
  const auto* key = static_cast<const int64_t*>(call.inputs[0].data);
  auto* key_out = static_cast<int64_t*>(call.outputs[0].data);
  return loop_kernel(ctx, [=]() -> Result<void> {
    *key_out = static_cast<int64_t>(static_cast<uint64_t>(*key) + 1);
    return {};
  });
}

}  // namespace

Result<KernelPtr> build_loops_nn(DnnlContext& ctx, const KernelCall& call) {
  switch (call.op) {
    case Op::cross_entropy: return cross_entropy(ctx, call, false);
    case Op::cross_entropy_grad: return cross_entropy(ctx, call, true);
    case Op::embedding: return embedding(ctx, call, false);
    case Op::embedding_grad: return embedding(ctx, call, true);
    case Op::sgd_update: return sgd(ctx, call);
    case Op::momentum_update: return momentum(ctx, call);
    case Op::adam_update: return adam(ctx, call);
    case Op::bn_running_update: return bn_running_update(ctx, call);
    case Op::dropout: return dropout(ctx, call);
    case Op::hardswish:
    case Op::hardswish_grad: return hardswish(ctx, call);
    case Op::rng_advance: return rng_advance(ctx, call);
    default: return KernelPtr();
  }
}

}  // namespace lms::cpu
