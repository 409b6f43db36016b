// Internal to src/lms/models: the layers the builders share (convolution, batch norm, linear, layer norm),
// each a few Builder calls that name values PyTorch-style ("<layer>" for the output, "<layer>.w", ".b",
// ".gamma", ".beta" for parameters, under the builder's prefix), plus the per-model entry points and the
// option checks that models.cc dispatches to. Helpers read shapes only while the builder is error-free (after
// an error every id is invalid and every further call is a no-op), so a builder checks `b.error()` once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lms/ir/builder.h"
#include "lms/models/models.h"

namespace lms::models {

// Weight initializers (docs/models.md, "Initializers"). Weights are laid out [out, in, *kernel] (PyTorch's
// convention; linear layers multiply by the transpose), so fan_in is the product of all dims but the first.
inline constexpr const char* kInitHe = "he";
inline constexpr const char* kInitZeros = "zeros";
inline constexpr const char* kInitOnes = "ones";

// Tensor size limit. Note [Element limit]: no device holds 2^48 elements (256 Ti); refusing larger tensors
// keeps every element count, byte count (x 8) and sum of byte counts far from int64 overflow downstream.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

// Dimension `axis` (negative counts from the end) of `v`, or 0 once the builder has failed.
inline int64_t dim(const Builder& b, ValueId v, int axis) {
  if (!b.ok() || !v.valid()) return 0;
  const Shape& s = b.type(v).shape;
  int r = static_cast<int>(s.size());
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r ? s[axis] : 0;
}

inline IntList repeat(int64_t value, int rank) { return IntList(static_cast<size_t>(rank), value); }

// conv{1,2,3}d (or the transposed form) for a spatial rank of 1 to 3.
inline Op conv_op(int rank, bool transposed) {
  switch (rank) {
    case 1: return transposed ? Op::conv_transpose1d : Op::conv1d;
    case 2: return transposed ? Op::conv_transpose2d : Op::conv2d;
    default: return transposed ? Op::conv_transpose3d : Op::conv3d;
  }
}

struct ConvSpec {
  int64_t out_channels = 0;
  int64_t kernel = 1;  // the same along every spatial dim
  int64_t stride = 1;
  int64_t pad = 0;
  bool bias = false;        // a "<name>.b" bias added with bias_add{axis=1}
  bool transposed = false;  // conv_transpose with weight [Cin, Cout, *kernel]
};

// A convolution over x[N, C, *spatial] named `name`; its weight is "<name>.w" (init "he").
inline ValueId conv(Builder& b, ValueId x, const ConvSpec& s, const std::string& name) {
  const int rank = b.ok() ? b.type(x).rank() - 2 : 2;
  const int64_t cin = dim(b, x, 1);
  Shape wshape = s.transposed ? Shape{cin, s.out_channels} : Shape{s.out_channels, cin};
  for (int i = 0; i < rank; ++i) wshape.push_back(s.kernel);
  const DType dt = b.ok() ? b.type(x).dtype : DType::f32;
  ValueId w = b.param(TensorType{dt, wshape}, name + ".w", kInitHe);
  Attributes a = attrs({{"stride", repeat(s.stride, rank)}, {"pad", repeat(s.pad, rank)}});
  if (!s.bias) return b.op(conv_op(rank, s.transposed), {x, w}, std::move(a), name);
  ValueId y = b.op(conv_op(rank, s.transposed), {x, w}, std::move(a), name + ".conv");
  ValueId bias = b.param(TensorType{dt, {s.out_channels}}, name + ".b", kInitZeros);
  return b.op(Op::bias_add, {y, bias}, attrs({{"axis", int64_t{1}}}), name);
}

// Training-mode batch norm over the channels (axis 1) of x; returns the normalized output "<name>".
inline ValueId batch_norm(Builder& b, ValueId x, const std::string& name) {
  const int64_t c = dim(b, x, 1);
  const DType dt = b.ok() ? b.type(x).dtype : DType::f32;
  ValueId gamma = b.param(TensorType{dt, {c}}, name + ".gamma", kInitOnes);
  ValueId beta = b.param(TensorType{dt, {c}}, name + ".beta", kInitZeros);
  auto outs = b.add(Op::batch_norm, {x, gamma, beta}, {}, name);
  return outs.empty() ? ValueId{} : outs[0];
}

// Layer norm over the last dim of x.
inline ValueId layer_norm(Builder& b, ValueId x, const std::string& name) {
  const int64_t c = dim(b, x, -1);
  const DType dt = b.ok() ? b.type(x).dtype : DType::f32;
  ValueId gamma = b.param(TensorType{dt, {c}}, name + ".gamma", kInitOnes);
  ValueId beta = b.param(TensorType{dt, {c}}, name + ".beta", kInitZeros);
  auto outs = b.add(Op::layer_norm, {x, gamma, beta}, {}, name);
  return outs.empty() ? ValueId{} : outs[0];
}

// A linear layer on the last dim of x[..., in]: x @ w^T (+ b), w = "<name>.w" [out, in], b = "<name>.b" [out].
inline ValueId linear(Builder& b, ValueId x, int64_t out, const std::string& name, bool bias,
                      const std::string& weight_init = kInitHe, const std::string& bias_init = kInitZeros) {
  const int64_t in = dim(b, x, -1);
  const DType dt = b.ok() ? b.type(x).dtype : DType::f32;
  ValueId w = b.param(TensorType{dt, {out, in}}, name + ".w", weight_init);
  if (!bias) return b.op(Op::matmul, {x, w}, attrs({{"transpose_b", true}}), name);
  ValueId y = b.op(Op::matmul, {x, w}, attrs({{"transpose_b", true}}), name + ".matmul");
  ValueId bv = b.param(TensorType{dt, {out}}, name + ".b", bias_init);
  return b.op(Op::bias_add, {y, bv}, attrs({{"axis", int64_t{-1}}}), name);
}

inline ValueId relu(Builder& b, ValueId x, const std::string& name) { return b.op(Op::relu, {x}, {}, name); }

// The per-model builders (mlp.cc, resnet.cc, unet3d.cc, gpt.cc). Each fills `g` from options already checked
// for the fields it does not use; it validates its own fields and returns the first error.
Result<void> build_mlp(Graph& g, const ModelOptions& o);
Result<void> build_resnet(Graph& g, const ModelOptions& o, int depth);
Result<void> build_unet3d(Graph& g, const ModelOptions& o);
Result<void> build_gpt(Graph& g, const ModelOptions& o);

// Option checks shared by the builders (models.cc).
// `value` (named `option`) must be >= 1.
Result<int64_t> positive(std::string_view option, int64_t value);
// The dropout option: in [0, 1), 0 when absent.
Result<double> dropout_probability(const ModelOptions& o);
// The image option resolved to `rank` spatial dims (one value broadcasts; empty takes `fallback`).
Result<std::vector<int64_t>> image_dims(const ModelOptions& o, int rank, int64_t fallback);
// The builder's first error, or an error for a tensor over kMaxElements; else sets the graph output to `loss`.
Result<void> finish(Graph& g, Builder& b, ValueId loss);

}  // namespace lms::models
