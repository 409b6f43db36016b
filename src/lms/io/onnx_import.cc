// ONNX import (io/onnx_import.h): one handler per ONNX operator, in one table (the Importer is described in
// onnx_importer.h). This file has the table, the handlers of the convolutional, normalization, element-wise and
// linear-algebra operators, the data input, the loss, and the public functions; onnx_import_layout.cc has views,
// constants and shape arithmetic, onnx_import_attention.cc the transformer operators.
#include "lms/io/onnx_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "lms/io/onnx_fold.h"
#include "lms/io/onnx_gelu.h"
#include "lms/io/onnx_layer_norm.h"
#include "lms/io/onnx_silu.h"
#include "lms/io/onnx_importer.h"

namespace lms {

namespace onnx_import_detail {

Result<void> Importer::conv(const OnnxNode& n) {
  const bool transposed = n.op_type == "ConvTranspose";
  ValueId x = LMS_TRY(data(n, 0)), w = LMS_TRY(data(n, 1));
  const int rank = LMS_TRY(spatial_rank(x));
  Attributes a = attrs({{"stride", LMS_TRY(spatial(n, "strides", rank))},
                        {"pad", LMS_TRY(symmetric_pads(n, rank))},
                        {"dilation", LMS_TRY(spatial(n, "dilations", rank))},
                        {"groups", int_attr(n, "group", 1)}});
  if (transposed) {
    if (n.attribute("output_shape")) return fail("'output_shape' is not supported (give pads and output_padding)");
    if (auto op = ints_attr(n, "output_padding")) a.set("output_pad", IntList(*op));
  }
  const Op op = rank == 1 ? (transposed ? Op::conv_transpose1d : Op::conv1d)
                : rank == 2 ? (transposed ? Op::conv_transpose2d : Op::conv2d)
                            : (transposed ? Op::conv_transpose3d : Op::conv3d);
  if (!has_input(n, 2)) return define(n, b_.op(op, {x, w}, std::move(a), out_name(n)));
  ValueId y = b_.op(op, {x, w}, std::move(a), out_name(n) + ".conv");
  ValueId bias = LMS_TRY(data(n, 2));
  return define(n, b_.op(Op::bias_add, {y, bias}, attrs({{"axis", int64_t{1}}}), out_name(n)));
}

Result<void> Importer::batch_norm(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0)), gamma = LMS_TRY(data(n, 1)), beta = LMS_TRY(data(n, 2));
  // ONNX: running = running * momentum + batch * (1 - momentum); LMS's momentum weighs the batch statistics.
  const double momentum = 1.0 - float_attr(n, "momentum", 0.9);
  auto outs = b_.add(Op::batch_norm, {x, gamma, beta},
                     attrs({{"eps", float_attr(n, "epsilon", 1e-5)}, {"momentum", momentum}}), out_name(n));
  if (!b_.ok()) return std::unexpected(*b_.error());
  const std::string bn = b_.graph().value(outs[0]).name;
  const DType dt = b_.type(outs[0]).dtype;
  const char* suffixes[] = {".running_mean", ".running_var"};
  for (size_t i = 0; i < 2; ++i) {
    const HostTensor* stat = constant(n, 3 + i);
    if (stat == nullptr || stat->type.shape != shape_of(gamma)) continue;  // no usable statistics: zeros/ones
    if (!opts_.values) continue;
    HostTensor t(TensorType{dt, stat->type.shape});
    for (int64_t k = 0; k < t.type.num_elements(); ++k) t.set(k, stat->get(k));
    weights_[bn + suffixes[i]] = std::move(t);
  }
  return define(n, outs[0]);
}

Result<void> Importer::unary(const OnnxNode& n) {
  const std::string& t = n.op_type;
  if (const HostTensor* c = folded(n, 0); c != nullptr && t != "Gelu" && t != "Silu")  // scale factors
    return define_const(n, LMS_TRY(fold_unary(t, *c)));
  if (t == "Neg") return define(n, b_.op(Op::scale, {LMS_TRY(data(n, 0))}, attrs({{"factor", -1.0}}), out_name(n)));
  if (t == "Mish") {  // x * tanh(softplus(x)), as PyTorch writes it before opset 18
    const ValueId x = LMS_TRY(data(n, 0));
    const std::string name = out_name(n);
    const ValueId s = b_.op(Op::tanh, {b_.op(Op::softplus, {x}, {}, name + ".softplus")}, {}, name + ".tanh");
    return define(n, b_.op(Op::mul, {x, s}, {}, name));
  }
  const Op op = t == "Gelu"         ? Op::gelu
                : t == "Silu"       ? Op::silu
                : t == "Sigmoid"    ? Op::sigmoid
                : t == "Tanh"       ? Op::tanh
                : t == "Sqrt"       ? Op::sqrt
                : t == "Reciprocal" ? Op::reciprocal
                : t == "Exp"        ? Op::exp
                : t == "Log"        ? Op::log
                : t == "Softplus"   ? Op::softplus
                                    : Op::relu;
  Attributes a;
  if (op == Op::gelu) {
    const std::string approximate = string_attr(n, "approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return fail("approximate = \"{}\" is not a GELU form (none or tanh)", approximate);
    if (approximate == "tanh") a = attrs({{"approximate", approximate}});
  }
  return define(n, b_.op(op, {LMS_TRY(data(n, 0))}, std::move(a), out_name(n)));
}

// Pow by a constant exponent with an exact spelling in LMS ops: 1 (the identity), 2 and 3 (products; Pow
// rounds once where the products round at each step), 0.5 (sqrt), -1 (reciprocal), -0.5 (both).
Result<void> Importer::power(const OnnxNode& n) {
  const HostTensor* e = constant(n, 1);
  if (e == nullptr || e->type.num_elements() != 1) return fail("only a one-element constant exponent is supported");
  const double p = e->get(0);
  if (const HostTensor* c = folded(n, 0)) return define_const(n, LMS_TRY(fold_unary("Pow", *c, p)));
  if (p == 1) {
    tensors_[n.outputs.at(0)] = LMS_TRY(tensor(n, 0));
    return {};
  }
  if (p != 2 && p != 3 && p != 0.5 && p != -1 && p != -0.5)
    return fail("exponent {} is not supported (1, 2, 3, 0.5, -1 and -0.5 are)", p);
  const ValueId x = LMS_TRY(data(n, 0));
  const std::string name = out_name(n);
  if (p == 2) return define(n, b_.op(Op::mul, {x, x}, {}, name));
  if (p == 3) return define(n, b_.op(Op::mul, {b_.op(Op::mul, {x, x}, {}, name + ".square"), x}, {}, name));
  if (p == 0.5) return define(n, b_.op(Op::sqrt, {x}, {}, name));
  if (p == -1) return define(n, b_.op(Op::reciprocal, {x}, {}, name));
  return define(n, b_.op(Op::reciprocal, {b_.op(Op::sqrt, {x}, {}, name + ".sqrt")}, {}, name));
}

// Clip's bounds are optional one-element constant inputs from opset 11, attributes before; absent: unbounded.
Result<void> Importer::clip(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  Attributes a;
  for (size_t i : {size_t{1}, size_t{2}}) {
    const std::string name = i == 1 ? "min" : "max";
    if (has_input(n, i)) {
      const HostTensor* c = constant(n, i);
      if (c == nullptr || c->type.num_elements() != 1) return fail("the {} input must be a one-element constant", name);
      a.set(name, c->get(0));
    } else if (const OnnxAttribute* v = n.attribute(name); v != nullptr && v->kind == OnnxAttribute::Kind::f) {
      a.set(name, v->f);
    }
  }
  return define(n, b_.op(Op::clamp, {x}, std::move(a), out_name(n)));
}

// HardSigmoid(x) = clamp(alpha x + beta, 0, 1) as scale, add and clamp; HardSwish(x) = x clamp(x + 3, 0, 6) / 6 is
// LMS's hardswish (its gradient reads x alone).
Result<void> Importer::hard_activation(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  if (n.op_type == "HardSwish") return define(n, b_.op(Op::hardswish, {x}, {}, out_name(n)));
  const double alpha = float_attr(n, "alpha", 0.2), beta = float_attr(n, "beta", 0.5);
  const std::string name = out_name(n);
  ValueId scaled = b_.op(Op::scale, {x}, attrs({{"factor", alpha}}), name + ".scaled");
  if (!b_.ok()) return std::unexpected(*b_.error());
  const TensorType scalar{b_.type(x).dtype, {}};
  const std::vector<ValueId> shift = b_.add(Op::constant, {}, attrs({{"value", beta}}), name + ".beta", {scalar});
  if (shift.empty()) return std::unexpected(*b_.error());
  ValueId shifted = b_.op(Op::add, {scaled, shift[0]}, {}, name + ".shifted");
  return define(n, b_.op(Op::clamp, {shifted}, attrs({{"min", 0.0}, {"max", 1.0}}), name));
}

// Pad by zero amounts is the identity (PyTorch writes one before every AveragePool with count_include_pad;
// U-Nets pad skip connections by size differences that are usually zero). Constant zero padding of the
// spatial dims, the same before and after, read only by a Conv or an AveragePool counting padding (PyTorch's
// AvgPool with padding, nn.ZeroPad2d before a convolution), becomes that node's own padding: the output is
// recorded in zero_pads_ and aliases the input. Any other padding is refused.
Result<void> Importer::pad(const OnnxNode& n) {
  std::optional<std::vector<int64_t>> pads = ints_attr(n, "pads");
  if (!pads && has_input(n, 1)) {
    const HostTensor* c = constant(n, 1);
    if (c == nullptr) return fail("the pads input '{}' is not a constant", n.inputs[1]);
    pads = ints_of(*c);
  }
  if (!pads) return fail("no pads are given");
  const Tensor x = LMS_TRY(tensor(n, 0));
  if (std::ranges::all_of(*pads, [](int64_t p) { return p == 0; })) {
    tensors_[n.outputs.at(0)] = x;
    return {};
  }
  const std::string amounts = to_string(Shape(pads->begin(), pads->end()));
  const size_t rank = x.shape.size();
  if (string_attr(n, "mode", "constant") != "constant")
    return fail("padding by {} in mode '{}' is not supported (constant padding is)", amounts,
                string_attr(n, "mode", "constant"));
  const HostTensor* value_input = has_input(n, 2) ? constant(n, 2) : nullptr;
  if (has_input(n, 2) && value_input == nullptr) return fail("the padding value is not a constant");
  const double value = value_input != nullptr ? value_input->get(0) : float_attr(n, "value", 0);
  if (pads->size() != 2 * rank) return fail("{} pads for a tensor of rank {}", pads->size(), rank);
  if (value == 0 && rank >= 3) {  // zero spatial padding, equal on both sides, read by one Conv: its own padding
    IntList spatial;
    bool symmetric = true;
    for (size_t d = 0; d < rank && symmetric; ++d) {
      const int64_t begin = (*pads)[d], end = (*pads)[d + rank];
      symmetric = d < 2 ? begin == 0 && end == 0 : begin == end && begin >= 0;
      if (d >= 2) spatial.push_back(begin);
    }
    const std::string& out = n.outputs.at(0);
    std::vector<const OnnxNode*> readers;
    for (const OnnxNode& m : model_.nodes)
      if (std::ranges::find(m.inputs, out) != m.inputs.end()) readers.push_back(&m);
    const bool is_output = std::ranges::any_of(model_.outputs, [&](const OnnxValueInfo& o) { return o.name == out; });
    if (symmetric && readers.size() == 1 && !is_output && readers[0]->inputs.at(0) == out) {
      const OnnxNode& r = *readers[0];
      const bool own_pads = std::ranges::any_of(ints_attr(r, "pads").value_or(std::vector<int64_t>{}),
                                                [](int64_t p) { return p != 0; });
      if (r.op_type == "Conv" ||
          (r.op_type == "AveragePool" && (int_attr(r, "count_include_pad", 0) != 0 || !own_pads))) {
        tensors_[out] = x;
        zero_pads_[out] = spatial;
        return {};
      }
    }
  }
  // Any other constant padding: along each padded dim, the input between two `constant` blocks of the value
  // (a `concat`; a negative amount crops, a `slice`). Exact, and its gradient is the slice of the middle.
  ValueId v = LMS_TRY(data(n, 0));
  for (size_t d = 0; d < rank; ++d) {
    const int64_t begin = (*pads)[d], end = (*pads)[d + rank], size = shape_of(v)[d];
    if (begin == 0 && end == 0) continue;
    const auto axis = static_cast<int64_t>(d);
    const std::string name = out_name(n) + fmt::format(".axis{}", d);
    if (begin < 0 || end < 0) {
      const int64_t from = std::max<int64_t>(-begin, 0), to = size - std::max<int64_t>(-end, 0);
      if (from >= to) return fail("padding by {} crops dim {} of {} away", amounts, d, to_string(shape_of(v)));
      v = b_.op(Op::slice, {v}, attrs({{"axis", axis}, {"start", from}, {"end", to}}), name + ".cropped");
      if (!b_.ok()) return std::unexpected(*b_.error());
    }
    std::vector<ValueId> parts;
    for (const auto& [amount, side] : {std::pair{begin, "before"}, std::pair{end, "after"}}) {
      if (amount <= 0) continue;
      TensorType block = b_.type(v);
      block.shape[d] = amount;
      const auto fill = b_.add(Op::constant, {}, attrs({{"value", value}}), name + "." + side, {block});
      if (!b_.ok()) return std::unexpected(*b_.error());
      parts.push_back(fill.at(0));
    }
    if (parts.empty()) continue;
    parts.insert(parts.begin() + (begin > 0 ? 1 : 0), v);
    v = b_.op(Op::concat, std::move(parts), attrs({{"axis", axis}}), name);
    if (!b_.ok()) return std::unexpected(*b_.error());
  }
  return define(n, v);
}

Result<void> Importer::binary(const OnnxNode& n) {
  const std::string& t = n.op_type;
  if (constant(n, 0) && constant(n, 1))
    return define_const(n, LMS_TRY(fold_binary(t, *constant(n, 0), *constant(n, 1))));
  // Scores plus a constant of zeros and fills masking causally: a causal Softmax. Any other constant added is
  // held as state (Importer::tensor).
  for (size_t side : {size_t{1}, size_t{0}}) {
    const HostTensor* c = constant(n, side);  // an initializer too: a registered mask buffer
    if (t != "Add" || c == nullptr || c->type.num_elements() < 2 || !tensors_.contains(n.inputs[1 - side]))
      continue;
    HostTensor masked(TensorType{DType::i64, c->type.shape});
    bool mask = true, filled = false;
    for (int64_t k = 0; k < c->type.num_elements() && mask; ++k) {
      mask = c->get(k) == 0 || c->get(k) <= kMaskFill;
      filled = filled || c->get(k) != 0;
      masked.set(k, c->get(k) != 0);
    }
    if (mask && filled && is_causal_mask(masked, tensors_.at(n.inputs[1 - side]).shape)) {
      masked_[n.outputs.at(0)] = n.inputs[1 - side];
      return {};
    }
  }
  // A one-element constant factor: Mul and Div by it are `scale` (Div by its reciprocal).
  if (t == "Mul" || t == "Div") {
    for (size_t side : {size_t{1}, size_t{0}}) {
      const HostTensor* c = constant(n, side);
      if (c == nullptr || c->type.num_elements() != 1 || (t == "Div" && side == 0)) continue;
      const double f = t == "Div" ? 1.0 / c->get(0) : c->get(0);
      ValueId x = LMS_TRY(data(n, 1 - side));
      if (shape_of(x).size() < c->type.shape.size()) return fail("a constant factor of higher rank than the data");
      return define(n, b_.op(Op::scale, {x}, attrs({{"factor", f}}), out_name(n)));
    }
  }
  // Division by data is a product with its reciprocal (within an ulp of the quotient, not bit for bit); a
  // one-element constant numerator scales the reciprocal.
  if (t == "Div") {
    ValueId inv = b_.op(Op::reciprocal, {LMS_TRY(data(n, 1))}, {}, out_name(n) + ".reciprocal");
    if (const HostTensor* c = constant(n, 0); c != nullptr && c->type.num_elements() == 1) {
      if (b_.ok() && shape_of(inv).size() < c->type.shape.size())
        return fail("a constant numerator of higher rank than the data");
      return define(n, b_.op(Op::scale, {inv}, attrs({{"factor", c->get(0)}}), out_name(n)));
    }
    return define(n, b_.op(Op::mul, {LMS_TRY(data(n, 0)), inv}, {}, out_name(n)));
  }
  ValueId a = LMS_TRY(data(n, 0)), c = LMS_TRY(data(n, 1));
  if (t == "Sub") c = b_.op(Op::scale, {c}, attrs({{"factor", -1.0}}), out_name(n) + ".neg");
  return define(n, b_.op(t == "Mul" ? Op::mul : Op::add, {a, c}, {}, out_name(n)));
}

Result<void> Importer::pool(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  const int rank = LMS_TRY(spatial_rank(x));
  auto kernel = ints_attr(n, "kernel_shape");
  if (!kernel || static_cast<int>(kernel->size()) != rank) return fail("'kernel_shape' must give {} values", rank);
  if (int_attr(n, "storage_order", 0) != 0) return fail("storage_order 1 is not supported");
  for (int64_t d : LMS_TRY(spatial(n, "dilations", rank)))
    if (d != 1) return fail("dilated pooling is not supported");
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return fail("the Indices output is not supported");
  const bool max = n.op_type == "MaxPool";
  Attributes a = attrs({{"kernel", IntList(*kernel)},
                        {"stride", LMS_TRY(spatial(n, "strides", rank))},
                        {"pad", LMS_TRY(symmetric_pads(n, rank))}});
  if (int_attr(n, "ceil_mode", 0) != 0) a.set("ceil_mode", true);
  // Padding from a zero Pad before the pool (Importer::pad) is counted, as it was part of the data.
  if (!max) a.set("count_include_pad", int_attr(n, "count_include_pad", 0) != 0 || zero_pads_.contains(n.inputs[0]));
  const Op ops[2][3] = {{Op::avg_pool1d, Op::avg_pool2d, Op::avg_pool3d}, {Op::max_pool1d, Op::max_pool2d, Op::max_pool3d}};
  return define(n, b_.op(ops[max][rank - 1], {x}, std::move(a), out_name(n)));
}

Result<void> Importer::global_avg_pool(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  LMS_TRY(spatial_rank(x));
  ValueId y = b_.op(Op::global_avg_pool, {x}, {}, out_name(n));
  if (!b_.ok()) return std::unexpected(*b_.error());
  Shape s = shape_of(x);  // ONNX keeps the spatial dims as ones
  std::fill(s.begin() + 2, s.end(), 1);
  return define_view(n, y, s);
}

Result<void> Importer::layer_norm(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  const int64_t axis = int_attr(n, "axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(shape_of(x).size()) - 1)
    return fail("normalization over axis {} (only the last axis is supported)", axis);
  if (!has_input(n, 2)) return fail("a LayerNormalization without a bias input is not supported");
  auto outs = b_.add(Op::layer_norm, {x, LMS_TRY(data(n, 1)), LMS_TRY(data(n, 2))},
                     attrs({{"eps", float_attr(n, "epsilon", 1e-5)}}), out_name(n));
  return define(n, outs.empty() ? ValueId{} : outs[0]);
}

Result<void> Importer::gemm(const OnnxNode& n) {
  if (float_attr(n, "alpha", 1.0) != 1.0 || float_attr(n, "beta", 1.0) != 1.0)
    return fail("alpha and beta other than 1 are not supported");
  if (int_attr(n, "transA", 0) != 0) return fail("transA 1 is not supported");
  ValueId a = LMS_TRY(data(n, 0)), w = LMS_TRY(data(n, 1));
  Attributes at = attrs({{"transpose_b", int_attr(n, "transB", 0) != 0}});
  if (!has_input(n, 2)) return define(n, b_.op(Op::matmul, {a, w}, std::move(at), out_name(n)));
  ValueId y = b_.op(Op::matmul, {a, w}, std::move(at), out_name(n) + ".matmul");
  ValueId c = LMS_TRY(data(n, 2));
  if (b_.ok() && shape_of(c).size() == 1 && shape_of(c)[0] == shape_of(y).back())
    return define(n, b_.op(Op::bias_add, {y, c}, attrs({{"axis", int64_t{-1}}}), out_name(n)));
  return define(n, b_.op(Op::add, {y, c}, {}, out_name(n)));
}

Result<void> Importer::matmul(const OnnxNode& n) {
  return define(n, b_.op(Op::matmul, {LMS_TRY(data(n, 0)), LMS_TRY(data(n, 1))}, {}, out_name(n)));
}

Result<void> Importer::reduce(const OnnxNode& n) {
  ValueId x = LMS_TRY(data(n, 0));
  auto ax = LMS_TRY(axes(n, 1));
  if (ax && ax->empty() && int_attr(n, "noop_with_empty_axes", 0) != 0) return define(n, x);
  Attributes a = attrs({{"axes", IntList(ax.value_or(std::vector<int64_t>{}))},
                        {"keepdims", int_attr(n, "keepdims", 1) != 0}});
  return define(n, b_.op(n.op_type == "ReduceSum" ? Op::reduce_sum : Op::mean, {x}, std::move(a), out_name(n)));
}

Result<void> Importer::sum(const OnnxNode& n) {
  if (n.inputs.empty()) return fail("Sum of nothing");
  ValueId total = LMS_TRY(data(n, 0));
  for (size_t i = 1; i < n.inputs.size(); ++i)
    total = b_.op(Op::add, {total, LMS_TRY(data(n, i))}, {},
                  i + 1 == n.inputs.size() ? out_name(n) : out_name(n) + fmt::format(".{}", i));
  return define(n, total);
}

const std::vector<std::pair<std::string_view, Importer::Handler>>& Importer::handlers() {
  static const std::vector<std::pair<std::string_view, Handler>> table = {
      {"Add", &Importer::binary},
      {"AveragePool", &Importer::pool},
      {"BatchNormalization", &Importer::batch_norm},
      {"Cast", &Importer::cast},
      {"Clip", &Importer::clip},
      {"Concat", &Importer::concat},
      {"Constant", &Importer::constant_node},
      {"ConstantOfShape", &Importer::constant_of_shape},
      {"Conv", &Importer::conv},
      {"ConvTranspose", &Importer::conv},
      {"Div", &Importer::binary},
      {"Dropout", &Importer::identity},
      {"Einsum", &Importer::einsum},
      {"Equal", &Importer::fold},
      {"Exp", &Importer::unary},
      {"Expand", &Importer::expand},
      {"Flatten", &Importer::reshape_like},
      {"Gather", &Importer::gather},
      {"Gelu", &Importer::unary},
      {"Gemm", &Importer::gemm},
      {"GlobalAveragePool", &Importer::global_avg_pool},
      {"HardSigmoid", &Importer::hard_activation},
      {"HardSwish", &Importer::hard_activation},
      {"Identity", &Importer::identity},
      {"InstanceNormalization", &Importer::instance_norm},
      {"LayerNormalization", &Importer::layer_norm},
      {"LeakyRelu", &Importer::leaky_relu},
      {"Log", &Importer::unary},
      {"LogSoftmax", &Importer::log_softmax},
      {"MatMul", &Importer::matmul},
      {"MaxPool", &Importer::pool},
      {"Mish", &Importer::unary},
      {"Mod", &Importer::fold},
      {"Mul", &Importer::binary},
      {"Neg", &Importer::unary},
      {"Not", &Importer::fold},
      {"Pad", &Importer::pad},
      {"Pow", &Importer::power},
      {"PRelu", &Importer::leaky_relu},
      {"Range", &Importer::fold},
      {"Reciprocal", &Importer::unary},
      {"ReduceMean", &Importer::reduce},
      {"ReduceSum", &Importer::reduce},
      {"Relu", &Importer::unary},
      {"Reshape", &Importer::reshape_like},
      {"Resize", &Importer::resize},
      {"ScatterND", &Importer::fold},
      {"Shape", &Importer::shape},
      {"Sigmoid", &Importer::unary},
      {"Silu", &Importer::unary},  // fuse_silu's, not an ONNX operator
      {"Slice", &Importer::slice},
      {"Softmax", &Importer::softmax},
      {"Softplus", &Importer::unary},
      {"Split", &Importer::split},
      {"Sqrt", &Importer::unary},
      {"Squeeze", &Importer::reshape_like},
      {"Sub", &Importer::binary},
      {"Sum", &Importer::sum},
      {"Tanh", &Importer::unary},
      {"Tile", &Importer::tile},
      {"Transpose", &Importer::transpose},
      {"Unsqueeze", &Importer::reshape_like},
      {"Where", &Importer::where},
  };
  return table;
}

// The type of graph input `in` with the batch dimension resolved (its first: --batch, or the file's number; a
// symbolic one without --batch takes the command's default batch). `held`: held at a value (input_values), where
// narrow integers and bools are widened to i64 as in initializers.
Result<TensorType> Importer::input_type(const OnnxValueInfo& in, bool held) const {
  const std::string where = "input '" + in.name + "'";
  std::optional<DType> dt = onnx_dtype(in.elem_type);
  if (!dt && held && onnx_small_int_bytes(in.elem_type) > 0) dt = DType::i64;
  if (!dt) return fail_at(where, "element type {} is not supported", onnx_type_name(in.elem_type));
  if (in.dims.empty()) return fail_at(where, "no shape is given");
  Shape shape;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (i == 0 && (opts_.batch || !in.dims[0])) {
      const int64_t batch = opts_.batch.value_or(opts_.symbolic_batch);
      if (batch < 1) return fail_at(where, "batch {} must be >= 1", batch);
      shape.push_back(batch);
    } else if (in.dims[i]) {
      shape.push_back(*in.dims[i]);
    } else if (auto d = opts_.dims.find(in.dim_names[i]); !in.dim_names[i].empty() && d != opts_.dims.end()) {
      if (d->second < 1) return fail_at(where, "dimension {} ('{}') of {} must be >= 1", i, d->first, d->second);
      shape.push_back(d->second);
    } else {
      const std::string& sym = in.dim_names[i];
      return fail_at(where, "dimension {} is symbolic{}: give its size (--dim {}=N) or export the model with a "
                     "fixed size there", i, sym.empty() ? "" : " ('" + sym + "')", sym.empty() ? "NAME" : sym);
    }
  }
  if (product(shape, 0, shape.size()) < 0) return fail_at(where, "shape {} is too large", to_string(shape));
  return TensorType{*dt, std::move(shape)};
}

// The one graph input that is neither an initializer nor held at a value, as %x with the batch dimension resolved;
// the held ones as constants.
Result<ValueId> Importer::data_input() {
  std::set<std::string> symbolic;  // the inputs' symbolic dimensions past the batch
  for (const OnnxValueInfo& in : model_.inputs)
    for (size_t i = 1; i < in.dims.size(); ++i)
      if (!in.dims[i] && !in.dim_names[i].empty()) symbolic.insert(in.dim_names[i]);
  for (const auto& [name, size] : opts_.dims)
    if (!symbolic.contains(name))
      return fail("a size for dimension '{}', which no input of the model has past the batch (its symbolic ones: {})",
                  name, symbolic.empty() ? "none" : fmt::format("'{}'", fmt::join(symbolic, "', '")));
  std::vector<const OnnxValueInfo*> data;
  std::string inputs;  // every graph input that is not an initializer, for messages
  for (const OnnxValueInfo& in : model_.inputs) {
    if (initializers_.contains(in.name)) continue;
    inputs += (inputs.empty() ? "'" : ", '") + in.name + "'";
    auto held = opts_.input_values.find(in.name);
    if (held == opts_.input_values.end()) {
      data.push_back(&in);
      continue;
    }
    HostTensor value(LMS_TRY(input_type(in, true)));
    for (int64_t i = 0; i < value.type.num_elements(); ++i) value.set(i, held->second);
    set_const(in.name, std::move(value));
  }
  for (const auto& [name, value] : opts_.input_values)
    if (!std::ranges::any_of(model_.inputs, [&](const OnnxValueInfo& in) { return in.name == name; }) ||
        initializers_.contains(name))
      return fail("an input value for '{}', which is not an input of the model (its inputs: {})", name,
                  inputs.empty() ? "none" : inputs);
  if (data.size() != 1) {
    std::string names;
    for (const OnnxValueInfo* in : data) names += (names.empty() ? "'" : ", '") + in->name + "'";
    return fail("the model has {} data inputs ({}); LMS trains models with exactly one{}", data.size(),
                names.empty() ? "none" : names,
                data.size() > 1 ? " (hold the others at a value: --input-value NAME=V, e.g. an attention mask at 1)"
                                : "");
  }
  const OnnxValueInfo& in = *data[0];
  const TensorType type = LMS_TRY(input_type(in, false));
  ValueId x = b_.input(type, "x");
  data_dtype_ = type.dtype;
  tensors_[in.name] = Tensor{x, type.shape};
  return x;
}

// Whether `name` matches `pattern`, in which '*' matches any run of characters.
static bool glob_match(std::string_view pattern, std::string_view name) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == name;
  if (!name.starts_with(pattern.substr(0, star))) return false;
  for (size_t at = star; at <= name.size(); ++at)
    if (glob_match(pattern.substr(star + 1), name.substr(at))) return true;
  return false;
}

Result<std::map<std::string, HostTensor>> Importer::run() {
  for (const auto& [name, t] : model_.initializers) {
    consts_[name] = &t;
    initializers_.insert(name);
  }
  // The names a float initializer goes by: its own, and those of the Identity nodes PyTorch reads equal ones
  // through (each a parameter or buffer of its own, Importer::identity).
  std::vector<std::string> floats;
  std::set<std::string> seen;
  for (const auto& [name, t] : model_.initializers)
    if (is_float(t.type.dtype) && seen.insert(name).second) floats.push_back(name);
  for (const OnnxNode& n : model_.nodes)
    if (n.op_type == "Identity" && !n.inputs.empty() && seen.contains(n.inputs[0]) &&
        seen.insert(n.outputs.at(0)).second)
      floats.push_back(n.outputs.at(0));
  for (const std::string& pattern : opts_.frozen) {
    bool matched = false;
    for (const std::string& name : floats)
      if (glob_match(pattern, name)) {
        frozen_.insert(name);
        matched = true;
      }
    if (!matched) {
      std::string listed;
      for (size_t i = 0; i < std::min<size_t>(floats.size(), 8); ++i) listed += (i ? ", " : "") + floats[i];
      return fail("frozen '{}' matches no float initializer of the model ({}{})", pattern,
                  floats.empty() ? "it has none" : listed,
                  floats.size() > 8 ? fmt::format(", ... {} in all", floats.size()) : "");
    }
  }
  LMS_TRY(data_input());
  const std::vector<OnnxNode> nodes = fuse_silu(fuse_layer_norm(fuse_gelu(model_.nodes, model_), model_), model_);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const OnnxNode& n = nodes[i];
    const std::string where = fmt::format("node '{}' ({})", n.name.empty() ? fmt::format("#{}", i) : n.name, n.op_type);
    if (!n.domain.empty() && n.domain != "ai.onnx")
      return fail_at(where, "operator domain '{}' is not supported (only the standard ONNX operators)", n.domain);
    if (n.outputs.empty()) return fail_at(where, "the node has no outputs");
    const auto& table = handlers();
    auto h = std::find_if(table.begin(), table.end(), [&](const auto& e) { return e.first == n.op_type; });
    if (h == table.end()) {
      std::string known;
      for (const auto& [op, fn] : table) known += (known.empty() ? "" : ", ") + std::string(op);
      return fail_at(where, "operator not supported (LMS imports: {})", known);
    }
    attr_error_.reset();
    Result<void> done = (this->*(h->second))(n);
    if (!done) return wrap(where, done.error());
    // Constants folded from a trainable initializer's values keep where they came from (a Shape reads none).
    for (const std::string& in : n.op_type == "Shape" ? std::vector<std::string>{} : n.inputs) {
      std::string source;
      if (auto o = origin_.find(in); o != origin_.end()) {
        source = o->second;
      } else if (auto c = consts_.find(in); c != consts_.end() && is_param(in, *c->second)) {
        source = in;
      }
      if (source.empty()) continue;
      for (const std::string& out : n.outputs)
        if (!out.empty() && consts_.contains(out) && !initializers_.contains(out)) origin_.try_emplace(out, source);
    }
    if (attr_error_) return fail_at(where, "{}", *attr_error_);
    if (!b_.ok()) return wrap(where, *b_.error());
  }
  if (model_.outputs.size() != 1) return fail("the model has {} outputs; LMS trains models with one", model_.outputs.size());
  OnnxNode out;  // reads the model's output like a node would
  out.inputs = out.outputs = {model_.outputs[0].name};
  const Shape logits = LMS_TRY(tensor(out, 0)).shape;
  const bool classes_last = this->classes_last(logits.size());
  if (opts_.add_loss && classes_last) {  // [B, T, V] logits: one row of V per token, as [B*T, V]
    const int64_t rows = product(logits, 0, logits.size() - 1);
    LMS_TRY_VOID(define_view(out, LMS_TRY(tensor(out, 0)).value, {rows, logits.back()}));
  }
  ValueId y = LMS_TRY(data(out, 0));
  ValueId loss = y;
  if (opts_.add_loss) {
    const TensorType& t = b_.type(y);
    if (t.rank() < 2 || !is_float(t.dtype))
      return fail("output '{}' is {}; a classifier's logits are [N, classes, ...] floats", out.inputs[0], to_string(t));
    Shape labels_shape = classes_last ? Shape(logits.begin(), logits.end() - 1) : t.shape;
    if (!classes_last) labels_shape.erase(labels_shape.begin() + 1);
    ValueId labels = b_.input(TensorType{DType::i64, labels_shape}, "labels");
    if (classes_last) labels = b_.op(Op::reshape, {labels}, attrs({{"shape", IntList{t.shape[0]}}}), "labels.flat");
    loss = b_.op(Op::cross_entropy, {y, labels}, {}, "loss");
  } else if (b_.type(y).rank() != 0 || !is_float(b_.type(y).dtype)) {
    return fail("output '{}' is {}, not a scalar loss", out.inputs[0], to_string(b_.type(y)));
  }
  if (!b_.ok()) return std::unexpected(*b_.error());
  b_.graph().set_outputs({loss});
  return std::move(weights_);
}

}  // namespace onnx_import_detail

using onnx_import_detail::Importer;

std::string legal_name(std::string_view onnx) {
  while (onnx.starts_with('/')) onnx.remove_prefix(1);  // PyTorch 2's scoped names
  std::string out;
  for (char c : onnx) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? std::string("v") : out;
}

std::vector<std::string_view> onnx_supported_ops() {
  std::vector<std::string_view> out;
  for (const auto& [op, fn] : Importer::handlers()) out.push_back(op);
  return out;
}

Result<ImportedModel> import_onnx(const OnnxModel& model, const std::string& graph_name,
                                  const OnnxImportOptions& opts) {
  // A trainable initializer that a computation done at import turned into data (a positional table built from
  // two parameters) is imported again with that computation in the graph, one such initializer at a time.
  std::set<std::string> computed;
  for (;;) {
    ImportedModel m{Graph(graph_name), {}};
    Importer imp(model, opts, m.forward, computed);
    auto weights = imp.run();
    if (weights) {
      m.weights = std::move(*weights);
      return m;
    }
    if (!imp.needs_computing() || !computed.insert(*imp.needs_computing()).second)
      return std::unexpected(std::move(weights.error()));
  }
}

}  // namespace lms
