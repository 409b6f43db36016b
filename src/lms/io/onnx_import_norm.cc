// The importer's handlers for what medical-imaging U-Nets use besides batch norm (see onnx_importer.h), built from
// ops LMS has so that every backend runs them and autodiff differentiates them:
//   - InstanceNormalization (nnU-Net's and MONAI's InstanceNorm3d; PyTorch also exports GroupNorm before opset 18
//     as one over the input viewed as [N, groups, -1], with unit scale and zero bias, then its affine): the input
//     viewed as [N*C, spatial], a `layer_norm` over that last axis with unit gamma and zero beta (`constant`s), the
//     view back, then the per-channel scale (`mul`, broadcast) and bias (`bias_add` on axis 1), each left out when
//     it is the identity;
//   - LeakyRelu and PRelu (MONAI's default activation): relu(x) - alpha relu(-x) (`relu`, `scale`, `add`; PRelu's
//     learned slope by a broadcasting `mul`), which is alpha x below zero and x above it exactly, as PyTorch's;
//     the backward keeps both relu outputs.
#include <fmt/format.h>

#include "lms/io/onnx_importer.h"

namespace lms::onnx_import_detail {

Result<void> Importer::instance_norm(const OnnxNode& n) {
  const ValueId x = LMS_TRY(data(n, 0));
  const Shape in = shape_of(x);
  if (in.size() < 3) return fail("input {} has no spatial dims (N, C, ...)", to_string(in));
  const int64_t rows = in[0] * in[1], cols = product(in, 2, in.size());
  const std::string name = out_name(n);
  const DType dt = b_.type(x).dtype;
  const ValueId flat = b_.op(Op::reshape, {x}, attrs({{"shape", IntList{rows, cols}}}), name + ".rows");
  const TensorType unit{dt, {cols}};
  const auto one = b_.add(Op::constant, {}, attrs({{"value", 1.0}}), name + ".ones", {unit});
  const auto zero = b_.add(Op::constant, {}, attrs({{"value", 0.0}}), name + ".zeros", {unit});
  if (!b_.ok()) return std::unexpected(*b_.error());
  const auto normed = b_.add(Op::layer_norm, {flat, one.at(0), zero.at(0)},
                             attrs({{"eps", float_attr(n, "epsilon", 1e-5)}}), name + ".normed");
  if (!b_.ok()) return std::unexpected(*b_.error());
  ValueId y = b_.op(Op::reshape, {normed.at(0)}, attrs({{"shape", IntList(in.begin(), in.end())}}),
                    name + ".unscaled");
  // The affine part, per channel; a constant scale of ones or bias of zeros (GroupNorm's export) is left out.
  auto identity = [&](size_t i, double v) {
    const HostTensor* c = folded(n, i);
    if (c == nullptr) return false;
    for (int64_t k = 0; k < c->type.num_elements(); ++k)
      if (c->get(k) != v) return false;
    return true;
  };
  IntList channel_view(in.size() - 1, 1);
  channel_view[0] = in[1];
  if (!identity(1, 1.0)) {
    const ValueId gamma = LMS_TRY(data(n, 1));
    const ValueId g = b_.op(Op::reshape, {gamma}, attrs({{"shape", channel_view}}), name + ".scale");
    y = b_.op(Op::mul, {y, g}, {}, identity(2, 0.0) ? name : name + ".scaled");
  }
  if (!identity(2, 0.0)) y = b_.op(Op::bias_add, {y, LMS_TRY(data(n, 2))}, attrs({{"axis", int64_t{1}}}), name);
  return define(n, y);
}

Result<void> Importer::leaky_relu(const OnnxNode& n) {
  const ValueId x = LMS_TRY(data(n, 0));
  const std::string name = out_name(n);
  const ValueId positive = b_.op(Op::relu, {x}, {}, name + ".positive");
  const ValueId flipped = b_.op(Op::scale, {x}, attrs({{"factor", -1.0}}), name + ".flipped");
  const ValueId negative = b_.op(Op::relu, {flipped}, {}, name + ".negative");
  ValueId leak;
  if (n.op_type == "PRelu") {  // a learned slope, broadcast (PyTorch's [C, 1, ...] per channel, or one)
    const ValueId slope = LMS_TRY(data(n, 1));
    const ValueId scaled = b_.op(Op::mul, {negative, slope}, {}, name + ".sloped");
    leak = b_.op(Op::scale, {scaled}, attrs({{"factor", -1.0}}), name + ".leak");
  } else {
    leak = b_.op(Op::scale, {negative}, attrs({{"factor", -float_attr(n, "alpha", 0.01)}}), name + ".leak");
  }
  return define(n, b_.op(Op::add, {positive, leak}, {}, name));
}

}  // namespace lms::onnx_import_detail
