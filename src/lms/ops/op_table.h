// Internal to src/lms/ops: the table each op family fills in, and small helpers the families share.
// Family files (sources.cc, conv.cc, ...) each define `void define_<family>_ops(OpTable&)`; registry.cc calls
// every one of them, in op-list order, when the table is first used.
#pragma once

#include <limits>
#include <vector>

#include "lms/ops/op.h"

namespace lms::ops {

struct OpTable {
  std::vector<OpDef> defs;       // indexed by Op
  std::vector<int> times_defined;  // guards against an op defined twice or never

  OpTable() : defs(kNumOps), times_defined(kNumOps, 0) {}
  // Starts the definition of `op`: sets its id and name and returns it for the caller to fill in.
  OpDef& define(Op op);
};

void define_source_ops(OpTable& t);
void define_conv_ops(OpTable& t);
void define_norm_ops(OpTable& t);
void define_elementwise_ops(OpTable& t);
void define_pool_ops(OpTable& t);
void define_linalg_ops(OpTable& t);   // matmul, reshape, transpose, concat, slice, softmax, embedding
void define_loss_ops(OpTable& t);     // mean, reduce_sum, cross_entropy
void define_update_ops(OpTable& t);   // sgd, momentum, adam
void define_copy_ops(OpTable& t);     // swap_out, swap_in
void define_grad_ops(OpTable& t);     // the backward ops autodiff emits, and bn_running_update

// Resolves an axis attribute (negative counts from the end) against `t`; an error names the op and the value.
Result<int> resolve_axis(const OpCall& c, std::string_view name, const TensorType& t);

// gelu's and gelu_grad's `approximate` attribute, in PyTorch's spelling; gelu_approximation checks its value.
inline const AttrSpec kGeluApproximateAttr{"approximate", AttrKind::String, Attribute{std::string("none")},
                                           "none: x*Phi(x) with the erf; tanh: 0.5x(1 + tanh(sqrt(2/pi)(x + "
                                           "0.044715x^3)))"};
Result<void> gelu_approximation(const OpCall& c);
// clamp's and clamp_grad's bounds: `min` and `max`, unbounded (-inf, +inf) when absent; clamp_bounds checks
// that neither is NaN and min <= max.
inline const AttrSpec kClampMinAttr{"min", AttrKind::Float, Attribute{-std::numeric_limits<double>::infinity()},
                                    "the lower bound; absent: none"};
inline const AttrSpec kClampMaxAttr{"max", AttrKind::Float, Attribute{std::numeric_limits<double>::infinity()},
                                    "the upper bound; absent: none"};
Result<void> clamp_bounds(const OpCall& c);
// The pooling ops' and their gradients' ceil_mode (PyTorch's): output sizes rounded up (ops/pool_window.h).
inline const AttrSpec kCeilModeAttr{"ceil_mode", AttrKind::Bool, Attribute{false},
                                    "round output sizes up: the last window may reach past the right padding"};

// Shared cost helpers.
int64_t total_bytes(std::span<const TensorType> ts);
// Bytes read = all inputs, written = all outputs, flops = `flops_per_output_element` x output elements.
Cost elementwise_cost(const OpCall& c, std::span<const TensorType> outs, double flops_per_output_element);

}  // namespace lms::ops
