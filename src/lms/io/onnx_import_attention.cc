// The importer's handlers for what transformers need (see onnx_importer.h): Slice and Split as `slice`, causal
// attention masks (Where, or Add of a constant) carried to the Softmax that reads them (other constant masks
// become an `add` of the constant), LogSoftmax at the model's output (the loss reads its input), and
// Equal/Not/Range/Mod/ScatterND folded on constants.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <cmath>
#include <numeric>

#include "lms/io/onnx_fold.h"
#include "lms/io/onnx_importer.h"

namespace lms::onnx_import_detail {

Result<void> Importer::mask_scores(const OnnxNode& n, const std::string& scores, const HostTensor& masked,
                                   const HostTensor& fill) {
  OnnxNode reader;
  reader.inputs = {scores};
  const Shape shape = LMS_TRY(tensor(reader, 0)).shape;
  if (is_causal_mask(masked, shape)) {
    masked_[n.outputs.at(0)] = scores;
    return {};
  }
  // Any other constant mask: the scores plus a constant, 0 where kept and the fill where masked. The same after
  // the softmax wherever a row keeps an entry; a row masked whole would be uniform under a finite fill, where the
  // sum gives the softmax of its scores.
  const int64_t cols = masked.type.shape.empty() ? 1 : masked.type.shape.back();
  for (int64_t row = 0; std::isfinite(fill.get(0)) && row * cols < masked.type.num_elements(); ++row) {
    bool kept = false;
    for (int64_t j = 0; j < cols && !kept; ++j) kept = masked.get(row * cols + j) == 0;
    if (!kept)
      return fail("the attention mask {} masks row {} whole with the finite fill {} (supported: causal masks, and "
                  "others that keep an entry in every row or fill with -inf)", to_string(masked.type.shape), row,
                  fill.get(0));
  }
  // Every layer masks with the same condition: one state for them all.
  const std::string key = fmt::format("{}|{}|{}", n.inputs.at(0), n.inputs.at(1) == scores ? 2 : 1, fill.get(0));
  auto mask = additive_masks_.find(key);
  if (mask == additive_masks_.end()) {
    HostTensor zero(TensorType{fill.type.dtype, {}});
    const HostTensor additive = LMS_TRY(fold_where(masked, fill, zero));
    mask = additive_masks_.emplace(key, constant_state(n.outputs.at(0) + ".mask", additive)).first;
  }
  const ValueId x = LMS_TRY(data(reader, 0));
  return define(n, b_.op(Op::add, {x, mask->second}, {}, out_name(n)));
}

Result<void> Importer::where(const OnnxNode& n) {
  const HostTensor* cond = constant(n, 0);
  if (cond && constant(n, 1) && constant(n, 2))
    return define_const(n, LMS_TRY(fold_where(*cond, *constant(n, 1), *constant(n, 2))));
  for (size_t side : {size_t{1}, size_t{2}}) {
    const HostTensor* fill = constant(n, side);
    if (cond == nullptr || fill == nullptr || fill->type.num_elements() != 1 || !(fill->get(0) <= kMaskFill))
      continue;
    return mask_scores(n, n.inputs.at(3 - side), side == 1 ? *cond : fold_not(*cond), *fill);
  }
  return fail("Where is supported on constants, and on data only as an attention mask (a constant condition "
              "choosing between the scores and -inf, or a fill <= {})", kMaskFill);
}

Result<void> Importer::fold(const OnnxNode& n) {
  std::vector<const HostTensor*> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    in.push_back(constant(n, i));
    if (in.back() == nullptr)
      return fail("{} is supported on constants only (shape arithmetic and masks), but input '{}' is computed "
                  "from the data", n.op_type, has_input(n, i) ? n.inputs[i] : "");
  }
  const size_t arity = n.op_type == "Not" ? 1 : n.op_type == "Range" || n.op_type == "ScatterND" ? 3 : 2;
  if (in.size() != arity) return fail("{} inputs, expected {}", in.size(), arity);
  if (n.op_type == "Not") return define_const(n, fold_not(*in[0]));
  if (n.op_type == "Equal") return define_const(n, LMS_TRY(fold_binary("Equal", *in[0], *in[1])));
  if (n.op_type == "ScatterND") {
    if (string_attr(n, "reduction", "none") != "none") return fail("ScatterND with a reduction is not supported");
    return define_const(n, LMS_TRY(fold_scatter_nd(*in[0], *in[1], *in[2])));
  }
  if (n.op_type == "Mod")
    return define_const(n, LMS_TRY(fold_binary(int_attr(n, "fmod", 0) != 0 ? "Fmod" : "Mod", *in[0], *in[1])));
  return define_const(n, LMS_TRY(fold_range(*in[0], *in[1], *in[2])));
}

Result<void> Importer::slice(const OnnxNode& n) {
  std::vector<std::vector<int64_t>> lists(4);  // starts, ends, axes, steps
  const char* names[] = {"starts", "ends", "axes", "steps"};
  for (size_t k = 0; k < 4; ++k) {
    if (model_.opset < 10) {  // attributes before opset 10
      lists[k] = ints_attr(n, names[k]).value_or(std::vector<int64_t>{});
    } else if (has_input(n, k + 1)) {
      const HostTensor* c = constant(n, k + 1);
      if (c == nullptr) return fail("the {} input '{}' is not a constant", names[k], n.inputs[k + 1]);
      lists[k] = ints_of(*c);
    }
  }
  if (const HostTensor* c = constant(n, 0))
    return define_const(n, LMS_TRY(fold_slice(*c, lists[0], lists[1], lists[2], lists[3])));
  ValueId v = LMS_TRY(data(n, 0));
  const Shape in = shape_of(v);
  const SliceBounds s = LMS_TRY(slice_bounds(in, lists[0], lists[1], lists[2], lists[3]));
  std::vector<size_t> cut;  // the axes actually sliced
  for (size_t a = 0; a < in.size(); ++a) {
    if (s.count[a] == in[a] && s.step[a] == 1) continue;
    if (s.count[a] == 0) return fail("the slice along axis {} is empty", a);
    if (s.step[a] < 1) return fail("a slice with step {} along axis {} (backwards) is not supported", s.step[a], a);
    cut.push_back(a);
  }
  for (size_t a : cut)
    v = LMS_TRY(strided_slice(v, static_cast<int64_t>(a), s.first[a], s.count[a], s.step[a],
                              out_name(n) + (a == cut.back() ? "" : fmt::format(".axis{}", a))));
  return define(n, v);
}

Result<ValueId> Importer::strided_slice(ValueId v, int64_t axis, int64_t first, int64_t count, int64_t step,
                                        const std::string& name) {
  const int64_t d = shape_of(v)[static_cast<size_t>(axis)];
  if (step == 1 || count == 1)
    return b_.op(Op::slice, {v}, attrs({{"axis", axis}, {"start", first}, {"end", first + count}}), name);
  if (count * step > d) {  // x[0::2] of an odd length: all but the last by the span below, then the last
    ValueId most = LMS_TRY(strided_slice(v, axis, first, count - 1, step, name + ".most"));
    const int64_t last = first + (count - 1) * step;
    ValueId tail = b_.op(Op::slice, {v}, attrs({{"axis", axis}, {"start", last}, {"end", last + 1}}), name + ".last");
    return b_.op(Op::concat, {most, tail}, attrs({{"axis", axis}}), name);
  }
  // Every step-th element from first (PatchMerging's x[..., 1::2, 0::2, :]): a span of count * step elements
  // holding them (from first, or ending at the axis' end), viewed as [count, step], and the same entry of each.
  const int64_t start = std::min(first, d - count * step), pick = first - start;
  if (start != 0 || count * step != d)
    v = b_.op(Op::slice, {v}, attrs({{"axis", axis}, {"start", start}, {"end", start + count * step}}),
              name + ".span");
  if (!b_.ok()) return std::unexpected(*b_.error());
  Shape grouped = shape_of(v);
  const auto a = static_cast<size_t>(axis);
  grouped[a] = step;
  grouped.insert(grouped.begin() + axis, count);
  v = b_.op(Op::reshape, {v}, attrs({{"shape", IntList(grouped)}}), name + ".grouped");
  v = b_.op(Op::slice, {v}, attrs({{"axis", axis + 1}, {"start", pick}, {"end", pick + 1}}), name + ".picked");
  grouped.erase(grouped.begin() + axis + 1);
  v = b_.op(Op::reshape, {v}, attrs({{"shape", IntList(grouped)}}), name);
  if (!b_.ok()) return std::unexpected(*b_.error());
  return v;
}

Result<void> Importer::split(const OnnxNode& n) {
  const HostTensor* c = folded(n, 0);  // shape arithmetic: its parts are constants too
  const Shape in = c != nullptr ? c->type.shape : LMS_TRY(tensor(n, 0)).shape;
  const auto r = static_cast<int64_t>(in.size());
  int64_t axis = int_attr(n, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return fail("axis {} is out of range for rank {}", int_attr(n, "axis", 0), r);
  const int64_t d = in[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes = ints_attr(n, "split").value_or(std::vector<int64_t>{});
  if (has_input(n, 1)) {
    const HostTensor* c = constant(n, 1);
    if (c == nullptr) return fail("the split input '{}' is not a constant", n.inputs[1]);
    sizes = ints_of(*c);
  }
  if (sizes.empty()) {  // equal parts; since opset 18 the last may be smaller
    const auto parts = static_cast<int64_t>(n.outputs.size());
    const int64_t each = (d + parts - 1) / parts;
    if (model_.opset < 18 && d % parts != 0) return fail("{} does not split into {} equal parts", d, parts);
    for (int64_t k = 0; k < parts; ++k) sizes.push_back(std::min(each, d - k * each));
  }
  if (sizes.size() != n.outputs.size() || std::reduce(sizes.begin(), sizes.end()) != d)
    return fail("split sizes {} do not divide axis {} of size {} into {} outputs", to_string(Shape(sizes)), axis, d,
                n.outputs.size());
  int64_t start = 0;
  const ValueId x = c != nullptr ? ValueId{} : LMS_TRY(data(n, 0));
  for (size_t k = 0; k < sizes.size(); start += sizes[k++]) {
    if (n.outputs[k].empty()) continue;
    if (c != nullptr) {
      const int64_t bounds[] = {start, start + sizes[k], axis};
      set_const(n.outputs[k], LMS_TRY(fold_slice(*c, {bounds, 1}, {bounds + 1, 1}, {bounds + 2, 1}, {})));
      continue;
    }
    if (sizes[k] <= 0) return fail("output {} of the split is empty", k);
    ValueId part = b_.op(Op::slice, {x}, attrs({{"axis", axis}, {"start", start}, {"end", start + sizes[k]}}),
                         out_name(n, k));
    if (!b_.ok()) return std::unexpected(*b_.error());
    tensors_[n.outputs[k]] = Tensor{part, shape_of(part)};
  }
  return {};
}

Result<void> Importer::softmax(const OnnxNode& n) {
  OnnxNode scores = n;  // under a causal mask: the scores themselves, and a causal softmax
  auto masked = has_input(n, 0) ? masked_.find(n.inputs[0]) : masked_.end();
  if (masked != masked_.end()) scores.inputs = {masked->second};
  ValueId x = LMS_TRY(data(scores, 0));
  const int64_t r = static_cast<int64_t>(shape_of(x).size());
  int64_t axis = int_attr(n, "axis", model_.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  // Before opset 13 Softmax works on the input flattened to 2-D at `axis`: the same only for the last axis.
  if (model_.opset < 13 && axis != r - 1) return fail("opset {} Softmax over axis {} of rank {}", model_.opset, axis, r);
  const bool causal = masked != masked_.end();
  if (causal && axis != r - 1)
    return fail("a causally masked Softmax over axis {} of rank {} (not the last)", axis, r);
  return define(n, b_.op(Op::softmax, {x}, attrs({{"axis", axis}, {"causal", causal}}), out_name(n)));
}

Result<void> Importer::log_softmax(const OnnxNode& n) {
  const std::string& out = n.outputs[0];
  const bool read = std::ranges::any_of(
      model_.nodes, [&](const OnnxNode& m) { return std::ranges::find(m.inputs, out) != m.inputs.end(); });
  if (!opts_.add_loss || model_.outputs.size() != 1 || model_.outputs[0].name != out || read)
    return fail("LogSoftmax is imported only as the model's output, read by the cross-entropy loss LMS appends (which "
                "takes the log-softmax itself)");
  ValueId x = LMS_TRY(data(n, 0));
  const int64_t r = static_cast<int64_t>(shape_of(x).size());
  int64_t axis = int_attr(n, "axis", model_.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  const int64_t classes = classes_last(static_cast<size_t>(r)) || r < 2 ? r - 1 : 1;
  if (axis != classes || (model_.opset < 13 && axis != r - 1))
    return fail("LogSoftmax over axis {} of rank {}: the loss's classes are axis {}", axis, r, classes);
  return define(n, x);
}

namespace {

// One operand's letters in an Einsum equation; "" where the equation has a form LMS does not take.
std::vector<std::string> einsum_terms(std::string equation, std::string& out, std::string& error) {
  std::erase(equation, ' ');
  const size_t arrow = equation.find("->");
  const std::string ins = equation.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : ins) {
    if (c == ',') {
      terms.emplace_back();
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      if (terms.back().find(c) != std::string::npos) error = fmt::format("'{}' repeats within an operand", c);
      terms.back() += c;
    } else {
      error = fmt::format("'{}' (ellipses and other forms are not supported)", c);
    }
  }
  if (arrow != std::string::npos) {
    out = equation.substr(arrow + 2);
  } else {  // implicit: the letters appearing once, in alphabetical order
    for (char c = 'A'; c <= 'z'; ++c)
      if (std::isalpha(static_cast<unsigned char>(c)) && std::ranges::count(ins, c) == 1) out += c;
  }
  for (char c : out)
    if (!std::isalpha(static_cast<unsigned char>(c)) || std::ranges::count(out, c) != 1 ||
        ins.find(c) == std::string::npos)
      error = fmt::format("output letter '{}' is repeated or not in an operand", c);
  return terms;
}

}  // namespace

// Einsum of one or two operands as the transposes, reshapes, sums and one matmul it amounts to (numpy's
// tensordot method): letters only in one operand and not in the output are summed first; the rest are batch
// letters (both operands and the output), contracted ones (both operands only) and the free letters of each;
// A is arranged [batch, free A, contracted] and B [batch, contracted, free B], each viewed as three dims, and
// the matmul's [batch, free A, free B] is viewed back and transposed to the output's order.
Result<void> Importer::einsum(const OnnxNode& n) {
  std::string out, error;
  const std::vector<std::string> terms = einsum_terms(string_attr(n, "equation", ""), out, error);
  if (!error.empty()) return fail("equation '{}': {}", string_attr(n, "equation", ""), error);
  if (terms.size() != n.inputs.size() || terms.size() > 2)
    return fail("equation '{}' for {} inputs (one or two operands are supported)", string_attr(n, "equation", ""),
                n.inputs.size());
  const std::string name = out_name(n);
  std::map<char, int64_t> size;
  std::vector<ValueId> xs;
  std::vector<std::string> letters;
  for (size_t i = 0; i < terms.size(); ++i) {
    ValueId x = LMS_TRY(data(n, i));
    const Shape s = shape_of(x);
    if (s.size() != terms[i].size())
      return fail("operand {} has rank {} for '{}'", i, s.size(), terms[i]);
    std::string kept;
    IntList summed;
    for (size_t k = 0; k < s.size(); ++k) {
      const char c = terms[i][k];
      if (auto it = size.find(c); it != size.end() && it->second != s[k])
        return fail("'{}' is {} in one operand and {} in another", c, it->second, s[k]);
      size[c] = s[k];
      const bool other = terms.size() == 2 && terms[1 - i].find(c) != std::string::npos;
      if (out.find(c) == std::string::npos && !other) {
        summed.push_back(static_cast<int64_t>(k));
      } else {
        kept += c;
      }
    }
    if (!summed.empty())
      x = b_.op(Op::reduce_sum, {x}, attrs({{"axes", summed}}), name + fmt::format(".sum{}", i));
    xs.push_back(x);
    letters.push_back(kept);
  }
  // Arranges operand i's letters in `order`, viewed as `dims` (products of groups of letters).
  auto arrange = [&](size_t i, const std::string& order, const IntList& dims) -> ValueId {
    IntList perm;
    for (char c : order) perm.push_back(static_cast<int64_t>(letters[i].find(c)));
    ValueId x = xs[i];
    if (!std::ranges::is_sorted(perm))
      x = b_.op(Op::transpose, {x}, attrs({{"perm", perm}}), name + fmt::format(".arranged{}", i));
    if (b_.ok() && shape_of(x) != Shape(dims.begin(), dims.end()))
      x = b_.op(Op::reshape, {x}, attrs({{"shape", dims}}), name + fmt::format(".viewed{}", i));
    return x;
  };
  auto product_of = [&](const std::string& group) {
    int64_t p = 1;
    for (char c : group) p *= size.at(c);
    return p;
  };
  std::string batch, contracted, free_a, free_b;
  for (char c : letters[0]) {
    const bool in_b = letters.size() == 2 && letters[1].find(c) != std::string::npos;
    const bool in_out = out.find(c) != std::string::npos;
    (in_b ? (in_out ? batch : contracted) : free_a) += c;
  }
  if (letters.size() == 2)
    for (char c : letters[1])
      if (letters[0].find(c) == std::string::npos) free_b += c;
  ValueId y;
  if (letters.size() == 1) {
    y = arrange(0, free_a, IntList(shape_of(xs[0]).begin(), shape_of(xs[0]).end()));  // a transpose at most
  } else {
    const int64_t nb = product_of(batch), m = product_of(free_a), k = product_of(contracted), nn = product_of(free_b);
    const ValueId a = arrange(0, batch + free_a + contracted, batch.empty() ? IntList{m, k} : IntList{nb, m, k});
    const ValueId b = arrange(1, batch + contracted + free_b, batch.empty() ? IntList{k, nn} : IntList{nb, k, nn});
    y = b_.op(Op::matmul, {a, b}, {}, name + ".product");
  }
  if (!b_.ok()) return std::unexpected(*b_.error());
  // [batch, free A, free B] in the output's order.
  const std::string have = batch + free_a + free_b;
  IntList dims;
  for (char c : have) dims.push_back(size.at(c));
  if (shape_of(y) != Shape(dims.begin(), dims.end()))
    y = b_.op(Op::reshape, {y}, attrs({{"shape", dims}}), name + ".unviewed");
  IntList perm;
  for (char c : out) perm.push_back(static_cast<int64_t>(have.find(c)));
  if (!std::ranges::is_sorted(perm)) y = b_.op(Op::transpose, {y}, attrs({{"perm", perm}}), name);
  return define(n, y);
}

}  // namespace lms::onnx_import_detail
