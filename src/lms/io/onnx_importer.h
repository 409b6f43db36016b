// The ONNX importer's internals (io/onnx_import.h is the interface), shared by its source files: onnx_import.cc
// (the operator table, the convolutional and general operators, the graph's inputs and loss),
// onnx_import_layout.cc (views, constants, shape arithmetic), onnx_import_attention.cc (what transformers need:
// Slice, Split, masks, Softmax, Equal/Not/Range), onnx_import_resize.cc (upsampling, Tile) and
// onnx_import_norm.cc (instance norm, leaky relu). The Importer keeps, for every ONNX tensor name, either a graph
// value with the shape ONNX knows it by (a pending view: the value's own shape may differ until an op needs the
// ONNX shape, when one reshape is added) or a host constant (initializers, Constant outputs, folded shape
// arithmetic). Float initializers become parameters when first read as data. Nothing outside src/lms/io includes
// this file.
#pragma once

#include <fmt/format.h>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lms/io/onnx_import.h"
#include "lms/ir/builder.h"

namespace lms::onnx_import_detail {

using Kind = OnnxAttribute::Kind;

// The product of s[from, to), or -1 past kMaxImportElements (so no size arithmetic overflows).
constexpr int64_t kMaxImportElements = int64_t{1} << 48;  // as the model builders' limit (models/layers.h)
inline int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    if (s[i] < 0 || __builtin_mul_overflow(p, s[i], &p) || p > kMaxImportElements) return -1;
  return p;
}

// The integer elements of a constant (i32 or i64).
inline std::vector<int64_t> ints_of(const HostTensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.type.num_elements()));
  if (t.type.dtype == DType::i64) {
    std::span<const int64_t> v = t.as<int64_t>();
    out.assign(v.begin(), v.end());
  } else {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(t.get(static_cast<int64_t>(i)));
  }
  return out;
}

// A list for an error line: all of it up to 8 values, else the first 8 and how many in all.
inline std::string abbreviated(const std::vector<int64_t>& v) {
  constexpr size_t kShown = 8;
  if (v.size() <= kShown) return to_string(Shape(v));
  return fmt::format("[{},... ({} in all)]", fmt::join(v.begin(), v.begin() + kShown, ","), v.size());
}

// A fill value that masks an attention score out: -inf, or one so negative that exp() of it underflows to 0
// (PyTorch code uses finfo.min or -1e4 as well as -inf).
constexpr double kMaskFill = -1e4;

inline HostTensor i64_tensor(const std::vector<int64_t>& v, Shape shape) {
  HostTensor t(TensorType{DType::i64, std::move(shape)});
  std::copy(v.begin(), v.end(), t.as<int64_t>().begin());
  return t;
}

class Importer {
 public:
  // `computed`: trainable initializers whose computations run in the graph rather than at import (import_onnx
  // fills it when a run fails for want of that, needs_computing()).
  Importer(const OnnxModel& m, const OnnxImportOptions& o, Graph& g, std::set<std::string> computed = {})
      : model_(m), opts_(o), b_(g), computed_(std::move(computed)) {}

  Result<std::map<std::string, HostTensor>> run();
  // After run() failed because a value folded from a trainable initializer was read as data: that initializer.
  const std::optional<std::string>& needs_computing() const { return needs_computing_; }

  using Handler = Result<void> (Importer::*)(const OnnxNode&);
  static const std::vector<std::pair<std::string_view, Handler>>& handlers();

 private:
  struct Tensor {
    ValueId value;
    Shape shape;  // the ONNX shape; differs from the value's own until `data` adds the reshape
  };

  // ---- reading inputs ----
  bool has_input(const OnnxNode& n, size_t i) const { return i < n.inputs.size() && !n.inputs[i].empty(); }
  const HostTensor* constant(const OnnxNode& n, size_t i) const {
    if (!has_input(n, i) || computed_.contains(n.inputs[i])) return nullptr;
    auto it = consts_.find(n.inputs[i]);
    return it == consts_.end() ? nullptr : it->second;
  }
  // Input i where a node on it is evaluated at import: a constant that is not a parameter (a float initializer
  // is one, and stays one).
  const HostTensor* folded(const OnnxNode& n, size_t i) const {
    const HostTensor* c = constant(n, i);
    return c != nullptr && !is_param(n.inputs[i], *c) ? c : nullptr;
  }
  // Whether a constant is a trainable parameter: a float initializer the options do not freeze.
  bool is_param(const std::string& name, const HostTensor& t) const {
    return is_float(t.type.dtype) && initializers_.contains(name) && !frozen_.contains(name);
  }
  // Input i as a graph value without fixing its shape (for ops that only reshape).
  Result<Tensor> tensor(const OnnxNode& n, size_t i) {
    if (!has_input(n, i)) return fail("input {} is missing", i);
    const std::string& name = n.inputs[i];
    if (auto it = tensors_.find(name); it != tensors_.end()) return it->second;
    if (masked_.contains(name))
      return fail("'{}' holds attention scores under a causal mask; LMS takes it only as the input of a Softmax "
                  "over the last axis", name);
    auto c = consts_.find(name);
    if (c == consts_.end()) return fail("input '{}' is not produced by any node LMS imported", name);
    const HostTensor& t = *c->second;
    if (!is_float(t.type.dtype))
      return fail("input '{}' is an integer constant ({}), which LMS takes as data only as indices of a Gather",
                  name, to_string(t.type));
    if (auto o = origin_.find(name); o != origin_.end() && !initializers_.contains(name)) {
      // Folded from a trainable initializer: the parameter itself under another shape; else this run fails and
      // import_onnx starts again with that initializer never folded (needs_computing), so the computation is in
      // the graph; the message is what remains when that fails too.
      const HostTensor& source = *consts_.at(o->second);
      if (source.type.dtype != t.type.dtype || source.data != t.data) {
        needs_computing_ = o->second;
        return fail("'{}' is computed at import from the float initializer '{}', which LMS takes as a trainable "
                    "parameter and cannot train through that computation; if '{}' is a buffer (not trained), "
                    "freeze it (OnnxImportOptions::frozen, `--frozen`)", name, o->second, o->second);
      }
      OnnxNode reader;
      reader.inputs = {o->second};
      const ValueId p = LMS_TRY(tensor(reader, 0)).value;
      return tensors_[name] = Tensor{p, t.type.shape};
    }
    ValueId v;
    if (is_param(name, t)) {  // a trainable parameter, initialized from the file
      v = b_.param(t.type, legal_name(name));  // no init: the weights come from the file
      if (b_.ok()) keep(b_.graph().value(v).name, t);
    } else if (is_uniform(t)) {  // a Constant of one repeated value: LMS's `constant`
      auto outs = b_.add(Op::constant, {}, attrs({{"value", t.type.num_elements() > 0 ? t.get(0) : 0.0}}),
                         legal_name(name), {t.type});
      v = outs.empty() ? ValueId{} : outs[0];
    } else {  // any other Constant (an attention mask, a bias table's indices): state holding the file's values
      v = constant_state(name, t);
    }
    if (!b_.ok()) return std::unexpected(*b_.error());
    return tensors_[name] = Tensor{v, t.type.shape};
  }
  static bool is_uniform(const HostTensor& t) {
    for (int64_t k = 1; k < t.type.num_elements(); ++k)
      if (t.get(k) != t.get(0)) return false;
    return true;
  }
  // A constant tensor as a `state` value named after it, initialized from its values (in `weights`) and never
  // written: LMS has no op holding arbitrary constant values, and state is the persistent, untrained kind.
  ValueId constant_state(const std::string& name, const HostTensor& t) {
    ValueId v = b_.state(t.type, legal_name(name));
    if (b_.ok()) keep(b_.graph().value(v).name, t);
    return v;
  }
  // Records a value's initial contents (ImportedModel::weights) unless the caller wants the graph alone.
  void keep(const std::string& name, const HostTensor& t) {
    if (opts_.values) weights_[name] = t;
  }
  // Input i as a graph value of its ONNX shape.
  Result<ValueId> data(const OnnxNode& n, size_t i) {
    Tensor t = LMS_TRY(tensor(n, i));
    if (b_.type(t.value).shape == t.shape) return t.value;
    ValueId v = b_.op(Op::reshape, {t.value}, attrs({{"shape", IntList(t.shape)}}), legal_name(n.inputs[i]));
    if (!b_.ok()) return std::unexpected(*b_.error());
    tensors_[n.inputs[i]] = Tensor{v, t.shape};
    return v;
  }
  const Shape& shape_of(ValueId v) const { return b_.type(v).shape; }

  // ---- attributes (the first wrong kind is kept in attr_error_, like Builder's errors) ----
  const OnnxAttribute* attr(const OnnxNode& n, std::string_view name, Kind kind) {
    const OnnxAttribute* a = n.attribute(name);
    if (a == nullptr || a->kind == kind) return a;
    if (!attr_error_) attr_error_ = fmt::format("attribute '{}' has the wrong kind", name);
    return nullptr;
  }
  int64_t int_attr(const OnnxNode& n, std::string_view name, int64_t fallback) {
    const OnnxAttribute* a = attr(n, name, Kind::i);
    return a ? a->i : fallback;
  }
  double float_attr(const OnnxNode& n, std::string_view name, double fallback) {
    const OnnxAttribute* a = attr(n, name, Kind::f);
    return a ? a->f : fallback;
  }
  std::string string_attr(const OnnxNode& n, std::string_view name, std::string fallback) {
    const OnnxAttribute* a = attr(n, name, Kind::s);
    return a ? a->s : fallback;
  }
  std::optional<std::vector<int64_t>> ints_attr(const OnnxNode& n, std::string_view name) {
    const OnnxAttribute* a = attr(n, name, Kind::ints);
    return a ? std::optional(a->ints) : std::nullopt;
  }
  // Axes from an attribute (older opsets) or from constant input `i` (newer ones).
  Result<std::optional<std::vector<int64_t>>> axes(const OnnxNode& n, size_t i) {
    if (auto a = ints_attr(n, "axes")) return a;
    if (!has_input(n, i)) return std::optional<std::vector<int64_t>>();
    const HostTensor* c = constant(n, i);
    if (c == nullptr) return fail("the axes input '{}' is not a constant", n.inputs[i]);
    return std::optional(ints_of(*c));
  }

  // ---- defining outputs ----
  std::string out_name(const OnnxNode& n, size_t i = 0) const { return legal_name(n.outputs.at(i)); }
  Result<void> define(const OnnxNode& n, ValueId v) {
    if (!b_.ok()) return std::unexpected(*b_.error());
    tensors_[n.outputs.at(0)] = Tensor{v, shape_of(v)};
    return {};
  }
  Result<void> define_view(const OnnxNode& n, ValueId v, Shape shape) {
    if (product(shape, 0, shape.size()) != b_.type(v).num_elements())
      return fail("shape {} does not hold the {} elements of {}", to_string(shape), b_.type(v).num_elements(),
                  to_string(b_.type(v)));
    tensors_[n.outputs.at(0)] = Tensor{v, std::move(shape)};
    return {};
  }
  Result<void> define_const(const OnnxNode& n, HostTensor t) {
    set_const(n.outputs.at(0), std::move(t));
    return {};
  }
  // A constant made at import (folded, or an input held at a value), owned by the importer.
  void set_const(const std::string& name, HostTensor t) { consts_[name] = &made_.emplace_back(std::move(t)); }

  // ---- spatial attributes shared by Conv, ConvTranspose and the pools ----
  // strides/dilations default to ones; pads [begin..., end...] must be symmetric; auto_pad NOTSET or VALID.
  Result<IntList> spatial(const OnnxNode& n, std::string_view name, int rank) {
    std::vector<int64_t> v = ints_attr(n, name).value_or(std::vector<int64_t>(static_cast<size_t>(rank), 1));
    if (static_cast<int>(v.size()) != rank) return fail("'{}' has {} values for {} spatial dims", name, v.size(), rank);
    return v;
  }
  Result<IntList> symmetric_pads(const OnnxNode& n, int rank) {
    const std::string auto_pad = string_attr(n, "auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID")
      return fail("auto_pad '{}' is not supported (export with explicit pads)", auto_pad);
    std::vector<int64_t> pads = ints_attr(n, "pads").value_or(std::vector<int64_t>(2 * static_cast<size_t>(rank), 0));
    if (static_cast<int>(pads.size()) != 2 * rank) return fail("'pads' has {} values for {} spatial dims", pads.size(), rank);
    IntList out;
    for (int i = 0; i < rank; ++i) {
      if (pads[i] != pads[i + rank]) return fail("asymmetric padding {} is not supported", to_string(Shape(pads)));
      out.push_back(pads[i]);
    }
    // A zero Pad before this node (see Importer::pad) adds its amounts.
    if (auto z = zero_pads_.find(n.inputs.at(0)); z != zero_pads_.end())
      for (int i = 0; i < rank; ++i) out[i] += z->second.at(static_cast<size_t>(i));
    return out;
  }
  Result<int> spatial_rank(ValueId x) {
    const int rank = b_.type(x).rank() - 2;
    if (rank < 1 || rank > 3) return fail("input {} has {} spatial dims (1 to 3 supported)", to_string(b_.type(x)), rank);
    return rank;
  }

  // ---- handlers ----
  Result<void> conv(const OnnxNode& n);
  Result<void> batch_norm(const OnnxNode& n);
  Result<void> unary(const OnnxNode& n);
  Result<void> clip(const OnnxNode& n);
  Result<void> power(const OnnxNode& n);
  Result<void> hard_activation(const OnnxNode& n);  // HardSigmoid, HardSwish
  Result<void> pad(const OnnxNode& n);
  Result<void> binary(const OnnxNode& n);
  // The output is the scores with the entries `masked` (nonzero) set to `fill` (one element): under a causal
  // mask, a pending causal Softmax (only a Softmax may read it); under another, the scores plus a constant.
  Result<void> mask_scores(const OnnxNode& n, const std::string& scores, const HostTensor& masked,
                           const HostTensor& fill);
  // Where: folded on constants; on data, a masked fill of attention scores (a constant condition and a fill of
  // -inf, or <= kMaskFill, as in scores.masked_fill(mask == 0, -inf)).
  Result<void> where(const OnnxNode& n);
  // Equal, Not, Range, Mod, ScatterND: on constants only (shape arithmetic, masks and positions).
  Result<void> fold(const OnnxNode& n);
  // Slice: folded on constants; on data, one `slice` per sliced axis (forward steps: see strided_slice).
  Result<void> slice(const OnnxNode& n);
  // `count` elements first, first + step, ... of `axis`: a `slice` for step 1, else a span of the axis viewed as
  // [count, step] (reshape, slice, reshape), with the last element concatenated where the span would not fit.
  Result<ValueId> strided_slice(ValueId v, int64_t axis, int64_t first, int64_t count, int64_t step,
                                const std::string& name);
  // Split: one `slice` per output (sizes from the 'split' input or attribute, else equal parts).
  Result<void> split(const OnnxNode& n);
  Result<void> pool(const OnnxNode& n);
  // Resize: upsampling, nearest or linear; Tile (onnx_import_resize.cc).
  Result<void> resize(const OnnxNode& n);
  Result<void> tile(const OnnxNode& n);
  // InstanceNormalization, LeakyRelu and PRelu, written with other ops (onnx_import_norm.cc).
  Result<void> instance_norm(const OnnxNode& n);
  Result<void> leaky_relu(const OnnxNode& n);
  Result<void> global_avg_pool(const OnnxNode& n);
  // Flatten, Reshape, Squeeze, Unsqueeze: the output is the input under another shape (constants are folded).
  Result<void> reshape_like(const OnnxNode& n);
  // Identity, and Dropout where it is the identity (evaluation mode, or a ratio of 0).
  Result<void> identity(const OnnxNode& n);
  Result<void> transpose(const OnnxNode& n);
  Result<void> concat(const OnnxNode& n);
  Result<void> softmax(const OnnxNode& n);
  // LogSoftmax as the model's output over the loss's class axis: its input (cross_entropy takes the log-softmax
  // itself, and log_softmax(log_softmax(z)) = log_softmax(z)); refused anywhere else.
  Result<void> log_softmax(const OnnxNode& n);
  // Einsum of one or two operands: transposes, reshapes, reduce_sum and one matmul.
  Result<void> einsum(const OnnxNode& n);
  Result<void> layer_norm(const OnnxNode& n);
  Result<void> gemm(const OnnxNode& n);
  Result<void> matmul(const OnnxNode& n);
  // ReduceMean, ReduceSum: `mean`, `reduce_sum` (noop_with_empty_axes honoured).
  Result<void> reduce(const OnnxNode& n);
  // Sum (of any number of inputs, broadcasting): a chain of `add`s.
  Result<void> sum(const OnnxNode& n);
  // Gather: folded on constants (shape arithmetic); a float initializer table read by ids is an embedding.
  Result<void> gather(const OnnxNode& n);
  Result<void> shape(const OnnxNode& n);
  Result<void> constant_node(const OnnxNode& n);
  // ConstantOfShape: a constant (shape from a constant input) of one value.
  Result<void> constant_of_shape(const OnnxNode& n);
  // Expand: folded on constants; on data, a `broadcast_to` (nothing where the shape does not grow).
  Result<void> expand(const OnnxNode& n);
  Result<void> cast(const OnnxNode& n);

  Result<ValueId> data_input();
  Result<TensorType> input_type(const OnnxValueInfo& in, bool held) const;
  // Whether logits of `rank` have their classes on the last axis (token ids in: a language model's [B, T, vocab])
  // rather than axis 1 (OnnxImportOptions::classes_last overrides); known once data_input() has run.
  bool classes_last(size_t rank) const {
    return opts_.classes_last.value_or(!is_float(data_dtype_)) && rank > 2;
  }

  const OnnxModel& model_;
  const OnnxImportOptions& opts_;
  Builder b_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> masked_;  // a causally masked output -> the scores it masks (for Softmax)
  std::map<std::string, ValueId> additive_masks_;  // another mask's state, by (condition, side, fill)
  std::map<std::string, IntList> zero_pads_;   // a zero-padded output -> its spatial pads (for Conv, AveragePool)
  // Constants by name: the model's initializers, pointing into the model (never copied: a ViT-B's are 343 MB, and
  // a capacity search imports the model at every size it probes), and those made at import, in `made_` (a deque:
  // its elements stay where they are as it grows).
  std::map<std::string, const HostTensor*> consts_;
  std::deque<HostTensor> made_;
  std::set<std::string> initializers_;
  std::set<std::string> frozen_;  // initializers OnnxImportOptions::frozen names
  std::map<std::string, std::string> origin_;  // a constant folded from a trainable initializer -> that initializer
  const std::set<std::string> computed_;       // trainable initializers never folded (see the constructor)
  std::optional<std::string> needs_computing_;
  std::map<std::string, HostTensor> weights_;
  std::optional<std::string> attr_error_;
  DType data_dtype_ = DType::f32;  // the data input's (data_input())
};

}  // namespace lms::onnx_import_detail
