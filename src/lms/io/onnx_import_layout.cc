// The importer's handlers for views, constants and shape arithmetic (see onnx_importer.h): Reshape, Flatten,
// Squeeze and Unsqueeze as views, Identity, Transpose, Concat, Gather (folded, a slice of consecutive indices,
// an embedding), Shape, Constant, ConstantOfShape, Expand and Cast, each folded where its inputs are constants.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "lms/io/onnx_fold.h"
#include "lms/io/onnx_importer.h"

namespace lms::onnx_import_detail {

Result<void> Importer::reshape_like(const OnnxNode& n) {
  const HostTensor* c = constant(n, 0);
  Shape in;
  if (c != nullptr) {
    in = c->type.shape;
  } else {
    in = LMS_TRY(tensor(n, 0)).shape;
  }
  const int r = static_cast<int>(in.size());
  Shape out;
  const std::string& t = n.op_type;
  if (t == "Flatten") {
    int64_t axis = int_attr(n, "axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) return fail("axis {} is out of range for rank {}", int_attr(n, "axis", 1), r);
    out = {product(in, 0, static_cast<size_t>(axis)), product(in, static_cast<size_t>(axis), in.size())};
  } else if (t == "Reshape") {
    const HostTensor* target = constant(n, 1);
    if (target == nullptr) return fail("the target shape '{}' is not a constant", has_input(n, 1) ? n.inputs[1] : "");
    out = ints_of(*target);
    int infer = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0 && int_attr(n, "allowzero", 0) == 0) out[i] = i < in.size() ? in[i] : 0;
      if (out[i] == -1) {
        if (infer >= 0) return fail("more than one -1 in the target shape");
        infer = static_cast<int>(i);
      } else if (out[i] < 0) {
        return fail("target shape {} has a negative size", to_string(out));
      }
    }
    const int64_t count = product(in, 0, in.size());
    if (infer >= 0) {
      out[static_cast<size_t>(infer)] = 1;
      const int64_t known = product(out, 0, out.size());
      out[static_cast<size_t>(infer)] = known > 0 && count % known == 0 ? count / known : -1;
    }
    if (count < 0 || product(out, 0, out.size()) != count)
      return fail("cannot reshape {} ({} elements) to {}: a size fixed at export (the batch?) disagrees; export "
                  "with a symbolic batch dimension (dynamic_axes) to import at another batch",
                  to_string(in), count, to_string(ints_of(*target)));
  } else {
    auto ax = LMS_TRY(axes(n, 1));
    const bool squeeze = t == "Squeeze";
    const int out_rank = squeeze ? r : r + static_cast<int>(ax ? ax->size() : 0);
    std::set<int64_t> marked;
    for (int64_t a : ax.value_or(std::vector<int64_t>{})) {
      const int64_t k = a < 0 ? a + (squeeze ? r : out_rank) : a;
      if (k < 0 || k >= (squeeze ? r : out_rank) || !marked.insert(k).second) return fail("bad axis {}", a);
      if (squeeze && in[static_cast<size_t>(k)] != 1) return fail("cannot squeeze axis {} of size {}", a, in[k]);
    }
    if (squeeze) {
      for (int i = 0; i < r; ++i)
        if (marked.empty() ? in[i] != 1 : !marked.contains(i)) out.push_back(in[i]);
    } else {
      for (int i = 0, j = 0; i < out_rank; ++i) out.push_back(marked.contains(i) ? 1 : in[static_cast<size_t>(j++)]);
    }
  }
  if (c != nullptr) {
    HostTensor folded = *c;
    folded.type.shape = out;
    return define_const(n, std::move(folded));
  }
  return define_view(n, LMS_TRY(tensor(n, 0)).value, out);
}

Result<void> Importer::identity(const OnnxNode& n) {
  // The mask output is fine as long as nothing reads it (LMS never materializes a mask).
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
    const std::string& mask = n.outputs[1];
    const auto reads_mask = [&](const OnnxNode& m) { return std::ranges::find(m.inputs, mask) != m.inputs.end(); };
    if (std::ranges::any_of(model_.nodes, reads_mask) ||
        std::ranges::any_of(model_.outputs, [&](const OnnxValueInfo& o) { return o.name == mask; }))
      return fail("the mask output is read, which is not supported");
  }
  // Dropout (opset >= 12) drops in training mode only; before opset 12 it is the identity at inference.
  if (n.op_type == "Dropout" && has_input(n, 2)) {
    const HostTensor* training = constant(n, 2);
    const HostTensor* ratio = constant(n, 1);
    if (training == nullptr) return fail("training_mode must be a constant");
    if (has_input(n, 1) && ratio == nullptr) return fail("ratio must be a constant");
    constexpr double kDefaultRatio = 0.5;  // ONNX's default
    const double p = ratio != nullptr ? ratio->get(0) : kDefaultRatio;
    if (training->get(0) != 0 && p != 0) return define(n, b_.dropout(LMS_TRY(data(n, 0)), p, out_name(n)));
  }
  if (const HostTensor* c = constant(n, 0)) {
    // PyTorch's exporter writes parameters that were equal at export (fresh layer norms: ones and zeros) as one
    // initializer read through Identity nodes named after the others; each stays a parameter of its own.
    if (initializers_.contains(n.inputs[0])) initializers_.insert(n.outputs.at(0));
    return define_const(n, *c);
  }
  tensors_[n.outputs.at(0)] = LMS_TRY(tensor(n, 0));
  return {};
}

Result<void> Importer::transpose(const OnnxNode& n) {
  const HostTensor* c = folded(n, 0);
  std::vector<int64_t> perm(c != nullptr ? c->type.shape.size() : LMS_TRY(tensor(n, 0)).shape.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // ONNX's default reverses the dims
  perm = ints_attr(n, "perm").value_or(perm);
  if (c != nullptr) return define_const(n, LMS_TRY(fold_transpose(*c, perm)));
  return define(n, b_.op(Op::transpose, {LMS_TRY(data(n, 0))}, attrs({{"perm", IntList(perm)}}), out_name(n)));
}

Result<void> Importer::concat(const OnnxNode& n) {
  const int64_t axis = int_attr(n, "axis", 0);
  std::vector<const HostTensor*> parts;  // all constants: shape lists, index tables
  for (size_t i = 0; i < n.inputs.size(); ++i) parts.push_back(folded(n, i));
  if (!parts.empty() && std::ranges::find(parts, nullptr) == parts.end())
    return define_const(n, LMS_TRY(fold_concat(parts, axis)));
  std::vector<ValueId> xs;
  for (size_t i = 0; i < n.inputs.size(); ++i) xs.push_back(LMS_TRY(data(n, i)));
  return define(n, b_.op(Op::concat, std::move(xs), attrs({{"axis", axis}}), out_name(n)));
}

Result<void> Importer::gather(const OnnxNode& n) {
  const HostTensor* table = constant(n, 0);
  const HostTensor* ids = constant(n, 1);
  int64_t axis = int_attr(n, "axis", 0);
  if (table != nullptr && ids != nullptr && !is_float(table->type.dtype)) {
    if (table->type.rank() != 1 || axis != 0 || ids->type.rank() > 1)
      return fail("only gathers from 1-D integer constants are folded");
    const std::vector<int64_t> from = ints_of(*table);
    std::vector<int64_t> picked;
    for (int64_t i : ints_of(*ids)) {
      const int64_t k = i < 0 ? i + static_cast<int64_t>(from.size()) : i;
      if (k < 0 || k >= static_cast<int64_t>(from.size())) return fail("index {} out of range", i);
      picked.push_back(from[static_cast<size_t>(k)]);
    }
    return define_const(n, i64_tensor(picked, ids->type.shape));
  }
  if (ids != nullptr) {  // consecutive constant indices k, k+1, ... (positions from a Range, x[:, 0]): a slice
    const std::vector<int64_t> rows = ints_of(*ids);
    ValueId t = LMS_TRY(data(n, 0));
    const Shape& ts = shape_of(t);
    const auto r = static_cast<int64_t>(ts.size());
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return fail("axis {} is out of range for rank {}", int_attr(n, "axis", 0), r);
    const int64_t d = ts[static_cast<size_t>(axis)];
    if (rows.empty()) return fail("no indices");
    const int64_t first = rows[0] < 0 ? rows[0] + d : rows[0], end = first + static_cast<int64_t>(rows.size());
    bool consecutive = first >= 0 && end <= d;
    for (size_t i = 0; i < rows.size() && consecutive; ++i)
      consecutive = (rows[i] < 0 ? rows[i] + d : rows[i]) == first + static_cast<int64_t>(i);
    if (!consecutive && axis == 0) {  // any rows (a relative position bias table): an embedding at constant ids
      std::vector<int64_t> at(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        at[i] = rows[i] < 0 ? rows[i] + d : rows[i];
        if (at[i] < 0 || at[i] >= d) return fail("index {} is out of range for axis 0 of {}", rows[i], to_string(ts));
      }
      auto held = tensors_.find(n.inputs[1]);  // another Gather at the same indices holds them already
      if (held == tensors_.end())
        held = tensors_.emplace(n.inputs[1], Tensor{constant_state(n.inputs[1], i64_tensor(at, ids->type.shape)),
                                                    ids->type.shape}).first;
      return define(n, b_.op(Op::embedding, {t, held->second.value}, {}, out_name(n)));
    }
    if (!consecutive)
      return fail("constant indices {} are not consecutive entries of axis {} of {}", abbreviated(rows), axis,
                  to_string(ts));
    Shape view(ts.begin(), ts.begin() + axis);  // the indices' dims replace the axis
    view.insert(view.end(), ids->type.shape.begin(), ids->type.shape.end());
    view.insert(view.end(), ts.begin() + axis + 1, ts.end());
    if (first == 0 && end == d) return define_view(n, t, view);
    ValueId y = b_.op(Op::slice, {t}, attrs({{"axis", axis}, {"start", first}, {"end", end}}), out_name(n));
    if (!b_.ok()) return std::unexpected(*b_.error());
    return define_view(n, y, view);
  }
  if (axis != 0) return fail("only axis 0 of a table (an embedding) is read at computed ids");
  return define(n, b_.op(Op::embedding, {LMS_TRY(data(n, 0)), LMS_TRY(data(n, 1))}, {}, out_name(n)));
}

Result<void> Importer::shape(const OnnxNode& n) {
  const HostTensor* c = constant(n, 0);
  const Shape s = c != nullptr ? c->type.shape : LMS_TRY(tensor(n, 0)).shape;
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t start = int_attr(n, "start", 0), end = int_attr(n, "end", r);
  start = std::clamp(start < 0 ? start + r : start, int64_t{0}, r);
  end = std::clamp(end < 0 ? end + r : end, int64_t{0}, r);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  return define_const(n, i64_tensor(dims, {static_cast<int64_t>(dims.size())}));
}

Result<void> Importer::constant_node(const OnnxNode& n) {
  if (const OnnxAttribute* a = attr(n, "value", Kind::t)) return define_const(n, a->t);
  if (const OnnxAttribute* a = attr(n, "value_ints", Kind::ints))
    return define_const(n, i64_tensor(a->ints, {static_cast<int64_t>(a->ints.size())}));
  if (const OnnxAttribute* a = attr(n, "value_int", Kind::i)) return define_const(n, i64_tensor({a->i}, {}));
  if (const OnnxAttribute* a = attr(n, "value_float", Kind::f)) {
    HostTensor t(TensorType{DType::f32, {}});
    t.set(0, a->f);
    return define_const(n, std::move(t));
  }
  return fail("only 'value', 'value_int', 'value_ints' and 'value_float' constants are supported");
}

Result<void> Importer::constant_of_shape(const OnnxNode& n) {
  const HostTensor* shape = constant(n, 0);
  if (shape == nullptr) return fail("the shape input is not a constant");
  HostTensor value(TensorType{DType::f32, {}});  // ONNX's default: a float 0
  if (const OnnxAttribute* a = attr(n, "value", Kind::t)) {
    if (a->t.type.num_elements() != 1) return fail("'value' has {} elements, not one", a->t.type.num_elements());
    value = a->t;
    value.type.shape = {};
  }
  return define_const(n, LMS_TRY(fold_expand(value, Shape(ints_of(*shape)))));
}

Result<void> Importer::expand(const OnnxNode& n) {
  const HostTensor* shape = constant(n, 1);
  if (shape == nullptr) return fail("the shape input '{}' is not a constant", has_input(n, 1) ? n.inputs[1] : "");
  if (const HostTensor* c = folded(n, 0)) return define_const(n, LMS_TRY(fold_expand(*c, Shape(ints_of(*shape)))));
  ValueId x = LMS_TRY(data(n, 0));
  const Shape to = LMS_TRY(broadcast_shapes(shape_of(x), Shape(ints_of(*shape))));
  if (to == shape_of(x)) return define(n, x);
  return define(n, b_.op(Op::broadcast_to, {x}, attrs({{"shape", IntList(to)}}), out_name(n)));
}

Result<void> Importer::cast(const OnnxNode& n) {
  const int32_t to = static_cast<int32_t>(int_attr(n, "to", 0));
  constexpr int32_t kOnnxBool = 9;  // booleans are i64 0/1 here
  if (to == kOnnxBool && constant(n, 0)) return define_const(n, fold_not(fold_not(*constant(n, 0))));
  std::optional<DType> dt = onnx_dtype(to);
  if (!dt) return fail("cast to {} is not supported", onnx_type_name(to));
  if (const HostTensor* c = constant(n, 0)) {
    HostTensor t(TensorType{*dt, c->type.shape});
    for (int64_t k = 0; k < t.type.num_elements(); ++k) t.set(k, c->get(k));
    return define_const(n, std::move(t));
  }
  Tensor t = LMS_TRY(tensor(n, 0));
  if (b_.type(t.value).dtype != *dt)
    return fail("casting {} to {} is not supported", to_string(b_.type(t.value)), dtype_name(*dt));
  tensors_[n.outputs.at(0)] = t;
  return {};
}

}  // namespace lms::onnx_import_detail
