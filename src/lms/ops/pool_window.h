// Pooling window arithmetic shared by the pooling shape rules (ops/pool.cc, ops/grad.cc) and the kernels that
// check their geometry (backends/reference/pool.cc): PyTorch's output size with and without ceil_mode, and
// the divisor of an average that counts padding; and which ops are the windowed max and average poolings.
#pragma once

#include <algorithm>
#include <cstdint>

#include "lms/ops/op.h"

namespace lms {

inline bool is_max_pool(Op op) { return op == Op::max_pool1d || op == Op::max_pool2d || op == Op::max_pool3d; }
inline bool is_avg_pool(Op op) { return op == Op::avg_pool1d || op == Op::avg_pool2d || op == Op::avg_pool3d; }

// The output size along one dimension, PyTorch's pooling_output_shape with dilation 1: floor((in + 2 pad -
// kernel) / stride) + 1; with ceil_mode the ceiling, less one where the last window would start in the right
// padding, so that every window starts inside the input or its left padding. Needs in + 2 pad >= kernel.
inline int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// How many positions of output o's window an average that counts padding divides by along one dimension: the
// window clipped to the padded input [-pad, in + pad), as PyTorch's avg_pool. Only a ceil_mode window can
// reach past in + pad, so without ceil_mode this is the kernel size.
inline int64_t counted_window(int64_t o, int64_t kernel, int64_t stride, int64_t pad, int64_t in) {
  const int64_t start = o * stride - pad;
  return std::min(start + kernel, in + pad) - start;
}

}  // namespace lms
