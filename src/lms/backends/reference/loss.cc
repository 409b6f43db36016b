// Reference cross_entropy and its gradient. The loss is the mean over all N*prod(sp) positions of
// logsumexp(logits[n, :, s]) - logits[n, label, s] (the class axis is 1), summed in double in row-major position
// order and stored in the output's dtype (f32[] by the shape rule). The gradient is
// dloss * (softmax(logits, axis 1) - onehot(label)) / positions. A label outside [0, C) is an error naming the
// label and its position, never a read out of bounds.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "lms/backends/reference/families.h"

namespace lms::reference {

namespace {

// logits[N, C, *sp] viewed as N x C x S, with S the product of the spatial dimensions.
struct LossGeometry {
  int64_t batch = 0, classes = 0, spatial = 1;
  int64_t positions() const { return batch * spatial; }
};

// Checks logits (input `li`) against labels (input `li + 1`) and returns the geometry.
Result<LossGeometry> loss_geometry(const Args& a, size_t li) {
  const TensorType &logits = a.in(li), &labels = a.in(li + 1);
  if (logits.rank() < 2) return fail("{} logits must be [N, C, ...], got {}", a.name(), to_string(logits));
  if (labels.dtype != DType::i32 && labels.dtype != DType::i64)
    return fail("{} labels must be i32 or i64, got {}", a.name(), to_string(labels));
  Shape expect = logits.shape;
  expect.erase(expect.begin() + 1);
  if (labels.shape != expect)
    return fail("{} labels {} must have shape {} for logits {}", a.name(), to_string(labels), to_string(expect),
                to_string(logits));
  return LossGeometry{logits.shape[0], logits.shape[1], product(logits.shape, 2, logits.shape.size())};
}

// Fails unless every label is a class index; names the first bad one and its position in the labels.
Result<void> check_labels(const Args& a, size_t labels_input, const LossGeometry& g) {
  const TensorRef& labels = a.call.inputs[labels_input];
  for (int64_t p = 0; p < g.positions(); ++p) {
    const int64_t label = load_index(labels, p);
    if (label < 0 || label >= g.classes)
      return fail("{} label {} at position {} of labels {} is outside [0, {})", a.name(), label,
                  index_text(a.in(labels_input).shape, p), to_string(a.in(labels_input)), g.classes);
  }
  return {};
}

// The maximum and the log-sum-exp of logits[n, :, s] (offset base = n*C*S + s, class stride S).
template <class T>
void row_stats(const T* logits, const LossGeometry& g, int64_t base, Acc& max, Acc& lse) {
  max = -std::numeric_limits<Acc>::infinity();
  for (int64_t c = 0; c < g.classes; ++c) max = std::max(max, static_cast<Acc>(logits[base + c * g.spatial]));
  Acc sum = 0;
  for (int64_t c = 0; c < g.classes; ++c) sum += std::exp(static_cast<Acc>(logits[base + c * g.spatial]) - max);
  lse = max + std::log(sum);
}

template <class T>
Result<void> cross_entropy_loops(const Args& a, const LossGeometry& g) {
  const T* logits = a.in_data<T>(0);
  const TensorRef& labels = a.call.inputs[1];
  Acc total = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t s = 0; s < g.spatial; ++s) {
      const int64_t base = n * g.classes * g.spatial + s;
      Acc max = 0, lse = 0;
      row_stats(logits, g, base, max, lse);
      const int64_t label = load_index(labels, n * g.spatial + s);
      total += lse - static_cast<Acc>(logits[base + label * g.spatial]);
    }
  store_any(a.call.outputs[0], 0, total / static_cast<Acc>(g.positions()));
  return {};
}

template <class T>
Result<void> cross_entropy_grad_loops(const Args& a, const LossGeometry& g) {
  const Acc scale = load_float(a.call.inputs[0], 0) / static_cast<Acc>(g.positions());
  const T* logits = a.in_data<T>(1);
  const TensorRef& labels = a.call.inputs[2];
  T* dlogits = a.out_data<T>(0);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t s = 0; s < g.spatial; ++s) {
      const int64_t base = n * g.classes * g.spatial + s;
      Acc max = 0, lse = 0;
      row_stats(logits, g, base, max, lse);
      const int64_t label = load_index(labels, n * g.spatial + s);
      for (int64_t c = 0; c < g.classes; ++c) {
        const int64_t i = base + c * g.spatial;
        const Acc p = std::exp(static_cast<Acc>(logits[i]) - lse);
        dlogits[i] = static_cast<T>(scale * (p - (c == label ? 1.0 : 0.0)));
      }
    }
  return {};
}

}  // namespace

Result<void> cross_entropy(const Args& a) {
  LossGeometry g = LMS_TRY(loss_geometry(a, 0));
  if (a.out(0).num_elements() != 1 || !is_float(a.out(0).dtype))
    return fail("{} output must be a float scalar, got {}", a.name(), to_string(a.out(0)));
  LMS_TRY_VOID(check_labels(a, 1, g));
  return with_float(a, a.in(0).dtype, [&]<class T>() { return cross_entropy_loops<T>(a, g); });
}

Result<void> cross_entropy_grad(const Args& a) {
  LossGeometry g = LMS_TRY(loss_geometry(a, 1));
  if (a.in(0).num_elements() != 1 || !is_float(a.in(0).dtype))
    return fail("{} dloss must be a float scalar, got {}", a.name(), to_string(a.in(0)));
  if (a.out(0) != a.in(1))
    return fail("{} output {} must have the logits' type {}", a.name(), to_string(a.out(0)), to_string(a.in(1)));
  LMS_TRY_VOID(check_labels(a, 2, g));
  return with_float(a, a.in(1).dtype, [&]<class T>() { return cross_entropy_grad_loops<T>(a, g); });
}

}  // namespace lms::reference
